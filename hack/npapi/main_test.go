package main

import (
	"bytes"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// The shape of the suites' base manifests: a StatefulSet whose pod has TCP
// and UDP servers and two SCTP ones, then a host-network one whose names
// and ports are Go templates.
const sample = `apiVersion: v1
kind: Namespace
metadata:
  name: network-policy-conformance-gryffindor
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: harry-potter
spec:
  template:
    spec:
      containers:
        - name: harry-potter-client
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
        - name: harry-potter-80
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost serve-hostname --tcp --http=false --port 80"]
          ports:
            - containerPort: 80
              protocol: TCP
              name: web
        - name: harry-potter-9003
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost porter"]
          env:
          - name: SERVE_SCTP_PORT_9003
            value: "foo"

        - name: harry-potter-9005
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost porter"]
          env:
          - name: SERVE_SCTP_PORT_9005
            value: "foo"
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: centaur
spec:
  template:
    spec:
      hostNetwork: true
      containers:
      - name: centaur-{{ index .HostNetworkPorts 0 }}
        image: registry.k8s.io/e2e-test-images/agnhost:2.45
        ports:
          - containerPort: {{ index .HostNetworkPorts 0 }}
      - name: centaur-{{ index .HostNetworkPorts 6 }}
        image: registry.k8s.io/e2e-test-images/agnhost:2.45
        command: ["/bin/bash", "-c", "/agnhost porter"]
        env:
        - name: SERVE_SCTP_PORT_{{ index .HostNetworkPorts 6 }}
          value: "foo"
      dnsPolicy: ClusterFirstWithHostNet
`

const sampleStripped = `apiVersion: v1
kind: Namespace
metadata:
  name: network-policy-conformance-gryffindor
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: harry-potter
spec:
  template:
    spec:
      containers:
        - name: harry-potter-client
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
        - name: harry-potter-80
          image: registry.k8s.io/e2e-test-images/agnhost:2.45
          command: ["/bin/bash", "-c", "/agnhost serve-hostname --tcp --http=false --port 80"]
          ports:
            - containerPort: 80
              protocol: TCP
              name: web
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: centaur
spec:
  template:
    spec:
      hostNetwork: true
      containers:
      - name: centaur-{{ index .HostNetworkPorts 0 }}
        image: registry.k8s.io/e2e-test-images/agnhost:2.45
        ports:
          - containerPort: {{ index .HostNetworkPorts 0 }}
      dnsPolicy: ClusterFirstWithHostNet
`

func TestStripSCTPServers(t *testing.T) {
	got, n := stripSCTPServers([]byte(sample))
	if n != 3 || string(got) != sampleStripped {
		t.Fatalf("removed %d, want 3; got:\n%s", n, got)
	}
	if again, n := stripSCTPServers(got); n != 0 || !bytes.Equal(again, got) {
		t.Fatalf("a second pass removed %d containers", n)
	}
}

// The real base manifests of each pinned suite lose exactly their SCTP
// servers and stay valid YAML with every other container (skipped when the
// module is not in the module cache: make conformance downloads it).
func TestStripSCTPServersModules(t *testing.T) {
	for _, c := range crds[:2] { // one per pinned version
		dir := moduleDir(t, c.tools)
		if dir == "" {
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(baseManifests)))
		if err != nil {
			t.Fatal(err)
		}
		want := strings.Count(string(b), sctpServer)
		got, n := stripSCTPServers(b)
		if n == 0 || n != want || strings.Contains(string(got), sctpServer) {
			t.Errorf("%s: removed %d containers, want the %d serving SCTP; SCTP left: %v", c.tools, n, want, strings.Contains(string(got), sctpServer))
		}
		before, after := containers(t, b), containers(t, got)
		if before-after != n {
			t.Errorf("%s: %d containers before, %d after, %d removed", c.tools, before, after, n)
		}
	}
}

// moduleDir is the module cache's copy of the version tools pins, "" when
// it is not there.
func moduleDir(t *testing.T, tools string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", tools, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	v := regexp.MustCompile(`(?m)^\s*(?:require\s+)?` + regexp.QuoteMeta(modulePath) + `\s+(\S+)`).FindSubmatch(b)
	if v == nil {
		t.Fatalf("%s/go.mod does not require %s", tools, modulePath)
	}
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(cache)), modulePath+"@"+string(v[1]))
	if _, err := os.Stat(dir); err != nil {
		t.Logf("%s not in the module cache: %v", dir, err)
		return ""
	}
	return dir
}

// containers counts the containers of every pod template in a YAML stream
// whose Go templates are replaced by a number.
func containers(t *testing.T, b []byte) int {
	t.Helper()
	b = regexp.MustCompile(`\{\{[^}]*\}\}`).ReplaceAll(b, []byte("34345"))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	n := 0
	for {
		var obj struct {
			Spec struct {
				Template struct {
					Spec struct {
						Containers []any `json:"containers"`
					} `json:"spec"`
				} `json:"template"`
			} `json:"spec"`
		}
		if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
			return n
		} else if err != nil {
			t.Fatal(err)
		}
		n += len(obj.Spec.Template.Spec.Containers)
	}
}

func TestCRDFileHeader(t *testing.T) {
	got := string(crdFile(module{Path: modulePath, Version: "v0.2.0"}, "config/crd/experimental/x.yaml", []byte("apiVersion: v1\n")))
	want := "# Generated by hack/npapi (make generate) from sigs.k8s.io/network-policy-api@v0.2.0 config/crd/experimental/x.yaml: do not edit.\napiVersion: v1\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}
