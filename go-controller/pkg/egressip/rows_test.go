package egressip

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func addrs(s ...string) []netip.Addr {
	var out []netip.Addr
	for _, a := range s {
		out = append(out, netip.MustParseAddr(a))
	}
	return out
}

// Two egress IPs of one family on two nodes: the pods' traffic is shared
// between both nodes' gateway routers (one reroute with both next hops),
// each SNATing every pod to its own egress IP; an IPv6 egress IP on one of
// them serves the pods' IPv6 addresses.
func TestComputeRows(t *testing.T) {
	p := Plan{Name: "prod-web",
		Assignments: []Assignment{{IP: netip.MustParseAddr("172.18.0.100"), Node: "n2"}, {IP: netip.MustParseAddr("172.18.0.101"), Node: "n3"},
			{IP: netip.MustParseAddr("fc00::100"), Node: "n2"}},
		Pods:     []Pod{{Namespace: "prod", Name: "a", IPs: addrs("10.244.1.5", "fd00:10:244:1::5")}, {Namespace: "prod", Name: "b", IPs: addrs("10.244.2.7")}},
		NextHops: map[string][]netip.Addr{"n2": addrs("100.64.0.3", "fd98::3"), "n3": addrs("100.64.0.4", "fd98::4")},
	}
	r := Compute(p, topology.Families{V4: true, V6: true})
	if len(r.Sets) != 2 || r.Sets[0].Name != "eip.prod_web" || strings.Join(r.Sets[0].Addresses, ",") != "10.244.1.5,10.244.2.7" ||
		r.Sets[1].Name != "eip.prod_web_v6" || strings.Join(r.Sets[1].Addresses, ",") != "fd00:10:244:1::5" {
		t.Errorf("sets %+v %+v", r.Sets[0], r.Sets[1])
	}
	if len(r.Reroutes) != 2 {
		t.Fatalf("reroutes %+v", r.Reroutes)
	}
	v4, v6 := r.Reroutes[0], r.Reroutes[1]
	if v4.Priority != ReroutePriority || v4.Match != "ip4.src == $eip.prod_web" || v4.Action != nbdb.LogicalRouterPolicyActionReroute ||
		strings.Join(v4.Nexthops, ",") != "100.64.0.3,100.64.0.4" || v4.ExternalIDs[topology.RowIDKey] != "egressip/prod-web/reroute/ip4" {
		t.Errorf("IPv4 reroute %+v", v4)
	}
	if v6.Match != "ip6.src == $eip.prod_web_v6" || strings.Join(v6.Nexthops, ",") != "fd98::3" {
		t.Errorf("IPv6 reroute %+v", v6)
	}
	snat := func(node string) string {
		var out []string
		for _, n := range r.SNATs[node] {
			out = append(out, n.LogicalIP+">"+n.ExternalIP)
			if n.Type != nbdb.NATTypeSNAT || n.ExternalIDs[topology.OwnerTypeKey] != OwnerEgressIP || n.ExternalIDs[topology.OwnerNameKey] != "prod-web" {
				t.Errorf("NAT %+v", n)
			}
		}
		return strings.Join(out, ",")
	}
	if got := snat("n2"); got != "10.244.1.5>172.18.0.100,10.244.2.7>172.18.0.100,fd00:10:244:1::5>fc00::100" {
		t.Errorf("GR_n2 SNATs %s", got)
	}
	if got := snat("n3"); got != "10.244.1.5>172.18.0.101,10.244.2.7>172.18.0.101" {
		t.Errorf("GR_n3 SNATs %s", got)
	}
}

// No egress IP of a family is assigned: no reroute of that family (the
// pods leave as any pod), and no egress IP at all gives an empty set only.
func TestComputeWithoutAssignments(t *testing.T) {
	p := Plan{Name: "x", Assignments: []Assignment{{IP: netip.MustParseAddr("172.18.0.100"), Node: "n2"}},
		Pods: []Pod{{IPs: addrs("10.244.1.5", "fd00::5")}}, NextHops: map[string][]netip.Addr{"n2": addrs("100.64.0.3")}}
	r := Compute(p, topology.Families{V4: true, V6: true})
	if len(r.Reroutes) != 1 || !strings.HasPrefix(r.Reroutes[0].Match, "ip4.") || len(r.SNATs["n2"]) != 1 {
		t.Errorf("reroutes %+v SNATs %+v", r.Reroutes, r.SNATs)
	}
	none := Compute(Plan{Name: "x", Pods: p.Pods}, topology.IPv4Only)
	if len(none.Reroutes) != 0 || len(none.SNATs) != 0 || len(none.Sets) != 1 {
		t.Errorf("unassigned: %+v", none)
	}
}

func TestNoReroutes(t *testing.T) {
	got := NoReroutes([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")},
		[]netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")})
	var matches []string
	for _, p := range got {
		if p.Priority != NoReroutePriority || p.Action != nbdb.LogicalRouterPolicyActionAllow {
			t.Errorf("%+v", p)
		}
		matches = append(matches, p.Match)
	}
	want := []string{
		"pkt.mark == 42",
		"ip4.src == 10.244.0.0/16 && ip4.dst == 10.244.0.0/16",
		"ip4.src == 10.244.0.0/16 && ip4.dst == 100.64.0.0/16",
		"ip4.src == 10.244.0.0/16 && ip4.dst == $egressip.nodes",
		"ip6.src == fd00:10:244::/48 && ip6.dst == fd00:10:244::/48",
		"ip6.src == fd00:10:244::/48 && ip6.dst == fd98::/64",
		"ip6.src == fd00:10:244::/48 && ip6.dst == $egressip.nodes_v6",
	}
	if strings.Join(matches, "\n") != strings.Join(want, "\n") {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(matches, "\n"), strings.Join(want, "\n"))
	}
	if ReroutePriority >= NoReroutePriority || NoReroutePriority >= topology.HostPolicyPriority {
		t.Errorf("priorities: reroute %d, no-reroute %d, host %d", ReroutePriority, NoReroutePriority, topology.HostPolicyPriority)
	}
}
