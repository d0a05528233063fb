package policy

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// Admin policies' status writes yield to the writes they report on: while
// admin policies are being created or changed (an event less than
// statusQuiet ago) or the policy queue has work, a status write is held,
// for at most statusMaxHold, and then queued again. A burst of policies is
// thus programmed, and its CREATE calls served, before the API server is
// asked for their statuses, as kube-controller-manager's
// --endpointslice-updates-batch-period holds EndpointSlice writes back
// behind pod changes. Statuses stay level-triggered: the write, when it
// comes, is of the condition the policy's latest sync computed.
const (
	statusQuiet   = 100 * time.Millisecond
	statusMaxHold = 2 * time.Second
)

// statusPacer holds status writes (by queue key) and releases them.
type statusPacer struct {
	quiet, maxHold time.Duration
	now            func() time.Time
	busy           func() bool // the policy queue has work
	lastEvent      atomic.Int64
	wake           chan struct{}

	mu       sync.Mutex
	held     map[string]time.Time // since when
	released map[string]bool      // queued again, to be written without a hold
}

func newStatusPacer(quiet, maxHold time.Duration, now func() time.Time, busy func() bool) *statusPacer {
	return &statusPacer{quiet: quiet, maxHold: maxHold, now: now, busy: busy, wake: make(chan struct{}, 1),
		held: map[string]time.Time{}, released: map[string]bool{}}
}

// event records that an admin policy was created, changed or deleted.
func (p *statusPacer) event() { p.lastEvent.Store(p.now().UnixNano()) }

// quietFor is how long it takes still until writes may go (<= 0: now).
func (p *statusPacer) quietFor(now time.Time) time.Duration {
	if p.busy() {
		return p.quiet
	}
	return p.quiet - now.Sub(time.Unix(0, p.lastEvent.Load()))
}

// hold says whether key's write must wait; the pacer then queues the key
// again when it may go (run).
func (p *statusPacer) hold(key string) bool {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released[key] {
		delete(p.released, key)
		return false
	}
	if _, ok := p.held[key]; ok {
		return true
	}
	if p.quietFor(now) <= 0 {
		return false
	}
	p.held[key] = now
	select {
	case p.wake <- struct{}{}:
	default:
	}
	return true
}

// done forgets key: its write went ahead, or none is needed any more.
func (p *statusPacer) done(key string) {
	p.mu.Lock()
	delete(p.held, key)
	delete(p.released, key)
	p.mu.Unlock()
}

// pending says some write is held or released and not yet made.
func (p *statusPacer) pending() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.held)+len(p.released) > 0
}

// due releases the held keys whose writes may go now: all of them once
// it is quiet, else those held maxHold; next is when to look again (0:
// nothing is held).
func (p *statusPacer) due() (keys []string, next time.Duration) {
	now := p.now()
	p.mu.Lock()
	defer p.mu.Unlock()
	quiet := p.quietFor(now)
	for k, since := range p.held {
		left := p.maxHold - now.Sub(since)
		if quiet <= 0 || left <= 0 {
			delete(p.held, k)
			p.released[k] = true
			keys = append(keys, k)
			continue
		}
		if w := min(quiet, left); next == 0 || w < next {
			next = w
		}
	}
	return keys, next
}

// run queues released keys with add until ctx ends.
func (p *statusPacer) run(ctx context.Context, add func(key string)) {
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		keys, next := p.due()
		for _, k := range keys {
			add(k)
		}
		var tick <-chan time.Time
		if next > 0 {
			timer.Reset(next)
			tick = timer.C
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-tick:
		}
	}
}
