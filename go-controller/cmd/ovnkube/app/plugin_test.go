package app

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// As kubectl's plugin, ovnkube offers only its read-only commands, and the
// cluster's ConfigMap gives the flags the command line leaves out; a flag
// given on the command line wins. (An ssl: NB without the certificate's
// flags is refused at once, which tells whose address was taken.)
func TestPluginTakesTheClusterConfigMap(t *testing.T) {
	var asked []string
	configMap := func(name, nb string) string {
		return `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"` + name + `","namespace":"ovn-kubernetes"},"data":{"nb_address":"` + nb + `","sb_address":"unix:/nonexistent/sb.sock"}}`
	}
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked = append(asked, r.Method+" "+r.URL.Path)
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/api/v1/namespaces/ovn-kubernetes/configmaps/ovn-config":
			_, _ = w.Write([]byte(configMap("ovn-config", "ssl:192.0.2.1:6641")))
		case "/api/v1/namespaces/ovn-kubernetes/configmaps/unix-nb":
			_, _ = w.Write([]byte(configMap("unix-nb", "unix:/nonexistent/nb.sock")))
		default:
			http.NotFound(w, r)
		}
	}))
	defer api.Close()
	kc := writeKubeconfig(t, api.URL, "")
	run := func(args ...string) (int, string) {
		var out bytes.Buffer
		code := Main(append([]string{PluginName}, args...), &out, &out)
		return code, out.String()
	}

	code, out := run("--help")
	if code != 0 || !strings.Contains(out, "kubectl ovnk") || !strings.Contains(out, "trace") || !strings.Contains(out, "diff") || strings.Contains(out, "master-init") {
		t.Errorf("kubectl ovnk --help: exit %d, want 0 and only trace and diff:\n%s", code, out)
	}
	// The ConfigMap's ssl: NB, and no certificate given.
	code, out = run("trace", "--kubeconfig", kc, "ns/a", "ns/b")
	if code != exitUsage || !strings.Contains(out, "invalid --nb-client-cert: is required with an ssl: --nb-address") {
		t.Errorf("kubectl ovnk trace: exit %d, want %d for the ConfigMap's ssl: NB:\n%s", code, exitUsage, out)
	}
	if strings.Contains(out, "Feature gate") {
		t.Errorf("kubectl ovnk logs the client library's notes by default:\n%s", out)
	}
	if len(asked) != 1 || asked[0] != "GET /api/v1/namespaces/ovn-kubernetes/configmaps/ovn-config" {
		t.Errorf("API requests %v, want the ConfigMap read", asked)
	}
	// The command line's ssl: NB over another ConfigMap's unix: one.
	code, out = run("trace", "--kubeconfig", kc, "--ovn-config", "ovn-kubernetes/unix-nb", "--nb-address", "ssl:192.0.2.1:6641", "ns/a", "ns/b")
	if code != exitUsage || !strings.Contains(out, "invalid --nb-client-cert: is required") {
		t.Errorf("kubectl ovnk trace --nb-address ssl:…: exit %d, want %d (the flag's address taken):\n%s", code, exitUsage, out)
	}
	// No ConfigMap: the flags must be given.
	code, out = run("trace", "--kubeconfig", kc, "--ovn-config", "kube-system/none", "ns/a", "ns/b")
	if code != exitUsage || !strings.Contains(out, "--nb-address") {
		t.Errorf("kubectl ovnk trace without a ConfigMap: exit %d, want %d naming --nb-address:\n%s", code, exitUsage, out)
	}
	code, out = run("diff", "--kubeconfig", kc, "--ovn-config", "nonsense")
	if code != exitUsage || !strings.Contains(out, "--ovn-config") {
		t.Errorf("kubectl ovnk diff --ovn-config nonsense: exit %d, want %d naming the flag:\n%s", code, exitUsage, out)
	}
}

// The ConfigMap's ranges reach the diff's master settings as the master's
// own flags would (comma-separated families).
func TestPluginConfigMapRanges(t *testing.T) {
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"ovn-config","namespace":"ovn-kubernetes"},
			"data":{"nb_address":"unix:/nonexistent/nb.sock","cluster_subnet":"10.128.0.0/14/23,fd01::/48/64","service_cidr":"172.30.0.0/16,fd02::/112"}}`))
	}))
	defer api.Close()
	kc := writeKubeconfig(t, api.URL, "")
	var out bytes.Buffer
	// The NB is not there: the diff fails (2) after its settings were read.
	code := Main([]string{PluginName, "diff", "--kubeconfig", kc, "--timeout", "2s"}, &out, &out)
	if code != 2 || !strings.Contains(out.String(), "/nonexistent/nb.sock") {
		t.Errorf("kubectl ovnk diff: exit %d, want 2 naming the ConfigMap's NB:\n%s", code, out.String())
	}
	// A range the master would refuse is refused here too, naming the flag.
	out.Reset()
	code = Main([]string{PluginName, "diff", "--kubeconfig", kc, "--service-cidr", "10.128.0.0/16", "--timeout", "2s"}, &out, &out)
	if code != exitUsage || !strings.Contains(out.String(), "service-cidr") {
		t.Errorf("kubectl ovnk diff --service-cidr inside the cluster subnet: exit %d, want %d naming the flag:\n%s", code, exitUsage, out.String())
	}
}
