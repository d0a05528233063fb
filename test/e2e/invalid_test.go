package e2e

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	cnins "github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// boomPort is the out-of-window check's server port (that of Kubernetes'
// boom server, whose test, "should not be vulnerable to the invalid
// conntrack state bug", this one makes deterministic).
const boomPort = 9000

// TCP flags the check sets and looks for.
const (
	tcpSYN = 0x02
	tcpRST = 0x04
	tcpPSH = 0x08
	tcpACK = 0x10
)

// segment is what the check reads and writes of a TCP header.
type segment struct {
	srcPort, dstPort uint16
	seq, ack         uint32
	flags            uint8
}

func parseSegment(b []byte) (segment, bool) {
	if len(b) < 20 {
		return segment{}, false
	}
	return segment{srcPort: binary.BigEndian.Uint16(b[0:]), dstPort: binary.BigEndian.Uint16(b[2:]),
		seq: binary.BigEndian.Uint32(b[4:]), ack: binary.BigEndian.Uint32(b[8:]), flags: b[13]}, true
}

// encode is the segment with its payload and checksum (the pseudo header's
// sum is the same for both families when the length fits 16 bits).
func (s segment) encode(src, dst netip.Addr, payload []byte) []byte {
	b := make([]byte, 20+len(payload))
	binary.BigEndian.PutUint16(b[0:], s.srcPort)
	binary.BigEndian.PutUint16(b[2:], s.dstPort)
	binary.BigEndian.PutUint32(b[4:], s.seq)
	binary.BigEndian.PutUint32(b[8:], s.ack)
	b[12], b[13] = 5<<4, s.flags
	binary.BigEndian.PutUint16(b[14:], 502) // window
	copy(b[20:], payload)
	sum := uint32(6 + len(b)) // protocol and length
	for _, p := range [][]byte{src.AsSlice(), dst.AsSlice(), b} {
		for i := 0; i < len(p); i += 2 {
			w := uint32(p[i]) << 8
			if i+1 < len(p) {
				w |= uint32(p[i+1])
			}
			sum += w
		}
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	binary.BigEndian.PutUint16(b[16:], ^uint16(sum))
	return b
}

// rawTCP is a raw TCP socket bound to a pod's address of one family: it
// sees a copy of every segment sent to that address and sends segments as
// from it.
type rawTCP struct {
	addr netip.Addr
	conn *net.IPConn
}

func openRawTCP(t *testing.T, pod *harness.Pod, addr netip.Addr) *rawTCP {
	t.Helper()
	network := "ip4:tcp"
	if addr.Is6() {
		network = "ip6:tcp"
	}
	var conn *net.IPConn
	err := cnins.WithNetNSPath(pod.NS.Path(), func(cnins.NetNS) error {
		var err error
		conn, err = net.ListenIP(network, &net.IPAddr{IP: addr.AsSlice()})
		return err
	})
	if err != nil {
		t.Fatalf("raw TCP socket at %s in %s: %v", addr, pod.NS.Name, err)
	}
	t.Cleanup(func() { conn.Close() })
	return &rawTCP{addr: addr, conn: conn}
}

// next reads segments from the address from until one matches, for at most d.
func (r *rawTCP) next(from netip.Addr, d time.Duration, match func(segment) bool) (segment, error) {
	_ = r.conn.SetReadDeadline(time.Now().Add(d))
	buf := make([]byte, 1500)
	for {
		n, src, err := r.conn.ReadFrom(buf)
		if err != nil {
			return segment{}, err
		}
		a, _ := netip.AddrFromSlice(src.(*net.IPAddr).IP)
		if seg, ok := parseSegment(buf[:n]); ok && a.Unmap() == from && match(seg) {
			return seg, nil
		}
	}
}

// boomServer is a TCP server in a pod with raw sockets beside it and its
// client (the pod's and the client's address of one family).
type boomServer struct {
	l              *net.TCPListener
	server, client *rawTCP
	clientPod      *harness.Pod
}

func newBoomServer(t *testing.T, l *net.TCPListener, server, client *harness.Pod, f corev1.IPFamily) *boomServer {
	t.Helper()
	return &boomServer{l: l, server: openRawTCP(t, server, server.Addr(f)), client: openRawTCP(t, client, client.Addr(f)), clientPod: client}
}

func timedOut(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// probe opens a connection from the client to vip (a service in front of
// the server's boomPort), learns both sides' next sequence numbers from the
// client's handshake ACK, and sends the client a segment 100,000 bytes
// before the server's next one: conntrack's "invalid". Were it delivered,
// it would come from the server's own address, not the VIP (an invalid
// packet is not NATed back), and the client's kernel, with no socket for
// it, would answer with a reset: the invalid conntrack state bug. probe
// reports whether the segment reached the client's namespace within wait
// (its raw socket) and whether the client reset (within wait too); when
// neither, that the connection still carries the server's next line.
//
// behind 0 is the control: a segment at the server's next sequence number,
// which conntrack takes as valid and NATs back; arrived then says whether
// the client's socket read its payload.
func (s *boomServer) probe(vip string, wait time.Duration, behind uint32) (arrived, reset bool, err error) {
	var cc net.Conn
	if err := cnins.WithNetNSPath(s.clientPod.NS.Path(), func(cnins.NetNS) error {
		var err error
		cc, err = net.DialTimeout("tcp", vip, 3*time.Second)
		return err
	}); err != nil {
		return false, false, err
	}
	defer cc.Close()
	cport := uint16(cc.LocalAddr().(*net.TCPAddr).Port)
	sc, err := s.accept(cport)
	if err != nil {
		return false, false, err
	}
	defer sc.Close()
	ack, err := s.server.next(s.client.addr, 3*time.Second, func(g segment) bool {
		return g.srcPort == cport && g.dstPort == boomPort && g.flags&tcpACK != 0 && g.flags&tcpSYN == 0
	})
	if err != nil {
		return false, false, fmt.Errorf("the client's handshake ACK from port %d not seen: %w", cport, err)
	}
	bad := segment{srcPort: boomPort, dstPort: cport, seq: ack.ack - behind, ack: ack.seq, flags: tcpPSH | tcpACK}
	if _, err := s.server.conn.WriteTo(bad.encode(s.server.addr, s.client.addr, []byte("boom!!!\n")), &net.IPAddr{IP: s.client.addr.AsSlice()}); err != nil {
		return false, false, fmt.Errorf("injecting: %w", err)
	}
	if behind == 0 { // NATed back: from the VIP, seen by the client's raw socket too
		vipAddr := netip.MustParseAddrPort(vip).Addr()
		if _, err := s.client.next(vipAddr, wait, func(g segment) bool { return g.dstPort == cport && g.seq == bad.seq }); err != nil {
			return false, false, fmt.Errorf("the client's raw socket saw no segment from %s: %w", vipAddr, err)
		}
		_ = cc.SetReadDeadline(time.Now().Add(wait))
		line, err := bufio.NewReader(cc).ReadString('\n')
		return strings.TrimSpace(line) == "boom!!!", false, err
	}
	_, err = s.client.next(s.server.addr, wait, func(g segment) bool { return g.dstPort == cport && g.seq == bad.seq })
	if err != nil && !timedOut(err) {
		return false, false, err
	}
	arrived = err == nil
	_, err = s.server.next(s.client.addr, wait, func(g segment) bool {
		return g.srcPort == cport && g.dstPort == boomPort && g.flags&tcpRST != 0
	})
	if err != nil && !timedOut(err) {
		return arrived, false, err
	}
	if reset = err == nil; reset || arrived {
		return arrived, reset, nil
	}
	if _, err := sc.Write([]byte("alive\n")); err != nil {
		return false, false, err
	}
	_ = cc.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := bufio.NewReader(cc).ReadString('\n')
	if strings.TrimSpace(line) != "alive" {
		return false, false, fmt.Errorf("the connection carries nothing after the injected segment: %q, %v", line, err)
	}
	return false, false, nil
}

// accept takes the server's connection from the client's port cport,
// closing any other (a connection left from an earlier probe).
func (s *boomServer) accept(cport uint16) (net.Conn, error) {
	_ = s.l.SetDeadline(time.Now().Add(3 * time.Second))
	for {
		sc, err := s.l.Accept()
		if err != nil {
			return nil, fmt.Errorf("the server accepted no connection from port %d: %w", cport, err)
		}
		if sc.RemoteAddr().(*net.TCPAddr).Port == int(cport) {
			return sc, nil
		}
		sc.Close()
	}
}

// outOfWindowDropped: out-of-window segments from a ClusterIP's backend
// never reach the client (OVN drops what conntrack finds invalid on every
// switch with a load balancer), three connections over, and each
// connection still works after. The control: the same segment at the
// server's next sequence number is delivered, NATed back, to the client's
// socket.
func outOfWindowDropped(t *testing.T, s *boomServer, vip string) {
	t.Helper()
	var arrivals, resets int
	count := func(arrived, reset bool) {
		if arrived {
			arrivals++
		}
		if reset {
			resets++
		}
	}
	harness.Eventually(t, 20*time.Second, "a first connection through "+vip, func() error {
		arrived, reset, err := s.probe(vip, time.Second, 100000)
		count(arrived, reset)
		return err
	})
	for i := 0; i < 2; i++ {
		arrived, reset, err := s.probe(vip, time.Second, 100000)
		if err != nil {
			t.Fatalf("probe %d: %v", i+2, err)
		}
		count(arrived, reset)
	}
	if arrivals+resets > 0 {
		t.Fatalf("of 3 connections, %d had the out-of-window segment reach the client and %d were reset by it", arrivals, resets)
	}
	if delivered, _, err := s.probe(vip, 3*time.Second, 0); err != nil || !delivered {
		t.Fatalf("control: the same segment in the window was not delivered to the client's socket (%v): the check proves nothing", err)
	}
}
