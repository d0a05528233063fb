package dnstap

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/miekg/dns"
	"google.golang.org/protobuf/encoding/protowire"
)

// Message types of dnstap.proto besides CLIENT_RESPONSE.
const (
	clientQuery      = 5
	resolverResponse = 4
)

// tapMessage encodes, by hand, a Dnstap protobuf of type MESSAGE holding a
// Message of type mtype with response as its response_message (none when
// nil), and the other fields CoreDNS sets, to be skipped.
func tapMessage(mtype uint64, response []byte) []byte {
	var m []byte
	m = protowire.AppendTag(m, 1, protowire.VarintType)
	m = protowire.AppendVarint(m, mtype)
	m = protowire.AppendTag(m, 2, protowire.VarintType) // socket_family INET
	m = protowire.AppendVarint(m, 1)
	m = protowire.AppendTag(m, 4, protowire.BytesType) // query_address
	m = protowire.AppendBytes(m, []byte{10, 128, 0, 7})
	m = protowire.AppendTag(m, 6, protowire.VarintType) // query_port
	m = protowire.AppendVarint(m, 53124)
	m = protowire.AppendTag(m, 8, protowire.VarintType) // query_time_sec
	m = protowire.AppendVarint(m, 1700000000)
	m = protowire.AppendTag(m, 9, protowire.Fixed32Type) // query_time_nsec
	m = protowire.AppendFixed32(m, 123456789)
	if response != nil {
		m = protowire.AppendTag(m, 14, protowire.BytesType)
		m = protowire.AppendBytes(m, response)
	}
	m = protowire.AppendTag(m, 13, protowire.Fixed32Type) // response_time_nsec
	m = protowire.AppendFixed32(m, 987654321)

	var d []byte
	d = protowire.AppendTag(d, 1, protowire.BytesType) // identity
	d = protowire.AppendBytes(d, []byte("coredns-7d8f9"))
	d = protowire.AppendTag(d, 2, protowire.BytesType) // version
	d = protowire.AppendBytes(d, []byte("CoreDNS-1.14.7"))
	d = protowire.AppendTag(d, 14, protowire.BytesType)
	d = protowire.AppendBytes(d, m)
	d = protowire.AppendTag(d, 15, protowire.VarintType)
	d = protowire.AppendVarint(d, 1) // MESSAGE
	return d
}

// response packs a DNS response to qname/qtype with the given rcode and
// answer records (zone-file syntax).
func response(t *testing.T, qname string, qtype uint16, rcode int, rrs ...string) []byte {
	t.Helper()
	q := new(dns.Msg).SetQuestion(qname, qtype)
	m := new(dns.Msg).SetRcode(q, rcode)
	for _, s := range rrs {
		rr, err := dns.NewRR(s)
		if err != nil {
			t.Fatalf("record %q: %v", s, err)
		}
		m.Answer = append(m.Answer, rr)
	}
	b, err := m.Pack()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func ans(addr string, ttl int) Answer {
	return Answer{Addr: netip.MustParseAddr(addr), TTL: time.Duration(ttl) * time.Second}
}

func decodeFrame(frame []byte) (string, []Answer, error) {
	resp, isResponse, err := clientResponse(frame)
	if err != nil || !isResponse || resp == nil {
		return "", nil, err
	}
	return answers(resp)
}

func TestDecode(t *testing.T) {
	cnameChain := response(t, "WWW.Example.COM.", dns.TypeA, dns.RcodeSuccess,
		"edge.cdn.test. 300 IN A 198.51.100.7", // before its CNAME: order does not matter
		"www.example.com. 30 IN CNAME edge.example.net.",
		"edge.example.net. 10 IN CNAME Edge.CDN.test.",
		"edge.cdn.test. 5 IN AAAA ::ffff:198.51.100.8",
		"edge.cdn.test. 600 IN A 198.51.100.7", // the same address again: the longest TTL
		"www.example.com. 300 IN MX 10 mail.example.com.",
		"other.example.com. 300 IN A 203.0.113.9",
		"loop.example.com. 300 IN CNAME www.example.com.",
	)
	for _, tc := range []struct {
		name     string
		frame    []byte
		wantName string
		want     []Answer
		wantErr  bool
	}{{
		name:     "A and AAAA",
		frame:    tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "a.example.com. 60 IN A 192.0.2.1", "a.example.com. 30 IN A 192.0.2.2")),
		wantName: "a.example.com",
		want:     []Answer{ans("192.0.2.1", 60), ans("192.0.2.2", 30)},
	}, {
		name:     "AAAA",
		frame:    tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeAAAA, dns.RcodeSuccess, "a.example.com. 60 IN AAAA 2001:db8::1")),
		wantName: "a.example.com",
		want:     []Answer{ans("2001:db8::1", 60)},
	}, {
		name:     "CNAME chain, names in mixed case",
		frame:    tapMessage(messageClientResp, cnameChain),
		wantName: "www.example.com",
		want:     []Answer{ans("198.51.100.7", 10), ans("198.51.100.8", 5)},
	}, {
		name:  "NXDOMAIN ignored",
		frame: tapMessage(messageClientResp, response(t, "gone.example.com.", dns.TypeA, dns.RcodeNameError, "gone.example.com. 60 IN A 192.0.2.1")),
	}, {
		name:  "SERVFAIL ignored",
		frame: tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeA, dns.RcodeServerFailure)),
	}, {
		name:     "answers for another name ignored",
		frame:    tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "b.example.com. 60 IN A 192.0.2.1", "c.example.com. 60 IN CNAME a.example.com.")),
		wantName: "a.example.com",
	}, {
		name:     "NODATA",
		frame:    tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeAAAA, dns.RcodeSuccess)),
		wantName: "a.example.com",
	}, {
		name:  "invalid question name ignored",
		frame: tapMessage(messageClientResp, response(t, "_http._tcp.example.com.", dns.TypeA, dns.RcodeSuccess, "_http._tcp.example.com. 60 IN A 192.0.2.1")),
	}, {
		name:  "client query ignored",
		frame: tapMessage(clientQuery, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "a.example.com. 60 IN A 192.0.2.1")),
	}, {
		name:  "resolver response ignored",
		frame: tapMessage(resolverResponse, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "a.example.com. 60 IN A 192.0.2.1")),
	}, {
		name:  "client response without its message",
		frame: tapMessage(messageClientResp, nil),
	}, {
		name:  "not a MESSAGE",
		frame: protowire.AppendVarint(protowire.AppendTag(nil, 15, protowire.VarintType), 2),
	}, {
		name:    "truncated protobuf",
		frame:   tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "a.example.com. 60 IN A 192.0.2.1"))[:40],
		wantErr: true,
	}, {
		name:    "garbage",
		frame:   []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff},
		wantErr: true,
	}, {
		name:    "DNS message that does not parse",
		frame:   tapMessage(messageClientResp, response(t, "a.example.com.", dns.TypeA, dns.RcodeSuccess, "a.example.com. 60 IN A 192.0.2.1")[:30]),
		wantErr: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			name, got, err := decodeFrame(tc.frame)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want an error: %v", err, tc.wantErr)
			}
			if name != tc.wantName || !slices.Equal(got, tc.want) {
				t.Errorf("got %q %v, want %q %v", name, got, tc.wantName, tc.want)
			}
		})
	}
}

func TestClientResponseWithoutMessage(t *testing.T) {
	resp, isResponse, err := clientResponse(tapMessage(messageClientResp, nil))
	if err != nil || !isResponse || resp != nil {
		t.Errorf("clientResponse = %v, %v, %v; want nil, true, nil", resp, isResponse, err)
	}
}

// FuzzDecode checks that no input makes decoding panic.
func FuzzDecode(f *testing.F) {
	f.Add(tapMessage(messageClientResp, nil))
	f.Add([]byte{0x7a, 0x05, 0x08, 0x06, 0x72, 0x01, 0x00, 0x78, 0x01})
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, _ = decodeFrame(b)
		_, _, _ = decodeFrame(tapMessage(messageClientResp, b))
		_, _ = parseControl(append([]byte{0, 0, 0, 4}, b...))
	})
}
