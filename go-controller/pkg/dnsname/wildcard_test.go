package dnsname

import (
	"net/netip"
	"slices"
	"testing"
	"time"
)

// A wildcard name is never queried: its addresses are what the cluster's DNS
// answered for names under it (Observe), at any depth but not the apex,
// each kept for its TTL; a followed plain name takes the observed addresses
// too, beside its own answers.
func TestWildcardFromObservedAnswers(t *testing.T) {
	t.Parallel()
	ts := startServer(t)
	ts.set(t, "www.example.com", "www.example.com. 300 IN A 192.0.2.1")
	h := run(t, Options{Servers: []string{ts.addr}, MinTTL: 300 * time.Millisecond})
	h.r.Set([]string{"*.Example.com.", "www.example.com", "*.bad_label.com"})
	eventually(t, wait, addrsAre(h.r, "www.example.com", "192.0.2.1"))
	if got := h.r.Addrs("*.example.com"); got != nil {
		t.Errorf("a wildcard before any observation: %v, want nil (not known yet)", got)
	}

	h.r.Observe("example.com", []Answer{{Addr: netip.MustParseAddr("203.0.113.1"), TTL: time.Hour}})
	h.r.Observe("Deep.Sub.Example.COM.", []Answer{{Addr: netip.MustParseAddr("198.51.100.7"), TTL: time.Hour},
		{Addr: netip.MustParseAddr("2001:db8::7"), TTL: time.Hour}})
	h.r.Observe("www.example.com", []Answer{{Addr: netip.MustParseAddr("198.51.100.8"), TTL: 0}})
	eventually(t, wait, addrsAre(h.r, "*.example.com", "198.51.100.7", "198.51.100.8", "2001:db8::7"))
	eventually(t, wait, addrsAre(h.r, "www.example.com", "192.0.2.1", "198.51.100.8"))

	// 198.51.100.8 had TTL 0: it goes after MinTTL, from both.
	eventually(t, wait, addrsAre(h.r, "*.example.com", "198.51.100.7", "2001:db8::7"))
	eventually(t, wait, addrsAre(h.r, "www.example.com", "192.0.2.1"))
	if n := ts.count("*.example.com."); n != 0 {
		t.Errorf("the wildcard was queried %d times", n)
	}
	want := [][]netip.Addr{addrs("198.51.100.7", "198.51.100.8", "2001:db8::7"), addrs("198.51.100.7", "2001:db8::7")}
	if got := h.changesOf("*.example.com"); !slices.EqualFunc(got, want, slices.Equal) {
		t.Errorf("onChange of the wildcard saw %v, want %v", got, want)
	}
}

func TestMatches(t *testing.T) {
	for _, c := range []struct {
		pattern, name string
		want          bool
	}{
		{"*.example.com", "www.example.com", true},
		{"*.example.com", "a.b.example.com", true},
		{"*.example.com", "example.com", false},
		{"*.example.com", "badexample.com", false},
		{"www.example.com", "www.example.com", true},
		{"www.example.com", "a.www.example.com", false},
	} {
		if got := Matches(c.pattern, c.name); got != c.want {
			t.Errorf("Matches(%q, %q) = %v", c.pattern, c.name, got)
		}
	}
	if got := patternsOf("a.b.example.com"); !slices.Equal(got, []string{"a.b.example.com", "*.b.example.com", "*.example.com", "*.com"}) {
		t.Errorf("patternsOf = %v", got)
	}
	for _, p := range patternsOf("a.b.example.com") {
		if !Matches(p, "a.b.example.com") {
			t.Errorf("pattern %q does not match the name it came from", p)
		}
	}
	for in, want := range map[string]string{"*.Example.COM.": "*.example.com", "www.example.com": "www.example.com", "*.": "", "**.x": "", "a.*.x": ""} {
		if got, ok := NormalizePattern(in); got != want && !(want == "" && !ok) {
			t.Errorf("NormalizePattern(%q) = %q, %v", in, got, ok)
		}
	}
}
