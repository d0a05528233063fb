package dnsname

import (
	"errors"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
)

func mustRRs(t *testing.T, ss ...string) []dns.RR {
	t.Helper()
	out := make([]dns.RR, 0, len(ss))
	for _, s := range ss {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("record %q: %v", s, err)
		}
		out = append(out, rr)
	}
	return out
}

func TestExtract(t *testing.T) {
	answer := mustRRs(t,
		"host.cdn.test. 300 IN A 198.51.100.7", // before its CNAME: order does not matter
		"WWW.example. 30 IN CNAME edge.example.",
		"edge.example. 10 IN CNAME Host.CDN.test.",
		"host.cdn.test. 5 IN AAAA ::ffff:198.51.100.8",
		"www.example. 300 IN MX 10 mail.example.",
		"other.example. 300 IN A 203.0.113.9",
		"loop1.example. 300 IN CNAME loop2.example.",
		"loop2.example. 300 IN CNAME loop1.example.",
	)
	chaos := &dns.A{Hdr: dns.RR_Header{Name: "www.example.", Rrtype: dns.TypeA, Class: dns.ClassCHAOS, Ttl: 1}, A: net.IPv4(192, 0, 2, 66)}
	var nilA *dns.A
	var nilCNAME *dns.CNAME
	answer = append(answer, nil, nilA, nilCNAME, chaos,
		&dns.A{Hdr: dns.RR_Header{Name: "www.example.", Class: dns.ClassINET}},
		&dns.AAAA{Hdr: dns.RR_Header{Name: "www.example.", Class: dns.ClassINET}, AAAA: net.IP{1, 2, 3}})
	got := extract(&dns.Msg{Answer: answer}, "www.example.")
	want := []answerAddr{
		{addr: netip.MustParseAddr("198.51.100.7"), ttl: 10},
		{addr: netip.MustParseAddr("198.51.100.8"), ttl: 5},
	}
	if !slices.Equal(got, want) {
		t.Errorf("extract = %v, want %v", got, want)
	}
	if got := extract(&dns.Msg{Answer: answer}, "loop1.example."); len(got) != 0 {
		t.Errorf("extract of a CNAME loop = %v, want nothing", got)
	}
}

func TestCheckResponse(t *testing.T) {
	req := new(dns.Msg).SetQuestion("a.example.", dns.TypeA)
	reply := func(rcode int) *dns.Msg {
		m := new(dns.Msg).SetReply(req)
		m.Rcode = rcode
		return m
	}
	other := new(dns.Msg).SetReply(new(dns.Msg).SetQuestion("b.example.", dns.TypeA))
	upper := reply(dns.RcodeSuccess)
	upper.Question[0].Name = "A.EXAMPLE."
	for _, tc := range []struct {
		name string
		resp *dns.Msg
		ok   bool
	}{
		{"noerror", reply(dns.RcodeSuccess), true},
		{"nxdomain", reply(dns.RcodeNameError), true},
		{"case differs", upper, true},
		{"servfail", reply(dns.RcodeServerFailure), false},
		{"refused", reply(dns.RcodeRefused), false},
		{"unknown rcode", reply(3000), false},
		{"other question", other, false},
		{"query, not response", req, false},
		{"nil", nil, false},
	} {
		if err := checkResponse(req, tc.resp); (err == nil) != tc.ok {
			t.Errorf("%s: checkResponse = %v, want ok=%v", tc.name, err, tc.ok)
		}
	}
}

func TestEntryLifetimes(t *testing.T) {
	o := Options{MinTTL: 2 * time.Second, MaxTTL: time.Minute}.withDefaults()
	t0 := time.Unix(1000, 0)
	at := func(d time.Duration) time.Time { return t0.Add(d) }
	a1, a2 := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	e := &entry{}

	// TTL 0 is raised to MinTTL; TTL 30 is kept.
	if changed, _ := e.update([]answerAddr{{a1, 0}, {a2, 30}}, t0, o.MinTTL); !changed {
		t.Fatal("first answer not a change")
	}
	if d := e.refreshAfter(t0, o); d != 2*time.Second {
		t.Errorf("refresh after %v, want MinTTL 2s", d)
	}
	// An empty answer (NODATA) at 1s keeps both; at 2s a1 expires.
	if changed, _ := e.update(nil, at(time.Second), o.MinTTL); changed {
		t.Error("NODATA before expiry changed the addresses")
	}
	if changed, _ := e.update(nil, at(2*time.Second), o.MinTTL); !changed || !slices.Equal(e.addrs, []netip.Addr{a2}) {
		t.Errorf("at 2s addresses are %v, want only %v", e.addrs, a2)
	}
	if d := e.refreshAfter(at(2*time.Second), o); d != 28*time.Second {
		t.Errorf("refresh after %v, want 28s (a2's expiry)", d)
	}
	// Seen again with TTL 100: refresh capped at MaxTTL.
	e.update([]answerAddr{{a2, 100}}, at(3*time.Second), o.MinTTL)
	if d := e.refreshAfter(at(3*time.Second), o); d != time.Minute {
		t.Errorf("refresh after %v, want MaxTTL 1m", d)
	}
	// Once everything has expired: empty, non-nil, negative interval.
	if changed, _ := e.update(nil, at(200*time.Second), o.MinTTL); !changed || e.addrs == nil || len(e.addrs) != 0 {
		t.Errorf("after expiry addresses are %#v, want empty", e.addrs)
	}
	if d := e.refreshAfter(at(200*time.Second), o); d != 12*time.Second {
		t.Errorf("refresh of an empty name after %v, want 6*MinTTL", d)
	}
}

func TestNegativeIntervalAndBackoff(t *testing.T) {
	for _, tc := range []struct {
		opts     Options
		negative time.Duration
		backoff  []time.Duration
	}{
		{Options{}, 30 * time.Second,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 30 * time.Second, 30 * time.Second}},
		{Options{MinTTL: 200 * time.Millisecond}, 1200 * time.Millisecond,
			[]time.Duration{200 * time.Millisecond, 400 * time.Millisecond, 800 * time.Millisecond, 1200 * time.Millisecond, 1200 * time.Millisecond}},
		{Options{MinTTL: 10 * time.Second, MaxTTL: 20 * time.Second}, 20 * time.Second,
			[]time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 16 * time.Second, 20 * time.Second}},
	} {
		o := tc.opts.withDefaults()
		if got := negativeInterval(o); got != tc.negative {
			t.Errorf("%+v: negative interval %v, want %v", tc.opts, got, tc.negative)
		}
		e := &entry{}
		var got []time.Duration
		for i := range tc.backoff {
			if first := e.fail(o); first != (i == 0) {
				t.Errorf("%+v: failure %d reported first=%v", tc.opts, i, first)
			}
			got = append(got, e.backoff)
		}
		if !slices.Equal(got, tc.backoff) {
			t.Errorf("%+v: backoff %v, want %v", tc.opts, got, tc.backoff)
		}
	}
}

func TestRecordCapsAddresses(t *testing.T) {
	sink := &countSink{t: t}
	r := New(Options{}, nil, logr.New(sink))
	e := &entry{}
	r.names["big.example"] = e
	var found []answerAddr
	for i := 300; i > 0; i-- {
		found = append(found, answerAddr{addr: netip.AddrFrom4([4]byte{10, 0, byte(i >> 8), byte(i)}), ttl: 60})
	}
	if out := r.record("big.example", e, found, nil); out.dropped != 44 {
		t.Errorf("first capped answer dropped %d (reported), want 44", out.dropped)
	}
	if len(e.addrs) != maxAddrs || e.addrs[0] != netip.MustParseAddr("10.0.0.1") || e.addrs[maxAddrs-1] != netip.MustParseAddr("10.0.1.0") {
		t.Errorf("kept %d addresses from %v to %v, want the lowest 256", len(e.addrs), e.addrs[0], e.addrs[len(e.addrs)-1])
	}
	if out := r.record("big.example", e, found, nil); out.dropped != 0 {
		t.Errorf("second capped answer reported %d dropped, want it logged only once", out.dropped)
	}
	// A failure keeps everything and only the first one is reported.
	boom := errors.New("boom")
	if out := r.record("big.example", e, nil, boom); !out.firstFailure || out.kept != maxAddrs {
		t.Errorf("first failure = %+v", out)
	}
	if out := r.record("big.example", e, nil, boom); out.firstFailure {
		t.Errorf("second failure reported as first: %+v", out)
	}
	if out := r.record("big.example", e, found, nil); !out.recovered {
		t.Errorf("success after failures not reported as a recovery: %+v", out)
	}
}

// FuzzExtract checks that no answer makes the parsing panic.
func FuzzExtract(f *testing.F) {
	req := new(dns.Msg).SetQuestion("www.example.", dns.TypeA)
	resp := new(dns.Msg).SetReply(req)
	for _, s := range []string{
		"www.example. 30 IN CNAME edge.example.",
		"edge.example. 10 IN A 192.0.2.1",
		"edge.example. 10 IN AAAA 2001:db8::1",
		"www.example. 10 IN TXT \"x\"",
	} {
		rr, err := dns.NewRR(s)
		if err != nil {
			f.Fatal(err)
		}
		resp.Answer = append(resp.Answer, rr)
	}
	packed, err := resp.Pack()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(packed)
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		m := new(dns.Msg)
		if err := m.Unpack(b); err != nil {
			return
		}
		_ = checkResponse(req, m)
		for _, a := range extract(m, "www.example.") {
			if !a.addr.IsValid() {
				t.Fatalf("invalid address from %v", m)
			}
		}
	})
}
