package topology

import (
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"

	"net"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func TestMACFromIP(t *testing.T) {
	tests := []struct{ ip, want string }{
		{"10.244.1.5", "0a:58:0a:f4:01:05"},
		{"100.64.0.1", "0a:58:64:40:00:01"},
		{"fd00:10:244:1::5", "0a:58:00:00:00:05"},
	}
	for _, tt := range tests {
		if got := MACFromIP(netip.MustParseAddr(tt.ip)).String(); got != tt.want {
			t.Errorf("MACFromIP(%s) = %s, want %s", tt.ip, got, tt.want)
		}
	}
}

func TestCluster(t *testing.T) {
	rows := Cluster([]netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")})
	if rows.Router.Name != "ovn_cluster_router" || rows.Join.Name != "join" {
		t.Fatalf("names: %s %s", rows.Router.Name, rows.Join.Name)
	}
	if rows.RouterToJoin.Name != "rtoj-ovn_cluster_router" || !reflect.DeepEqual(rows.RouterToJoin.Networks, []string{"100.64.0.1/16"}) || rows.RouterToJoin.MAC != "0a:58:64:40:00:01" {
		t.Errorf("rtoj = %+v", rows.RouterToJoin)
	}
	if rows.JoinToRouter.Name != "jtor-ovn_cluster_router" || rows.JoinToRouter.Type != "router" || rows.JoinToRouter.Options["router-port"] != "rtoj-ovn_cluster_router" {
		t.Errorf("jtor = %+v", rows.JoinToRouter)
	}
	if o, ok := OwnerOf(rows.Router.ExternalIDs); !ok || o.Type != OwnerCluster {
		t.Errorf("router owner = %v %v", o, ok)
	}
}

func TestNode(t *testing.T) {
	subnet := netip.MustParsePrefix("10.244.1.0/24")
	mac, _ := net.ParseMAC("aa:bb:cc:dd:ee:ff")
	tests := []struct {
		name    string
		mac     net.HardwareAddr
		wantMgm string
	}{
		{"derived MAC", nil, "0a:58:0a:f4:01:02 10.244.1.2"},
		{"annotated MAC", mac, "aa:bb:cc:dd:ee:ff 10.244.1.2"},
	}
	for _, tt := range tests {
		rows := Node("node1", []netip.Prefix{subnet}, nil, nil, false, tt.mac, "lbg-uuid")
		if len(rows.Switch.LoadBalancerGroup) != 1 || rows.Switch.LoadBalancerGroup[0] != "lbg-uuid" {
			t.Errorf("%s: switch load_balancer_group = %v", tt.name, rows.Switch.LoadBalancerGroup)
		}
		if rows.Switch.Name != "node1" || rows.Switch.OtherConfig["subnet"] != "10.244.1.0/24" || rows.Switch.OtherConfig["exclude_ips"] != "10.244.1.2" {
			t.Errorf("%s: switch = %+v", tt.name, rows.Switch)
		}
		if rows.RouterToSwitch.Name != "rtos-node1" || rows.RouterToSwitch.MAC != "0a:58:0a:f4:01:01" || !reflect.DeepEqual(rows.RouterToSwitch.Networks, []string{"10.244.1.1/24"}) {
			t.Errorf("%s: rtos = %+v", tt.name, rows.RouterToSwitch)
		}
		if rows.SwitchToRouter.Name != "stor-node1" || rows.SwitchToRouter.Options["router-port"] != "rtos-node1" || rows.SwitchToRouter.Addresses[0] != "router" {
			t.Errorf("%s: stor = %+v", tt.name, rows.SwitchToRouter)
		}
		if rows.Management.Name != "k8s-node1" || rows.Management.Addresses[0] != tt.wantMgm {
			t.Errorf("%s: mgmt = %+v", tt.name, rows.Management)
		}
		if o, _ := OwnerOf(rows.Switch.ExternalIDs); o != (Owner{Type: OwnerNode, Name: "node1"}) {
			t.Errorf("%s: owner = %v", tt.name, o)
		}
	}
}

func TestNodeDualStack(t *testing.T) {
	internal := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48"), netip.MustParsePrefix("100.64.0.0/16")}
	rows := Node("n", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}, internal, nil, false, nil, "g")
	if rows.Switch.OtherConfig["ipv6_prefix"] != "fd00:10:244:1::" {
		t.Errorf("other_config = %v", rows.Switch.OtherConfig)
	}
	if !reflect.DeepEqual(rows.RouterToSwitch.Networks, []string{"10.244.1.1/24", "fd00:10:244:1::1/64"}) {
		t.Errorf("networks = %v", rows.RouterToSwitch.Networks)
	}
	if rows.Management.Addresses[0] != "0a:58:0a:f4:01:02 10.244.1.2 fd00:10:244:1::2" {
		t.Errorf("mgmt = %v", rows.Management.Addresses)
	}
	q := rows.ReplyMark
	if q == nil || q.Direction != nbdb.QoSDirectionFromLport || q.Priority != ReplyMarkPriority || q.Action["mark"] != ReplyPktMark ||
		q.Match != "ct.trk && ct.rpl && ((ip4.src == 10.244.1.0/24 && ip4.dst != 10.244.0.0/16 && ip4.dst != 100.64.0.0/16) || (ip6.src == fd00:10:244:1::/64 && ip6.dst != fd00:10:244::/48))" ||
		q.ExternalIDs[RowIDKey] != ReplyMarkID {
		t.Errorf("reply mark %+v", q)
	}
	if Node("n", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, nil, nil, false, nil, "g").ReplyMark != nil {
		t.Error("a reply mark without the internal ranges")
	}
}

func TestPod(t *testing.T) {
	ip := netip.MustParseAddr("10.244.1.5")
	lsp := Pod(PodInfo{Namespace: "ns", Name: "web", UID: "u-1", Node: "node1", IPs: []netip.Addr{ip}, MAC: MACFromIP(ip)})
	want := "0a:58:0a:f4:01:05 10.244.1.5"
	if lsp.Name != "ns_web" || lsp.Addresses[0] != want || lsp.PortSecurity[0] != want {
		t.Errorf("lsp = %+v", lsp)
	}
	if lsp.Options["requested-chassis"] != "node1" || lsp.Options["iface-id-ver"] != "u-1" {
		t.Errorf("options = %v", lsp.Options)
	}
	if o, _ := OwnerOf(lsp.ExternalIDs); o != (Owner{Type: OwnerPod, Name: "ns/web"}) || lsp.ExternalIDs["namespace"] != "ns" {
		t.Errorf("external_ids = %v", lsp.ExternalIDs)
	}
}

func TestOwnerOfForeignRow(t *testing.T) {
	if _, ok := OwnerOf(map[string]string{OwnerTypeKey: "Pod"}); ok {
		t.Fatal("row without our controller key treated as ours")
	}
	if _, ok := OwnerOf(nil); ok {
		t.Fatal("nil external_ids treated as ours")
	}
}

func TestParseLSPAddress(t *testing.T) {
	tests := []struct {
		in     string
		ok     bool
		nIPs   int
		wantIP string
	}{
		{"0a:58:0a:f4:01:05 10.244.1.5", true, 1, "10.244.1.5"},
		{"0a:58:0a:f4:01:05 10.244.1.5 fd00::5", true, 2, "10.244.1.5"},
		{"router", false, 0, ""},
		{"dynamic", false, 0, ""},
		{"zz 10.244.1.5", false, 0, ""},
		{"0a:58:0a:f4:01:05 nope", false, 0, ""},
	}
	for _, tt := range tests {
		_, ips, ok := ParseLSPAddress(tt.in)
		if ok != tt.ok || len(ips) != tt.nIPs || (ok && ips[0].String() != tt.wantIP) {
			t.Errorf("ParseLSPAddress(%q) = %v, %v", tt.in, ips, ok)
		}
	}
}

func BenchmarkPod(b *testing.B) {
	ip := netip.MustParseAddr("10.244.1.5")
	p := PodInfo{Namespace: "ns", Name: "web", UID: "u-1", Node: "node1", IPs: []netip.Addr{ip}, MAC: MACFromIP(ip)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = Pod(p)
	}
}

func TestGatewayRouterNames(t *testing.T) {
	if GatewayRouter("n1") != "GR_n1" {
		t.Fatal(GatewayRouter("n1"))
	}
	if n, ok := GatewayRouterNode("GR_n1"); !ok || n != "n1" {
		t.Fatal(n, ok)
	}
	for _, bad := range []string{"GR_", "ovn_cluster_router", "gr_n1"} {
		if _, ok := GatewayRouterNode(bad); ok {
			t.Errorf("%q taken for a gateway router", bad)
		}
	}
}

func TestGateway(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:09")
	rows := Gateway(GatewayInput{
		Node: "n1", SystemID: "sys-1",
		JoinIPs: prefixes("100.64.0.2/16"), JoinSubnets: prefixes("100.64.0.0/16"),
		ClusterSubnets: prefixes("10.244.0.0/16"),
		HostSubnets:    prefixes("10.244.1.0/24"),
		PhysicalIPs:    prefixes("172.18.0.2/24"), BridgeMAC: mac, Bridge: "breth0", PhysNet: "physnet",
		DefaultGWs: []netip.Addr{netip.MustParseAddr("172.18.0.1")}, LBGroup: "g",
	})
	if rows.Router.Name != "GR_n1" || rows.Router.Options["chassis"] != "sys-1" || rows.Router.Options["lb_force_snat_ip"] != "router_ip" || rows.Router.LoadBalancerGroup[0] != "g" {
		t.Errorf("router %+v", rows.Router)
	}
	if rows.RouterToJoin.Name != "rtoj-GR_n1" || rows.RouterToJoin.Networks[0] != "100.64.0.2/16" || rows.JoinToRouter.Name != "jtor-GR_n1" || rows.JoinToRouter.Options["router-port"] != "rtoj-GR_n1" {
		t.Errorf("join ports %+v %+v", rows.RouterToJoin, rows.JoinToRouter)
	}
	if rows.External.Name != "ext_n1" || rows.Localnet.Name != "breth0_n1_localnet" || rows.Localnet.Type != "localnet" || rows.Localnet.Options["network_name"] != "physnet" {
		t.Errorf("external %+v %+v", rows.External, rows.Localnet)
	}
	if rows.RouterToExt.Name != "rtoe-GR_n1" || rows.RouterToExt.MAC != "02:00:00:00:00:09" || rows.RouterToExt.Networks[0] != "172.18.0.2/24" || rows.ExtToRouter.Options["router-port"] != "rtoe-GR_n1" {
		t.Errorf("external ports %+v %+v", rows.RouterToExt, rows.ExtToRouter)
	}
	if len(rows.SNATs) != 1 || rows.SNATs[0].LogicalIP != "10.244.0.0/16" || rows.SNATs[0].ExternalIP != "172.18.0.2" || rows.SNATs[0].Type != "snat" {
		t.Errorf("snat %+v", rows.SNATs)
	}
	if len(rows.Routes) != 2 || rows.Routes[0].Nexthop != "100.64.0.1" || rows.Routes[1].IPPrefix != "0.0.0.0/0" || rows.Routes[1].Nexthop != "172.18.0.1" || *rows.Routes[1].OutputPort != "rtoe-GR_n1" {
		t.Errorf("routes %+v", rows.Routes)
	}
	cr := rows.ClusterRoutes
	if len(cr) != 2 || cr[0].IPPrefix != "10.244.1.0/24" || cr[0].Nexthop != "100.64.0.2" || *cr[0].Policy != "src-ip" ||
		cr[1].IPPrefix != "100.64.0.2/32" || cr[1].Nexthop != "100.64.0.2" || cr[1].Policy != nil {
		t.Errorf("cluster routes %+v %+v", cr[0], cr[len(cr)-1])
	}
	ids := map[string]bool{}
	for _, r := range append(rows.Routes, cr...) {
		if ids[r.ExternalIDs[RowIDKey]] {
			t.Errorf("duplicate row id %s", r.ExternalIDs[RowIDKey])
		}
		ids[r.ExternalIDs[RowIDKey]] = true
	}
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// A dual-stack gateway: both families on its ports, SNAT, routes into the
// cluster and a default route per family, and the cluster router's source
// and join routes per family; the cluster router's join port has both.
func TestGatewayDualStack(t *testing.T) {
	mac, _ := net.ParseMAC("02:00:00:00:00:09")
	rows := Gateway(GatewayInput{
		Node: "n1", SystemID: "sys-1",
		JoinIPs: prefixes("100.64.0.2/16", "fd98::2/64"), JoinSubnets: prefixes("100.64.0.0/16", "fd98::/64"),
		ClusterSubnets: prefixes("10.244.0.0/16", "fd00:10:244::/48"),
		HostSubnets:    prefixes("10.244.1.0/24", "fd00:10:244:1::/64"),
		PhysicalIPs:    prefixes("172.18.0.2/24", "fc00:f853:ccd:e793::2/64"), BridgeMAC: mac, Bridge: "breth0", PhysNet: "physnet",
		DefaultGWs: []netip.Addr{netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("fc00:f853:ccd:e793::1")}, LBGroup: "g",
	})
	if !reflect.DeepEqual(rows.RouterToJoin.Networks, []string{"100.64.0.2/16", "fd98::2/64"}) ||
		!reflect.DeepEqual(rows.RouterToExt.Networks, []string{"172.18.0.2/24", "fc00:f853:ccd:e793::2/64"}) {
		t.Errorf("port networks %v, %v", rows.RouterToJoin.Networks, rows.RouterToExt.Networks)
	}
	var got []string
	for _, n := range rows.SNATs {
		got = append(got, n.LogicalIP+" → "+n.ExternalIP)
	}
	for _, r := range rows.Routes {
		got = append(got, "GR "+r.IPPrefix+" via "+r.Nexthop)
	}
	for _, r := range rows.ClusterRoutes {
		got = append(got, "cluster "+r.IPPrefix+" via "+r.Nexthop)
	}
	want := []string{
		"10.244.0.0/16 → 172.18.0.2", "fd00:10:244::/48 → fc00:f853:ccd:e793::2",
		"GR 10.244.0.0/16 via 100.64.0.1", "GR fd00:10:244::/48 via fd98::1",
		"GR 0.0.0.0/0 via 172.18.0.1", "GR ::/0 via fc00:f853:ccd:e793::1",
		"cluster 10.244.1.0/24 via 100.64.0.2", "cluster fd00:10:244:1::/64 via fd98::2",
		"cluster 100.64.0.2/32 via 100.64.0.2", "cluster fd98::2/128 via fd98::2",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NAT and routes\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	ids := map[string]bool{}
	for _, r := range append(rows.Routes, rows.ClusterRoutes...) {
		if ids[r.ExternalIDs[RowIDKey]] {
			t.Errorf("duplicate row id %s", r.ExternalIDs[RowIDKey])
		}
		ids[r.ExternalIDs[RowIDKey]] = true
	}
	if c := Cluster(prefixes("100.64.0.0/16", "fd98::/64")); !reflect.DeepEqual(c.RouterToJoin.Networks, []string{"100.64.0.1/16", "fd98::1/64"}) {
		t.Errorf("cluster router join networks %v", c.RouterToJoin.Networks)
	}
}

// Pod ports are <namespace>_<pod>, and neither part may hold an underscore
// (DNS labels and subdomains), so a name of ours with two underscores, or
// none, can never be taken by a pod.
func TestOurPortNamesCannotBePodPorts(t *testing.T) {
	for _, name := range []string{
		LocalnetPort("breth0", "node1"), LocalnetPort("br_eth0", "n.example.com"),
		ManagementPort("node1"), NodeSwitchToRouterPort("node1"),
	} {
		if strings.Count(name, "_") == 1 {
			t.Errorf("port name %q has the shape of a pod port <namespace>_<pod>", name)
		}
	}
	if got := LocalnetPort("breth0", "node1"); got == PodPort("breth0", "node1") {
		t.Errorf("localnet port %q equals the port of pod breth0/node1", got)
	}
}

func TestNodeHostRoutes(t *testing.T) {
	rows := Node("n", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}, nil,
		[]netip.Addr{netip.MustParseAddr("172.30.0.11"), netip.MustParseAddr("fd00::11")}, false, nil, "g")
	if len(rows.HostRoutes) != 1 || len(rows.HostPolicies) != 0 {
		t.Fatalf("host routes = %v, want one (no IPv6 subnet for the IPv6 address)", rows.HostRoutes)
	}
	r := rows.HostRoutes[0]
	if r.IPPrefix != "172.30.0.11/32" || r.Nexthop != "10.244.1.2" || r.OutputPort == nil || *r.OutputPort != "rtos-n" ||
		r.ExternalIDs[RowIDKey] != "node-ip:172.30.0.11" {
		t.Errorf("host route = %+v (output port %v)", r, r.OutputPort)
	}
	if o, _ := OwnerOf(r.ExternalIDs); o != (Owner{Type: OwnerNode, Name: "n"}) {
		t.Errorf("owner = %v", o)
	}
}

// With a gateway router, the node's addresses are rerouted into its
// management port for its own pods only (a policy on their router port);
// other nodes' pods reach them through their own gateways, so that replies
// to connections a gateway router took in leave through it.
func TestNodeHostPoliciesWithAGateway(t *testing.T) {
	rows := Node("n", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}, nil,
		[]netip.Addr{netip.MustParseAddr("172.30.0.11"), netip.MustParseAddr("fd00::11")}, true, nil, "g")
	if len(rows.HostRoutes) != 0 || len(rows.HostPolicies) != 2 {
		t.Fatalf("routes %v, policies %v: want no route and a policy per family", rows.HostRoutes, rows.HostPolicies)
	}
	want := []struct{ match, nexthop, id string }{
		{`inport == "rtos-n" && ip4.dst == 172.30.0.11`, "10.244.1.2", "node-ip:172.30.0.11"},
		{`inport == "rtos-n" && ip6.dst == fd00::11`, "fd00:10:244:1::2", "node-ip:fd00::11"},
	}
	for i, p := range rows.HostPolicies {
		if p.Match != want[i].match || len(p.Nexthops) != 1 || p.Nexthops[0] != want[i].nexthop || p.Action != "reroute" ||
			p.Priority != HostPolicyPriority || p.ExternalIDs[RowIDKey] != want[i].id {
			t.Errorf("policy %d = %+v, want %+v", i, p, want[i])
		}
	}
}

func TestMatchReferences(t *testing.T) {
	for _, tc := range []struct {
		match     string
		sets, pgs []string
	}{
		{`outport == @mt.a && ip4.src != {$mt.a, $mt_global}`, []string{"mt.a", "mt_global"}, []string{"mt.a"}},
		{`inport == @np.x.y && ip4.dst == $peers.ab12 && ip4.dst == $peers.ab12`, []string{"peers.ab12"}, []string{"np.x.y"}},
		{`ip4.src == 10.0.0.1 && tcp.dst == 80`, nil, nil},
		{`inport == "x@y$z" && outport == @g`, nil, []string{"g"}},
		{`$ || @`, nil, nil},
	} {
		sets, pgs := MatchReferences(tc.match)
		if !slices.Equal(sets, tc.sets) || !slices.Equal(pgs, tc.pgs) {
			t.Errorf("MatchReferences(%q) = %v, %v; want %v, %v", tc.match, sets, pgs, tc.sets, tc.pgs)
		}
	}
	if g := PortGroupOfAddressSet("np.a.b_ip4"); g != "np.a.b" {
		t.Errorf("PortGroupOfAddressSet = %q", g)
	}
	if g := PortGroupOfAddressSet("peers.ab"); g != "" {
		t.Errorf("PortGroupOfAddressSet = %q", g)
	}
}

func TestDBGuard(t *testing.T) {
	if a := DBGuard("n1", nil); a != nil {
		t.Fatalf("a guard without endpoints: %+v", a)
	}
	a := DBGuard("n1", []netip.AddrPort{netip.MustParseAddrPort("10.0.0.10:6642"), netip.MustParseAddrPort("10.0.0.10:6641"),
		netip.MustParseAddrPort("[fd00::10]:6641"), netip.MustParseAddrPort("10.0.0.10:6641")})
	want := "(ip4.dst == 10.0.0.10 && tcp.dst == 6641) || (ip4.dst == 10.0.0.10 && tcp.dst == 6642) || (ip6.dst == fd00::10 && tcp.dst == 6641)"
	if a.Match != want || a.Action != "drop" || a.Direction != "from-lport" || a.Priority <= ACLPriorityAlways || a.Options["apply-after-lb"] != "true" {
		t.Fatalf("guard %+v\nwant match %q, a drop from pods above every tier, after load balancing", a, want)
	}
}
