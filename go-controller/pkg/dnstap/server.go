// Package dnstap receives the dnstap stream of CoreDNS (its dnstap plugin,
// "dnstap tcp://HOST:PORT full" or "dnstap unix:///PATH full" in the
// Corefile) and reports, for every response CoreDNS gives a client, the
// question name and the addresses it resolved to. The controller learns from
// it which names under a wildcard ("*.example.com") the pods resolve.
//
// # Protocol
//
// The stream is Frame Streams (https://farsightsec.github.io/fstrm/) in its
// bidirectional form, as CoreDNS writes it on TCP and unix sockets alike:
// the sender sends READY listing content types, the Server answers ACCEPT
// with "protobuf:dnstap.Dnstap" (a READY without it closes the connection),
// the sender sends START, then data frames (a 4-byte big-endian length and a
// dnstap protobuf each), and finally STOP, which the Server answers with
// FINISH before closing. A stream opening with START (unidirectional) is
// taken too. Anything else (a data frame or garbage before READY, a malformed
// control frame, a data frame longer than Options.MaxFrame) closes the
// connection; so do 10 seconds without finishing the handshake, and
// Options.IdleTimeout without a frame when it is set.
//
// # What is reported
//
// Only Dnstap messages of type MESSAGE whose Message is a CLIENT_RESPONSE
// with its response_message (CoreDNS sends it with "full") count; others
// (the CLIENT_QUERY of every query, in particular) are skipped. The DNS
// response must be a NOERROR answer to one question of class IN for a valid
// name (dnsname.Normalize). The name reported is the question name,
// normalized (lower case, no trailing dot); the answers are the A and AAAA
// records of the answer section owned by that name or by a CNAME target
// reached from it within the message, each with the smallest TTL on its way
// (as package dnsname does). observe is called only when there is at least
// one such address. A frame whose protobuf or DNS message does not parse is
// skipped and counted in Stats.Malformed (the first one of each connection
// is logged); it does not close the connection.
//
// # CoreDNS
//
// What CoreDNS's dnstap plugin (1.14) does as the sender, which the
// receiver's users have to live with:
//
//   - It answers the client first and taps afterwards, through a queue of
//     10000 messages that never blocks a query: when the queue is full or
//     there is no connection, messages are dropped (and counted in a
//     "Dropped dnstap messages: N" warning every 10 seconds).
//   - It writes through a 4 KiB buffer flushed every second, so a response
//     reaches observe up to about a second after the client got it.
//   - It connects at startup; without a receiver it logs "No connection to
//     dnstap endpoint" and starts anyway. It tries again every 10 seconds
//     (counted from its start) while it has no connection, and at once
//     when a write fails on the connection it had.
//   - It only learns that the receiver closed the connection (a receiver
//     restart, IdleTimeout) when a flush fails, the second one after the
//     close: the responses written in between, a second or two of them, are
//     lost. If the receiver is back by the next write, CoreDNS is connected
//     again at once; otherwise within 10 seconds of the receiver's return.
//   - Each CLIENT_QUERY is sent too (skipped here): every query costs two
//     frames.
//   - It sends STOP when it shuts down (SIGTERM) and waits for FINISH.
//   - Data and control writes time out after 4 seconds, so a receiver that
//     stops reading loses the connection and messages, never blocks
//     CoreDNS.
package dnstap

import (
	"context"
	"errors"
	"fmt"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// Answer is one address a name resolved to, with its TTL.
type Answer = dnsname.Answer

// Options tune a Server. The zero value takes the defaults.
type Options struct {
	// Allow says whether a peer may send, by its IP address (IPv4-mapped
	// addresses unmapped, zone dropped); a peer without one (a unix socket)
	// is asked as the zero netip.Addr. A refused connection is closed at
	// once, and logged once per address. nil allows every peer.
	Allow func(netip.Addr) bool
	// MaxConns bounds the connections served at a time (default 64); one
	// more is closed at once.
	MaxConns int
	// MaxFrame bounds a data frame, in bytes (default 128 KiB: CoreDNS's
	// frames carry a DNS message of up to 64 KiB plus a few hundred bytes);
	// a longer frame closes the connection.
	MaxFrame int
	// IdleTimeout, when positive, closes a connection that sends no frame
	// for that long. The default is none: CoreDNS sends nothing while it
	// answers no query, and when it next writes to a connection the
	// receiver closed, it loses the responses of the next second or two
	// (see "CoreDNS" in the package documentation). A peer that is gone
	// without closing is found by TCP keepalive instead (30s idle, then 3
	// probes 10s apart).
	IdleTimeout time.Duration
}

const (
	defaultMaxConns = 64
	defaultMaxFrame = 128 << 10
	// handshakeTimeout bounds READY/START after the connection opens, and
	// each write of ACCEPT or FINISH.
	handshakeTimeout = 10 * time.Second
	// maxRefusedLogged bounds the addresses remembered as already logged.
	maxRefusedLogged = 1024
)

func (o Options) withDefaults() Options {
	if o.MaxConns <= 0 {
		o.MaxConns = defaultMaxConns
	}
	if o.MaxFrame <= 0 {
		o.MaxFrame = defaultMaxFrame
	}
	if o.Allow == nil {
		o.Allow = func(netip.Addr) bool { return true }
	}
	return o
}

// Stats counts what a Server has received since New.
type Stats struct {
	// Accepted and Refused count connections: served, or closed at once
	// (refused by Allow, or beyond MaxConns).
	Accepted, Refused int64
	// Frames counts the data frames received.
	Frames int64
	// Malformed counts the data frames skipped because their protobuf or
	// their DNS message does not parse.
	Malformed int64
	// Observed counts the calls of observe.
	Observed int64
}

// Server receives dnstap streams and reports client responses to observe.
type Server struct {
	opts    Options
	observe func(name string, answers []Answer)
	log     logr.Logger

	observeMu sync.Mutex // serializes observe

	accepted, refused, frames, malformed, observed atomic.Int64
	noFullLogged                                   atomic.Bool

	refusedMu     sync.Mutex
	refusedLogged map[netip.Addr]bool
}

// New returns a Server calling observe(name, answers) once per client
// response with at least one answer. The calls are never concurrent, even
// across connections; observe must be quick, as the connection it comes from
// is not read meanwhile, and must not keep answers.
func New(opts Options, observe func(name string, answers []Answer), log logr.Logger) *Server {
	if observe == nil {
		observe = func(string, []Answer) {}
	}
	return &Server{opts: opts.withDefaults(), observe: observe, log: log, refusedLogged: map[netip.Addr]bool{}}
}

// Stats returns the counters so far.
func (s *Server) Stats() Stats {
	return Stats{
		Accepted:  s.accepted.Load(),
		Refused:   s.refused.Load(),
		Frames:    s.frames.Load(),
		Malformed: s.malformed.Load(),
		Observed:  s.observed.Load(),
	}
}

// Serve accepts connections on l and serves them until ctx ends. It then
// closes l and every connection, waits for them (observe is not called after
// Serve returns), and returns nil. It returns an error, after the same
// cleanup, when l fails other than transiently (too many open files, ...).
// MaxConns applies to each Serve call.
func (s *Server) Serve(ctx context.Context, l net.Listener) error {
	ctx, cancel := context.WithCancel(ctx)
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		conns  = map[net.Conn]bool{}
		closed bool
		full   bool // logged that MaxConns is reached
	)
	context.AfterFunc(ctx, func() {
		_ = l.Close()
		mu.Lock()
		defer mu.Unlock()
		closed = true
		for c := range conns {
			_ = c.Close()
		}
	})
	defer wg.Wait()
	defer cancel()

	var backoff time.Duration
	for {
		c, err := l.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			if !transient(err) {
				return fmt.Errorf("dnstap: accept on %s: %w", l.Addr(), err)
			}
			backoff = min(max(2*backoff, 5*time.Millisecond), time.Second)
			s.log.Error(err, "dnstap: accept failed; retrying", "retryIn", backoff)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(backoff):
			}
			continue
		}
		backoff = 0
		peer := peerAddr(c.RemoteAddr())
		if !s.opts.Allow(peer) {
			s.refused.Add(1)
			_ = c.Close()
			s.logRefused(peer, c.RemoteAddr())
			continue
		}
		mu.Lock()
		if closed {
			mu.Unlock()
			_ = c.Close()
			return nil
		}
		if len(conns) >= s.opts.MaxConns {
			logIt := !full
			full = true
			mu.Unlock()
			s.refused.Add(1)
			_ = c.Close()
			if logIt {
				s.log.Info("dnstap: too many connections; closing new ones until one ends", "maxConns", s.opts.MaxConns, "peer", c.RemoteAddr().String())
			}
			continue
		}
		conns[c] = true
		mu.Unlock()
		if tc, ok := c.(*net.TCPConn); ok {
			_ = tc.SetKeepAliveConfig(keepAlive)
		}
		s.accepted.Add(1)
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveConn(c)
			_ = c.Close()
			mu.Lock()
			delete(conns, c)
			if len(conns) < s.opts.MaxConns {
				full = false
			}
			mu.Unlock()
		}()
	}
}

// keepAlive finds peers gone without closing (a node that died) in about a
// minute.
var keepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 10 * time.Second, Count: 3}

// transient says whether an Accept error may go away by itself.
func transient(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	for _, e := range []error{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED, syscall.EINTR} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// peerAddr is the IP address of a peer, or the zero Addr when it has none.
func peerAddr(a net.Addr) netip.Addr {
	if ap, ok := a.(interface{ AddrPort() netip.AddrPort }); ok {
		return ap.AddrPort().Addr().Unmap().WithZone("")
	}
	if a != nil {
		if ap, err := netip.ParseAddrPort(a.String()); err == nil {
			return ap.Addr().Unmap().WithZone("")
		}
	}
	return netip.Addr{}
}

func (s *Server) logRefused(peer netip.Addr, remote net.Addr) {
	s.refusedMu.Lock()
	defer s.refusedMu.Unlock()
	if s.refusedLogged[peer] {
		return
	}
	if len(s.refusedLogged) >= maxRefusedLogged {
		clear(s.refusedLogged)
	}
	s.refusedLogged[peer] = true
	s.log.Info("dnstap: refusing a connection from a peer not allowed (logged once per address)", "peer", remote.String())
}

// connStats are one connection's counters, for its closing log line.
type connStats struct {
	frames, observed, malformed int64
}

// serveConn runs one connection to its end and logs how it ended.
func (s *Server) serveConn(c net.Conn) {
	peer := c.RemoteAddr().String()
	s.log.V(2).Info("dnstap: connection opened", "peer", peer)
	var st connStats
	err := s.stream(c, &st)
	kv := []any{"peer", peer, "frames", st.frames, "observed", st.observed, "malformed", st.malformed}
	switch {
	case err == nil:
		s.log.V(2).Info("dnstap: connection stopped by the sender", kv...)
	case errors.Is(err, net.ErrClosed):
		s.log.V(2).Info("dnstap: connection closed at shutdown", kv...)
	default:
		s.log.Info("dnstap: connection closed", append(kv, "reason", err.Error())...)
	}
}

// stream runs the Frame Streams protocol on c: handshake, data frames, and
// STOP/FINISH. It returns nil after a STOP.
func (s *Server) stream(c net.Conn, st *connStats) error {
	fr := newFrameReader(c, s.opts.MaxFrame)
	_ = c.SetReadDeadline(time.Now().Add(handshakeTimeout))
	f, err := fr.next()
	if err != nil {
		return fmt.Errorf("waiting for READY: %w", err)
	}
	bidirectional := f.control == controlReady
	if bidirectional {
		if !f.hasContentType() {
			return fmt.Errorf("READY does not offer %q (offers %q)", ContentType, f.contentTypes)
		}
		if err := write(c, controlFrame(controlAccept, ContentType)); err != nil {
			return fmt.Errorf("sending ACCEPT: %w", err)
		}
		if f, err = fr.next(); err != nil {
			return fmt.Errorf("waiting for START: %w", err)
		}
	}
	if f.control != controlStart {
		want := "START"
		if !bidirectional {
			want = "READY"
		}
		return fmt.Errorf("expected %s, got a %s", want, f)
	}
	if len(f.contentTypes) > 0 && !f.hasContentType() {
		return fmt.Errorf("START is for %q, not %q", f.contentTypes, ContentType)
	}
	for {
		if s.opts.IdleTimeout > 0 {
			_ = c.SetReadDeadline(time.Now().Add(s.opts.IdleTimeout))
		} else {
			_ = c.SetReadDeadline(time.Time{})
		}
		f, err := fr.next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return errors.New("closed by the sender without STOP")
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				return fmt.Errorf("no frame for %s", s.opts.IdleTimeout)
			}
			return err
		}
		switch f.control {
		case 0:
			s.data(f.data, st, c.RemoteAddr())
		case controlStop:
			if bidirectional {
				if err := write(c, controlFrame(controlFinish)); err != nil {
					return fmt.Errorf("sending FINISH: %w", err)
				}
			}
			return nil
		default:
			return fmt.Errorf("unexpected %s", f)
		}
	}
}

func write(c net.Conn, b []byte) error {
	_ = c.SetWriteDeadline(time.Now().Add(handshakeTimeout))
	_, err := c.Write(b)
	return err
}

// data handles one data frame.
func (s *Server) data(frame []byte, st *connStats, remote net.Addr) {
	s.frames.Add(1)
	st.frames++
	resp, isResponse, err := clientResponse(frame)
	if err == nil && isResponse && resp == nil {
		if !s.noFullLogged.Swap(true) {
			s.log.Info("dnstap: client responses come without their DNS message: the sender's dnstap needs \"full\" (logged once)", "peer", remote.String())
		}
		return
	}
	var name string
	var ans []Answer
	if err == nil && isResponse {
		name, ans, err = answers(resp)
	}
	if err != nil {
		s.malformed.Add(1)
		st.malformed++
		if st.malformed == 1 {
			s.log.Info("dnstap: skipping a malformed frame (logged once per connection)", "peer", remote.String(), "err", err.Error())
		}
		return
	}
	if len(ans) == 0 {
		return
	}
	st.observed++
	s.observed.Add(1)
	s.observeMu.Lock()
	defer s.observeMu.Unlock()
	s.observe(name, ans)
}
