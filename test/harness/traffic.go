package harness

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ns"
)

// ServeTCP answers every connection to port inside netns with reply and a
// newline; the listening socket lives in that namespace, the goroutine here.
func ServeTCP(t T, netns NetNS, port int, reply string) {
	t.Helper()
	serveTCP(t, netns, port, func(net.Conn) string { return reply })
}

// ServeTCPPeer answers every connection to port inside netns with the
// client's address as the server sees it (after any NAT on the way) and a
// newline: what an external host tells of where a pod's packets came from.
func ServeTCPPeer(t T, netns NetNS, port int) {
	t.Helper()
	serveTCP(t, netns, port, func(c net.Conn) string {
		if a, err := netip.ParseAddrPort(c.RemoteAddr().String()); err == nil {
			return a.Addr().Unmap().String()
		}
		return c.RemoteAddr().String()
	})
}

// ListenTCP listens on port, every family, inside netns (closed at the
// test's end).
func ListenTCP(t T, netns NetNS, port int) *net.TCPListener {
	t.Helper()
	var l net.Listener
	err := ns.WithNetNSPath(netns.Path(), func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listening on %d in %s: %v", port, netns.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	return l.(*net.TCPListener)
}

func serveTCP(t T, netns NetNS, port int, reply func(net.Conn) string) {
	t.Helper()
	l := ListenTCP(t, netns, port)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
				_, _ = conn.Write([]byte(reply(conn) + "\n"))
			}()
		}
	}()
}

// ServeUDP answers every datagram to port inside netns with reply.
func ServeUDP(t T, netns NetNS, port int, reply string) {
	t.Helper()
	var pc net.PacketConn
	err := ns.WithNetNSPath(netns.Path(), func(ns.NetNS) error {
		var err error
		pc, err = net.ListenPacket("udp", fmt.Sprintf(":%d", port))
		return err
	})
	if err != nil {
		t.Fatalf("listening on udp %d in %s: %v", port, netns.Name, err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 1500)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(reply), from)
		}
	}()
}

// DialTCP connects from inside netns and returns the server's first line.
func DialTCP(netns NetNS, addr string, timeout time.Duration) (string, error) {
	var line string
	err := ns.WithNetNSPath(netns.Path(), func(ns.NetNS) error {
		conn, err := net.DialTimeout("tcp", addr, timeout)
		if err != nil {
			return err
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(timeout))
		line, err = bufio.NewReader(conn).ReadString('\n')
		line = strings.TrimSpace(line)
		return err
	})
	return line, err
}

// DialUDP sends a datagram from inside netns and returns the answer.
func DialUDP(netns NetNS, addr string, timeout time.Duration) (string, error) {
	f, err := OpenUDPFlow(netns, addr)
	if err != nil {
		return "", err
	}
	defer f.Close()
	return f.Ask(timeout)
}

// UDPFlow is one UDP socket inside a namespace, connected to one address and
// kept across requests: one conntrack flow, as a DNS client or a game keeps.
type UDPFlow struct{ conn net.Conn }

// OpenUDPFlow opens the socket in netns (it stays there).
func OpenUDPFlow(netns NetNS, addr string) (*UDPFlow, error) {
	var conn net.Conn
	err := ns.WithNetNSPath(netns.Path(), func(ns.NetNS) error {
		var err error
		conn, err = net.Dial("udp", addr)
		return err
	})
	if err != nil {
		return nil, err
	}
	return &UDPFlow{conn: conn}, nil
}

// Ask sends one datagram and returns the answer.
func (f *UDPFlow) Ask(timeout time.Duration) (string, error) {
	_ = f.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := f.conn.Write([]byte("ping")); err != nil {
		return "", err
	}
	buf := make([]byte, 1500)
	n, err := f.conn.Read(buf)
	return string(buf[:n]), err
}

// Close closes the socket.
func (f *UDPFlow) Close() { _ = f.conn.Close() }

// Ping sends one ICMP echo from inside netns.
func Ping(netns NetNS, ip string) error {
	_, err := netns.Exec("ping", "-c", "1", "-W", "1", ip)
	return err
}

func resultIPs(res types.Result) ([]netip.Addr, error) {
	r, err := current.NewResultFromResult(res)
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, ipc := range r.IPs {
		if a, ok := netip.AddrFromSlice(ipc.Address.IP); ok {
			out = append(out, a.Unmap())
		}
	}
	return out, nil
}
