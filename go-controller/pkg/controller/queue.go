// Package controller is the worker skeleton every ovn-k8s controller shares
// (sample-controller style): a rate-limited workqueue of string keys, workers
// that sync one key at a time, retries with backoff, and resyncs that log
// what they repaired.
package controller

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/util/workqueue"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// SyncFunc brings the state of one key in line; an error retries the key
// with backoff. Its NB writes go through a context that counts them.
type SyncFunc func(ctx context.Context, key string) error

// Queue is one kind's workqueue with its sync function.
type Queue struct {
	name  string
	log   logr.Logger
	sync  SyncFunc
	q     workqueue.TypedRateLimitingInterface[string]
	busy  atomic.Int64
	syncs atomic.Int64 // syncs run, for tests and figures
	check sync.Map     // keys queued by a resync, whose repairs are logged
}

// NewQueue makes a queue whose failing keys are retried from 50 ms up to maxDelay.
func NewQueue(name string, maxDelay time.Duration, sync SyncFunc, log logr.Logger) *Queue {
	return &Queue{
		name: name,
		log:  log,
		sync: sync,
		q: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, maxDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: name}),
	}
}

// Add queues key.
func (q *Queue) Add(key string) { q.q.Add(key) }

// AddAfter queues key once d has passed (at the earliest of the times asked
// while it waits).
func (q *Queue) AddAfter(key string, d time.Duration) { q.q.AddAfter(key, d) }

// Resync queues key for a check whose repairs (committed operations) are logged.
func (q *Queue) Resync(key string) {
	q.check.Store(key, true)
	q.q.Add(key)
}

// Retries is how many times key's sync has failed since it last succeeded.
func (q *Queue) Retries(key string) int { return q.q.NumRequeues(key) }

// Syncs is how many syncs the queue has run.
func (q *Queue) Syncs() int64 { return q.syncs.Load() }

// Idle says no key is queued or being synced.
func (q *Queue) Idle() bool { return q.q.Len() == 0 && q.busy.Load() == 0 }

// Run starts workers and blocks until ctx ends, then drains them.
func (q *Queue) Run(ctx context.Context, workers int) {
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for q.processNext(ctx) {
			}
		}()
	}
	<-ctx.Done()
	q.q.ShutDown()
	wg.Wait()
}

func (q *Queue) processNext(ctx context.Context) bool {
	key, quit := q.q.Get()
	if quit {
		return false
	}
	defer q.q.Done(key)
	q.busy.Add(1)
	defer q.busy.Add(-1)
	q.syncs.Add(1)
	_, checking := q.check.LoadAndDelete(key)
	var ops atomic.Int64
	if err := q.sync(ovndb.WithOpCounter(ctx, &ops), key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		if checking {
			q.check.Store(key, true) // the retry's repairs are the resync's
		}
		q.log.Info("sync failed; will retry", "queue", q.name, "key", key, "retries", q.q.NumRequeues(key), "error", err.Error())
		q.q.AddRateLimited(key)
		return true
	}
	if checking && ops.Load() > 0 {
		q.log.Info("resync repaired an object whose NB rows had drifted", "queue", q.name, "key", key, "operations", ops.Load())
		metrics.ResyncRepairs.WithLabelValues(q.name).Inc()
	}
	q.q.Forget(key)
	return true
}
