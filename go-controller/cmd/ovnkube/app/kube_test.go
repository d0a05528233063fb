package app

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// syncBuffer is an io.Writer that Main's log goroutines may share with the test.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// runMain runs ovnkube with args and returns its exit status and stderr; it
// fails the test when ovnkube is still running after within.
func runMain(t *testing.T, within time.Duration, args ...string) (int, string) {
	t.Helper()
	var stderr syncBuffer
	done := make(chan int, 1)
	go func() { done <- Main(append([]string{"ovnkube"}, args...), &stderr, &stderr) }()
	select {
	case status := <-done:
		return status, stderr.String()
	case <-time.After(within):
		t.Fatalf("ovnkube %v still running after %s; output:\n%s", args, within, stderr.String())
		return 0, ""
	}
}

// writeKubeconfig writes a kubeconfig for server, with a bearer token unless token is "".
func writeKubeconfig(t *testing.T, server, token string) string {
	t.Helper()
	user := "{}"
	if token != "" {
		user = fmt.Sprintf("{token: %q}", token)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kc := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q, insecure-skip-tls-verify: %v}}]
users: [{name: u, user: %s}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`, server, strings.HasPrefix(server, "https:"), user)
	if err := os.WriteFile(path, []byte(kc), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// The pod's service account token never crosses the network in clear: a
// plain http --k8s-apiserver without --kubeconfig is a usage error naming the flag.
func TestPlainHTTPAPIServerWithServiceAccountExitsTwoNamingTheFlag(t *testing.T) {
	args := []string{"master", "--nb-address", "unix:/nonexistent", "--leader-elect=false", "--k8s-apiserver", "http://127.0.0.1:1"}
	status, out := runMain(t, 10*time.Second, args...)
	if status != exitUsage || !strings.Contains(out, "invalid --k8s-apiserver") || !strings.Contains(out, "https://") {
		t.Errorf("ovnkube %v: exit %d, want 2 and a message naming --k8s-apiserver and https://; output:\n%s", args, status, out)
	}
}

// A kubeconfig is the user's: client-go sends its credentials only over TLS
// (it drops them for an http:// server, whether the kubeconfig or
// --k8s-apiserver names it), so nothing is refused and nothing leaks.
func TestKubeconfigCredentialsOnlyOverTLS(t *testing.T) {
	for _, tt := range []struct {
		name  string
		k     config.Kube
		creds bool
	}{
		{"https with a token", config.Kube{Kubeconfig: writeKubeconfig(t, "https://127.0.0.1:6443", "t")}, true},
		{"http with a token", config.Kube{Kubeconfig: writeKubeconfig(t, "http://127.0.0.1:6443", "t")}, false},
		{"https with a token, http --k8s-apiserver", config.Kube{Kubeconfig: writeKubeconfig(t, "https://127.0.0.1:6443", "t"), APIServer: "http://127.0.0.1:6443"}, false},
		{"kubectl proxy: http, no credentials", config.Kube{Kubeconfig: writeKubeconfig(t, "http://127.0.0.1:8001", "")}, false},
	} {
		tt.k.QPS, tt.k.Burst = 1, 1
		rc, err := kubeRESTConfig(tt.k, "test")
		if err != nil || sendsCredentials(rc) != tt.creds {
			t.Errorf("%s: kubeRESTConfig = %v, %v; want credentials %v", tt.name, rc, err, tt.creds)
		}
	}
}

func TestRefuseCleartextCredentials(t *testing.T) {
	for _, tt := range []struct {
		rc   *rest.Config
		k    config.Kube
		flag string
	}{
		{serviceAccountRESTConfig("http://10.0.0.10:6443"), config.Kube{APIServer: "http://10.0.0.10:6443"}, "--k8s-apiserver"},
		{&rest.Config{Host: "10.0.0.10:6443", Username: "u", Password: "p"}, config.Kube{Kubeconfig: "k"}, "--kubeconfig"}, // no CA: http
		{&rest.Config{Host: "http://10.0.0.10:6443", ExecProvider: &clientcmdapi.ExecConfig{Command: "x"}}, config.Kube{Kubeconfig: "k"}, "--kubeconfig"},
		{serviceAccountRESTConfig("https://10.0.0.10:6443"), config.Kube{APIServer: "https://10.0.0.10:6443"}, ""},
		{&rest.Config{Host: "http://10.0.0.10:6443"}, config.Kube{APIServer: "http://10.0.0.10:6443"}, ""},
	} {
		err := refuseCleartextCredentials(tt.rc, tt.k)
		var ue usageError
		if tt.flag == "" && err != nil || tt.flag != "" && (!errors.As(err, &ue) || !strings.Contains(err.Error(), tt.flag)) {
			t.Errorf("refuseCleartextCredentials(%s) = %v, want a usage error naming %q", tt.rc.Host, err, tt.flag)
		}
	}
}
