package policy

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// The NB rows of an admin policy: a port group of its subject's pods
// (cnp.<name>, anp.<name>, banp.<name>) carrying one ACL per rule (plus one
// per number a named port resolves to) in the policy's tier, and the same
// peer address sets NetworkPolicy shares, plus node address sets
// (nodes.<SHA-256 of the selector>).
//
// Priorities order rules across policies within a tier: a policy of API
// priority p owns AdminRuleSlots priorities below 31000 - p*AdminRuleSlots,
// its rules taking them in order. Priorities 0–1000 and BaselinePriority
// all fit under OVN's 32767.
const (
	adminPriorityTop = 31000
	// AdminRuleSlots is how many rules one policy may have per direction.
	AdminRuleSlots = 30
)

// AdminACLPriority is the OVN priority of rule i of a policy of API
// priority p.
func AdminACLPriority(p int32, i int) int { return adminPriorityTop - int(p)*AdminRuleSlots - i }

// AdminPortGroup is the port group of an admin policy's subject.
func AdminPortGroup(kind, name string) string {
	prefix := map[string]string{KindCNP: "cnp.", KindANP: "anp.", KindBANP: "banp.", KindEF: "ef."}[kind]
	return prefix + identifier(name)
}

// AdminLogging is an admin policy's ACL logging, from its own
// k8s.ovn.org/acl-logging annotation (as upstream OVN-Kubernetes reads it):
// a severity for each action, "" for none.
type AdminLogging struct {
	Accept, Deny, Pass string
	Meter              string
}

func (l AdminLogging) severity(action string) string {
	switch action {
	case ActionAccept:
		return l.Accept
	case ActionDeny:
		return l.Deny
	}
	return l.Pass
}

// ovnAction is an API action as an OVN ACL action: an accepted connection's
// replies are accepted too.
func ovnAction(a string) (string, bool) {
	switch a {
	case ActionAccept:
		return nbdb.ACLActionAllowRelated, true
	case ActionDeny:
		return nbdb.ACLActionDrop, true
	case ActionPass:
		return "pass", true
	}
	return "", false
}

// AdminRows computes an admin policy's rows; Refused says why it has none.
func AdminRows(p *AdminPolicy, resolve Resolver, log AdminLogging, fams topology.Families) Rows {
	pg := AdminPortGroup(p.Kind, p.Name)
	owner := topology.Owner{Type: p.Kind, Name: p.Name}
	subject := p.Subject
	r := Rows{PortGroup: &nbdb.PortGroup{Name: pg, ExternalIDs: owner.ExternalIDs()}, Subject: &subject,
		Problems: append([]string(nil), p.Problems...)}
	if why := adminTooLarge(p); why != "" {
		r.refuse(why)
		return r
	}
	b := builder{owner: owner, pg: pg, aclName: aclName(strings.Replace(pg, ".", ":", 1)),
		target: subject, resolve: resolve, fams: fams, rows: &r, seen: map[string]bool{}}
	for d, rules := range map[Direction][]AdminRule{Ingress: p.Ingress, Egress: p.Egress} {
		for i, rule := range rules {
			where := fmt.Sprintf("%s[%d]", d, i)
			ps := peers{sets: splitUnions(rule.Pods), nodes: rule.Nodes, domains: rule.Domains, blocks: networkGroups(rule.Networks)}
			if ps.empty() {
				continue // peers that all match nothing
			}
			action, ok := ovnAction(rule.Action)
			if !ok {
				r.Problems = append(r.Problems, fmt.Sprintf("%s: action %q is not Accept, Deny or Pass; the rule is left out", where, rule.Action))
				continue
			}
			numbered, named := b.adminPorts(where, rule.Ports)
			b.emit(d, where, ps, len(rule.Ports) == 0, numbered, named, verdict{action: action, tier: p.Tier,
				priority: p.rulePriority(i), severity: log.severity(rule.Action), meter: log.Meter})
		}
	}
	if limit := p.maxACLs(); len(r.ACLs) > limit {
		r.refuse(fmt.Sprintf("%d ACLs (rules times the numbers its named ports resolve to), more than %d; split it into several policies", len(r.ACLs), limit))
	}
	return r
}

// rulePriority is the OVN priority of the policy's rule i.
func (p *AdminPolicy) rulePriority(i int) int {
	if p.Kind == KindEF {
		return efPriorityTop - i
	}
	return AdminACLPriority(p.Priority, i)
}

// maxACLs bounds the ACLs one policy may have: an egress firewall's rules
// have one each.
func (p *AdminPolicy) maxACLs() int {
	if p.Kind == KindEF {
		return MaxEgressFirewallRules
	}
	return MaxACLsPerPolicy
}

// adminTooLarge says why a policy cannot be programmed whole ("" when it can).
func adminTooLarge(p *AdminPolicy) string {
	if p.Kind == KindEF {
		return efTooLarge(p)
	}
	switch {
	case p.Priority < 0 || p.Priority > BaselinePriority:
		return fmt.Sprintf("priority %d is outside 0–%d", p.Priority, MaxAdminPriority)
	case len(p.Ingress) > AdminRuleSlots || len(p.Egress) > AdminRuleSlots:
		return fmt.Sprintf("%d ingress and %d egress rules: at most %d per direction are supported; split it into policies of adjacent priorities",
			len(p.Ingress), len(p.Egress), AdminRuleSlots)
	}
	peers, ports := 0, 0
	for _, r := range append(append([]AdminRule(nil), p.Ingress...), p.Egress...) {
		peers += len(r.Pods) + len(r.Nodes) + len(r.Networks) + len(r.Domains)
		ports += len(r.Ports)
	}
	switch {
	case peers > MaxPeersPerPolicy:
		return fmt.Sprintf("%d peers, more than %d; split it into several policies", peers, MaxPeersPerPolicy)
	case ports > MaxPortsPerPolicy:
		return fmt.Sprintf("%d ports, more than %d; use port ranges or split it", ports, MaxPortsPerPolicy)
	}
	return ""
}

// networkGroups splits CIDRs by family (blockClause matches one family).
func networkGroups(nets []netip.Prefix) [][]netip.Prefix {
	var v4, v6 []netip.Prefix
	for _, n := range nets {
		if n.Addr().Is6() {
			v6 = append(v6, n)
		} else {
			v4 = append(v4, n)
		}
	}
	var out [][]netip.Prefix
	for _, g := range [][]netip.Prefix{v4, v6} {
		if len(g) > 0 {
			out = append(out, g)
		}
	}
	return out
}

// adminPorts sorts a rule's ports into match clauses and named ports; a
// named port without a protocol is resolved for each protocol.
func (b *builder) adminPorts(where string, ports []AdminPort) (numbered []string, named []namedPortRef) {
	for j, p := range ports {
		switch {
		case p.Name != "" && p.Protocol == "":
			for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
				named = append(named, b.namedPort(p.Name, proto))
			}
		case p.Name != "":
			named = append(named, b.namedPort(p.Name, p.Protocol))
		case protoName(p.Protocol) == "":
			b.rows.Problems = append(b.rows.Problems, fmt.Sprintf("%s.ports[%d]: protocol %q is not TCP, UDP or SCTP", where, j, p.Protocol))
		case p.Port == 0:
			numbered = append(numbered, protoName(p.Protocol))
		default:
			numbered = append(numbered, portMatch(p.Protocol, p.Port, p.End))
		}
	}
	return numbered, named
}

// NodeSetRow is a node set's row of one family with these addresses.
func NodeSetRow(s NodeSet, v6 bool, addrs []string) *nbdb.AddressSet {
	ids := topology.Owner{Type: OwnerNodePeers, Name: s.Name()}.ExternalIDs()
	ids[PeersKey] = s.Key()
	ids[FamilyKey] = familyName(v6)
	return &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), v6), Addresses: addrs, ExternalIDs: ids}
}
