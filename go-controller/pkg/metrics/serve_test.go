package metrics

import (
	"errors"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, s Server, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	s.Handler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b)
}

func TestReadyzFollowsReadyAndPprofIsOptIn(t *testing.T) {
	var notReady error = errors.New("initial sync not done")
	s := Server{Registry: prometheus.NewRegistry(), Ready: func() error { return notReady }}
	if code, body := get(t, s, "/readyz"); code != 503 || !strings.Contains(body, "initial sync not done") {
		t.Fatalf("/readyz = %d %q, want 503 naming the reason", code, body)
	}
	if code, _ := get(t, s, "/healthz"); code != 200 {
		t.Fatalf("/healthz = %d while not ready, want 200 (liveness is not readiness)", code)
	}
	notReady = nil
	if code, _ := get(t, s, "/readyz"); code != 200 {
		t.Fatalf("/readyz = %d once ready", code)
	}
	if code, _ := get(t, s, "/debug/pprof/"); code != 404 {
		t.Fatalf("pprof served without Pprof: %d", code)
	}
	s.Pprof = true
	if code, _ := get(t, s, "/debug/pprof/"); code != 200 {
		t.Fatalf("pprof not served with Pprof: %d", code)
	}
}

func TestMasterSeriesAreRegistered(t *testing.T) {
	reg := prometheus.NewRegistry()
	RegisterMaster(reg, GaugeFunc("ovnkube_master_leader", "test", func() float64 { return 1 }))
	Resyncs.WithLabelValues("periodic").Inc()
	NBTransactionDuration.WithLabelValues("ok").Observe(0.01)
	ResyncRepairs.WithLabelValues("pods").Inc()
	_, body := get(t, Server{Registry: reg}, "/metrics")
	for _, name := range []string{"ovnkube_master_pod_lsp_created_seconds", "ovnkube_master_pod_annotated_seconds",
		"ovnkube_master_nb_transaction_duration_seconds", "ovnkube_master_nb_transaction_operations",
		"ovnkube_master_resyncs_total", "ovnkube_resync_repairs_total", "ovnkube_master_leader",
		"go_goroutines", "process_resident_memory_bytes"} {
		if !strings.Contains(body, "\n"+name) && !strings.HasPrefix(body, name) {
			t.Errorf("%s missing from /metrics", name)
		}
	}
}
