package metrics

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/client-go/util/workqueue"
)

// The workqueue series carry the names Kubernetes components use
// (k8s.io/component-base), labelled by queue name, so dashboards made for
// them work unchanged.
var (
	wqDepth = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_depth", Help: "Current depth of the workqueue.",
	}, []string{"name"})
	wqAdds = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_adds_total", Help: "Adds handled by the workqueue.",
	}, []string{"name"})
	wqLatency = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "workqueue_queue_duration_seconds", Help: "How long an item stays in the workqueue before being processed.",
		Buckets: latencyBuckets,
	}, []string{"name"})
	wqWork = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "workqueue_work_duration_seconds", Help: "How long processing an item from the workqueue takes.",
		Buckets: latencyBuckets,
	}, []string{"name"})
	wqUnfinished = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_unfinished_work_seconds", Help: "Seconds of work in progress not yet observed by work_duration (large values: stuck workers).",
	}, []string{"name"})
	wqLongest = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "workqueue_longest_running_processor_seconds", Help: "Seconds the longest running processor of the workqueue has been running.",
	}, []string{"name"})
	wqRetries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "workqueue_retries_total", Help: "Retries (rate-limited re-adds) handled by the workqueue.",
	}, []string{"name"})
)

// registerWorkqueue registers the workqueue series and makes client-go's
// workqueues report to them. client-go takes the first provider set in the
// process, before any queue is made: call this before building controllers.
func registerWorkqueue(reg prometheus.Registerer) {
	reg.MustRegister(wqDepth, wqAdds, wqLatency, wqWork, wqUnfinished, wqLongest, wqRetries)
	workqueue.SetProvider(queueMetrics{})
}

type queueMetrics struct{}

func (queueMetrics) NewDepthMetric(name string) workqueue.GaugeMetric {
	return wqDepth.WithLabelValues(name)
}
func (queueMetrics) NewAddsMetric(name string) workqueue.CounterMetric {
	return wqAdds.WithLabelValues(name)
}
func (queueMetrics) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return wqLatency.WithLabelValues(name)
}
func (queueMetrics) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return wqWork.WithLabelValues(name)
}
func (queueMetrics) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return wqUnfinished.WithLabelValues(name)
}
func (queueMetrics) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return wqLongest.WithLabelValues(name)
}
func (queueMetrics) NewRetriesMetric(name string) workqueue.CounterMetric {
	return wqRetries.WithLabelValues(name)
}
