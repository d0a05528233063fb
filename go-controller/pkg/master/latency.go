package master

import (
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
)

// podLatency times new pods from the master first seeing them scheduled and
// without an address to their LSP commit and their annotation (pods the
// master finds already addressed, as after a restart, are not timed). A
// pod's creationTimestamp has one-second resolution, too coarse for this.
type podLatency struct{ timers sync.Map } // pod UID → *podTimer

type podTimer struct {
	start          time.Time
	lsp, annotated atomic.Bool
}

// saw starts timing a pod the first time it needs an address.
func (l *podLatency) saw(obj any) {
	pod, ok := obj.(*slim.Pod)
	if !ok || !pod.Networked() || pod.Annotated {
		return
	}
	l.timers.LoadOrStore(pod.UID, &podTimer{start: time.Now()})
}

// lspCommitted and annotated observe their latency once per pod.
func (l *podLatency) lspCommitted(uid types.UID) { l.observe(uid, true) }
func (l *podLatency) annotatedPod(uid types.UID) { l.observe(uid, false) }

func (l *podLatency) observe(uid types.UID, lsp bool) {
	v, ok := l.timers.Load(uid)
	if !ok {
		return
	}
	t := v.(*podTimer)
	if lsp && t.lsp.CompareAndSwap(false, true) {
		metrics.PodLSPLatency.Observe(time.Since(t.start).Seconds())
	}
	if !lsp && t.annotated.CompareAndSwap(false, true) {
		metrics.PodAnnotatedLatency.Observe(time.Since(t.start).Seconds())
	}
	if t.lsp.Load() && t.annotated.Load() {
		l.timers.Delete(uid)
	}
}

// forget drops a deleted pod's timer.
func (l *podLatency) forget(obj any) {
	if pod := controller.ObjectOf[*slim.Pod](obj); pod != nil {
		l.timers.Delete(pod.UID)
	}
}
