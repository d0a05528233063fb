package harness

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The IP families a cluster in a box runs with, as Kubernetes names them.
const (
	IPv4 = corev1.IPv4Protocol
	IPv6 = corev1.IPv6Protocol
)

// AddressPlan is one IP family's ranges in a cluster in a box: the
// master's and the API server's flags, and the addresses of the nodes on
// the underlay and on the external (gateway) network.
type AddressPlan struct {
	Family        corev1.IPFamily
	ClusterSubnet string // CIDR/HOSTLEN, as --cluster-subnet takes it
	ServiceCIDR   string
	JoinSubnet    string
	// Underlay carries the tunnels; node i (from 1) is its .10+i (::1i).
	Underlay netip.Prefix
	// External is the network of the nodes' shared gateways; the external
	// host is its .1 (::1), node i its .10+i (::1i).
	External netip.Prefix
}

// Plans are the ranges of each family: IPv4 as the harness always had
// them, IPv6 as the dual-stack integration tests and the cluster in a box
// use them.
var Plans = map[corev1.IPFamily]AddressPlan{
	IPv4: {Family: IPv4, ClusterSubnet: "10.244.0.0/16/24", ServiceCIDR: "10.96.0.0/16", JoinSubnet: "100.64.0.0/16",
		Underlay: netip.MustParsePrefix("172.30.0.0/24"), External: netip.MustParsePrefix("172.18.0.0/24")},
	IPv6: {Family: IPv6, ClusterSubnet: "fd00:10:244::/48/64", ServiceCIDR: "fd00:10:96::/112", JoinSubnet: "fd98::/64",
		Underlay: netip.MustParsePrefix("fd00:172:30::/64"), External: netip.MustParsePrefix("fc00:f853::/64")},
}

// ClusterCIDR is the pod range of the plan, without the host length.
func (p AddressPlan) ClusterCIDR() netip.Prefix {
	return netip.MustParsePrefix(p.ClusterSubnet[:strings.LastIndex(p.ClusterSubnet, "/")])
}

// Host is address number i of a prefix: .i for IPv4, ::i (i written in
// decimal digits, as the IPv4 address reads) for IPv6.
func Host(p netip.Prefix, i int) netip.Addr {
	if p.Addr().Is4() {
		b := p.Masked().Addr().As4()
		b[3] = byte(i)
		return netip.AddrFrom4(b)
	}
	base := strings.TrimSuffix(p.Masked().Addr().String(), ":")
	return netip.MustParseAddr(fmt.Sprintf("%s:%d", base, i))
}

// Family is an address's IP family.
func Family(a netip.Addr) corev1.IPFamily {
	if a.Is4() {
		return IPv4
	}
	return IPv6
}

// Of is the address of the family in addrs (invalid when there is none).
func Of(addrs []netip.Addr, f corev1.IPFamily) netip.Addr {
	for _, a := range addrs {
		if Family(a) == f {
			return a
		}
	}
	return netip.Addr{}
}

// ClusterOptions say how NewClusterWith builds a cluster.
type ClusterOptions struct {
	// Families are the cluster's IP families, the primary first (nil:
	// IPv4). The master, the node daemons and the API server get the
	// ranges of Plans for them; the underlay, the Node objects' InternalIPs
	// and the gateways have an address of each.
	Families []corev1.IPFamily
	// Gateway gives every node added a shared gateway: a NIC eth1 on an
	// external network (Cluster.External) moved onto breth1 by
	// `ovnkube nics-to-bridge`, which the node daemon is started with.
	Gateway bool
	// MasterArgs are further `ovnkube master` flags.
	MasterArgs []string
	// CRDs installs dist/kubernetes's CustomResourceDefinitions before the
	// master starts (it follows the kinds served then).
	CRDs bool
	// Zones is ZonesPerNode for zone mode (OVN interconnection): no
	// central OVN; every node added gets a zone of its own (its NB, SB,
	// northd and ovn-ic, and `ovnkube master --zone`), joined through an
	// Interconnect; `ovnkube cluster-manager` allocates the host subnets
	// and keeps the transit switch. Empty: central mode.
	Zones string
	// ZoneOf, in zone mode, names the zone of each node added (nil: the
	// node's own name, a zone per node); nodes of one zone share its OVN
	// and its master.
	ZoneOf func(node string) string
}

// ZonesPerNode is ClusterOptions.Zones for a zone per node.
const ZonesPerNode = "per-node"

func (o ClusterOptions) families() []corev1.IPFamily {
	if len(o.Families) == 0 {
		return []corev1.IPFamily{IPv4}
	}
	return o.Families
}

// rangeFlags are --cluster-subnet, --service-cidr (and, for the master,
// --join-subnet) for the families, the primary first.
func rangeFlags(families []corev1.IPFamily, join bool) []string {
	var cluster, service, joins []string
	for _, f := range families {
		p := Plans[f]
		cluster, service, joins = append(cluster, p.ClusterSubnet), append(service, p.ServiceCIDR), append(joins, p.JoinSubnet)
	}
	out := []string{"--cluster-subnet", strings.Join(cluster, ","), "--service-cidr", strings.Join(service, ",")}
	if join {
		out = append(out, "--join-subnet", strings.Join(joins, ","))
	}
	return out
}

// serviceRanges is the API server's --service-cluster-ip-range for the families.
func serviceRanges(families []corev1.IPFamily) []string {
	var out []string
	for _, f := range families {
		out = append(out, Plans[f].ServiceCIDR)
	}
	return out
}

// ExternalNetwork is the network outside the cluster that the nodes'
// shared gateways are on: a Linux bridge in a namespace of its own, whose
// namespace is also the external host (the .1 and ::1 of each family's
// External range). It has no route to the pod or service ranges: a pod's
// packet is answered only when the gateway router gave it the node's
// address.
type ExternalNetwork struct {
	NS       NetNS
	Families []corev1.IPFamily
	ports    int
}

// NewExternalNetwork creates the external host with an address of each family.
func NewExternalNetwork(t T, families ...corev1.IPFamily) *ExternalNetwork {
	t.Helper()
	x := &ExternalNetwork{NS: NewNetNS(t, "ext"), Families: families}
	cmds := [][]string{
		{"ip", "-n", x.NS.Name, "link", "add", "br0", "type", "bridge"},
		// The external host computes its checksums (a bridge and a veth
		// leave them to "hardware", which OVS's userspace conntrack refuses).
		{"ip", "netns", "exec", x.NS.Name, "ethtool", "-K", "br0", "tx", "off"},
		{"ip", "-n", x.NS.Name, "link", "set", "br0", "up"},
	}
	for _, f := range families {
		cmds = append(cmds, addrCmd(x.NS.Name, "br0", netip.PrefixFrom(x.Host(f), Plans[f].External.Bits())))
	}
	for _, args := range cmds {
		if _, err := Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return x
}

// Host is the external host's address of a family.
func (x *ExternalNetwork) Host(f corev1.IPFamily) netip.Addr { return Host(Plans[f].External, 1) }

// Attach gives the node a NIC on the external network with address number
// i of each family and default routes through the external host.
func (x *ExternalNetwork) Attach(t T, n *Node, nic string, i int) []netip.Prefix {
	t.Helper()
	x.ports++
	peer := fmt.Sprintf("x%d", x.ports)
	cmds := [][]string{
		{"ip", "link", "add", nic, "netns", n.NS.Name, "type", "veth", "peer", "name", peer, "netns", x.NS.Name},
		{"ip", "netns", "exec", x.NS.Name, "ethtool", "-K", peer, "tx", "off"},
		{"ip", "-n", x.NS.Name, "link", "set", peer, "master", "br0", "up"},
		{"ip", "-n", n.NS.Name, "link", "set", nic, "up"},
	}
	var addrs []netip.Prefix
	for _, f := range x.Families {
		a := netip.PrefixFrom(Host(Plans[f].External, 10+i), Plans[f].External.Bits())
		addrs = append(addrs, a)
		cmds = append(cmds, addrCmd(n.NS.Name, nic, a))
	}
	for _, f := range x.Families {
		cmds = append(cmds, []string{"ip", "-n", n.NS.Name, familyFlag(f), "route", "add", "default", "via", x.Host(f).String()})
	}
	for _, args := range cmds {
		if _, err := Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return addrs
}

// SharedGateway moves the node's NIC onto its OVS bridge br<NIC> with
// `ovnkube nics-to-bridge` (addresses and default routes included), as a
// node is prepared for a shared gateway; the node daemon is then started
// with --bridge-interface br<NIC>.
func SharedGateway(t T, n *Node, nic string) string {
	t.Helper()
	out, err := n.NS.Exec(Binary(t, "ovnkube"), "nics-to-bridge", "--ovs-address", n.OVSAddress(), "--datapath-type", "netdev", nic)
	if err != nil {
		t.Fatalf("nics-to-bridge %s on %s: %v\n%s", nic, n.Name, err, out)
	}
	return "br" + nic
}

// addrCmd adds an address to a device in a namespace; IPv6 addresses skip
// duplicate address detection, so they are usable at once.
func addrCmd(netns, dev string, a netip.Prefix) []string {
	args := []string{"ip", "-n", netns, "addr", "add", a.String(), "dev", dev}
	if a.Addr().Is6() {
		args = append(args, "nodad")
	}
	return args
}

func familyFlag(f corev1.IPFamily) string {
	if f == IPv6 {
		return "-6"
	}
	return "-4"
}
