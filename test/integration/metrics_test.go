package integration

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

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
