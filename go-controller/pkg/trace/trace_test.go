package trace

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// ovn-trace's output (OVN 25.03), shortened: a pod's packet to a ClusterIP,
// balanced, then dropped by a NetworkPolicy's ACL on the backend's switch.
const sample = `# tcp,reg14=0x4,dl_src=0a:58:0a:f4:00:03,dl_dst=0a:58:0a:f4:00:01,nw_src=10.244.0.3,nw_dst=10.96.0.10,tp_dst=80

ingress(dp="n1", inport="ns_a")
-------------------------------
 6. ls_in_pre_stateful (northd.c:7762): reg0[2] == 1 && ip4.dst == 10.96.0.10 && tcp.dst == 80, priority 120, uuid 39b025de
    reg4 = 10.96.0.10;
    reg2[0..15] = 80;
    ct_lb_mark;

ct_lb_mark
----------
28. ls_in_l2_lkup (northd.c:10246): eth.dst == 0a:58:0a:f4:00:01, priority 50, uuid 8a542131
    outport = "stor-n1";
    output;

egress(dp="n1", inport="ns_a", outport="stor-n1")
-------------------------------------------------
12. ls_out_apply_port_sec (northd.c:5843): 1, priority 0, uuid 205c355c
    output;
    /* output to "stor-n1", type "patch" */

ingress(dp="ovn_cluster_router", inport="rtos-n1")
--------------------------------------------------
15. lr_in_ip_routing (northd.c:11000): ip4.dst == 10.244.1.0/24, priority 74, uuid 11112222
    ip.ttl--;
    reg0 = ip4.dst;
    outport = "rtos-n2";
    next;

ingress(dp="n2", inport="stor-n2")
----------------------------------
 0. ls_in_check_port_sec (northd.c:9365): 1, priority 50, uuid d9306d17
    next;

egress(dp="n2", inport="stor-n2", outport="ns_db")
--------------------------------------------------
 6. ls_out_acl_eval (northd.c:7449): reg0[7] == 1 && (outport == @np.ns.db && ip4 && tcp.dst == 5432), priority 2001, uuid 3f55d055
    reg8[17] = 1;
    next;
 8. ls_out_acl_action (northd.c:7259): reg8[17] == 1, priority 1000, uuid 1f411eb7
    reg8[16] = 0;
    drop;
`

func TestParseAndExplain(t *testing.T) {
	tr := Parse(sample)
	if tr.Verdict != Dropped || tr.Port != "" || len(tr.Steps) != 7 {
		t.Fatalf("verdict %s at %q, %d steps: %+v", tr.Verdict, tr.Port, len(tr.Steps), tr.Steps)
	}
	name := "ns_db"
	nb := NB{
		ACLs: []nbdb.ACL{{Direction: "to-lport", Priority: 1001, Match: "outport == @np.ns.db && ip4 && tcp.dst == 5432", Action: "drop", Name: &name,
			ExternalIDs: topology.Owner{Type: "NetworkPolicy", Name: "ns/db"}.ExternalIDs()}},
		LBs: []nbdb.LoadBalancer{{Name: "Service_ns/web_TCP_cluster", Vips: map[string]string{"10.96.0.10:80": "10.244.1.5:8080"},
			ExternalIDs: topology.Owner{Type: topology.OwnerService, Name: "ns/web"}.ExternalIDs()}},
		Nodes: map[string]bool{"n1": true, "n2": true},
	}
	var got []string
	for _, d := range Explain(tr, nb) {
		got = append(got, d.Kind+": "+d.Text+" ← "+d.Object)
	}
	want := []string{
		"datapath: enters n1 ← ",
		"balancer: n1 balances 10.96.0.10:80 (Service_ns/web_TCP_cluster) ← Service ns/web",
		"datapath: enters ovn_cluster_router ← ",
		`route: ovn_cluster_router routes it (ip4.dst == 10.244.1.0/24): reg0 = ip4.dst, outport = "rtos-n2" ← `,
		"tunnel: Geneve from n1's chassis to n2's ← ",
		"datapath: enters n2 ← ",
		"acl: to-lport ACL ns_db: drop (outport == @np.ns.db && ip4 && tcp.dst == 5432) ← NetworkPolicy ns/db",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("Explain:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	delivered := Parse(strings.Replace(sample, `    drop;`, "    output;\n    /* output to \"ns_db\", type \"\" */", 1))
	if delivered.Verdict != Delivered || delivered.Port != "ns_db" {
		t.Errorf("delivered: %s at %q", delivered.Verdict, delivered.Port)
	}
	rejected := Parse(sample + "13. ls_in_lb (northd.c:8198): ct.new && ip4.dst == 10.96.0.11 && tcp.dst == 80, priority 120, uuid 678a77a1\n    reject { outport <-> inport; };\n    /* output to \"ns_a\", type \"\" */\n")
	if rejected.Verdict != Rejected || rejected.Port != "" {
		t.Errorf("rejected: %s at %q", rejected.Verdict, rejected.Port)
	}
}

func TestMicroflow(t *testing.T) {
	p := Packet{InPort: "ns_a", SrcMAC: "0a:58:0a:f4:00:03", DstMAC: "0a:58:0a:f4:00:01",
		Src: netip.MustParseAddr("fd00:10:244::3"), Dst: netip.MustParseAddr("fd00:10:96::a"), Proto: "udp", DstPort: 53}
	want := `inport == "ns_a" && eth.src == 0a:58:0a:f4:00:03 && eth.dst == 0a:58:0a:f4:00:01 && ip6.src == fd00:10:244::3 && ip6.dst == fd00:10:96::a && ip.ttl == 64 && udp && udp.src == 33333 && udp.dst == 53`
	if got := p.Microflow(); got != want {
		t.Errorf("Microflow =\n%s\nwant\n%s", got, want)
	}
	p.Proto = "icmp"
	if got := p.Microflow(); !strings.HasSuffix(got, "icmp6 && icmp6.type == 128 && icmp6.code == 0") {
		t.Errorf("ICMPv6: %s", got)
	}
}

// A balancing that takes two flows (the VIP's pre-stateful flow, then its
// balancer stage) is one decision.
func TestExplainTellsABalancingOnce(t *testing.T) {
	out := `ingress(dp="n1", inport="ns_a")
-------------------------------
 6. ls_in_pre_stateful (northd.c:7762): reg0[2] == 1 && ip4.dst == 10.96.0.10 && tcp.dst == 80, priority 120, uuid 39b025de
    ct_lb_mark;
13. ls_in_lb (northd.c:8198): ct.new && ip4.dst == 10.96.0.10 && tcp.dst == 80, priority 120, uuid 678a77a1
    ct_lb_mark(backends=10.244.1.5:8080);
`
	n := 0
	for _, d := range Explain(Parse(out), NB{}) {
		if d.Kind == "balancer" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("%d balancer decisions, want 1", n)
	}
}

// --ipv4/--ipv6 pick the family of a dual-stack trace; a family one end
// lacks is an error naming both ends' addresses.
func TestAddrLikeFamily(t *testing.T) {
	addrs := func(s ...string) []netip.Addr {
		var out []netip.Addr
		for _, a := range s {
			out = append(out, netip.MustParseAddr(a))
		}
		return out
	}
	src := end{ips: addrs("10.244.1.3", "fd00:10:244:1::3")}
	dst := end{ips: addrs("10.244.2.4", "fd00:10:244:2::4")}
	for family, want := range map[int]string{0: "10.244.2.4", 4: "10.244.2.4", 6: "fd00:10:244:2::4"} {
		if got, err := dst.addrLike(src, family); err != nil || got.String() != want {
			t.Errorf("family %d: %v, %v; want %s", family, got, err, want)
		}
	}
	v4only := end{ips: addrs("10.244.2.5")}
	if got, err := v4only.addrLike(src, 6); err == nil || !strings.Contains(err.Error(), "no IPv6 address at both ends") {
		t.Errorf("IPv6 to an IPv4-only destination: %v, %v; want an error", got, err)
	}
}

// The packet as ofproto/trace takes it, in each family.
func TestOpenFlow(t *testing.T) {
	p := Packet{InPort: "ns_a", SrcMAC: "0a:58:0a:f4:00:03", DstMAC: "0a:58:0a:f4:00:01",
		Src: netip.MustParseAddr("10.244.0.3"), Dst: netip.MustParseAddr("10.244.1.3"), Proto: "tcp", DstPort: 8080}
	if got, want := p.OpenFlow("5"), "in_port=5,tcp,tp_src=33333,tp_dst=8080,dl_src=0a:58:0a:f4:00:03,dl_dst=0a:58:0a:f4:00:01,nw_src=10.244.0.3,nw_dst=10.244.1.3,nw_ttl=64"; got != want {
		t.Errorf("IPv4 TCP:\n got %s\nwant %s", got, want)
	}
	p.Src, p.Dst, p.Proto = netip.MustParseAddr("fd00:10:244::3"), netip.MustParseAddr("fd00:10:244:1::3"), "icmp"
	if got, want := p.OpenFlow("5"), "in_port=5,icmp6,icmpv6_type=128,icmpv6_code=0,dl_src=0a:58:0a:f4:00:03,dl_dst=0a:58:0a:f4:00:01,ipv6_src=fd00:10:244::3,ipv6_dst=fd00:10:244:1::3,nw_ttl=64"; got != want {
		t.Errorf("IPv6 ICMP:\n got %s\nwant %s", got, want)
	}
}

// ofproto/trace's last datapath actions decide: a tunnel or a port is
// delivered, drop is dropped, a select group's hash then a recirculation
// is not followed (not dropped); no actions at all is an error.
func TestParseOFProto(t *testing.T) {
	for _, c := range []struct{ out, verdict, tunnel string }{
		{"Datapath actions: ct(zone=5),recirc(0x1)\n===\nDatapath actions: set(tunnel(tun_id=0x2,dst=172.18.0.3,ttl=64,tp_dst=6081,geneve({class=0x102,type=0x80,len=4,0x10002}),flags(df|csum|key))),4\n", Delivered, "172.18.0.3"},
		{"Datapath actions: ct(commit,zone=10,nat(src)),set(eth(src=0a:58:0a:f4:01:01,dst=0a:58:0a:f4:01:03)),tnl_push(tnl_port(5),header(size=58,type=5,eth(dst=02:ce:ff:42:de:4c,src=b2:6c:05:82:22:4d,dl_type=0x0800),ipv4(src=172.30.0.11,dst=172.30.0.12,proto=17,tos=0,ttl=64,frag=0x4000),udp(src=0,dst=6081,csum=0xffff),geneve(crit,vni=0x4,options({class=0x102,type=0x80,len=4,0x10003}))),out_port(1)),2\n", Delivered, "172.30.0.12"},
		{"Datapath actions: ct(zone=5),recirc(0x1)\n===\nDatapath actions: 3\n", Delivered, ""},
		{"Datapath actions: ct(zone=5),recirc(0x1)\n===\nDatapath actions: drop\n", Dropped, ""},
		{"Datapath actions: ct(zone=5),recirc(0x1)\n===\nDatapath actions: hash(l4(0)),recirc(0x1c5)\n", Unfollowed, ""},
	} {
		got, err := parseOFProto(c.out)
		if err != nil || got.Verdict != c.verdict || got.Tunnel != c.tunnel {
			t.Errorf("%q: %+v, %v; want %s, tunnel %q", c.out, got, err, c.verdict, c.tunnel)
		}
	}
	if _, err := parseOFProto("ovs-appctl: cannot connect"); err == nil {
		t.Error("output without datapath actions: no error")
	}
}

// A reply is the answer on the first packet's connection: ports swapped, an
// echo reply for an echo request, in each family.
func TestReplyMicroflow(t *testing.T) {
	p := Packet{InPort: "ns_b", SrcMAC: "0a:58:0a:f4:00:04", DstMAC: "0a:58:0a:f4:00:03",
		Src: netip.MustParseAddr("10.244.0.4"), Dst: netip.MustParseAddr("10.244.0.3"), Proto: "udp", DstPort: 53, Reply: true}
	if got := p.Microflow(); !strings.HasSuffix(got, "udp && udp.src == 53 && udp.dst == 33333") {
		t.Errorf("UDP reply: %s", got)
	}
	if got := p.OpenFlow("4"); !strings.Contains(got, ",udp,tp_src=53,tp_dst=33333,") {
		t.Errorf("UDP reply to ofproto/trace: %s", got)
	}
	p.Proto = "icmp"
	if got := p.Microflow(); !strings.HasSuffix(got, "icmp4 && icmp4.type == 0 && icmp4.code == 0") {
		t.Errorf("ICMP echo reply: %s", got)
	}
	p.Src, p.Dst = netip.MustParseAddr("fd00:10:244::4"), netip.MustParseAddr("fd00:10:244::3")
	if got := p.Microflow(); !strings.HasSuffix(got, "icmp6 && icmp6.type == 129 && icmp6.code == 0") {
		t.Errorf("ICMPv6 echo reply: %s", got)
	}
}
