// Package metrics holds ovn-k8s's Prometheus metrics and the HTTP endpoint
// that serves them with /healthz, /readyz and, when asked, pprof. Metrics are
// package-level collectors, as Prometheus instrumentation usually is; a
// process registers the ones it reports (RegisterMaster, RegisterNode).
// docs/operations.md lists every series.
package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// latency buckets: 1 ms to about 33 s.
var latencyBuckets = prometheus.ExponentialBuckets(0.001, 2, 16)

var (
	// PodLSPLatency is from the master first seeing a new scheduled pod to its LSP being committed.
	PodLSPLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ovnkube_master_pod_lsp_created_seconds",
		Help:    "Time from the master first seeing a scheduled pod without an address to its logical switch port being committed to the NB.",
		Buckets: latencyBuckets,
	})
	// PodAnnotatedLatency is from the master first seeing a new scheduled pod to its annotation being written.
	PodAnnotatedLatency = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ovnkube_master_pod_annotated_seconds",
		Help:    "Time from the master first seeing a scheduled pod without an address to its k8s.ovn.org/pod-networks annotation being written.",
		Buckets: latencyBuckets,
	})
	// NBTransactionDuration is one NB transaction's round trip, by result.
	NBTransactionDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ovnkube_master_nb_transaction_duration_seconds",
		Help:    "Round trip of one OVN Northbound transaction, by result (ok, error).",
		Buckets: latencyBuckets,
	}, []string{"result"})
	// NBTransactionOperations is how many operations one NB transaction carried.
	NBTransactionOperations = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "ovnkube_master_nb_transaction_operations",
		Help:    "Operations carried by one OVN Northbound transaction (batched across objects).",
		Buckets: prometheus.ExponentialBuckets(1, 2, 13),
	})
	// NBSetMemberReads counts reads of address sets' members from the NB
	// (the client does not monitor them: ovndb keeps them), by scope.
	NBSetMemberReads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ovnkube_master_nb_set_member_reads_total",
		Help: "Reads of address sets' members from the OVN Northbound, which the master keeps instead of monitoring them: of the whole table (after a start, a reconnect or a resync) or of one set.",
	}, []string{"scope"})
	// Resyncs counts full resyncs by reason.
	Resyncs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ovnkube_master_resyncs_total",
		Help: "Full resyncs of every object, by reason (periodic, nb_reconnect).",
	}, []string{"reason"})
	// ResyncRepairs counts objects a resync found drifted and repaired, by queue.
	ResyncRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "ovnkube_resync_repairs_total",
		Help: "Objects whose NB rows a resync found drifted and repaired, by queue.",
	}, []string{"queue"})
	// CNIRequests is the node daemon's CNI request duration by command and result.
	CNIRequests = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "ovnkube_node_cni_request_duration_seconds",
		Help:    "Duration of CNI requests served by the node daemon's CNI server, by command (ADD, DEL, CHECK) and result (ok, error).",
		Buckets: latencyBuckets,
	}, []string{"command", "result"})
	// NodeRepairs counts the node daemon's repairs of its setup.
	NodeRepairs = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "ovnkube_node_repairs_total",
		Help: "Times the node daemon found its setup (management port, gateway flows, NodePort chain) gone or drifted and rebuilt it.",
	})
)

// Result is the result label of an error.
func Result(err error) string {
	if err != nil {
		return "error"
	}
	return "ok"
}

// RegisterMaster registers the master's metrics, the workqueue metrics,
// Go runtime and process metrics, and the gauges given (leader, NB connection).
func RegisterMaster(reg prometheus.Registerer, gauges ...prometheus.Collector) {
	registerCommon(reg)
	reg.MustRegister(PodLSPLatency, PodAnnotatedLatency, NBTransactionDuration, NBTransactionOperations, NBSetMemberReads, Resyncs, ResyncRepairs)
	reg.MustRegister(gauges...)
}

// RegisterNode registers the node daemon's metrics.
func RegisterNode(reg prometheus.Registerer, gauges ...prometheus.Collector) {
	registerCommon(reg)
	reg.MustRegister(NodeRepairs, CNIRequests)
	reg.MustRegister(gauges...)
}

// RegisterClusterManager registers the cluster manager's metrics (its
// queues', Go runtime and process metrics) and the gauges given.
func RegisterClusterManager(reg prometheus.Registerer, gauges ...prometheus.Collector) {
	registerCommon(reg)
	reg.MustRegister(gauges...)
}

func registerCommon(reg prometheus.Registerer) {
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	registerWorkqueue(reg)
}

// GaugeFunc is a gauge read when scraped.
func GaugeFunc(name, help string, f func() float64) prometheus.Collector {
	return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f)
}

// Bool is 1 for true.
func Bool(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
