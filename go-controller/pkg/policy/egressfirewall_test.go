package policy

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

var efClusterSubnets = []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10:244::/48")}

func egressFirewall(ns string, rules ...k8sovnv1.EgressFirewallRule) *k8sovnv1.EgressFirewall {
	return &k8sovnv1.EgressFirewall{ObjectMeta: metav1.ObjectMeta{Name: k8sovnv1.EgressFirewallName, Namespace: ns},
		Spec: k8sovnv1.EgressFirewallSpec{Egress: rules}}
}

func efRule(typ k8sovnv1.EgressFirewallRuleType, to k8sovnv1.EgressFirewallDestination, ports ...k8sovnv1.EgressFirewallPort) k8sovnv1.EgressFirewallRule {
	return k8sovnv1.EgressFirewallRule{Type: typ, To: to, Ports: ports}
}

// An egress firewall is tier-0 egress ACLs on its namespace's port group,
// first match deciding: Allow passes to the later tiers, Deny drops, and no
// destination reaches into the cluster's pod subnets.
func TestEgressFirewallRows(t *testing.T) {
	allow, deny := k8sovnv1.EgressFirewallRuleAllow, k8sovnv1.EgressFirewallRuleDeny
	ef := egressFirewall("tenant-a",
		efRule(allow, k8sovnv1.EgressFirewallDestination{CIDRSelector: "1.2.3.0/24"}),
		efRule(allow, k8sovnv1.EgressFirewallDestination{DNSName: "WWW.OpenvSwitch.org."}),
		efRule(allow, k8sovnv1.EgressFirewallDestination{CIDRSelector: "4.5.6.0/24"}, k8sovnv1.EgressFirewallPort{Protocol: "UDP", Port: 55}),
		efRule(allow, k8sovnv1.EgressFirewallDestination{NodeSelector: sel("region", "east")}, k8sovnv1.EgressFirewallPort{Protocol: "TCP"}),
		efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: "10.0.0.0/8"}),
		efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: "::/0"}, k8sovnv1.EgressFirewallPort{Protocol: "TCP", Port: 443}, k8sovnv1.EgressFirewallPort{Protocol: "SCTP", Port: 9}),
	)
	r := AdminRows(FromEF(ef, efClusterSubnets), noResolve, AdminLogging{}, topology.Families{V4: true, V6: true})
	if r.Refused != "" || len(r.Problems) > 0 {
		t.Fatalf("refused %q, problems %v", r.Refused, r.Problems)
	}
	if r.PortGroup.Name != "ef.tenant_a" || r.PortGroup.ExternalIDs[topology.OwnerTypeKey] != KindEF || r.PortGroup.ExternalIDs[topology.OwnerNameKey] != "tenant-a" {
		t.Errorf("port group %s %v", r.PortGroup.Name, r.PortGroup.ExternalIDs)
	}
	dns, east := DomainSet{Domain: "www.openvswitch.org"}.Name(), nodeSet("region", "east")
	// 10.0.0.0/8 less 10.244.0.0/16: the prefixes around it.
	var tenEight []string
	for _, p := range subtractPrefixes(netip.MustParsePrefix("10.0.0.0/8"), efClusterSubnets[:1]) {
		tenEight = append(tenEight, p.String())
	}
	slices.Sort(tenEight)
	if len(tenEight) != 8 {
		t.Fatalf("10.0.0.0/8 less a /16 should be 8 prefixes, got %v", tenEight)
	}
	want := []aclView{
		{"egress[0]/ports", "from-lport", "pass", "", 30000, "inport == @ef.tenant_a && ip4.dst == 1.2.3.0/24"},
		{"egress[1]/ports", "from-lport", "pass", "", 29999, "inport == @ef.tenant_a && (ip4.dst == $" + dns + " || ip6.dst == $" + dns + "_v6)"},
		{"egress[2]/ports", "from-lport", "pass", "", 29998, "inport == @ef.tenant_a && ip4.dst == 4.5.6.0/24 && udp && udp.dst == 55"},
		{"egress[3]/ports", "from-lport", "pass", "", 29997, "inport == @ef.tenant_a && (ip4.dst == $" + east + " || ip6.dst == $" + east + "_v6) && tcp"},
		{"egress[4]/ports", "from-lport", "drop", "", 29996, "inport == @ef.tenant_a && ip4.dst == {" + strings.Join(tenEight, ", ") + "}"},
	}
	got := viewACLs(r.ACLs)
	if len(got) != 6 {
		t.Fatalf("got %d ACLs, want 6:\n%v", len(got), got)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("ACL %d:\n got %+v\nwant %+v", i, got[i], w)
		}
	}
	// ::/0 less the /48: 48 prefixes; check the ends rather than list them.
	last := got[5]
	if last.id != "egress[5]/ports" || last.action != "drop" || last.priority != 29995 || !strings.HasPrefix(last.match, "inport == @ef.tenant_a && ip6.dst == {") ||
		strings.Contains(last.match, "fd00:10:244::/48") || !strings.HasSuffix(last.match, "&& ((tcp && tcp.dst == 443) || (sctp && sctp.dst == 9))") {
		t.Errorf("ACL 5: %+v", last)
	}
	if !slices.Equal(r.DomainSets, []DomainSet{{Domain: "www.openvswitch.org"}}) || len(r.NodeSets) != 1 || r.NodeSets[0].Name() != east {
		t.Errorf("sets: domains %v nodes %v", r.DomainSets, r.NodeSets)
	}
	for _, a := range r.ACLs {
		if a.Options["apply-after-lb"] != "true" {
			t.Errorf("%s: not after load balancing: %v", a.ExternalIDs[ACLIDKey], a.Options)
		}
	}
}

// What cannot be programmed is left out and said; a firewall past its
// limit is refused whole.
func TestEgressFirewallProblemsAndLimits(t *testing.T) {
	allow, deny := k8sovnv1.EgressFirewallRuleAllow, k8sovnv1.EgressFirewallRuleDeny
	ef := egressFirewall("b",
		efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: "10.244.3.0/24"}),
		efRule(allow, k8sovnv1.EgressFirewallDestination{DNSName: "*.bad_name.com"}),
		efRule("Maybe", k8sovnv1.EgressFirewallDestination{CIDRSelector: "1.1.1.1/32"}),
		efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: "not-a-cidr"}),
		efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: "8.8.8.8/32"}),
	)
	r := AdminRows(FromEF(ef, efClusterSubnets), noResolve, AdminLogging{}, topology.Families{V4: true})
	if len(r.Problems) != 4 {
		t.Errorf("problems %q, want 4 (inside the cluster, DNS name, type, CIDR)", r.Problems)
	}
	for _, want := range []string{"egress[0].to.cidrSelector", "egress[1].to.dnsName", "egress[2]: type", "egress[3].to.cidrSelector"} {
		if !slices.ContainsFunc(r.Problems, func(p string) bool { return strings.HasPrefix(p, want) }) {
			t.Errorf("no problem about %s in %q", want, r.Problems)
		}
	}
	// Only the last rule has rows, at its own index's priority.
	if got := viewACLs(r.ACLs); len(got) != 1 || got[0].priority != 29996 || got[0].match != "inport == @ef.b && ip4.dst == 8.8.8.8/32" {
		t.Errorf("ACLs %+v", got)
	}
	var rules []k8sovnv1.EgressFirewallRule
	for i := range MaxEgressFirewallRules + 1 {
		rules = append(rules, efRule(deny, k8sovnv1.EgressFirewallDestination{CIDRSelector: fmt.Sprintf("1.%d.%d.0/24", i/256, i%256)}))
	}
	big := AdminRows(FromEF(egressFirewall("c", rules...), efClusterSubnets), noResolve, AdminLogging{}, topology.Families{V4: true})
	if big.Refused == "" || len(big.ACLs) != 0 {
		t.Errorf("%d rules: refused %q, %d ACLs", len(rules), big.Refused, len(big.ACLs))
	}
	full := AdminRows(FromEF(egressFirewall("c", rules[:MaxEgressFirewallRules]...), efClusterSubnets), noResolve, AdminLogging{}, topology.Families{V4: true})
	if full.Refused != "" || len(full.ACLs) != MaxEgressFirewallRules || full.ACLs[len(full.ACLs)-1].Priority != efPriorityTop-MaxEgressFirewallRules+1 {
		t.Errorf("%d rules: refused %q, %d ACLs", MaxEgressFirewallRules, full.Refused, len(full.ACLs))
	}
}

// Domain name peers of admin policies share the firewall's sets; a
// wildcard is a set of its own (what the cluster's DNS answered for names
// under it), and says it matches nothing when the master has no dnstap
// stream; a malformed name is a problem, not a match-all.
func TestAdminDomainNames(t *testing.T) {
	p := &AdminPolicy{Kind: KindCNP, Name: "dns"}
	var rule AdminRule
	p.addDomains(&rule, "egress[0].to[0].domainNames", []string{"Example.COM", "*.Example.com", "bad_name.com", "*.*.x.com"})
	if !slices.Equal(rule.Domains, []DomainSet{{Domain: "example.com"}, {Domain: "*.example.com"}}) || len(p.Problems) != 2 {
		t.Errorf("domains %v problems %q", rule.Domains, p.Problems)
	}
	p.Egress = []AdminRule{rule}
	if why := wildcardProblem(p); !strings.Contains(why, `"*.example.com"`) || !strings.Contains(why, "--dns-tap-address") {
		t.Errorf("wildcard problem %q", why)
	}
	p.Egress[0].Domains = p.Egress[0].Domains[:1]
	if why := wildcardProblem(p); why != "" {
		t.Errorf("wildcard problem without a wildcard: %q", why)
	}
}
