package dnsname

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/miekg/dns"
)

// testServer is an in-process DNS server on 127.0.0.1 (UDP) serving a zone
// the test changes at will.
type testServer struct {
	addr string
	srv  *dns.Server
	once sync.Once

	mu        sync.Mutex
	records   map[string][]dns.RR // by lowercase owner
	stray     []dns.RR            // appended to every answer
	rcode     int                 // forced rcode when nonzero
	delay     time.Duration       // before each answer
	queries   map[string]int      // by lowercase qname
	silent    bool                // read queries, answer none
	swallowed int                 // queries read while silent
	active    int
	maxActive int
}

func startServer(t *testing.T) *testServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	ts := &testServer{addr: pc.LocalAddr().String(), records: map[string][]dns.RR{}, queries: map[string]int{}}
	started := make(chan struct{})
	ts.srv = &dns.Server{PacketConn: pc, Handler: ts, NotifyStartedFunc: func() { close(started) }}
	served := make(chan error, 1)
	go func() { served <- ts.srv.ActivateAndServe() }()
	select {
	case <-started:
	case err := <-served:
		t.Fatalf("DNS server on %s: %v", ts.addr, err)
	}
	t.Cleanup(ts.stop)
	return ts
}

// stop shuts the server down; its port is free afterwards.
func (ts *testServer) stop() {
	ts.once.Do(func() { _ = ts.srv.Shutdown() })
}

// set replaces the records of owner with rrs, in zone file syntax.
func (ts *testServer) set(t *testing.T, owner string, rrs ...string) {
	t.Helper()
	parsed := make([]dns.RR, 0, len(rrs))
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("record %q: %v", s, err)
		}
		parsed = append(parsed, rr)
	}
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.records[strings.ToLower(dns.Fqdn(owner))] = parsed
}

// remove makes owner answer NXDOMAIN.
func (ts *testServer) remove(owner string) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	delete(ts.records, strings.ToLower(dns.Fqdn(owner)))
}

// silence makes the server swallow every query from now on, as a server
// that went away with something else on its port would; unlike stopping it
// and listening again, the port is never free for another socket to take.
func (ts *testServer) silence() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.silent = true
}

func (ts *testServer) swallowedQueries() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.swallowed
}

func (ts *testServer) setRcode(rcode int) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.rcode = rcode
}

// count is the number of queries received for name.
func (ts *testServer) count(name string) int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.queries[strings.ToLower(dns.Fqdn(name))]
}

func (ts *testServer) total() int {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	n := 0
	for _, c := range ts.queries {
		n += c
	}
	return n
}

// ServeDNS answers from the zone, following CNAMEs within it.
func (ts *testServer) ServeDNS(w dns.ResponseWriter, req *dns.Msg) {
	resp := new(dns.Msg).SetReply(req)
	if len(req.Question) != 1 {
		resp.Rcode = dns.RcodeFormatError
		_ = w.WriteMsg(resp)
		return
	}
	q := req.Question[0]
	ts.mu.Lock()
	if ts.silent {
		ts.swallowed++
		ts.mu.Unlock()
		return // no reply: the query is lost
	}
	ts.queries[strings.ToLower(q.Name)]++
	ts.active++
	ts.maxActive = max(ts.maxActive, ts.active)
	answer, found := ts.lookup(strings.ToLower(q.Name), q.Qtype)
	rcode, delay := ts.rcode, ts.delay
	answer = append(answer, ts.stray...)
	ts.mu.Unlock()
	if delay > 0 {
		time.Sleep(delay) // a slow server
	}
	ts.mu.Lock()
	ts.active-- // before the reply, which lets the client send its next query
	ts.mu.Unlock()
	switch {
	case rcode != 0:
		resp.Rcode = rcode
	case !found:
		resp.Rcode = dns.RcodeNameError
	default:
		resp.Answer = answer
	}
	_ = w.WriteMsg(resp)
}

// lookup returns the answer for name and qtype; found is false for NXDOMAIN.
func (ts *testServer) lookup(name string, qtype uint16) (answer []dns.RR, found bool) {
	for hops := 0; hops < 8; hops++ {
		rrs, ok := ts.records[name]
		if !ok {
			return answer, hops > 0
		}
		next := ""
		for _, rr := range rrs {
			if c, ok := rr.(*dns.CNAME); ok {
				next = strings.ToLower(c.Target)
				answer = append(answer, dns.Copy(rr))
			} else if rr.Header().Rrtype == qtype {
				answer = append(answer, dns.Copy(rr))
			}
		}
		if next == "" {
			return answer, true
		}
		name = next
	}
	return answer, true
}

// blackHole is a UDP socket that reads queries and never answers.
type blackHole struct {
	addr    string
	packets atomic.Int32
}

func startBlackHole(t *testing.T, addr string) *blackHole {
	t.Helper()
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	bh := &blackHole{addr: pc.LocalAddr().String()}
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 2048)
		for {
			if _, _, err := pc.ReadFrom(buf); err != nil {
				return
			}
			bh.packets.Add(1)
		}
	}()
	t.Cleanup(func() { _ = pc.Close(); <-done })
	return bh
}

// closedPort returns a UDP address where nothing listens: on 127.0.0.2,
// where no other test's server binds, so the port freed here stays free.
func closedPort(t *testing.T) string {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.2:0")
	if err != nil {
		t.Fatalf("listen: %v", err)
	}
	addr := pc.LocalAddr().String()
	_ = pc.Close()
	return addr
}

// countSink is a logr sink that counts errors and infos and passes them to
// the test log.
type countSink struct {
	t      *testing.T
	errors atomic.Int32
	infos  atomic.Int32
}

func (s *countSink) Init(logr.RuntimeInfo)          {}
func (s *countSink) Enabled(int) bool               { return true }
func (s *countSink) WithName(string) logr.LogSink   { return s }
func (s *countSink) WithValues(...any) logr.LogSink { return s }

func (s *countSink) Info(_ int, msg string, kv ...any) {
	s.infos.Add(1)
	s.t.Logf("info: %s %v", msg, kv)
}

func (s *countSink) Error(err error, msg string, kv ...any) {
	s.errors.Add(1)
	s.t.Logf("error: %s: %v %v", msg, err, kv)
}

// harness runs a Resolver for a test and records onChange calls with the
// addresses Addrs returned from inside the callback.
type harness struct {
	r    *Resolver
	sink *countSink

	mu      sync.Mutex
	changes map[string][][]netip.Addr
}

func run(t *testing.T, opts Options) *harness {
	t.Helper()
	h := &harness{sink: &countSink{t: t}, changes: map[string][][]netip.Addr{}}
	h.r = New(opts, h.onChange, logr.New(h.sink))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.r.Run(ctx)
	}()
	t.Cleanup(func() { cancel(); <-done })
	return h
}

func (h *harness) onChange(name string) {
	addrs := h.r.Addrs(name)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.changes[name] = append(h.changes[name], addrs)
}

func (h *harness) changesOf(name string) [][]netip.Addr {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.changes[name])
}

// eventually polls check until it returns nil, failing the test with the
// last error when timeout passes first.
func eventually(t *testing.T, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %v", timeout, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// addrsAre is a check that Addrs(name) is exactly want.
func addrsAre(r *Resolver, name string, want ...string) func() error {
	return func() error {
		got := r.Addrs(name)
		if got == nil {
			return fmt.Errorf("%s not resolved yet", name)
		}
		if !slices.Equal(got, addrs(want...)) {
			return fmt.Errorf("%s resolves to %v, want %v", name, got, want)
		}
		return nil
	}
}

func addrs(ss ...string) []netip.Addr {
	out := make([]netip.Addr, 0, len(ss))
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}
