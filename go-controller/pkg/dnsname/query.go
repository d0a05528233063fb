package dnsname

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strings"
	"time"

	"github.com/miekg/dns"
)

// ednsSize is the UDP payload size advertised in queries (the DNS flag day
// 2020 value, which avoids IP fragmentation).
const ednsSize = 1232

// answerAddr is an address found in an answer, with its TTL in seconds.
type answerAddr struct {
	addr netip.Addr
	ttl  uint32
}

// resolve queries the A and AAAA records of name. NXDOMAIN and NODATA are
// successful answers without addresses.
func (r *Resolver) resolve(ctx context.Context, name string) ([]answerAddr, error) {
	fqdn := name + "."
	var found []answerAddr
	for _, qtype := range []uint16{dns.TypeA, dns.TypeAAAA} {
		msg, err := r.query(ctx, fqdn, qtype)
		if err != nil {
			return nil, err
		}
		found = append(found, extract(msg, fqdn)...)
	}
	return found, nil
}

// query asks the servers in order for the qtype records of fqdn and returns
// the first usable answer.
func (r *Resolver) query(ctx context.Context, fqdn string, qtype uint16) (*dns.Msg, error) {
	if len(r.opts.Servers) == 0 {
		return nil, fmt.Errorf("query %s %s: no nameserver configured", fqdn, typeName(qtype))
	}
	var errs []error
	for _, server := range r.opts.Servers {
		msg, err := r.ask(ctx, fqdn, qtype, server)
		if err == nil {
			return msg, nil
		}
		errs = append(errs, err)
		if ctx.Err() != nil {
			break
		}
	}
	return nil, errors.Join(errs...)
}

// ask sends one question to one server, over UDP and again over TCP when the
// UDP answer is truncated (keeping the truncated answer if TCP fails).
func (r *Resolver) ask(ctx context.Context, fqdn string, qtype uint16, server string) (*dns.Msg, error) {
	req := new(dns.Msg)
	req.SetQuestion(fqdn, qtype)
	req.SetEdns0(ednsSize, false)
	resp, err := r.exchange(ctx, req, "udp", server)
	if err == nil {
		err = checkResponse(req, resp)
	}
	if err != nil {
		return nil, fmt.Errorf("query %s %s to %s: %w", fqdn, typeName(qtype), server, err)
	}
	if resp.Truncated {
		if full, err := r.exchange(ctx, req, "tcp", server); err == nil && checkResponse(req, full) == nil {
			resp = full
		}
	}
	return resp, nil
}

// exchange sends req to server over network, within Timeout; the end of ctx
// interrupts it.
func (r *Resolver) exchange(ctx context.Context, req *dns.Msg, network, server string) (*dns.Msg, error) {
	ctx, cancel := context.WithTimeout(ctx, r.opts.Timeout)
	defer cancel()
	client := &dns.Client{Net: network, Timeout: r.opts.Timeout}
	conn, err := client.DialContext(ctx, server)
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	resp, _, err := client.ExchangeWithConnContext(ctx, req, conn)
	if err != nil && errors.Is(ctx.Err(), context.DeadlineExceeded) {
		err = fmt.Errorf("no answer within %v", r.opts.Timeout)
	}
	return resp, err
}

// checkResponse accepts a response to req whose rcode is NOERROR or
// NXDOMAIN.
func checkResponse(req, resp *dns.Msg) error {
	switch {
	case resp == nil:
		return errors.New("no response")
	case !resp.Response:
		return errors.New("not a response")
	case len(resp.Question) != 1 || len(req.Question) != 1 ||
		!strings.EqualFold(resp.Question[0].Name, req.Question[0].Name) ||
		resp.Question[0].Qtype != req.Question[0].Qtype:
		return errors.New("response to another question")
	case resp.Rcode == dns.RcodeSuccess || resp.Rcode == dns.RcodeNameError:
		return nil
	}
	if name, ok := dns.RcodeToString[resp.Rcode]; ok {
		return fmt.Errorf("rcode %s", name)
	}
	return fmt.Errorf("rcode %d", resp.Rcode)
}

// extract returns the A and AAAA addresses of msg's answer section that
// belong to fqdn, directly or through a CNAME chain. The TTL of an address
// reached through CNAMEs is the smallest along its chain.
func extract(msg *dns.Msg, fqdn string) []answerAddr {
	chain := cnameChain(msg.Answer, fqdn)
	var found []answerAddr
	for _, rr := range msg.Answer {
		addr, hdr, ok := rrAddr(rr)
		if !ok || hdr.Class != dns.ClassINET {
			continue
		}
		if ttl, in := chain[strings.ToLower(hdr.Name)]; in {
			found = append(found, answerAddr{addr: addr, ttl: min(ttl, hdr.Ttl)})
		}
	}
	return found
}

// AnswerAddrs returns the A and AAAA addresses of an answer section that
// belong to fqdn, directly or through a CNAME chain, each with the smallest
// TTL on its way; an address given twice keeps its longest TTL.
// IPv4-mapped IPv6 addresses are unmapped.
func AnswerAddrs(answer []dns.RR, fqdn string) []Answer {
	var out []Answer
	index := map[netip.Addr]int{}
	for _, f := range extract(&dns.Msg{Answer: answer}, fqdn) {
		ttl := time.Duration(f.ttl) * time.Second
		if i, seen := index[f.addr]; seen {
			out[i].TTL = max(out[i].TTL, ttl)
			continue
		}
		index[f.addr] = len(out)
		out = append(out, Answer{Addr: f.addr, TTL: ttl})
	}
	return out
}

// cnameChain maps the owners that stand for fqdn in answer (fqdn itself and
// the CNAME targets reached from it, lowercased) to the smallest TTL on the
// way there.
func cnameChain(answer []dns.RR, fqdn string) map[string]uint32 {
	links := map[string][]*dns.CNAME{}
	for _, rr := range answer {
		if c, ok := rr.(*dns.CNAME); ok && c != nil && c.Hdr.Class == dns.ClassINET {
			owner := strings.ToLower(c.Hdr.Name)
			links[owner] = append(links[owner], c)
		}
	}
	start := strings.ToLower(fqdn)
	chain := map[string]uint32{start: math.MaxUint32}
	queue := []string{start}
	for len(queue) > 0 {
		owner := queue[0]
		queue = queue[1:]
		for _, c := range links[owner] {
			target := strings.ToLower(c.Target)
			if _, seen := chain[target]; !seen {
				chain[target] = min(chain[owner], c.Hdr.Ttl)
				queue = append(queue, target)
			}
		}
	}
	return chain
}

// rrAddr returns the address and header of an A or AAAA record; ok is false
// for any other record. IPv4-mapped IPv6 addresses are unmapped.
func rrAddr(rr dns.RR) (addr netip.Addr, hdr *dns.RR_Header, ok bool) {
	switch rr := rr.(type) {
	case *dns.A:
		if rr != nil {
			addr, ok = netip.AddrFromSlice(rr.A.To4())
			hdr = &rr.Hdr
		}
	case *dns.AAAA:
		if rr != nil {
			addr, ok = netip.AddrFromSlice(rr.AAAA.To16())
			addr, hdr = addr.Unmap(), &rr.Hdr
		}
	}
	return addr, hdr, ok
}

func typeName(qtype uint16) string {
	if name, ok := dns.TypeToString[qtype]; ok {
		return name
	}
	return fmt.Sprintf("TYPE%d", qtype)
}
