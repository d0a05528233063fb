package policy

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"

	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
)

// Cluster-wide admin policy: the network-policy-api's ClusterNetworkPolicy
// (v1alpha2, tiers Admin and Baseline) and its predecessors
// AdminNetworkPolicy and BaselineAdminNetworkPolicy (v1alpha1). Each API
// generation is converted here into one AdminPolicy, and adminrows.go turns
// that into rows with the same builder NetworkPolicy uses: a new generation
// is a converter, not a second engine.

// The kinds of admin policy, which are also the owner types of their rows.
const (
	KindCNP  = "ClusterNetworkPolicy"
	KindANP  = "AdminNetworkPolicy"
	KindBANP = "BaselineAdminNetworkPolicy"
)

// Rule actions, in ClusterNetworkPolicy's words (AdminNetworkPolicy's
// Allow is Accept).
const (
	ActionAccept = "Accept"
	ActionDeny   = "Deny"
	ActionPass   = "Pass"
)

// BaselinePriority is the priority BaselineAdminNetworkPolicy (which has
// none) takes in the Baseline tier: after every ClusterNetworkPolicy there.
const BaselinePriority = MaxAdminPriority + 1

// MaxAdminPriority is the APIs' largest priority (both allow 0–1000).
const MaxAdminPriority = 1000

// AdminPolicy is one cluster-wide policy of either API generation.
type AdminPolicy struct {
	Kind, Name string
	// Tier is TierAdmin or TierBaseline; Priority orders policies within
	// it, lowest first.
	Tier     int
	Priority int32
	// Subject is the pods the policy applies to (Namespace is always "").
	Subject PeerSet
	Ingress []AdminRule
	Egress  []AdminRule
	// Problems are parts that cannot be programmed (they match nothing).
	Problems []string
}

// Key is the policy's queue key and owner name: kind/name.
func (p *AdminPolicy) Key() string { return p.Kind + "/" + p.Name }

// AdminRule is one rule: its action on traffic between the subject and its
// peers on its ports (none: every port).
type AdminRule struct {
	Name     string
	Action   string
	Pods     []PeerSet
	Nodes    []NodeSet
	Networks []netip.Prefix
	Domains  []DomainSet
	Ports    []AdminPort
}

// AdminPort is a destination port or range of one protocol, or a named
// port (Name; Protocol "" for any protocol).
type AdminPort struct {
	Protocol  corev1.Protocol
	Port, End int32
	Name      string
}

// FromCNP converts a ClusterNetworkPolicy.
func FromCNP(cnp *cnpv1alpha2.ClusterNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindCNP, Name: cnp.Name, Tier: TierAdmin, Priority: cnp.Spec.Priority}
	if cnp.Spec.Tier == cnpv1alpha2.BaselineTier {
		p.Tier = TierBaseline
	}
	p.Subject = p.subject(cnp.Spec.Subject.Namespaces, podSel(cnp.Spec.Subject.Pods))
	for i, r := range cnp.Spec.Ingress {
		rule := AdminRule{Name: r.Name, Action: string(r.Action), Ports: cnpPorts(r.Protocols)}
		for j, peer := range r.From {
			p.addPods(&rule, fmt.Sprintf("ingress[%d].from[%d]", i, j), peer.Namespaces, podSel(peer.Pods))
		}
		p.Ingress = append(p.Ingress, rule)
	}
	for i, r := range cnp.Spec.Egress {
		rule := AdminRule{Name: r.Name, Action: string(r.Action), Ports: cnpPorts(r.Protocols)}
		for j, peer := range r.To {
			where := fmt.Sprintf("egress[%d].to[%d]", i, j)
			p.addPods(&rule, where, peer.Namespaces, podSel(peer.Pods))
			p.addNodes(&rule, where, peer.Nodes)
			p.addNetworks(&rule, where, cidrStrings(peer.Networks))
			p.addDomains(&rule, where+".domainNames", domainStrings(peer.DomainNames))
		}
		p.Egress = append(p.Egress, rule)
	}
	return p
}

// FromANP converts an AdminNetworkPolicy (Admin tier).
func FromANP(anp *anpv1alpha1.AdminNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindANP, Name: anp.Name, Tier: TierAdmin, Priority: anp.Spec.Priority}
	p.Subject = p.subject(anp.Spec.Subject.Namespaces, anpPodSel(anp.Spec.Subject.Pods))
	for i, r := range anp.Spec.Ingress {
		p.Ingress = append(p.Ingress, p.anpIngress(i, string(r.Action), r.Name, r.From, r.Ports))
	}
	for i, r := range anp.Spec.Egress {
		p.Egress = append(p.Egress, p.anpEgress(i, string(r.Action), r.Name, r.To, r.Ports))
	}
	return p
}

// FromBANP converts a BaselineAdminNetworkPolicy (Baseline tier, after
// every ClusterNetworkPolicy of that tier).
func FromBANP(banp *anpv1alpha1.BaselineAdminNetworkPolicy) *AdminPolicy {
	p := &AdminPolicy{Kind: KindBANP, Name: banp.Name, Tier: TierBaseline, Priority: BaselinePriority}
	p.Subject = p.subject(banp.Spec.Subject.Namespaces, anpPodSel(banp.Spec.Subject.Pods))
	for i, r := range banp.Spec.Ingress {
		p.Ingress = append(p.Ingress, p.anpIngress(i, string(r.Action), r.Name, r.From, r.Ports))
	}
	for i, r := range banp.Spec.Egress {
		to := make([]anpv1alpha1.AdminNetworkPolicyEgressPeer, len(r.To)) // the same peers but domain names
		for j, peer := range r.To {
			to[j] = anpv1alpha1.AdminNetworkPolicyEgressPeer{Namespaces: peer.Namespaces, Pods: peer.Pods, Nodes: peer.Nodes, Networks: peer.Networks}
		}
		p.Egress = append(p.Egress, p.anpEgress(i, string(r.Action), r.Name, to, r.Ports))
	}
	return p
}

func (p *AdminPolicy) anpEgress(i int, action, name string, to []anpv1alpha1.AdminNetworkPolicyEgressPeer, ports *[]anpv1alpha1.AdminNetworkPolicyPort) AdminRule {
	rule := AdminRule{Name: name, Action: anpAction(action), Ports: anpPorts(ports)}
	for j, peer := range to {
		where := fmt.Sprintf("egress[%d].to[%d]", i, j)
		p.addPods(&rule, where, peer.Namespaces, anpPodSel(peer.Pods))
		p.addNodes(&rule, where, peer.Nodes)
		p.addNetworks(&rule, where, anpCIDRs(peer.Networks))
		p.addDomains(&rule, where+".domainNames", domainStrings(peer.DomainNames))
	}
	return rule
}

func (p *AdminPolicy) anpIngress(i int, action, name string, from []anpv1alpha1.AdminNetworkPolicyIngressPeer, ports *[]anpv1alpha1.AdminNetworkPolicyPort) AdminRule {
	rule := AdminRule{Name: name, Action: anpAction(action), Ports: anpPorts(ports)}
	for j, peer := range from {
		p.addPods(&rule, fmt.Sprintf("ingress[%d].from[%d]", i, j), peer.Namespaces, anpPodSel(peer.Pods))
	}
	return rule
}

// anpAction maps v1alpha1's Allow to Accept.
func anpAction(a string) string {
	if a == "Allow" {
		return ActionAccept
	}
	return a
}

// namespacedPod is a pods peer or subject: pods matching a selector in the
// namespaces matching another.
type namespacedPod struct{ namespaces, pods *metav1.LabelSelector }

func podSel(p *cnpv1alpha2.NamespacedPod) *namespacedPod {
	if p == nil {
		return nil
	}
	return &namespacedPod{&p.NamespaceSelector, &p.PodSelector}
}

func anpPodSel(p *anpv1alpha1.NamespacedPod) *namespacedPod {
	if p == nil {
		return nil
	}
	return &namespacedPod{&p.NamespaceSelector, &p.PodSelector}
}

// subject is the pods of the namespaces selected, or the pods selected.
func (p *AdminPolicy) subject(namespaces *metav1.LabelSelector, pods *namespacedPod) PeerSet {
	switch {
	case namespaces != nil:
		return PeerSet{Namespaces: p.selector("subject.namespaces", namespaces), Pods: labels.Everything()}
	case pods != nil:
		return PeerSet{Namespaces: p.selector("subject.pods.namespaceSelector", pods.namespaces),
			Pods: p.selector("subject.pods.podSelector", pods.pods)}
	}
	p.Problems = append(p.Problems, "subject: neither namespaces nor pods; it selects nothing")
	return PeerSet{Namespaces: labels.Nothing(), Pods: labels.Nothing()}
}

// selector converts a label selector; a malformed one (the API server's
// validation should refuse it) selects nothing and is a problem.
func (p *AdminPolicy) selector(where string, s *metav1.LabelSelector) labels.Selector {
	sel, err := metav1.LabelSelectorAsSelector(s)
	if err != nil {
		p.Problems = append(p.Problems, fmt.Sprintf("%s: %v; it selects nothing", where, err))
		return labels.Nothing()
	}
	return sel
}

func (p *AdminPolicy) addPods(r *AdminRule, where string, namespaces *metav1.LabelSelector, pods *namespacedPod) {
	switch {
	case namespaces != nil:
		r.Pods = append(r.Pods, PeerSet{Namespaces: p.selector(where+".namespaces", namespaces), Pods: labels.Everything()})
	case pods != nil:
		r.Pods = append(r.Pods, PeerSet{Namespaces: p.selector(where+".pods.namespaceSelector", pods.namespaces),
			Pods: p.selector(where+".pods.podSelector", pods.pods)})
	}
}

func (p *AdminPolicy) addNodes(r *AdminRule, where string, nodes *metav1.LabelSelector) {
	if nodes != nil {
		r.Nodes = append(r.Nodes, NodeSet{Nodes: p.selector(where+".nodes", nodes)})
	}
}

func (p *AdminPolicy) addNetworks(r *AdminRule, where string, cidrs []string) {
	for _, c := range cidrs {
		pfx, err := netip.ParsePrefix(c)
		if err != nil {
			p.Problems = append(p.Problems, fmt.Sprintf("%s.networks: %q is not a CIDR; it matches nothing", where, c))
			continue
		}
		r.Networks = append(r.Networks, pfx.Masked())
	}
}

// addDomains adds DNS name peers (domains.go): plain names, and wildcard
// ones ("*.example.com"), which match what the cluster's DNS answered its
// clients for names under them.
func (p *AdminPolicy) addDomains(r *AdminRule, where string, names []string) {
	for _, n := range names {
		if d, ok := dnsname.NormalizePattern(n); ok {
			r.Domains = append(r.Domains, DomainSet{Domain: d})
		} else {
			p.Problems = append(p.Problems, fmt.Sprintf("%s: %q is not a DNS name; it matches nothing", where, n))
		}
	}
}

// wildcardProblem is what a policy naming wildcard DNS names says when the
// master learns no answers from the cluster's DNS (no dnstap stream).
func wildcardProblem(p *AdminPolicy) string {
	for _, rules := range [][]AdminRule{p.Ingress, p.Egress} {
		for _, r := range rules {
			for _, d := range r.Domains {
				if strings.HasPrefix(d.Domain, dnsname.Wildcard) {
					return fmt.Sprintf("wildcard name %q matches nothing: the master learns the names under it from the cluster DNS's dnstap stream, which it does not receive (--dns-tap-address)", d.Domain)
				}
			}
		}
	}
	return ""
}

func domainStrings[S ~string](names []S) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = string(n)
	}
	return out
}

func cidrStrings(cs []cnpv1alpha2.CIDR) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

func anpCIDRs(cs []anpv1alpha1.CIDR) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = string(c)
	}
	return out
}

// cnpPorts converts v1alpha2 protocols: a protocol without a port is every
// port of it.
func cnpPorts(ps []cnpv1alpha2.ClusterNetworkPolicyProtocol) []AdminPort {
	var out []AdminPort
	add := func(proto corev1.Protocol, port *cnpv1alpha2.Port) {
		switch {
		case port == nil:
			out = append(out, AdminPort{Protocol: proto})
		case port.Range != nil:
			out = append(out, AdminPort{Protocol: proto, Port: port.Range.Start, End: port.Range.End})
		default:
			out = append(out, AdminPort{Protocol: proto, Port: port.Number})
		}
	}
	for _, p := range ps {
		switch {
		case p.TCP != nil:
			add(corev1.ProtocolTCP, p.TCP.DestinationPort)
		case p.UDP != nil:
			add(corev1.ProtocolUDP, p.UDP.DestinationPort)
		case p.SCTP != nil:
			add(corev1.ProtocolSCTP, p.SCTP.DestinationPort)
		case p.DestinationNamedPort != "":
			out = append(out, AdminPort{Name: p.DestinationNamedPort})
		}
	}
	return out
}

// anpPorts converts v1alpha1 ports (nil: every port).
func anpPorts(ps *[]anpv1alpha1.AdminNetworkPolicyPort) []AdminPort {
	if ps == nil {
		return nil
	}
	var out []AdminPort
	for _, p := range *ps {
		switch {
		case p.PortNumber != nil:
			out = append(out, AdminPort{Protocol: p.PortNumber.Protocol, Port: p.PortNumber.Port})
		case p.PortRange != nil:
			proto := p.PortRange.Protocol
			if proto == "" {
				proto = corev1.ProtocolTCP
			}
			out = append(out, AdminPort{Protocol: proto, Port: p.PortRange.Start, End: p.PortRange.End})
		case p.NamedPort != nil:
			out = append(out, AdminPort{Name: *p.NamedPort})
		}
	}
	return out
}

// NodeSet is the nodes one address set holds: their addresses.
type NodeSet struct {
	Nodes labels.Selector
}

// Key is the canonical text of the set.
func (s NodeSet) Key() string { return "nodes=[" + s.Nodes.String() + "]" }

// Name is the address set's name (see PeerSet.Name).
func (s NodeSet) Name() string { return "nodes." + peerSetHash(s.Key()) }
