package dnsname

import (
	"net/netip"
	"slices"
	"time"
)

// entry is the state of one followed name; the Resolver's lock guards it.
type entry struct {
	// expiry is when each kept address expires.
	expiry map[netip.Addr]time.Time
	// addrs is what Addrs returns: nil until the first successful answer.
	addrs []netip.Addr
	// next is when the name is due for a refresh.
	next time.Time
	// inflight is set while a refresh of the name is under way.
	inflight bool
	// backoff is the current retry delay; nonzero during an outage.
	backoff time.Duration
	// capLogged is set once exceeding maxAddrs has been logged.
	capLogged bool
	// passive marks a name never queried (a wildcard, or any name of an
	// Options.ObserveOnly resolver): its addresses come from Observe and
	// Learn alone, and next is when the first of them expires.
	passive bool
}

// earliestExpiry is when the first kept address expires (MaxTTL from now
// when none is kept).
func (e *entry) earliestExpiry(o Options) time.Time {
	next := time.Now().Add(o.MaxTTL)
	for _, exp := range e.expiry {
		if exp.Before(next) {
			next = exp
		}
	}
	return next
}

// dueByExpiry brings the name's next turn forward to its earliest expiry
// after new addresses: a passive name expires them then, a plain one is
// refreshed then, dropping what expired.
func (e *entry) dueByExpiry(o Options) {
	if exp := e.earliestExpiry(o); e.passive || exp.Before(e.next) {
		e.next = exp
	}
}

// update merges the addresses of a successful answer received at now, drops
// the expired ones and keeps at most maxAddrs (the lowest). It reports
// whether addrs changed and how many addresses the cap dropped.
func (e *entry) update(found []answerAddr, now time.Time, minTTL time.Duration) (changed bool, dropped int) {
	seen := make(map[netip.Addr]time.Time, len(found))
	for _, f := range found {
		exp := now.Add(max(time.Duration(f.ttl)*time.Second, minTTL))
		if exp.After(seen[f.addr]) {
			seen[f.addr] = exp
		}
	}
	return e.merge(seen, now)
}

// merge sets the expiry of each address of seen, then drops the expired
// ones and keeps at most maxAddrs (the lowest), as update says.
func (e *entry) merge(seen map[netip.Addr]time.Time, now time.Time) (changed bool, dropped int) {
	if e.expiry == nil {
		e.expiry = map[netip.Addr]time.Time{}
	}
	for addr, exp := range seen {
		e.expiry[addr] = exp
	}
	for addr, exp := range e.expiry {
		if !exp.After(now) {
			delete(e.expiry, addr)
		}
	}
	addrs := make([]netip.Addr, 0, len(e.expiry))
	for addr := range e.expiry {
		addrs = append(addrs, addr)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	if len(addrs) > maxAddrs {
		dropped = len(addrs) - maxAddrs
		for _, addr := range addrs[maxAddrs:] {
			delete(e.expiry, addr)
		}
		addrs = addrs[:maxAddrs:maxAddrs]
	}
	changed = e.addrs == nil || !slices.Equal(addrs, e.addrs)
	e.addrs = addrs
	return changed, dropped
}

// refreshAfter is the delay before the next refresh after a successful
// answer: until the earliest expiry clamped to [MinTTL, MaxTTL], or the
// negative interval when no address is kept.
func (e *entry) refreshAfter(now time.Time, o Options) time.Duration {
	if len(e.expiry) == 0 {
		return negativeInterval(o)
	}
	var earliest time.Time
	for _, exp := range e.expiry {
		if earliest.IsZero() || exp.Before(earliest) {
			earliest = exp
		}
	}
	return min(max(earliest.Sub(now), o.MinTTL), o.MaxTTL)
}

// fail advances the retry delay after a failed resolution and reports
// whether this failure starts an outage.
func (e *entry) fail(o Options) (first bool) {
	step := min(time.Second, o.MinTTL)
	if e.backoff == 0 {
		e.backoff = step
		return true
	}
	e.backoff = min(2*e.backoff, max(negativeInterval(o), step))
	return false
}

// negativeInterval is the refresh interval of a name without addresses.
func negativeInterval(o Options) time.Duration {
	return min(6*o.MinTTL, o.MaxTTL)
}
