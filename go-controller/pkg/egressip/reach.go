package egressip

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"syscall"
	"time"
)

// The reachability check of egress nodes: the Node's Ready condition lags
// a dead node by the node monitor's grace period (40 s by default), far
// more than an egress IP may be down. So the master probes each labelled
// node itself, every probeInterval: a TCP connection to its gateway address
// on port 9 (discard), where any answer, a refusal included, shows the
// node's kernel is up and its network reaches it; failuresToDown probes in
// a row without one mark it unreachable, one answer reachable again. Each
// change queues a new assignment.
const (
	probeInterval  = time.Second
	failuresToDown = 2
	probePort      = 9
)

type prober struct {
	timeout time.Duration // 0: off, every node is reachable
	changed func()
	// check is one probe (probe; tests replace it).
	check func(context.Context, netip.Addr) bool
	mu    sync.Mutex
	fails map[string]int
	down  map[string]bool
}

func newProber(timeout time.Duration, changed func()) *prober {
	p := &prober{timeout: timeout, changed: changed, fails: map[string]int{}, down: map[string]bool{}}
	p.check = p.probe
	return p
}

// reachable says whether the last probes reached node.
func (p *prober) reachable(node string) bool {
	if p.timeout == 0 {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return !p.down[node]
}

// run probes the targets every probeInterval until ctx ends.
func (p *prober) run(ctx context.Context, targets func() map[string]netip.Addr) {
	if p.timeout == 0 {
		return
	}
	tick := time.NewTicker(probeInterval)
	defer tick.Stop()
	for {
		p.round(ctx, targets())
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// round probes every target at once and records the results. The lock is
// taken only once every probe has answered or timed out: reachable (the
// assignment asks it for every labelled node) must not wait for a probe of
// a dead node, or each such call delays a failover by up to the timeout.
func (p *prober) round(ctx context.Context, targets map[string]netip.Addr) {
	type result struct {
		node string
		ok   bool
	}
	results := make(chan result, len(targets))
	for node, addr := range targets {
		go func() { results <- result{node, p.check(ctx, addr)} }()
	}
	got := make([]result, 0, len(targets))
	for range targets {
		got = append(got, <-results)
	}
	changed := false
	p.mu.Lock()
	for _, r := range got {
		if r.ok {
			p.fails[r.node] = 0
		} else {
			p.fails[r.node]++
		}
		down := p.fails[r.node] >= failuresToDown
		if down != p.down[r.node] {
			p.down[r.node], changed = down, true
		}
	}
	for node := range p.fails { // nodes no longer probed
		if _, ok := targets[node]; !ok {
			delete(p.fails, node)
			delete(p.down, node)
		}
	}
	p.mu.Unlock()
	if changed {
		p.changed()
	}
}

// probe says whether addr answered on probePort within the timeout.
func (p *prober) probe(ctx context.Context, addr netip.Addr) bool {
	d := net.Dialer{Timeout: p.timeout}
	conn, err := d.DialContext(ctx, "tcp", netip.AddrPortFrom(addr, probePort).String())
	if err == nil {
		_ = conn.Close()
		return true
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}
