package dnstap

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"github.com/miekg/dns"
)

// dataFrame encodes a Frame Streams data frame.
func dataFrame(payload []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(payload))), payload...)
}

// observation is one call of observe.
type observation struct {
	name    string
	answers []Answer
}

// harness is a Server on a loopback listener, with what it observed and
// logged.
type harness struct {
	t      *testing.T
	srv    *Server
	addr   string
	cancel context.CancelFunc
	done   chan error

	mu   sync.Mutex
	seen []observation
	logs []string
}

func start(t *testing.T, opts Options) *harness {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{t: t, addr: l.Addr().String(), done: make(chan error, 1)}
	log := funcr.New(func(prefix, args string) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.logs = append(h.logs, args)
	}, funcr.Options{Verbosity: 2})
	h.srv = New(opts, func(name string, answers []Answer) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.seen = append(h.seen, observation{name, slices.Clone(answers)})
	}, log)
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.srv.Serve(ctx, l) }()
	t.Cleanup(h.stop)
	return h
}

// stop ends Serve and checks that it returns nil, quickly.
func (h *harness) stop() {
	h.t.Helper()
	if h.cancel == nil {
		return
	}
	h.cancel()
	h.cancel = nil
	select {
	case err := <-h.done:
		if err != nil {
			h.t.Errorf("Serve returned %v", err)
		}
	case <-time.After(5 * time.Second):
		h.t.Error("Serve did not return within 5s of its context ending")
	}
}

func (h *harness) observed() []observation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.seen)
}

func (h *harness) allLogs() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.logs)
}

func (h *harness) logged(substr string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, l := range h.logs {
		if strings.Contains(l, substr) {
			n++
		}
	}
	return n
}

// eventually polls cond until it returns nil or 5s pass.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: %v", what, err)
}

// sender is the sending side of a Frame Streams connection, by hand.
type sender struct {
	t  *testing.T
	c  net.Conn
	fr *frameReader
}

func dial(t *testing.T, addr string) *sender {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &sender{t: t, c: c, fr: newFrameReader(c, 1<<20)}
}

func (s *sender) send(b ...[]byte) {
	s.t.Helper()
	if _, err := s.c.Write(bytes.Join(b, nil)); err != nil {
		s.t.Fatal(err)
	}
}

// expect reads the next frame from the server, which must be the control
// frame typ (with the dnstap content type if withType).
func (s *sender) expect(typ uint32, withType bool) {
	s.t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	f, err := s.fr.next()
	if err != nil {
		s.t.Fatalf("waiting for %s: %v", controlName(typ), err)
	}
	if f.control != typ {
		s.t.Fatalf("got a %s, want %s", f, controlName(typ))
	}
	if withType && !slices.Equal(f.contentTypes, []string{ContentType}) {
		s.t.Fatalf("%s has content types %q, want only %q", f, f.contentTypes, ContentType)
	}
	if !withType && len(f.contentTypes) > 0 {
		s.t.Fatalf("%s has content types %q, want none", f, f.contentTypes)
	}
}

// handshake does READY/ACCEPT/START as CoreDNS does.
func (s *sender) handshake() {
	s.t.Helper()
	s.send(controlFrame(controlReady, ContentType))
	s.expect(controlAccept, true)
	s.send(controlFrame(controlStart, ContentType))
}

// expectClosed checks that the server closes the connection without
// sending anything more.
func (s *sender) expectClosed() {
	s.t.Helper()
	_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(s.fr.r)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		s.t.Fatal("the server did not close the connection within 5s")
	}
	if len(b) > 0 {
		s.t.Fatalf("the server sent %x before closing", b)
	}
}

func clientResponseFrame(t *testing.T, qname string, qtype uint16, rrs ...string) []byte {
	return dataFrame(tapMessage(messageClientResp, response(t, qname, qtype, dns.RcodeSuccess, rrs...)))
}

func TestStreamAndStop(t *testing.T) {
	h := start(t, Options{})
	s := dial(t, h.addr)
	s.handshake()
	s.send(
		dataFrame(tapMessage(clientQuery, nil)),
		clientResponseFrame(t, "www.example.test.", dns.TypeA,
			"www.example.test. 3600 IN CNAME edge.example.test.",
			"edge.example.test. 60 IN A 192.0.2.10"),
		dataFrame(tapMessage(messageClientResp, response(t, "gone.example.test.", dns.TypeA, dns.RcodeNameError))),
		clientResponseFrame(t, "other.example.test.", dns.TypeA, "www.example.test. 60 IN A 192.0.2.11"),
		dataFrame([]byte("not a protobuf \xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff")), // skipped; the connection goes on
		clientResponseFrame(t, "www.example.test.", dns.TypeAAAA, "www.example.test. 30 IN AAAA 2001:db8::10"),
		controlFrame(controlStop),
	)
	s.expect(controlFinish, false)
	s.expectClosed()

	want := []observation{
		{"www.example.test", []Answer{ans("192.0.2.10", 60)}},
		{"www.example.test", []Answer{ans("2001:db8::10", 30)}},
	}
	got := h.observed()
	if len(got) != len(want) {
		t.Fatalf("observed %v, want %v", got, want)
	}
	for i := range want {
		if got[i].name != want[i].name || !slices.Equal(got[i].answers, want[i].answers) {
			t.Errorf("observation %d = %v, want %v", i, got[i], want[i])
		}
	}
	h.stop()
	st := h.srv.Stats()
	if st != (Stats{Accepted: 1, Frames: 6, Malformed: 1, Observed: 2}) {
		t.Errorf("stats = %+v", st)
	}
	if n := h.logged("skipping a malformed frame"); n != 1 {
		t.Errorf("the malformed frame was logged %d times, want once", n)
	}
}

// A READY offering several content types gets ACCEPT with dnstap's only.
func TestReadyWithSeveralContentTypes(t *testing.T) {
	h := start(t, Options{})
	s := dial(t, h.addr)
	s.send(controlFrame(controlReady, "protobuf:other.Thing", ContentType))
	s.expect(controlAccept, true)
	s.send(controlFrame(controlStart), clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1"))
	eventually(t, "the observation", func() error {
		if got := h.observed(); len(got) != 1 || got[0].name != "a.example.test" {
			return fmt.Errorf("observed %v", got)
		}
		return nil
	})
}

// A unidirectional stream (START first, no READY) is served too, and its
// STOP gets no FINISH.
func TestUnidirectional(t *testing.T) {
	h := start(t, Options{})
	s := dial(t, h.addr)
	s.send(controlFrame(controlStart, ContentType),
		clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1"),
		controlFrame(controlStop))
	s.expectClosed()
	if got := h.observed(); len(got) != 1 {
		t.Errorf("observed %v, want one observation", got)
	}
}

func TestProtocolErrorsClose(t *testing.T) {
	for _, tc := range []struct {
		name       string
		handshake  bool
		send       [][]byte
		wantAccept bool
	}{
		{name: "garbage instead of READY", send: [][]byte{[]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n")}},
		{name: "data frame instead of READY", send: [][]byte{clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1")}},
		{name: "READY for another content type", send: [][]byte{controlFrame(controlReady, "protobuf:other.Thing")}},
		{name: "READY without content type", send: [][]byte{controlFrame(controlReady)}},
		{name: "control frame too long", send: [][]byte{{0, 0, 0, 0, 0, 0, 2, 1}, make([]byte, 513)}},
		{name: "control frame with a truncated field", send: [][]byte{{0, 0, 0, 0, 0, 0, 0, 10, 0, 0, 0, 4, 0, 0, 0, 1, 0, 0}}},
		{name: "data frame instead of START", wantAccept: true, send: [][]byte{controlFrame(controlReady, ContentType), dataFrame([]byte("x"))}},
		{name: "START for another content type", wantAccept: true, send: [][]byte{controlFrame(controlReady, ContentType), controlFrame(controlStart, "protobuf:other.Thing")}},
		{name: "READY after START", handshake: true, send: [][]byte{controlFrame(controlReady, ContentType)}},
		{name: "oversized frame", handshake: true, send: [][]byte{
			binary.BigEndian.AppendUint32(nil, 1000), make([]byte, 1000),
			clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1"),
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := start(t, Options{MaxFrame: 999})
			s := dial(t, h.addr)
			if tc.handshake {
				s.handshake()
			}
			s.send(tc.send...)
			if tc.wantAccept {
				s.expect(controlAccept, true)
			}
			s.expectClosed()
			if got := h.observed(); len(got) > 0 {
				t.Errorf("observed %v", got)
			}
			if n := h.logged("dnstap: connection closed\""); n != 1 {
				t.Errorf("the closing was logged %d times, want once; logs: %q", n, h.allLogs())
			}
		})
	}
}

func TestAllowRefuses(t *testing.T) {
	var mu sync.Mutex
	var asked []netip.Addr
	h := start(t, Options{Allow: func(a netip.Addr) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, a)
		return false
	}})
	for range 3 {
		s := dial(t, h.addr)
		s.send(controlFrame(controlReady, ContentType))
		s.expectClosed()
	}
	mu.Lock()
	if want := slices.Repeat([]netip.Addr{netip.MustParseAddr("127.0.0.1")}, 3); !slices.Equal(asked, want) {
		t.Errorf("Allow was asked about %v, want %v", asked, want)
	}
	mu.Unlock()
	if n := h.logged("refusing"); n != 1 {
		t.Errorf("the refusal was logged %d times, want once", n)
	}
	if st := h.srv.Stats(); st.Refused != 3 || st.Accepted != 0 {
		t.Errorf("stats = %+v, want 3 refused", st)
	}
}

func TestMaxConns(t *testing.T) {
	h := start(t, Options{MaxConns: 1})
	first := dial(t, h.addr)
	first.handshake()
	second := dial(t, h.addr)
	second.expectClosed()
	// The first one is still served.
	first.send(clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1"), controlFrame(controlStop))
	first.expect(controlFinish, false)
	// Once it has ended, a new one is accepted.
	eventually(t, "a new connection accepted", func() error {
		s := dial(t, h.addr)
		defer s.c.Close()
		s.send(controlFrame(controlReady, ContentType))
		_ = s.c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := s.fr.next(); err != nil {
			return err
		}
		return nil
	})
	if st := h.srv.Stats(); st.Refused < 1 || st.Observed != 1 {
		t.Errorf("stats = %+v, want at least one refused and one observed", st)
	}
}

func TestIdleTimeout(t *testing.T) {
	h := start(t, Options{IdleTimeout: 300 * time.Millisecond})
	s := dial(t, h.addr)
	s.handshake()
	began := time.Now()
	s.expectClosed()
	if took := time.Since(began); took < 250*time.Millisecond {
		t.Errorf("closed after %s, before the idle timeout", took)
	}
	eventually(t, "the idle close logged", func() error {
		if h.logged("no frame for 300ms") != 1 {
			return fmt.Errorf("logs: %q", h.allLogs())
		}
		return nil
	})
}

// Serve returns when its context ends, closing the connections, and
// observe is not called after.
func TestServeStopsAtContextEnd(t *testing.T) {
	h := start(t, Options{})
	s := dial(t, h.addr)
	s.handshake()
	s.send(clientResponseFrame(t, "a.example.test.", dns.TypeA, "a.example.test. 5 IN A 192.0.2.1"))
	eventually(t, "the observation", func() error {
		if len(h.observed()) != 1 {
			return errors.New("not yet")
		}
		return nil
	})
	h.stop()
	s.expectClosed()
	if _, err := net.Dial("tcp", h.addr); err == nil {
		t.Error("the listener still accepts after Serve returned")
	}
}

// Serve returns an error when the listener fails.
func TestServeListenerFails(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	err = New(Options{}, nil, logr.Discard()).Serve(context.Background(), l)
	if err == nil || !errors.Is(err, net.ErrClosed) {
		t.Errorf("Serve on a closed listener = %v, want net.ErrClosed", err)
	}
}

func TestPeerAddr(t *testing.T) {
	for _, tc := range []struct {
		addr net.Addr
		want netip.Addr
	}{
		{&net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 5}, netip.MustParseAddr("10.1.2.3")},
		{&net.TCPAddr{IP: net.ParseIP("::ffff:10.1.2.3"), Port: 5}, netip.MustParseAddr("10.1.2.3")},
		{&net.TCPAddr{IP: net.ParseIP("fe80::1"), Zone: "eth0", Port: 5}, netip.MustParseAddr("fe80::1")},
		{&net.UnixAddr{Name: "@", Net: "unix"}, netip.Addr{}},
		{nil, netip.Addr{}},
	} {
		if got := peerAddr(tc.addr); got != tc.want {
			t.Errorf("peerAddr(%v) = %v, want %v", tc.addr, got, tc.want)
		}
	}
}
