package integration

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/miekg/dns"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnstap"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// tapRecorder keeps what a dnstap.Server observed: the last answers seen
// for each name, by address.
type tapRecorder struct {
	mu   sync.Mutex
	seen map[string]map[netip.Addr]time.Duration
}

func (r *tapRecorder) observe(name string, answers []dnstap.Answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[string]map[netip.Addr]time.Duration{}
	}
	if r.seen[name] == nil {
		r.seen[name] = map[netip.Addr]time.Duration{}
	}
	for _, a := range answers {
		r.seen[name][a.Addr] = a.TTL
	}
}

func (r *tapRecorder) get(name string) map[netip.Addr]time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[netip.Addr]time.Duration{}
	for a, ttl := range r.seen[name] {
		out[a] = ttl
	}
	return out
}

func (r *tapRecorder) names() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for n := range r.seen {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}

// startTap serves a dnstap.Server on addr (loopback peers only) until the
// returned stop is called or the test ends.
func startTap(t *testing.T, addr string, rec *tapRecorder) (srv *dnstap.Server, stop func()) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	srv = dnstap.New(dnstap.Options{Allow: netip.Addr.IsLoopback}, rec.observe, testr.NewWithOptions(t, testr.Options{Verbosity: 2}))
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, l) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("dnstap Serve: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Error("dnstap Serve did not return within 10s of its context ending")
			}
		})
	}
	t.Cleanup(stop)
	return srv, stop
}

func dnsQuery(server, name string, qtype uint16) (*dns.Msg, error) {
	c := &dns.Client{Net: "udp", Timeout: time.Second}
	r, _, err := c.Exchange(new(dns.Msg).SetQuestion(dns.Fqdn(name), qtype), server)
	return r, err
}

// expectAnswers is a poll condition: the recorder has seen name with
// exactly these addresses and TTLs.
func expectAnswers(rec *tapRecorder, name string, want map[netip.Addr]time.Duration) func() error {
	return func() error {
		got := rec.get(name)
		if len(got) != len(want) {
			return fmt.Errorf("observed %s -> %v (names seen: %v)", name, got, rec.names())
		}
		for a, ttl := range want {
			if got[a] != ttl {
				return fmt.Errorf("observed %s -> %v (names seen: %v)", name, got, rec.names())
			}
		}
		return nil
	}
}

// The real CoreDNS, with "dnstap tcp://... full", streams its client
// responses to a dnstap.Server: the name a client resolved, with its A and
// AAAA addresses and their TTLs, and nothing for a name it could not
// resolve. When the receiver restarts, CoreDNS connects again by itself.
func TestDnstapFromCoreDNS(t *testing.T) {
	coredns := harness.Binary(t, "coredns")
	dnsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	tapAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	rec := &tapRecorder{}
	srv, stopTap := startTap(t, tapAddr, rec) // before CoreDNS: it connects once at startup

	dir := t.TempDir()
	corefile := filepath.Join(dir, "Corefile")
	_, dnsPort, _ := net.SplitHostPort(dnsAddr)
	conf := fmt.Sprintf(`.:%s {
    bind 127.0.0.1
    hosts {
        192.0.2.10 www.example.test
        2001:db8::10 www.example.test
        ttl 120
        fallthrough
    }
    dnstap tcp://%s full
}
`, dnsPort, tapAddr)
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, dir, "coredns", coredns, "-conf", corefile, "-dns.port", dnsPort)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("coredns log tail:\n%s", p.Tail(30))
		}
	})
	harness.Eventually(t, 20*time.Second, "CoreDNS answering", func() error {
		if p.Exited() {
			t.Fatalf("coredns exited:\n%s", p.Tail(30))
		}
		r, err := dnsQuery(dnsAddr, "www.example.test", dns.TypeA)
		if err != nil {
			return err
		}
		if len(r.Answer) != 1 {
			return fmt.Errorf("answer %v", r.Answer)
		}
		return nil
	})

	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		if _, err := dnsQuery(dnsAddr, "WWW.Example.Test", qtype); err != nil {
			t.Fatal(err)
		}
	}
	if r, err := dnsQuery(dnsAddr, "nothere.example.test", dns.TypeA); err != nil {
		t.Fatal(err)
	} else {
		t.Logf("CoreDNS answers %s for a name hosts does not have", dns.RcodeToString[r.Rcode])
	}
	want := map[netip.Addr]time.Duration{
		netip.MustParseAddr("192.0.2.10"):   120 * time.Second,
		netip.MustParseAddr("2001:db8::10"): 120 * time.Second,
	}
	// Without asking again: the responses of those queries themselves arrive
	// (CoreDNS flushes its stream every second).
	harness.Eventually(t, 10*time.Second, "www.example.test observed with its A and AAAA", expectAnswers(rec, "www.example.test", want))
	if names := rec.names(); !slices.Equal(names, []string{"www.example.test"}) {
		t.Errorf("names observed: %v, want only www.example.test", names)
	}
	if st := srv.Stats(); st.Malformed != 0 || st.Accepted != 1 {
		t.Errorf("stats = %+v, want one connection and no malformed frame", st)
	}

	// The receiver goes away for 5 seconds, during which clients keep asking
	// (CoreDNS drops those responses). That is long enough for CoreDNS to
	// find the connection broken and fail to connect again, so that it is
	// back only on its 10-second retry. The receiver then comes back on the
	// same address.
	stopTap()
	downUntil := time.Now().Add(5 * time.Second)
	for time.Now().Before(downUntil) {
		if _, err := dnsQuery(dnsAddr, "www.example.test", dns.TypeA); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	rec2 := &tapRecorder{}
	srv2, _ := startTap(t, tapAddr, rec2)
	back := time.Now()
	harness.Eventually(t, 30*time.Second, "CoreDNS streaming to the restarted receiver", func() error {
		if _, err := dnsQuery(dnsAddr, "www.example.test", dns.TypeAAAA); err != nil {
			return err
		}
		return expectAnswers(rec2, "www.example.test", map[netip.Addr]time.Duration{netip.MustParseAddr("2001:db8::10"): 120 * time.Second})()
	})
	t.Logf("CoreDNS streamed again %s after the receiver came back", time.Since(back).Round(100*time.Millisecond))
	if st := srv2.Stats(); st.Malformed != 0 {
		t.Errorf("stats after the restart = %+v, want no malformed frame", st)
	}

	// CoreDNS stopping ends its stream with STOP (the receiver's log says
	// "stopped by the sender").
	p.Stop()
}
