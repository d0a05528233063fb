package integration

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ndp"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// An unsolicited neighbour advertisement from ndp.Announcer, as the node
// daemon sends one for an IPv6 egress IP it takes, is taken by a real
// kernel on the other end of the link: the neighbour entry it had for the
// address, of another MAC (the node the address left), now has the
// advertised one. The sender picks its interface's link-local address as
// the source; an interface without one, or an IPv4 address, is refused
// naming the interface and the address.
//
// The receiver has an entry for the address before the advertisement, as
// an external host or router that was talking to the egress IP has: Linux
// updates an existing entry (Override set), but creates none from an
// unsolicited advertisement unless it forwards and has accept_untracked_na
// (RFC 9131), which a plain host does not.
func TestUnsolicitedNeighbourAdvertisement(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the neighbour advertisement test needs root (network namespaces, packet sockets); CI runs as root")
	}
	const (
		target    = "2001:db8:5::33"
		staleMAC  = "02:00:5e:00:53:99" // the node the address left
		senderMAC = "02:00:5e:00:53:01" // the node that took it: its bridge's MAC
	)
	sender, receiver := harness.NewNetNS(t, "nda"), harness.NewNetNS(t, "ndb")
	for _, args := range [][]string{
		{"-n", sender.Name, "link", "add", "nd0", "address", senderMAC, "type", "veth", "peer", "name", "nd1", "address", "02:00:5e:00:53:02", "netns", receiver.Name},
		{"-n", sender.Name, "link", "add", "nd9", "type", "veth", "peer", "name", "nd8"},
		{"-n", sender.Name, "link", "set", "nd9", "addrgenmode", "none"}, // no link-local address
		{"-n", sender.Name, "link", "set", "nd8", "up"},
		{"-n", sender.Name, "link", "set", "nd9", "up"},
		{"-n", sender.Name, "link", "set", "nd0", "up"},
		{"-n", receiver.Name, "link", "set", "nd1", "up"},
		{"-n", receiver.Name, "-6", "neigh", "replace", target, "lladdr", staleMAC, "dev", "nd1", "nud", "stale"},
	} {
		if _, err := harness.Run(append([]string{"ip"}, args...)...); err != nil {
			t.Fatal(err)
		}
	}
	mac, _ := net.ParseMAC(senderMAC)
	inSender := func(f func() error) error {
		return ns.WithNetNSPath(sender.Path(), func(ns.NetNS) error { return f() })
	}

	// What is refused, naming the interface and the address.
	for _, c := range []struct{ iface, want string }{
		{"nd9", "announcing on nd9: it has no IPv6 link-local address"},
		{"nd404", "announcing on nd404: no such interface"},
	} {
		err := inSender(func() error {
			a, err := ndp.OpenAnnouncer(c.iface, mac)
			if err == nil {
				a.Close()
			}
			return err
		})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("OpenAnnouncer(%s): %v, want an error saying %q", c.iface, err, c.want)
		}
	}

	// The receiver's entry, read through netlink in its namespace.
	neigh := receiverNeighbour(t, receiver, "nd1", netip.MustParseAddr(target))
	if got, err := neigh(); err != nil || got != staleMAC {
		t.Fatalf("the receiver's entry before the advertisement: %s %v, want %s", got, err, staleMAC)
	}

	// nd0's link-local address comes once its peer is up: wait for it.
	var src netip.Addr
	harness.Eventually(t, 10*time.Second, "an announcer on nd0 (its link-local address)", func() error {
		return inSender(func() error {
			a, err := ndp.OpenAnnouncer("nd0", mac)
			if err != nil {
				return err
			}
			defer a.Close()
			src = a.Source()
			if err := a.Announce(netip.MustParseAddr("192.0.2.33")); err == nil || !strings.Contains(err.Error(), "nd0") || !strings.Contains(err.Error(), "192.0.2.33") {
				t.Errorf("announcing an IPv4 address: %v, want an error naming nd0 and 192.0.2.33", err)
			}
			return a.Announce(netip.MustParseAddr(target)) // once: no retries below
		})
	})
	if !src.IsLinkLocalUnicast() {
		t.Errorf("sent from %s, want nd0's link-local address", src)
	}
	harness.Eventually(t, 10*time.Second, fmt.Sprintf("the receiver's entry for %s to be %s (advertised from %s)", target, senderMAC, src), func() error {
		got, err := neigh()
		if err == nil && got != senderMAC {
			err = fmt.Errorf("the entry has %s", got)
		}
		return err
	})
}

// nsNetlink is a netlink handle in the namespace n, closed at test end.
func nsNetlink(t *testing.T, n harness.NetNS) *netlink.Handle {
	t.Helper()
	nsh, err := netns.GetFromName(n.Name)
	if err != nil {
		t.Fatalf("namespace %s: %v", n.Name, err)
	}
	t.Cleanup(func() { nsh.Close() })
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatalf("netlink in %s: %v", n.Name, err)
	}
	t.Cleanup(h.Close)
	return h
}

// receiverNeighbour reads the MAC of the neighbour entry for ip on iface in
// the namespace n, through netlink.
func receiverNeighbour(t *testing.T, n harness.NetNS, iface string, ip netip.Addr) func() (string, error) {
	t.Helper()
	h := nsNetlink(t, n)
	link, err := h.LinkByName(iface)
	if err != nil {
		t.Fatalf("%s in %s: %v", iface, n.Name, err)
	}
	return func() (string, error) {
		list, err := h.NeighList(link.Attrs().Index, netlink.FAMILY_V6)
		if err != nil {
			return "", err
		}
		for _, e := range list {
			if a, ok := netip.AddrFromSlice(e.IP); ok && a == ip {
				return e.HardwareAddr.String(), nil
			}
		}
		return "", fmt.Errorf("no entry for %s on %s", ip, iface)
	}
}

// The node daemon announces the IPv6 egress IP its node takes: with the
// EgressIP's status assigning it to n1 (written here as the master writes
// it; no master runs, so nothing else rewrites it), the external host on the
// other side of n1's gateway bridge (a real OVS bridge, its flows the
// daemon's) has its entry for the address, of another MAC, updated to the
// bridge's. Moved away and back, the address is announced again; the IPv4
// one, which OVN announces, never is.
func TestNodeAnnouncesIPv6EgressIP(t *testing.T) {
	const (
		egressIP6 = "fd00:18::33"
		egressIP4 = "172.18.0.33"
		staleMAC  = "02:00:5e:00:53:99"
	)
	c := newNodeCluster(t)
	c.kube.InstallCRDs(t)
	n1 := c.addNode("n1")
	ext := externalNIC(t, n1)
	if out, err := n1.VSCtl("add-br", "breth1", "--", "set", "bridge", "breth1", "datapath_type=netdev", "--", "add-port", "breth1", "eth1"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	for _, args := range [][]string{
		{"addr", "add", "172.18.0.2/24", "dev", "breth1"},
		{"link", "set", "breth1", "up"},
	} {
		if out, err := n1.NS.Exec(append([]string{"ip"}, args...)...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	d := harness.Start(t, c.logDir, "node-n1", "ip", "netns", "exec", n1.NS.Name, harness.Binary(t, "ovnkube"), "node",
		"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:"+c.ovn.SBSock,
		"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev", "--resync-interval", "500ms",
		"--minion-switch-subnet", "10.244.1.0/24",
		"--bridge-interface", "breth1", "--physical-ip", "172.18.0.2/24", "--default-gw", "172.18.0.1")
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("node daemon log tail:\n%s", d.Tail(40))
		}
	})
	harness.WaitForLog(t, d, "following EgressIPs", 30*time.Second)

	// The bridge's MAC, and its link-local address the advertisement
	// leaves from (present once the bridge's port is up).
	h := nsNetlink(t, n1.NS)
	var bridgeMAC string
	harness.Eventually(t, 20*time.Second, "breth1's link-local address", func() error {
		link, err := h.LinkByName("breth1")
		if err != nil {
			return err
		}
		bridgeMAC = link.Attrs().HardwareAddr.String()
		addrs, err := h.AddrList(link, netlink.FAMILY_V6)
		if err != nil {
			return err
		}
		for _, a := range addrs {
			if a.IP.IsLinkLocalUnicast() {
				return nil
			}
		}
		return fmt.Errorf("none yet: %v", addrs)
	})

	stale := func() {
		t.Helper()
		if _, err := harness.Run("ip", "-n", ext.Name, "-6", "neigh", "replace", egressIP6, "lladdr", staleMAC, "dev", "up0", "nud", "stale"); err != nil {
			t.Fatal(err)
		}
	}
	neigh := receiverNeighbour(t, ext, "up0", netip.MustParseAddr(egressIP6))
	announced := func(what string, bursts int) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, fmt.Sprintf("%s: the external host's entry for %s to be breth1's MAC %s", what, egressIP6, bridgeMAC), func() error {
			got, err := neigh()
			if err == nil && got != bridgeMAC {
				err = fmt.Errorf("the entry has %s", got)
			}
			return err
		})
		harness.Eventually(t, 20*time.Second, fmt.Sprintf("%s: %d bursts logged", what, bursts), func() error {
			if n := strings.Count(d.Tail(100000), "announcing IPv6 egress IPs"); n != bursts {
				return fmt.Errorf("%d bursts", n)
			}
			return nil
		})
	}
	status := func(items ...k8sovnv1.EgressIPStatusItem) {
		t.Helper()
		if err := k8sovnv1.WriteEgressIPStatus(c.ctx(), dynamicFor(t, c.kube.Config), "eip6", k8sovnv1.EgressIPStatus{Items: items}); err != nil {
			t.Fatal(err)
		}
	}

	stale()
	c.createEIP("eip6", []string{egressIP6, egressIP4}, map[string]string{"env": "prod"}, nil)
	status(k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: egressIP6}, k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: egressIP4})
	announced("assigned to n1", 1)

	// Away to n2 and back: announced again (the count of bursts says it is
	// the second burst, not a later round of the first, that the entry saw).
	status(k8sovnv1.EgressIPStatusItem{Node: "n2", EgressIP: egressIP6}, k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: egressIP4})
	stale()
	status(k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: egressIP6}, k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: egressIP4})
	announced("moved away and back", 2)

	log := d.Tail(100000)
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "announcing IPv6 egress IPs") && strings.Contains(line, egressIP4) {
			t.Errorf("the IPv4 egress IP announced: %s", line)
		}
		if strings.Contains(line, "cannot announce") {
			t.Errorf("an announcement failed: %s", line)
		}
	}
}
