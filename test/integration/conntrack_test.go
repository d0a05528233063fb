package integration

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The node daemon's conntrack sweep against the kernel's table: in a
// namespace, real UDP datagrams make entries as OVN's zones (zone 5, NATed
// to a live and to a gone backend, over both families) and the host's chain
// (zone 0, a NodePort sent to the ClusterIP, to an old ClusterIP, and not
// NATed at all) would; the sweep removes exactly the stale ones.
func TestConntrackSweepKernel(t *testing.T) {
	n := harness.NewNetNS(t, "ct")
	for _, cmd := range [][]string{
		{"ip", "link", "add", "d0", "type", "veth", "peer", "name", "d1"},
		{"ip", "link", "set", "d0", "up"},
		{"ip", "link", "set", "d1", "up"},
		{"ip", "addr", "add", "10.244.1.5/32", "dev", "d0"},
		{"ip", "addr", "add", "172.18.0.3/32", "dev", "d0"},
		{"ip", "-6", "addr", "add", "fd00:10:244:1::5/128", "dev", "d0", "nodad"},
		{"ip", "route", "add", "10.96.0.0/16", "dev", "d0"},
		{"ip", "route", "add", "10.244.0.0/16", "dev", "d0"},
		{"ip", "-6", "route", "add", "fd00:10:96::/112", "dev", "d0"},
		{"ip", "-6", "route", "add", "fd00:10:244::/48", "dev", "d0"},
		// OVN's zones, as the kernel datapath keeps them: the service range in zone 5.
		{"iptables", "-w", "-t", "raw", "-A", "OUTPUT", "-p", "udp", "-d", "10.96.0.0/16", "-j", "CT", "--zone", "5"},
		{"ip6tables", "-w", "-t", "raw", "-A", "OUTPUT", "-p", "udp", "-d", "fd00:10:96::/112", "-j", "CT", "--zone", "5"},
		dnat("iptables", 40001, "10.96.0.10", 53, "10.244.1.5:5353"),
		dnat("iptables", 40002, "10.96.0.10", 53, "10.244.1.99:5353"),
		dnat("iptables", 40004, "172.18.0.3", 30053, "10.96.0.10:53"),
		dnat("iptables", 40005, "172.18.0.3", 30053, "10.96.0.77:53"),
		dnat("ip6tables", 40011, "fd00:10:96::10", 53, "[fd00:10:244:1::5]:5353"),
		dnat("ip6tables", 40012, "fd00:10:96::10", 53, "[fd00:10:244:1::99]:5353"),
	} {
		if out, err := n.Exec(cmd...); err != nil {
			t.Fatalf("%v: %v %s", cmd, err, out)
		}
	}
	for _, d := range []struct {
		sport int
		dst   string
	}{
		{40001, "10.96.0.10:53"},       // to its backend: kept
		{40002, "10.96.0.10:53"},       // to a pod that is gone: swept
		{40003, "10.96.0.10:53"},       // not NATed: kept
		{40004, "172.18.0.3:30053"},    // host → NodePort → ClusterIP: kept
		{40005, "172.18.0.3:30053"},    // host → NodePort → an old ClusterIP: swept
		{40006, "172.18.0.3:30053"},    // host → NodePort, not NATed (before the rule): swept
		{40007, "10.244.1.99:7000"},    // no frontend: kept
		{40011, "[fd00:10:96::10]:53"}, // IPv6 to its backend: kept
		{40012, "[fd00:10:96::10]:53"}, // IPv6 to a pod that is gone: swept
	} {
		if err := sendFrom(n, d.sport, d.dst); err != nil {
			t.Fatalf("datagram from :%d to %s: %v", d.sport, d.dst, err)
		}
	}
	nsh, err := netns.GetFromPath(n.Path())
	if err != nil {
		t.Fatal(err)
	}
	defer nsh.Close()
	h, err := netlink.NewHandleAt(nsh)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	if got := sourcePorts(t, h); !slices.Equal(got, []int{40001, 40002, 40003, 40004, 40005, 40006, 40007, 40011, 40012}) {
		t.Fatalf("entries before the sweep from ports %v", got)
	}

	v4, v4Slice := udpService("dns", "10.96.0.10", "10.244.1.5")
	v6, v6Slice := udpService("six", "fd00:10:96::10", "fd00:10:244:1::5")
	v6.Spec.Type, v6.Spec.Ports[0].NodePort = corev1.ServiceTypeClusterIP, 0
	self := services.NodeGateway{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")},
		Own: []netip.Addr{netip.MustParseAddr("172.18.0.3")}, Mgmt: []netip.Addr{netip.MustParseAddr("10.244.1.2")}}
	plan := node.NewConntrackPlan([]*corev1.Service{v4, v6}, self, services.AddressPolicy{}, node.NewPeers("", nil, []*discovery.EndpointSlice{v4Slice, v6Slice}))
	swept, err := node.SweepConntrack(h, plan)
	if err != nil {
		t.Fatal(err)
	}
	if got := sourcePorts(t, h); !slices.Equal(got, []int{40001, 40003, 40004, 40007, 40011}) || swept != 4 {
		t.Errorf("after the sweep (%d removed) entries from ports %v; want 40001 40003 40004 40007 40011 left", swept, got)
	}
}

func dnat(cmd string, sport int, dst string, dport int, to string) []string {
	return []string{cmd, "-w", "-t", "nat", "-A", "OUTPUT", "-p", "udp", "-d", dst, "--dport", fmt.Sprint(dport),
		"--sport", fmt.Sprint(sport), "-j", "DNAT", "--to-destination", to}
}

// sendFrom sends one datagram from inside n, from source port sport.
func sendFrom(n harness.NetNS, sport int, dst string) error {
	return ns.WithNetNSPath(n.Path(), func(ns.NetNS) error {
		raddr, err := net.ResolveUDPAddr("udp", dst)
		if err != nil {
			return err
		}
		conn, err := net.DialUDP("udp", &net.UDPAddr{Port: sport}, raddr)
		if err != nil {
			return err
		}
		defer conn.Close()
		_, err = conn.Write([]byte("x"))
		return err
	})
}

// sourcePorts are the client ports of the UDP entries of both families, sorted.
func sourcePorts(t *testing.T, h *netlink.Handle) []int {
	t.Helper()
	var out []int
	for _, fam := range []netlink.InetFamily{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		flows, err := h.ConntrackTableList(netlink.ConntrackTable, fam)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range flows {
			if f.Forward.Protocol == 17 {
				out = append(out, int(f.Forward.SrcPort))
			}
		}
	}
	slices.Sort(out)
	return out
}

// udpService is a NodePort service (53 → 5353, NodePort 30053) with one
// ready endpoint on node n1.
func udpService(name, clusterIP, endpoint string) (*corev1.Service, *discovery.EndpointSlice) {
	proto, port, portName, nodeName, ready := corev1.ProtocolUDP, int32(5353), "dns", "n1", true
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: portName, Protocol: proto, Port: 53, NodePort: 30053}}}}
	addrType := discovery.AddressTypeIPv4
	if netip.MustParseAddr(clusterIP).Is6() {
		addrType = discovery.AddressTypeIPv6
	}
	sl := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-1", Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: addrType, Ports: []discovery.EndpointPort{{Name: &portName, Protocol: &proto, Port: &port}},
		Endpoints: []discovery.Endpoint{{Addresses: []string{endpoint}, NodeName: &nodeName, Conditions: discovery.EndpointConditions{Ready: &ready}}}}
	return svc, sl
}
