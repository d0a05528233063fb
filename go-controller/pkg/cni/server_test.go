package cni

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs/ovstest"
)

const testConf = `{"cniVersion":"1.0.0","name":"ovn-k8s","type":"ovn_cni","ovnInstalledTimeout":"0s"}`

// testServer is a CNI server on an in-memory OVS (at address) holding
// br-int, the management port, the bridge's NIC and one pod's port (sandbox
// c1); the master's annotation never comes.
func testServer(t *testing.T) (s *Server, address string) {
	sw, address := ovstest.Start(t)
	ovstest.Port(t, sw, "ovn-k8s-mp0", map[string]string{"iface-id": "k8s-n1"})
	ovstest.Port(t, sw, "eth1", nil)
	ovstest.Port(t, sw, HostVethName("c1"), map[string]string{"iface-id": "default_web", "iface-id-ver": "u1", "sandbox": "c1"})
	return &Server{OVS: sw, Log: logr.Discard(), PodNetwork: func(context.Context, *PodArgs, time.Duration) (annotations.PodNetwork, error) {
		return annotations.PodNetwork{}, errors.New("no annotation in this test")
	}}, address
}

// serveBody posts a raw body to the server and returns the HTTP status and
// the CNI error it answered (nil on success).
func serveBody(t *testing.T, s *Server, body []byte) (int, *types.Error) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.serve(rec, httptest.NewRequest(http.MethodPost, "/cni", bytes.NewReader(body)))
	if rec.Code == http.StatusOK {
		return rec.Code, nil
	}
	te := &types.Error{}
	if err := json.Unmarshal(rec.Body.Bytes(), te); err != nil || te.Code == 0 {
		t.Fatalf("HTTP %d without a CNI error: %q", rec.Code, rec.Body.String())
	}
	return rec.Code, te
}

func serveRequest(t *testing.T, s *Server, req request) (int, *types.Error) {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return serveBody(t, s, body)
}

type invalidCall struct {
	name     string
	req      request
	code     uint
	mentions string
}

// invalidCalls are calls skel refuses, each a change to ok: a valid DEL of
// sandbox c2 whose network configuration points at ovsAddress.
func invalidCalls(ovsAddress string) (ok request, calls []invalidCall) {
	conf := func(name, version string) []byte {
		return []byte(`{"cniVersion":"` + version + `","name":"` + name + `","type":"ovn_cni","ovsAddress":"` + ovsAddress + `"}`)
	}
	ok = request{Command: "DEL", ContainerID: "c2", Netns: "/var/run/netns/none", IfName: "eth0",
		Args: "K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=u1", StdinData: conf("ovn-k8s", "1.0.0")}
	with := func(change func(*request)) request { r := ok; change(&r); return r }
	return ok, []invalidCall{
		{"DEL, empty container ID", with(func(r *request) { r.ContainerID = "" }), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"DEL, container ID with a slash", with(func(r *request) { r.ContainerID = "../c1" }), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"DEL, container ID with a space", with(func(r *request) { r.ContainerID = "c1 c2" }), types.ErrInvalidEnvironmentVariables, "CNI_CONTAINERID"},
		{"DEL, empty interface", with(func(r *request) { r.IfName = "" }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, interface with a slash", with(func(r *request) { r.Command, r.IfName = "ADD", "eth0/x" }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, interface with a colon", with(func(r *request) { r.Command, r.IfName = "ADD", "eth0:1" }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, interface with a tab", with(func(r *request) { r.Command, r.IfName = "ADD", "eth\t0" }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, interface of 16 bytes", with(func(r *request) { r.Command, r.IfName = "ADD", "eth0123456789012" }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, interface ..", with(func(r *request) { r.Command, r.IfName = "ADD", ".." }), types.ErrInvalidEnvironmentVariables, "CNI_IFNAME"},
		{"ADD, no netns", with(func(r *request) { r.Command, r.Netns = "ADD", "" }), types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"CHECK, no netns", with(func(r *request) { r.Command, r.Netns = "CHECK", "" }), types.ErrInvalidEnvironmentVariables, "CNI_NETNS"},
		{"unknown command", with(func(r *request) { r.Command = "GC" }), types.ErrInvalidEnvironmentVariables, "CNI_COMMAND"},
		{"stdin not JSON", with(func(r *request) { r.StdinData = []byte("{") }), types.ErrDecodingFailure, "network configuration"},
		{"network name with a slash", with(func(r *request) { r.StdinData = conf("a/b", "1.0.0") }), types.ErrInvalidNetworkConfig, "name"},
		{"unsupported cniVersion", with(func(r *request) { r.StdinData = conf("n", "9.9.9") }), types.ErrIncompatibleCNIVersion, "cniVersion"},
	}
}

func checkRefused(t *testing.T, c invalidCall, err error) {
	t.Helper()
	te := &types.Error{}
	if !errors.As(err, &te) || te.Code != c.code || !strings.Contains(te.Msg+te.Details, c.mentions) {
		t.Errorf("%s: error %v; want CNI error %d naming %s", c.name, err, c.code, c.mentions)
	}
}

// Every request is checked as skel checks the runtime's call, before any
// work: above all, a DEL with an empty container ID must not remove every
// port without a sandbox id (br-int's own, the management port, the NIC).
func TestServerRefusesInvalidRequests(t *testing.T) {
	s, address := testServer(t)
	before := ovstest.PortNames(t, s.OVS)
	ok, calls := invalidCalls(address)
	for _, c := range calls {
		status, te := serveRequest(t, s, c.req)
		if te == nil {
			t.Errorf("%s: HTTP %d", c.name, status)
			continue
		}
		checkRefused(t, c, te)
	}
	if after := ovstest.PortNames(t, s.OVS); !slices.Equal(after, before) {
		t.Fatalf("refused requests changed OVS: ports %v, were %v", after, before)
	}
	// The valid DEL of an unknown sandbox and of c1 remove c1's port only.
	for _, id := range []string{"c2", "c1"} {
		ok.ContainerID = id
		if _, te := serveRequest(t, s, ok); te != nil {
			t.Fatalf("DEL of %s: %v", id, te)
		}
	}
	if got, want := ovstest.PortNames(t, s.OVS), []string{"br-int", "eth1", "ovn-k8s-mp0"}; !slices.Equal(got, want) {
		t.Fatalf("after DEL of c1: ports %v, want %v", got, want)
	}
}

// The standalone plugin checks its calls the same way (skel checks them
// first when it runs as ovn_cni; Add, Check and Del do not rely on it).
func TestStandaloneRefusesInvalidCalls(t *testing.T) {
	s, address := testServer(t)
	before := ovstest.PortNames(t, s.OVS)
	run := map[string]func(*skel.CmdArgs) error{"ADD": Add, "CHECK": Check, "DEL": Del}
	_, calls := invalidCalls(address)
	for _, c := range calls {
		if run[c.req.Command] == nil {
			continue // skel dispatches by command
		}
		args := &skel.CmdArgs{ContainerID: c.req.ContainerID, Netns: c.req.Netns, IfName: c.req.IfName, Args: c.req.Args, StdinData: c.req.StdinData}
		checkRefused(t, c, run[c.req.Command](args))
	}
	if after := ovstest.PortNames(t, s.OVS); !slices.Equal(after, before) {
		t.Fatalf("refused calls changed OVS: ports %v, were %v", after, before)
	}
}

// A request is one JSON object of at most 1 MiB.
func TestServerBoundsRequests(t *testing.T) {
	s, _ := testServer(t)
	del, _ := json.Marshal(request{Command: "DEL", ContainerID: "c1", IfName: "eth0", StdinData: []byte(testConf)})
	huge, _ := json.Marshal(request{Command: "DEL", ContainerID: "c1", IfName: "eth0",
		StdinData: []byte(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","pad":"` + strings.Repeat("x", 2<<20) + `"}`)})
	for _, tt := range []struct {
		name, mentions string
		body           []byte
	}{
		{"a request of 2 MiB", "1 MiB", huge},
		{"two requests in one", "after the request", append(append([]byte{}, del...), del...)},
		{"not JSON", "cannot decode", []byte("DEL c1")},
	} {
		status, te := serveBody(t, s, tt.body)
		if te == nil || te.Code != types.ErrDecodingFailure || !strings.Contains(te.Msg+te.Details, tt.mentions) {
			t.Errorf("%s: HTTP %d, error %+v; want CNI error 6 saying %q", tt.name, status, te, tt.mentions)
		}
	}
	if got := ovstest.PortNames(t, s.OVS); !slices.Contains(got, HostVethName("c1")) {
		t.Fatalf("a refused DEL removed c1's port: %v", got)
	}
}

// fakeServer answers every shim request with this status and body.
func fakeServer(t *testing.T, status int, body []byte) string {
	sock := filepath.Join(t.TempDir(), "cni.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(status)
		_, _ = w.Write(body)
	}), ReadHeaderTimeout: time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return sock
}

// captureStdout runs f and returns what it printed.
func captureStdout(t *testing.T, f func() error) (string, error) {
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	old := os.Stdout
	os.Stdout = w
	read := make(chan []byte)
	go func() { b, _ := io.ReadAll(r); read <- b }()
	err = f()
	os.Stdout = old
	w.Close()
	return string(<-read), err
}

// The shim prints only a CNI result of the requested version (ADD) or
// nothing (CHECK, DEL); any other answer is a CNI error.
func TestShimRefusesWhatIsNotACNIResult(t *testing.T) {
	result := `{"cniVersion":"1.0.0","interfaces":[{"name":"eth0","mac":"0a:58:0a:f4:00:05","sandbox":"/var/run/netns/p"}],"ips":[{"interface":0,"address":"10.244.0.5/24","gateway":"10.244.0.1"}]}`
	cniErr := `{"code":11,"msg":"timed out","details":"default/web"}`
	for _, tt := range []struct {
		name, command string
		status        int
		body          string
		code          uint   // 0: success
		prints        string // on success
	}{
		{"ADD, a result", "ADD", 200, result, 0, `"10.244.0.5/24"`},
		{"ADD, not JSON", "ADD", 200, "<html>hello</html>", types.ErrDecodingFailure, ""},
		{"ADD, JSON but no result", "ADD", 200, `{"foo":1}`, types.ErrDecodingFailure, ""},
		{"ADD, a result of another version", "ADD", 200, strings.Replace(result, "1.0.0", "0.4.0", 1), types.ErrDecodingFailure, ""},
		{"ADD, a result of 2 MiB", "ADD", 200, strings.Replace(result, `"eth0"`, `"`+strings.Repeat("x", 2<<20)+`"`, 1), types.ErrDecodingFailure, ""},
		{"DEL, nothing", "DEL", 200, "", 0, ""},
		{"DEL, something", "DEL", 200, result, types.ErrDecodingFailure, ""},
		{"CHECK, something", "CHECK", 200, "ok", types.ErrDecodingFailure, ""},
		{"ADD, a CNI error", "ADD", 500, cniErr, types.ErrTryAgainLater, ""},
		{"ADD, an HTTP error", "ADD", 502, "bad gateway", types.ErrInternal, ""},
	} {
		conf, err := parseConf([]byte(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","cniServerSocket":"` + fakeServer(t, tt.status, []byte(tt.body)) + `"}`))
		if err != nil {
			t.Fatal(err)
		}
		args := &skel.CmdArgs{ContainerID: "c1", Netns: "/var/run/netns/p", IfName: "eth0", StdinData: []byte(testConf)}
		out, err := captureStdout(t, func() error { return forward(args, conf, tt.command) })
		te := &types.Error{}
		switch {
		case tt.code == 0 && (err != nil || !strings.Contains(out, tt.prints)):
			t.Errorf("%s: error %v, printed %.200q; want success printing %s", tt.name, err, out, tt.prints)
		case tt.code != 0 && (!errors.As(err, &te) || te.Code != tt.code || out != ""):
			t.Errorf("%s: error %v, printed %.200q; want CNI error %d and nothing printed", tt.name, err, out, tt.code)
		}
	}
}
