package dnsname

import (
	"maps"
	"net/netip"
	"testing"
	"time"
)

// Zone mode's relay (the cluster manager's resolver, ObserveOnly; a zone
// master's, Learn and Known): an observe-only resolver never queries, not
// even a plain name, and reports each address's expiry; what another
// resolver learns keeps those expiries exactly (no MinTTL floor: relaying
// again does not extend them), a later one of an address winning, and a
// name starting to be followed learns what is Known of it.
func TestRelayObserveOnlyLearnKnown(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "www.example.com", "www.example.com. 300 IN A 192.0.2.1")
	src := run(t, Options{Servers: []string{ts.addr}, ObserveOnly: true, MinTTL: 300 * time.Millisecond})
	src.r.Set([]string{"www.example.com", "*.example.com"})
	if got := src.r.Expiries("www.example.com"); got != nil {
		t.Errorf("observe-only, nothing observed: Expiries %v, want nil", got)
	}
	src.r.Observe("a.example.com", []Answer{{Addr: netip.MustParseAddr("198.51.100.7"), TTL: time.Hour}})
	src.r.Observe("www.example.com", []Answer{{Addr: netip.MustParseAddr("198.51.100.8"), TTL: 0}})
	eventually(t, wait, addrsAre(src.r, "*.example.com", "198.51.100.7", "198.51.100.8"))
	eventually(t, wait, addrsAre(src.r, "www.example.com", "198.51.100.8"))
	wild := src.r.Expiries("*.example.com")
	if exp := wild[netip.MustParseAddr("198.51.100.7")]; time.Until(exp) < 59*time.Minute || time.Until(exp) > time.Hour {
		t.Errorf("198.51.100.7 expires in %v, want about an hour", time.Until(exp))
	}
	// TTL 0: MinTTL later it is gone, without any query.
	eventually(t, wait, addrsAre(src.r, "www.example.com"))
	if n := ts.count("www.example.com."); n != 0 {
		t.Errorf("an observe-only resolver queried www.example.com %d times", n)
	}

	// Another resolver learns: the expiries as they are, the later wins.
	a, b := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("::ffff:192.0.2.11")
	soon, later := time.Now().Add(400*time.Millisecond), time.Now().Add(time.Hour)
	known := map[string]map[netip.Addr]time.Time{"*.example.org": {a: soon, b: later}, "*.empty.org": {}}
	dst := run(t, Options{ObserveOnly: true, MinTTL: 5 * time.Second, Known: func(name string) map[netip.Addr]time.Time { return known[name] }})
	dst.r.Learn("*.example.org", map[netip.Addr]time.Time{a: soon}) // not followed yet: nothing
	if got := dst.r.Addrs("*.example.org"); got != nil {
		t.Errorf("learned before being followed: %v", got)
	}
	dst.r.Set([]string{"*.example.org", "*.empty.org", "*.unknown.org"})
	eventually(t, wait, addrsAre(dst.r, "*.example.org", "192.0.2.10", "192.0.2.11"))
	if got := dst.r.Addrs("*.empty.org"); got == nil || len(got) != 0 {
		t.Errorf("known to have no address: %v, want empty, not nil", got)
	}
	if got := dst.r.Addrs("*.unknown.org"); got != nil {
		t.Errorf("nothing known: %v, want nil", got)
	}
	dst.r.Learn("*.example.org", map[netip.Addr]time.Time{a: soon.Add(-time.Second)}) // earlier: ignored
	// a goes at its expiry, not MinTTL (5 s) after it was learned.
	eventually(t, 2*time.Second, addrsAre(dst.r, "*.example.org", "192.0.2.11"))
	if got := dst.r.Expiries("*.example.org"); !maps.Equal(got, map[netip.Addr]time.Time{b.Unmap(): later}) {
		t.Errorf("Expiries %v, want only %v until %v", got, b.Unmap(), later)
	}
}
