package dnsname

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
)

const (
	// maxConcurrent bounds the names being queried at a time.
	maxConcurrent = 8
	// maxAddrs bounds the addresses kept for one name.
	maxAddrs = 256

	defaultMinTTL  = 5 * time.Second
	defaultMaxTTL  = 30 * time.Minute
	defaultTimeout = 2 * time.Second
)

// Options configure a Resolver. Zero durations take their defaults.
type Options struct {
	// Servers are the nameservers as "host:port", tried in order.
	Servers []string
	// MinTTL is the floor of an address's lifetime and of the refresh
	// interval after an answer (default 5s); retries after a failure start
	// at min(1s, MinTTL).
	MinTTL time.Duration
	// MaxTTL is the ceiling of the refresh interval (default 30m; never
	// below MinTTL).
	MaxTTL time.Duration
	// Timeout bounds one query to one server (default 2s).
	Timeout time.Duration
	// ObserveOnly: no name is ever queried (Servers unused); every name's
	// addresses come from Observe and Learn, as a wildcard's do (zone
	// mode's cluster manager, which relays what the pods were answered).
	ObserveOnly bool
	// Known, when set, is asked for what was learned elsewhere about a
	// name as it starts being followed (Set): each address and when it
	// expires, Learned at once; nil: nothing known, an empty map: known
	// to have no address.
	Known func(name string) map[netip.Addr]time.Time
}

func (o Options) withDefaults() Options {
	o.Servers = slices.Clone(o.Servers)
	if o.MinTTL <= 0 {
		o.MinTTL = defaultMinTTL
	}
	if o.MaxTTL <= 0 {
		o.MaxTTL = defaultMaxTTL
	}
	o.MaxTTL = max(o.MaxTTL, o.MinTTL)
	if o.Timeout <= 0 {
		o.Timeout = defaultTimeout
	}
	return o
}

// Resolver follows a set of DNS names and tells when their addresses change.
// See the package documentation for its semantics.
type Resolver struct {
	opts     Options
	onChange func(name string)
	log      logr.Logger
	wake     chan struct{}

	mu      sync.Mutex
	names   map[string]*entry
	changed map[string]struct{}
	running int
}

// outcome is what a refresh has to log once the lock is released.
type outcome struct {
	err          error
	firstFailure bool
	recovered    bool
	kept         int
	dropped      int
}

// New returns a Resolver that follows no name yet. onChange(name) is called
// from Run's goroutine, never while the Resolver holds its lock, whenever
// Addrs(name) changes; it may be nil.
func New(opts Options, onChange func(name string), log logr.Logger) *Resolver {
	if onChange == nil {
		onChange = func(string) {}
	}
	return &Resolver{
		opts:     opts.withDefaults(),
		onChange: onChange,
		log:      log,
		wake:     make(chan struct{}, 1),
		names:    map[string]*entry{},
		changed:  map[string]struct{}{},
	}
}

// Run refreshes the followed names and calls onChange until ctx ends, then
// waits for the queries under way. Call it once.
func (r *Resolver) Run(ctx context.Context) {
	var wg sync.WaitGroup
	defer wg.Wait()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		changed, wait := r.dispatch(ctx, &wg)
		for _, name := range changed {
			r.onChange(name)
		}
		timer.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-r.wake:
		case <-timer.C:
		}
	}
}

// Set makes names the whole set of followed names: new ones are queried at
// once (by Run, without waiting here), the ones already followed keep their
// state and schedule, and the others are forgotten. Names are normalized;
// invalid ones (see NormalizePattern) are ignored. A wildcard name is never
// queried: its addresses are those Observe reports for names under it.
func (r *Resolver) Set(names []string) {
	want := make(map[string]bool, len(names))
	for _, name := range names {
		if norm, ok := NormalizePattern(name); ok {
			want[norm] = true
		}
	}
	var added []string
	r.mu.Lock()
	for name := range r.names {
		if !want[name] {
			delete(r.names, name)
			delete(r.changed, name)
		}
	}
	for name := range want {
		if r.names[name] == nil {
			r.names[name] = &entry{passive: r.opts.ObserveOnly || strings.HasPrefix(name, Wildcard)}
			added = append(added, name)
		}
	}
	r.mu.Unlock()
	if r.opts.Known != nil {
		for _, name := range added {
			if known := r.opts.Known(name); known != nil {
				r.Learn(name, known)
			}
		}
	}
	if len(added) > 0 {
		r.kick()
	}
}

// Learn merges what another follower of name saw (the cluster manager's
// relay, in zone mode): each address is kept until its expiry, unless the
// name already keeps it longer. The name counts as resolved from then on,
// even when expiries is empty. Nothing happens when name is not followed.
func (r *Resolver) Learn(name string, expiries map[netip.Addr]time.Time) {
	name, ok := NormalizePattern(name)
	if !ok {
		return
	}
	now := time.Now()
	r.mu.Lock()
	e := r.names[name]
	changed := false
	if e != nil {
		seen := make(map[netip.Addr]time.Time, len(expiries))
		for a, exp := range expiries {
			if a = a.Unmap(); exp.After(e.expiry[a]) && exp.After(seen[a]) {
				seen[a] = exp
			}
		}
		changed, _ = e.merge(seen, now)
		e.dueByExpiry(r.opts)
		if changed {
			r.changed[name] = struct{}{}
		}
	}
	r.mu.Unlock()
	if changed {
		r.kick()
	}
}

// Expiries is when each of name's current addresses expires: nil when the
// name is not followed or has not resolved yet.
func (r *Resolver) Expiries(name string) map[netip.Addr]time.Time {
	var out map[netip.Addr]time.Time
	r.withResolved(name, func(e *entry) { out = maps.Clone(e.expiry) })
	return out
}

// withResolved calls f with name's entry, under the lock, when the name is
// followed and has resolved.
func (r *Resolver) withResolved(name string, f func(*entry)) {
	name, ok := NormalizePattern(name)
	if !ok {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if e := r.names[name]; e != nil && e.addrs != nil {
		f(e)
	}
}

// Addrs returns the current addresses of name, sorted, IPv4 first. It is nil
// when the name is not followed or has not resolved yet, and non-nil (maybe
// empty) once it has.
func (r *Resolver) Addrs(name string) []netip.Addr {
	var out []netip.Addr
	r.withResolved(name, func(e *entry) { out = slices.Clone(e.addrs) })
	return out
}

// Answer is an address a DNS server gave for a name, with its TTL.
type Answer struct {
	Addr netip.Addr
	TTL  time.Duration
}

// Observe records an answer the cluster's DNS server gave one of its
// clients (seen through dnstap) for name: its addresses join those of the
// name if it is followed, and those of every followed wildcard it falls
// under, each kept for its TTL (at least MinTTL) from now, so that a rule
// matches the addresses the pods were given.
func (r *Resolver) Observe(name string, answers []Answer) {
	name, ok := Normalize(name)
	if !ok || len(answers) == 0 {
		return
	}
	found := make([]answerAddr, 0, len(answers))
	for _, a := range answers {
		found = append(found, answerAddr{addr: a.Addr.Unmap(), ttl: uint32(min(max(a.TTL/time.Second, 0), 1<<31))})
	}
	now := time.Now()
	changed := false
	r.mu.Lock()
	for _, pattern := range patternsOf(name) {
		e := r.names[pattern]
		if e == nil {
			continue
		}
		if c, _ := e.update(found, now, r.opts.MinTTL); c {
			r.changed[pattern] = struct{}{}
			changed = true
		}
		e.dueByExpiry(r.opts)
	}
	r.mu.Unlock()
	if changed {
		r.kick()
	}
}

// patternsOf are the names that match name (Matches): itself and the
// wildcard of each domain above it, so that an observation costs a lookup
// per label, however many names are followed.
func patternsOf(name string) []string {
	out := []string{name}
	for rest := name; ; {
		_, after, ok := strings.Cut(rest, ".")
		if !ok {
			return out
		}
		out = append(out, Wildcard+after)
		rest = after
	}
}

// expire drops a passive name's expired addresses (r.mu held): a name under it
// that the pods no longer resolve stops matching once its TTL has passed.
func (r *Resolver) expire(name string, e *entry, now time.Time) {
	if e.addrs != nil {
		if c, _ := e.update(nil, now, r.opts.MinTTL); c {
			r.changed[name] = struct{}{}
		}
	}
	e.next = e.earliestExpiry(r.opts)
}

// kick wakes Run without blocking.
func (r *Resolver) kick() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// dispatch starts the refreshes that are due, as far as maxConcurrent
// allows, and returns the names whose addresses changed and how long Run may
// sleep before the next refresh is due.
func (r *Resolver) dispatch(ctx context.Context, wg *sync.WaitGroup) ([]string, time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := time.Now()
	wait := r.opts.MaxTTL
	for name, e := range r.names {
		if e.inflight {
			continue
		}
		if d := e.next.Sub(now); d > 0 {
			wait = min(wait, d)
			continue
		}
		if e.passive {
			r.expire(name, e, now)
			continue
		}
		if r.running >= maxConcurrent {
			continue // a finishing refresh wakes Run
		}
		e.inflight = true
		r.running++
		wg.Add(1)
		go func() {
			defer wg.Done()
			r.refresh(ctx, name, e)
		}()
	}
	changed := slices.Sorted(maps.Keys(r.changed))
	clear(r.changed)
	return changed, wait
}

// refresh queries name and records the result, unless the name was
// forgotten meanwhile or ctx ended.
func (r *Resolver) refresh(ctx context.Context, name string, e *entry) {
	found, err := r.resolve(ctx, name)
	var out outcome
	r.mu.Lock()
	r.running--
	e.inflight = false
	if ctx.Err() == nil && r.names[name] == e {
		out = r.record(name, e, found, err)
	}
	r.mu.Unlock()
	r.report(name, out)
	r.kick()
}

// record applies the result of a resolution to e; r.mu is held.
func (r *Resolver) record(name string, e *entry, found []answerAddr, err error) outcome {
	now := time.Now()
	if err != nil {
		first := e.fail(r.opts)
		e.next = now.Add(e.backoff)
		return outcome{err: err, firstFailure: first, kept: len(e.addrs)}
	}
	out := outcome{recovered: e.backoff > 0}
	e.backoff = 0
	changed, dropped := e.update(found, now, r.opts.MinTTL)
	if dropped > 0 && !e.capLogged {
		e.capLogged = true
		out.dropped = dropped
	}
	if changed {
		r.changed[name] = struct{}{}
	}
	e.next = now.Add(e.refreshAfter(now, r.opts))
	return out
}

// report logs what a refresh of name has to say.
func (r *Resolver) report(name string, out outcome) {
	if out.firstFailure {
		r.log.Error(out.err, "DNS resolution failed; keeping the name's addresses until it recovers",
			"name", name, "addresses", out.kept)
	}
	if out.recovered {
		r.log.Info("DNS resolution recovered", "name", name)
	}
	if out.dropped > 0 {
		r.log.Info("DNS name has too many addresses; keeping the lowest",
			"name", name, "limit", maxAddrs, "dropped", out.dropped)
	}
}
