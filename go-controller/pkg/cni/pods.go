package cni

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
)

// PodWatcher answers the CNI server's "what is this pod's address" from a
// pod informer (the caller scopes it to the node): an ADD that comes before
// the master's annotation waits for the informer's event, not by polling
// the API.
type PodWatcher struct {
	lister  corelisters.PodLister
	mu      sync.Mutex
	waiters map[string][]chan struct{} // namespace/name → woken on any event of that pod
}

// NewPodWatcher registers on the factory's pod informer; start the factory after.
func NewPodWatcher(factory informers.SharedInformerFactory) *PodWatcher {
	inf := factory.Core().V1().Pods()
	w := &PodWatcher{lister: inf.Lister(), waiters: map[string][]chan struct{}{}}
	wake := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			w.wake(key)
		}
	}
	_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    wake,
		UpdateFunc: func(_, cur any) { wake(cur) },
	})
	// The CNI server reads annotations and the UID only.
	_ = inf.Informer().SetTransform(func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			pod.ManagedFields, pod.Spec, pod.Status = nil, corev1.PodSpec{}, corev1.PodStatus{}
		}
		return obj, nil
	})
	return w
}

func (w *PodWatcher) wake(key string) {
	w.mu.Lock()
	chans := w.waiters[key]
	delete(w.waiters, key)
	w.mu.Unlock()
	for _, ch := range chans {
		close(ch)
	}
}

// PodNetwork is a PodNetworkFunc.
func (w *PodWatcher) PodNetwork(ctx context.Context, pa *PodArgs, timeout time.Duration) (annotations.PodNetwork, error) {
	ns, name := string(pa.K8S_POD_NAMESPACE), string(pa.K8S_POD_NAME)
	key := ns + "/" + name
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for {
		// Registered before reading, so an event between the read and the
		// wait still wakes us.
		ch := make(chan struct{})
		w.mu.Lock()
		w.waiters[key] = append(w.waiters[key], ch)
		w.mu.Unlock()
		pod, err := w.lister.Pods(ns).Get(name)
		var pn annotations.PodNetwork
		if err == nil {
			if pn, err = PodNetworkOf(pod, pa); err == nil {
				w.drop(key, ch)
				return pn, nil
			}
		}
		select {
		case <-ch:
			continue
		case <-timer.C:
			err = fmt.Errorf("pod %s on this node: %w", key, err)
		case <-ctx.Done():
			err = ctx.Err()
		}
		w.drop(key, ch)
		return annotations.PodNetwork{}, err
	}
}

// drop unregisters a waiter that gave up.
func (w *PodWatcher) drop(key string, ch chan struct{}) {
	w.mu.Lock()
	defer w.mu.Unlock()
	list := w.waiters[key]
	for i, c := range list {
		if c == ch {
			w.waiters[key] = append(list[:i], list[i+1:]...)
			break
		}
	}
	if len(w.waiters[key]) == 0 {
		delete(w.waiters, key)
	}
}
