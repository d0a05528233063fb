package dnsname

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
)

const wait = 5 * time.Second

func TestResolvesAAndAAAA(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "a.example",
		"a.example. 300 IN A 192.0.2.2",
		"a.example. 300 IN A 192.0.2.1",
		"a.example. 300 IN AAAA 2001:db8::1")
	h := run(t, Options{Servers: []string{ts.addr}})
	h.r.Set([]string{"A.Example."})

	eventually(t, wait, addrsAre(h.r, "a.example", "192.0.2.1", "192.0.2.2", "2001:db8::1"))
	want := [][]netip.Addr{addrs("192.0.2.1", "192.0.2.2", "2001:db8::1")}
	if got := h.changesOf("a.example"); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("onChange saw %v, want %v", got, want)
	}
	// One A and one AAAA query, fully qualified, no search domain.
	if n, all := ts.count("a.example."), ts.total(); n != 2 || all != 2 {
		t.Errorf("server got %d queries for a.example. and %d in all, want 2 and 2", n, all)
	}
	if got := h.r.Addrs("other.example"); got != nil {
		t.Errorf("Addrs of a name not followed = %v, want nil", got)
	}
}

func TestFollowsCNAMEChain(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "www.example", "www.example. 300 IN CNAME edge.example.")
	ts.set(t, "edge.example", "edge.example. 300 IN CNAME host.cdn.test.")
	ts.set(t, "host.cdn.test",
		"host.cdn.test. 300 IN A 198.51.100.7",
		"host.cdn.test. 300 IN AAAA 2001:db8::7")
	stray, err := dns.NewRR("unrelated.example. 300 IN A 203.0.113.9")
	if err != nil {
		t.Fatal(err)
	}
	ts.mu.Lock()
	ts.stray = []dns.RR{stray}
	ts.mu.Unlock()
	h := run(t, Options{Servers: []string{ts.addr}})
	h.r.Set([]string{"www.example"})

	eventually(t, wait, addrsAre(h.r, "www.example", "198.51.100.7", "2001:db8::7"))
}

func TestAnswerChangeKeepsOldAddressesUntilTheirTTL(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// The AAAA record (TTL 0, so MinTTL) makes the name refresh every
	// 200ms; the A record lives 1s.
	ts.set(t, "rr.example", "rr.example. 1 IN A 192.0.2.1", "rr.example. 0 IN AAAA 2001:db8::1")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 200 * time.Millisecond})
	h.r.Set([]string{"rr.example"})
	eventually(t, wait, addrsAre(h.r, "rr.example", "192.0.2.1", "2001:db8::1"))

	changedAt := time.Now()
	ts.set(t, "rr.example", "rr.example. 1 IN A 192.0.2.2", "rr.example. 0 IN AAAA 2001:db8::1")
	eventually(t, wait, addrsAre(h.r, "rr.example", "192.0.2.1", "192.0.2.2", "2001:db8::1"))
	eventually(t, wait, addrsAre(h.r, "rr.example", "192.0.2.2", "2001:db8::1"))
	// 192.0.2.1 was last seen at most one refresh (200ms) before the change,
	// so it had about 800ms left; allow for slow queries.
	if kept := time.Since(changedAt); kept < 500*time.Millisecond {
		t.Errorf("old address left %v after the change, before its TTL", kept)
	}

	want := [][]netip.Addr{
		addrs("192.0.2.1", "2001:db8::1"),
		addrs("192.0.2.1", "192.0.2.2", "2001:db8::1"),
		addrs("192.0.2.2", "2001:db8::1"),
	}
	// Further refreshes with the same answer must not call onChange.
	before := ts.count("rr.example")
	eventually(t, wait, func() error {
		if n := ts.count("rr.example"); n < before+6 {
			return fmt.Errorf("%d more queries, want 6", n-before)
		}
		return nil
	})
	if got := h.changesOf("rr.example"); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("onChange saw %v, want %v", got, want)
	}
}

func TestNXDOMAIN(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// The AAAA record (TTL 0, so MinTTL) makes the name refresh every
	// 100ms; the A record lives 1s.
	ts.set(t, "gone.example", "gone.example. 1 IN A 192.0.2.5", "gone.example. 0 IN AAAA 2001:db8::5")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 100 * time.Millisecond})
	h.r.Set([]string{"missing.example", "gone.example"})

	eventually(t, wait, addrsAre(h.r, "missing.example"))
	if got := h.changesOf("missing.example"); len(got) != 1 || len(got[0]) != 0 || got[0] == nil {
		t.Errorf("onChange for missing.example saw %v, want one empty, non-nil list", got)
	}

	// After NXDOMAIN each address leaves by its own TTL.
	eventually(t, wait, addrsAre(h.r, "gone.example", "192.0.2.5", "2001:db8::5"))
	ts.remove("gone.example")
	eventually(t, wait, addrsAre(h.r, "gone.example", "192.0.2.5"))
	eventually(t, wait, addrsAre(h.r, "gone.example"))
	if n := h.sink.errors.Load(); n != 0 {
		t.Errorf("NXDOMAIN logged %d errors, want none", n)
	}
}

func TestServerFailureKeepsAddresses(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// TTL 0: the address expires after MinTTL (100ms).
	ts.set(t, "f.example", "f.example. 0 IN A 192.0.2.1")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 100 * time.Millisecond, Timeout: time.Second})
	h.r.Set([]string{"f.example"})
	eventually(t, wait, addrsAre(h.r, "f.example", "192.0.2.1"))

	// The name is refreshed when its address expires: the first failed
	// query comes at expiry, so three failures are well past it.
	ts.setRcode(dns.RcodeServerFailure)
	failedFrom := ts.count("f.example")
	eventually(t, wait, func() error {
		if n := ts.count("f.example") - failedFrom; n < 3 {
			return fmt.Errorf("%d failed queries, want 3", n)
		}
		return nil
	})
	if err := addrsAre(h.r, "f.example", "192.0.2.1")(); err != nil {
		t.Errorf("during the outage: %v", err)
	}
	if n := h.sink.errors.Load(); n != 1 {
		t.Errorf("the outage logged %d errors, want 1", n)
	}

	// Recovery: the kept address has expired, the new answer replaces it.
	ts.set(t, "f.example", "f.example. 0 IN A 192.0.2.2")
	ts.setRcode(dns.RcodeSuccess)
	eventually(t, wait, addrsAre(h.r, "f.example", "192.0.2.2"))

	// A second outage is logged again.
	ts.setRcode(dns.RcodeRefused)
	eventually(t, wait, func() error {
		if n := h.sink.errors.Load(); n != 2 {
			return fmt.Errorf("%d errors logged, want 2", n)
		}
		return nil
	})
	if err := addrsAre(h.r, "f.example", "192.0.2.2")(); err != nil {
		t.Errorf("during the second outage: %v", err)
	}
}

func TestServerStoppedKeepsAddresses(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	// TTL 0: the addresses expire after MinTTL, when the refresh comes.
	ts.set(t, "s.example", "s.example. 0 IN A 192.0.2.1", "s.example. 0 IN AAAA 2001:db8::1")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 100 * time.Millisecond, Timeout: 100 * time.Millisecond})
	h.r.Set([]string{"s.example"})
	eventually(t, wait, addrsAre(h.r, "s.example", "192.0.2.1", "2001:db8::1"))

	// The server goes away; something on its port swallows the queries.
	ts.silence()
	eventually(t, wait, func() error {
		if n := ts.swallowedQueries(); n < 3 {
			return fmt.Errorf("%d unanswered queries, want 3", n)
		}
		return nil
	})
	if err := addrsAre(h.r, "s.example", "192.0.2.1", "2001:db8::1")(); err != nil {
		t.Errorf("with the server stopped: %v", err)
	}
	if n := h.sink.errors.Load(); n != 1 {
		t.Errorf("the outage logged %d errors, want 1", n)
	}
	if got := h.changesOf("s.example"); len(got) != 1 {
		t.Errorf("onChange called %d times, want once", len(got))
	}
}

func TestFallsBackToNextServer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		first func(t *testing.T) (addr string, hits func() int)
	}{
		{"closed port", func(t *testing.T) (string, func() int) {
			return closedPort(t), nil
		}},
		{"silent server", func(t *testing.T) (string, func() int) {
			bh := startBlackHole(t, "127.0.0.1:0")
			return bh.addr, func() int { return int(bh.packets.Load()) }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ts := startServer(t)
			ts.set(t, "b.example", "b.example. 300 IN A 192.0.2.8", "b.example. 300 IN AAAA 2001:db8::8")
			first, hits := tc.first(t)
			h := run(t, Options{Servers: []string{first, ts.addr}, Timeout: 200 * time.Millisecond})
			h.r.Set([]string{"b.example"})
			eventually(t, wait, addrsAre(h.r, "b.example", "192.0.2.8", "2001:db8::8"))
			if hits != nil && hits() != 2 {
				t.Errorf("first server got %d queries, want 2 (A and AAAA)", hits())
			}
			if n := h.sink.errors.Load(); n != 0 {
				t.Errorf("fallback logged %d errors, want none", n)
			}
		})
	}
}

func TestSetForgetsNames(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "a.example", "a.example. 0 IN A 192.0.2.1")
	ts.set(t, "b.example", "b.example. 0 IN A 192.0.2.2")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 100 * time.Millisecond})
	h.r.Set([]string{"a.example", "b.example"})
	eventually(t, wait, addrsAre(h.r, "a.example", "192.0.2.1"))
	eventually(t, wait, addrsAre(h.r, "b.example", "192.0.2.2"))

	h.r.Set([]string{"b.example"})
	if got := h.r.Addrs("a.example"); got != nil {
		t.Errorf("Addrs of a forgotten name = %v, want nil", got)
	}
	forgotten := ts.count("a.example")
	kept := ts.count("b.example")
	eventually(t, wait, func() error {
		if n := ts.count("b.example") - kept; n < 6 {
			return fmt.Errorf("%d more queries for b.example, want 6", n)
		}
		return nil
	})
	// A refresh under way when Set was called may still land (A + AAAA).
	if n := ts.count("a.example") - forgotten; n > 2 {
		t.Errorf("%d queries for a.example after it was forgotten", n)
	}
}

func TestSetKeepsFollowedNames(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "a.example", "a.example. 300 IN A 192.0.2.1")
	ts.set(t, "c.example", "c.example. 300 IN A 192.0.2.3")
	h := run(t, Options{Servers: []string{ts.addr}})
	h.r.Set([]string{"a.example"})
	eventually(t, wait, addrsAre(h.r, "a.example", "192.0.2.1"))

	h.r.Set([]string{"A.example.", "c.example"})
	eventually(t, wait, addrsAre(h.r, "c.example", "192.0.2.3"))
	if n := ts.count("a.example"); n != 2 {
		t.Errorf("a.example queried %d times, want 2: Set must not re-query a followed name", n)
	}
	if got := h.changesOf("a.example"); len(got) != 1 {
		t.Errorf("onChange for a.example called %d times, want once", len(got))
	}

	// A name forgotten and followed again starts afresh.
	h.r.Set([]string{"c.example"})
	h.r.Set([]string{"a.example", "c.example"})
	eventually(t, wait, func() error {
		if n := ts.count("a.example"); n != 4 {
			return fmt.Errorf("a.example queried %d times, want 4", n)
		}
		return addrsAre(h.r, "a.example", "192.0.2.1")()
	})
}

func TestBoundsConcurrentQueries(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.mu.Lock()
	ts.delay = 30 * time.Millisecond
	ts.mu.Unlock()
	var names []string
	for i := range 20 {
		name := fmt.Sprintf("n%d.example", i)
		ts.set(t, name, fmt.Sprintf("%s. 300 IN A 192.0.2.%d", name, i+1))
		names = append(names, name)
	}
	h := run(t, Options{Servers: []string{ts.addr}})
	h.r.Set(names)
	for i, name := range names {
		eventually(t, wait, addrsAre(h.r, name, fmt.Sprintf("192.0.2.%d", i+1)))
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.maxActive > maxConcurrent || ts.maxActive < 2 {
		t.Errorf("%d queries at once, want 2 to %d", ts.maxActive, maxConcurrent)
	}
}
