package cluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
)

// The external host: a namespace on the underlay, outside the cluster, with
// routes to nothing but the node addresses (and the service addresses the
// "outside network" routes to a node, as a router in front of a cluster would).
const (
	externalIP  = underlayPrefix + "100"
	externalIPs = "192.0.2.10" // a Service's spec.externalIPs, routed to the first worker
	ingressIP   = "192.0.2.20" // a LoadBalancer's ingress IP, routed to the last worker
	// Their IPv6 twins, on a cluster with IPv6 (from 2001:db8::/32, the
	// documentation range).
	externalIP6  = underlayPrefix6 + "100"
	externalIPs6 = "2001:db8:1::10"
	ingressIP6   = "2001:db8:1::20"
	externalWeb  = 8080 // the external host's HTTP server
	externalWeb2 = 8081 // the same server on a second port (the egress firewall's port rules)
	// externalCIDRs is the master's --external-ip-cidrs: the ranges the
	// external and ingress IPs above come from (TEST-NET-1 and 2001:db8:1::/64)
	// and those the e2e suite's ExternalIP test takes its address from
	// (TEST-NET-3, and on IPv6 2001:db8::cb00:71fa, its twin in
	// 2001:db8::/64). Without it the master programs no external address.
	externalCIDRs = "192.0.2.0/24,203.0.113.0/24,2001:db8:1::/64,2001:db8::/64"
)

func (c *Cluster) externalNS() string { return prefix + "-external" }

// makeExternalHost creates the external host's namespace and wires it to the underlay.
func (c *Cluster) makeExternalHost() error {
	if err := c.record(func(st *state) { st.NetNS = append(st.NetNS, c.externalNS()) }); err != nil {
		return err
	}
	ext := c.externalNS()
	cmds := [][]string{
		{"ip", "netns", "add", ext},
		{"ip", "-n", ext, "link", "set", "lo", "up"},
		{"ip", "link", "add", "eth0", "netns", ext, "type", "veth", "peer", "name", "ul-external", "netns", c.underlayNS()},
		{"ip", "-n", c.underlayNS(), "link", "set", "ul-external", "master", "br0", "up"},
		{"ip", "-n", ext, "addr", "add", externalIP + "/32", "dev", "eth0"},
		{"ip", "-n", ext, "link", "set", "eth0", "up"},
		// A veth leaves TCP/UDP checksums to "hardware" that never fills
		// them in; a real host's NIC does, and OVS's userspace conntrack
		// drops segments with bad checksums. So the host computes them.
		{"ip", "netns", "exec", ext, "ethtool", "-K", "eth0", "tx", "off"},
	}
	// Routes to each node's address and, through a worker, to the service
	// addresses, in every family of the cluster.
	first, last := c.Nodes[1], c.Nodes[len(c.Nodes)-1]
	for _, f := range c.families() {
		ip, host := []string{"ip", "-n", ext}, "/32"
		if f.v6 {
			ip, host = []string{"ip", "-6", "-n", ext}, "/128"
			cmds = append(cmds, append(ip, "addr", "add", f.external+host, "dev", "eth0", "nodad"))
		}
		for _, n := range c.Nodes {
			cmds = append(cmds, append(ip, "route", "add", f.node(n)+host, "dev", "eth0"))
		}
		cmds = append(cmds, append(ip, "route", "add", f.serviceExternalIP+host, "via", f.node(first)),
			append(ip, "route", "add", f.ingressIP+host, "via", f.node(last)))
	}
	for _, args := range cmds {
		if _, err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// inExternal runs f with the calling goroutine's thread in the external
// namespace (sockets it opens stay there).
func (c *Cluster) inExternal(f func() error) error {
	return ns.WithNetNSPath("/var/run/netns/"+c.externalNS(), func(ns.NetNS) error { return f() })
}

// externalDial opens a connection from the external host.
func (c *Cluster) externalDial(ctx context.Context, network, addr string) (net.Conn, error) {
	var conn net.Conn
	err := c.inExternal(func() error {
		var err error
		conn, err = (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// externalGet is an HTTP GET from the external host.
func (c *Cluster) externalGet(url string) (string, error) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DialContext: c.externalDial, DisableKeepAlives: true}}
	resp, err := client.Get(url)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s: %s", url, resp.Status)
	}
	return strings.TrimSpace(string(b)), err
}

// externalUDP sends an agnhost netexec UDP command from the external host
// and returns the answer.
func (c *Cluster) externalUDP(addr, command string) (string, error) {
	conn, err := c.externalDial(bg, "udp", addr)
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := conn.Write([]byte(command + "\n")); err != nil {
		return "", err
	}
	buf := make([]byte, 1024)
	n, err := conn.Read(buf)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(buf[:n])), nil
}

// externalConnect opens and closes a TCP connection from the external host.
func (c *Cluster) externalConnect(addr string) (string, error) {
	conn, err := c.externalDial(bg, "tcp", addr)
	if err != nil {
		return "", err
	}
	return "connected from " + conn.LocalAddr().String(), conn.Close()
}

// serveExternal starts the external host's HTTP server on its address of
// each family, on externalWeb and externalWeb2; it answers every request
// with the client's address as it arrived. stop closes it.
func (c *Cluster) serveExternal() (stop func(), err error) {
	srv := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintln(w, host)
	})}
	for _, f := range c.families() {
		for _, port := range []int32{externalWeb, externalWeb2} {
			var l net.Listener
			err := c.inExternal(func() error {
				var err error
				l, err = net.Listen("tcp", hostPort(f.external, port))
				return err
			})
			if err != nil {
				_ = srv.Close()
				return nil, fmt.Errorf("external server: %w", err)
			}
			go func() { _ = srv.Serve(l) }()
		}
	}
	return func() { _ = srv.Close() }, nil
}

// lastLine is the last non-empty line of s.
func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
