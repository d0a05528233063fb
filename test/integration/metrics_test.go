package integration

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// httpGet returns the status and body of a GET on 127.0.0.1:port.
func httpGet(port int, path string) (int, string, error) {
	client := http.Client{Timeout: 5 * time.Second}
	resp, err := client.Get(fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// httpGetIn is httpGet from inside a network namespace (with curl).
func httpGetIn(ns harness.NetNS, port int) func(string) (int, string, error) {
	return func(path string) (int, string, error) {
		out, err := ns.Exec("curl", "-s", "-m", "5", "-w", "\n%{http_code}", fmt.Sprintf("http://127.0.0.1:%d%s", port, path))
		if err != nil {
			return 0, "", err
		}
		i := strings.LastIndex(out, "\n")
		body, code := out[:max(i, 0)], out[i+1:]
		n, err := strconv.Atoi(strings.TrimSpace(code))
		return n, body, err
	}
}

// metricValue sums the samples of a series whose name and labels match
// (series is a name, optionally followed by {label="value",...} to match).
func metricValue(body, series string) (float64, bool) {
	name, labels, _ := strings.Cut(series, "{")
	labels = strings.TrimSuffix(labels, "}")
	re := regexp.MustCompile(`^` + regexp.QuoteMeta(name) + `(\{[^}]*\})? (\S+)$`)
	sum, found := 0.0, false
	for _, line := range strings.Split(body, "\n") {
		m := re.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		ok := true
		for _, l := range strings.Split(labels, ",") {
			if l != "" && !strings.Contains(m[1], l) {
				ok = false
			}
		}
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(m[2], 64)
		if err == nil {
			sum, found = sum+v, true
		}
	}
	return sum, found
}

// waitMetric polls /metrics until check accepts the series' value.
func waitMetric(t *testing.T, get func(string) (int, string, error), series string, check func(float64) bool) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, "metric "+series, func() error {
		_, body, err := get("/metrics")
		if err != nil {
			return err
		}
		v, ok := metricValue(body, series)
		if !ok {
			return fmt.Errorf("series absent")
		}
		if !check(v) {
			return fmt.Errorf("value %v", v)
		}
		return nil
	})
}

func waitStatus(t *testing.T, get func(string) (int, string, error), path string, want int) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, fmt.Sprintf("%s answering %d", path, want), func() error {
		code, body, err := get(path)
		if err != nil {
			return err
		}
		if code != want {
			return fmt.Errorf("%d %s", code, strings.TrimSpace(body))
		}
		return nil
	})
}

// The master's /metrics carries every series docs/operations.md lists, with
// values that follow what happened; /readyz follows the first sync and the
// NB connection; pprof is served only when asked.
func TestMasterMetricsAndReadiness(t *testing.T) {
	c := newCluster(t)
	port := harness.FreePort(t)
	get := func(path string) (int, string, error) { return httpGet(port, path) }
	c.ovn.StopNB() // unreachable at start: not ready
	c.startMaster("--metrics-address", fmt.Sprintf("127.0.0.1:%d", port), "--enable-pprof")
	waitStatus(t, get, "/healthz", 200)
	waitStatus(t, get, "/readyz", 503)
	c.ovn.StartNB()
	c.createNode("n1", nil)
	c.nodeSubnet("n1")
	waitStatus(t, get, "/readyz", 200)
	const pods = 5
	for i := 0; i < pods; i++ {
		c.createPod("default", fmt.Sprintf("m%d", i), "n1")
	}
	for i := 0; i < pods; i++ {
		c.podNetwork("default", fmt.Sprintf("m%d", i))
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	equals := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	waitMetric(t, get, "ovnkube_master_pod_lsp_created_seconds_count", equals(pods))
	waitMetric(t, get, "ovnkube_master_pod_annotated_seconds_count", equals(pods))
	waitMetric(t, get, "ovnkube_master_nb_transaction_duration_seconds_count{result=\"ok\"}", atLeast(2))
	waitMetric(t, get, "ovnkube_master_nb_transaction_operations_sum", atLeast(pods))
	waitMetric(t, get, "workqueue_adds_total{name=\"pods\"}", atLeast(pods))
	waitMetric(t, get, "workqueue_depth{name=\"nodes\"}", equals(0))
	waitMetric(t, get, "workqueue_queue_duration_seconds_count{name=\"pods\"}", atLeast(pods))
	waitMetric(t, get, "workqueue_work_duration_seconds_count{name=\"services\"}", atLeast(1))
	waitMetric(t, get, "workqueue_retries_total{name=\"pods\"}", atLeast(0))
	waitMetric(t, get, "ovnkube_master_leader", equals(1))
	waitMetric(t, get, "ovnkube_master_nb_connected", equals(1))
	waitMetric(t, get, "process_resident_memory_bytes", atLeast(1))
	waitMetric(t, get, "go_goroutines", atLeast(1))
	// GOGC at the budget's floor (package gcbudget): a master this small
	// never works the collector hard enough to move it.
	waitMetric(t, get, "go_gc_gogc_percent", equals(50))

	// An NB replaced by an empty one: not ready while it is down, a resync
	// on reconnect that repairs every object, ready again.
	c.ovn.StopNB()
	waitMetric(t, get, "ovnkube_master_nb_connected", equals(0))
	waitStatus(t, get, "/readyz", 503)
	c.ovn.ResetNB()
	waitStatus(t, get, "/readyz", 200)
	waitMetric(t, get, "ovnkube_master_resyncs_total{reason=\"nb_reconnect\"}", atLeast(1))
	waitMetric(t, get, "ovnkube_resync_repairs_total{queue=\"pods\"}", atLeast(pods))
	waitMetric(t, get, "ovnkube_resync_repairs_total{queue=\"nodes\"}", atLeast(1))
	// No new pods: the latency histograms did not count the repairs.
	waitMetric(t, get, "ovnkube_master_pod_lsp_created_seconds_count", equals(pods))

	waitStatus(t, get, "/debug/pprof/", 200)
	// Without --enable-pprof there are no profiles.
	port2 := harness.FreePort(t)
	p := harness.StartMaster(t, c.logDir, "master-nopprof", c.ovn, c.kube, "--metrics-address", fmt.Sprintf("127.0.0.1:%d", port2),
		"--leader-elect-identity", "standby")
	get2 := func(path string) (int, string, error) { return httpGet(port2, path) }
	waitStatus(t, get2, "/readyz", 200) // a standby is ready to take over
	waitMetric(t, get2, "ovnkube_master_leader", equals(0))
	waitStatus(t, get2, "/debug/pprof/", 404)
	p.Stop()
}

// httpsGet is a GET on https://127.0.0.1:port with token (none when
// empty), trusting only the CA in caFile.
func httpsGet(t *testing.T, port int, caFile, path, token string) (int, string, error) {
	t.Helper()
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(pem)
	client := http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	req, err := http.NewRequest("GET", fmt.Sprintf("https://127.0.0.1:%d%s", port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// scraperToken is a token of a new ServiceAccount default/name, bound to
// the ClusterRole role unless role is empty.
func scraperToken(t *testing.T, c *cluster, name, role string) string {
	t.Helper()
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if _, err := c.kube.Client.CoreV1().ServiceAccounts("default").Create(c.ctx(), sa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if role != "" {
		bindCluster(t, c.kube, name+"-"+role, role, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: "default"})
	}
	return serviceAccountToken(t, c.kube, "default", name, nil)
}

// The master as shipped (its ServiceAccount, --metrics-auth=delegated, a
// serving certificate) against a real API server: /metrics and pprof need a
// bearer token the API server authenticates and authorizes for the path
// (401 without one or with a bad one, 403 for a ServiceAccount not bound to
// ovn-k8s-metrics-reader, 200 for one that is); the probes stay open; a
// scrape in clear gets nothing. Each rule of ovnkube-metrics-auth is needed:
// without it the authorized scrape is refused.
func TestMetricsDelegatedAuthWithTheAPIServer(t *testing.T) {
	t.Parallel() // wait-bound (leases, restarts), on its own API server and databases
	c := newCluster(t)
	kubeconfig := applyRBAC(t, c.kube, distObjects(t), "ovnkube-master")
	pki := harness.NewPKI(t, "metrics-ca")
	cert, key := pki.Issue(t, "ovnkube-master")
	port := harness.FreePort(t)
	round := 0
	run := func() *harness.Process {
		round++
		return harness.Start(t, c.logDir, fmt.Sprintf("master-metrics-%d", round), harness.Binary(t, "ovnkube"), "master",
			"--kubeconfig", kubeconfig, "--nb-address", c.ovn.NBAddress(), "--enable-pprof",
			"--metrics-address", fmt.Sprintf("127.0.0.1:%d", port), "--metrics-auth", "delegated",
			"--metrics-tls-cert-file", cert, "--metrics-tls-private-key-file", key)
	}
	get := func(token string) func(string) (int, string, error) {
		return func(path string) (int, string, error) { return httpsGet(t, port, pki.CACert, path, token) }
	}
	reader := scraperToken(t, c, "prometheus", "ovn-k8s-metrics-reader")
	nobody := scraperToken(t, c, "nobody", "")

	p := run()
	waitStatus(t, get(""), "/healthz", 200)
	waitStatus(t, get(""), "/readyz", 200)
	for _, tc := range []struct {
		what, path, token string
		code              int
		says              string
	}{
		{"no token", "/metrics", "", 401, "no bearer token"},
		{"a token the API server does not know", "/metrics", "not-a-token", 401, "does not authenticate"},
		{"a ServiceAccount without the permission", "/metrics", nobody, 403, `"system:serviceaccount:default:nobody" may not get the non-resource URL /metrics`},
		{"ovn-k8s-metrics-reader on pprof", "/debug/pprof/", reader, 403, "/debug/pprof/"},
		{"no token on pprof", "/debug/pprof/heap", "", 401, "no bearer token"},
	} {
		code, body, err := get(tc.token)(tc.path)
		if err != nil || code != tc.code || !strings.Contains(body, tc.says) {
			t.Errorf("%s: GET %s = %d %q (%v), want %d saying %q", tc.what, tc.path, code, body, err, tc.code, tc.says)
		}
	}
	waitMetric(t, get(reader), "ovnkube_master_leader", func(v float64) bool { return v == 1 })
	if code, body, err := httpGet(port, "/metrics"); err == nil && (code != 400 || strings.Contains(body, "ovnkube_")) {
		t.Errorf("a scrape in clear: %d %q, want 400 and no metrics", code, body)
	}
	p.Stop()

	rules := roleRules(t, c, "", "ovnkube-metrics-auth")
	for i := range rules {
		setRoleRules(t, c, "", "ovnkube-metrics-auth", append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...))
		p := run()
		waitStatus(t, get(""), "/healthz", 200)
		neverWithin(t, func() error {
			if code, body, err := get(reader)("/metrics"); err != nil || code != 200 {
				return fmt.Errorf("%d %s %v", code, body, err)
			}
			return nil
		}, fmt.Sprintf("rule %v of ovnkube-metrics-auth is superfluous: an authorized scrape succeeds without it", rules[i]))
		p.Stop()
		setRoleRules(t, c, "", "ovnkube-metrics-auth", rules)
	}
}

// The cluster manager's /metrics and /readyz (zone mode): ready once it
// has restored the nodes' subnets, not while the IC NB is down, again once
// it is back; its queue's series follow the nodes it synced.
func TestClusterManagerMetricsAndReadiness(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	ic := harness.StartInterconnect(t)
	port := harness.FreePort(t)
	get := func(path string) (int, string, error) { return httpGet(port, path) }
	harness.Start(t, t.TempDir(), "cluster-manager", harness.Binary(t, "ovnkube"), "cluster-manager", "--kubeconfig", kube.Kubeconfig,
		"--ic-nb-address", "unix:"+ic.NBSock, "--leader-elect=false", "--metrics-address", fmt.Sprintf("127.0.0.1:%d", port))
	waitStatus(t, get, "/healthz", 200)
	waitStatus(t, get, "/readyz", 200)
	if _, err := kube.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
	equals := func(n float64) func(float64) bool { return func(v float64) bool { return v == n } }
	waitMetric(t, get, "workqueue_adds_total{name=\"cluster-manager-nodes\"}", atLeast(1))
	waitMetric(t, get, "ovnkube_cluster_manager_leader", equals(1))
	waitMetric(t, get, "ovnkube_cluster_manager_ic_nb_connected", equals(1))
	waitMetric(t, get, "process_resident_memory_bytes", atLeast(1))
	ic.StopNB()
	waitMetric(t, get, "ovnkube_cluster_manager_ic_nb_connected", equals(0))
	waitStatus(t, get, "/readyz", 503)
	ic.StartNB()
	waitStatus(t, get, "/readyz", 200)
}
