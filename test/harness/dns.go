package harness

import (
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/miekg/dns"
)

// DNSServer is an authoritative DNS server on loopback answering A and
// AAAA queries from a table the test changes as it goes.
type DNSServer struct {
	// Addr is where it listens (UDP, 127.0.0.1:port).
	Addr string
	mu   sync.Mutex
	recs map[string][]netip.Addr // by lower-case FQDN
	ttl  uint32
	down bool
	// queries counts the questions received, answered or not.
	queries atomic.Int64
}

// Queries is how many questions the server has received.
func (s *DNSServer) Queries() int64 { return s.queries.Load() }

// StartDNS starts a DNS server answering with records of this TTL
// (seconds); names it does not know get NXDOMAIN. It stops with the test.
func StartDNS(t T, ttl uint32) *DNSServer {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &DNSServer{Addr: pc.LocalAddr().String(), recs: map[string][]netip.Addr{}, ttl: ttl}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(s.serve)}
	go func() { _ = srv.ActivateAndServe() }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	return s
}

// Set makes name resolve to addrs (none: NXDOMAIN).
func (s *DNSServer) Set(name string, addrs ...string) {
	var out []netip.Addr
	for _, a := range addrs {
		out = append(out, netip.MustParseAddr(a))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.recs[dns.Fqdn(strings.ToLower(name))] = out
}

// Down makes the server answer nothing (down) or answer again.
func (s *DNSServer) Down(down bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.down = down
}

func (s *DNSServer) serve(w dns.ResponseWriter, req *dns.Msg) {
	s.queries.Add(int64(len(req.Question)))
	m := new(dns.Msg)
	m.SetReply(req)
	m.Authoritative = true
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.down {
		return
	}
	for _, q := range req.Question {
		addrs, ok := s.recs[strings.ToLower(q.Name)]
		if !ok {
			m.Rcode = dns.RcodeNameError
			continue
		}
		for _, a := range addrs {
			hdr := dns.RR_Header{Name: q.Name, Class: dns.ClassINET, Ttl: s.ttl}
			switch {
			case q.Qtype == dns.TypeA && a.Is4():
				hdr.Rrtype = dns.TypeA
				m.Answer = append(m.Answer, &dns.A{Hdr: hdr, A: a.AsSlice()})
			case q.Qtype == dns.TypeAAAA && a.Is6():
				hdr.Rrtype = dns.TypeAAAA
				m.Answer = append(m.Answer, &dns.AAAA{Hdr: hdr, AAAA: a.AsSlice()})
			}
		}
	}
	_ = w.WriteMsg(m)
}
