package policy

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
)

// EgressFirewall (k8s.ovn.org/v1, upstream OVN-Kubernetes' schema): ordered
// Allow and Deny rules on what a namespace's pods send out of the cluster,
// to CIDRs, DNS names or nodes, on some ports or all. It is one more kind
// of AdminPolicy for the same engine:
//
//   - its subject is the namespace's pods (port group ef.<namespace>);
//   - its rules are egress ACLs in tier 0, the cluster's own, so they come
//     before admin policies and NetworkPolicy: Deny is a drop, Allow a pass
//     (an allowed connection still needs what the later tiers say: a
//     firewall never opens what a policy closes), and the first matching
//     rule decides (rule i has priority efPriorityTop - i);
//   - its destinations leave out the cluster's pod subnets (and a DNS
//     name's set the addresses in them): it judges only traffic leaving
//     the cluster, which includes the nodes' addresses (the API server's
//     too, as upstream's does).
//
// Tier 0 rows need ACL tiers (pass); on an NB without them the firewall is
// reported as not applied, as admin policies are.

// KindEF is the owner type of an egress firewall's rows.
const KindEF = "EgressFirewall"

// Priorities of egress firewall rules: below the database guard, one per
// rule, down to efPriorityTop - MaxEgressFirewallRules + 1.
const efPriorityTop = 30000

// MaxEgressFirewallRules is how many rules one firewall may have (the
// CRD's limit, as upstream's).
const MaxEgressFirewallRules = 8000

// FromEF converts a namespace's EgressFirewall; clusterSubnets are the pod
// subnets its CIDRs leave out.
func FromEF(ef *k8sovnv1.EgressFirewall, clusterSubnets []netip.Prefix) *AdminPolicy {
	p := &AdminPolicy{Kind: KindEF, Name: ef.Namespace, Subject: PeerSet{Namespace: ef.Namespace, Pods: labels.Everything()}}
	for i, r := range ef.Spec.Egress {
		where := fmt.Sprintf("egress[%d]", i)
		var rule AdminRule
		switch r.Type {
		case k8sovnv1.EgressFirewallRuleAllow:
			rule.Action = ActionPass
		case k8sovnv1.EgressFirewallRuleDeny:
			rule.Action = ActionDeny
		default:
			p.Problems = append(p.Problems, fmt.Sprintf("%s: type %q is neither Allow nor Deny; the rule is left out", where, r.Type))
			p.Egress = append(p.Egress, AdminRule{})
			continue
		}
		switch to := r.To; {
		case to.CIDRSelector != "":
			p.addEFNetwork(&rule, where+".to.cidrSelector", to.CIDRSelector, clusterSubnets)
		case to.DNSName != "":
			p.addDomains(&rule, where+".to.dnsName", []string{to.DNSName})
		case to.NodeSelector != nil:
			p.addNodes(&rule, where+".to", to.NodeSelector)
		default:
			p.Problems = append(p.Problems, where+".to: no destination; the rule matches nothing")
		}
		rule.Ports = efPorts(r.Ports)
		p.Egress = append(p.Egress, rule)
	}
	return p
}

// addEFNetwork adds a CIDR less the cluster's pod subnets.
func (p *AdminPolicy) addEFNetwork(r *AdminRule, where, cidr string, clusterSubnets []netip.Prefix) {
	pfx, err := netip.ParsePrefix(cidr)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("%s: %q is not a CIDR; the rule matches nothing", where, cidr))
		return
	}
	var inside []netip.Prefix
	for _, s := range clusterSubnets {
		if s.Addr().Is6() == pfx.Addr().Is6() {
			inside = append(inside, s)
		}
	}
	out := subtractPrefixes(pfx.Masked(), inside)
	if len(out) == 0 {
		p.Problems = append(p.Problems, fmt.Sprintf("%s: %s is inside the cluster's pod subnets, which an egress firewall does not judge; the rule matches nothing", where, cidr))
	}
	r.Networks = append(r.Networks, out...)
}

// efPorts converts a rule's ports: a protocol without a port is every port
// of it.
func efPorts(ps []k8sovnv1.EgressFirewallPort) []AdminPort {
	var out []AdminPort
	for _, p := range ps {
		out = append(out, AdminPort{Protocol: corev1.Protocol(p.Protocol), Port: p.Port})
	}
	return out
}

// efTooLarge says why a firewall cannot be programmed whole ("" when it can).
func efTooLarge(p *AdminPolicy) string {
	ports := 0
	for _, r := range p.Egress {
		ports += len(r.Ports)
	}
	switch {
	case len(p.Egress) > MaxEgressFirewallRules:
		return fmt.Sprintf("%d rules, more than %d", len(p.Egress), MaxEgressFirewallRules)
	case ports > MaxEgressFirewallRules:
		return fmt.Sprintf("%d ports, more than %d; use fewer rules with ports", ports, MaxEgressFirewallRules)
	}
	return ""
}
