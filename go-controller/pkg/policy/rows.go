// Package policy turns NetworkPolicies into OVN port groups, address sets
// and ACLs. rows.go is its pure core: a policy (and, for named ports, what
// the pods declare) in, the desired rows out, with no I/O.
//
// The NB design:
//   - a port group per policy (np.<namespace>.<name>) holding the ports of
//     the pods it selects, carrying the policy's ACLs: one per rule, plus one
//     per number a named port resolves to;
//   - a port group per namespace and direction (ns.<namespace>.ingressDefaultDeny)
//     holding every pod some policy selects for that direction, carrying the
//     default deny and what is always allowed (ARP/ND, hairpin);
//   - an address set per peer selector (peers.<SHA-256 of it>), shared by every policy
//     naming the same selector;
//   - on each node switch, an ACL letting the node's management port reach
//     its pods (kubelet probes), above every policy tier.
//
// OVN evaluates ACLs tier by tier (on NB schemas that have tiers, OVN 23.09
// and later); within a tier the highest priority matching ACL decides, and
// only the action "pass" goes on to the next tier:
//
//	tier 0  the cluster's own: node → pod (kubelet probes), the databases'
//	        guard, namespace isolation (2000): no policy can open them
//	tier 1  Admin: ClusterNetworkPolicy tier Admin, AdminNetworkPolicy
//	        (admin.go, adminrows.go)
//	tier 2  NetworkPolicy: 30000 always allowed (ARP/ND, hairpin), 1001
//	        allow, 1000 default deny
//	tier 3  Baseline: ClusterNetworkPolicy tier Baseline,
//	        BaselineAdminNetworkPolicy
//
// On a schema without tiers every ACL is in tier 0 and there are no admin
// policies, which leaves NetworkPolicy's priorities as they always were.
package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// ACL priorities (see the package comment).
const (
	PriorityDefaultDeny = 1000
	PriorityAllow       = 1001
	PriorityIsolation   = 2000
	PriorityAlways      = topology.ACLPriorityAlways
)

// OVN ACL tiers (see the package comment).
const (
	TierAdmin         = 1
	TierNetworkPolicy = 2
	TierBaseline      = 3
)

// Owner types of the rows this package writes.
const (
	OwnerPolicy    = "NetworkPolicy"
	OwnerNamespace = "Namespace"
	OwnerPeers     = "PeerSelector"
	OwnerNodePeers = "NodeSelector"
)

// ACLIDKey identifies an ACL among those of one port group.
const ACLIDKey = topology.RowIDKey

// PeersKey is the external_id naming, for people, what a peer address set holds.
const PeersKey = "k8s.ovn.org/peers"

// Direction is a policy direction.
type Direction string

// The two directions of a policy.
const (
	Ingress Direction = "ingress"
	Egress  Direction = "egress"
)

// PolicyPortGroup is the port group of the pods a policy selects.
func PolicyPortGroup(namespace, name string) string {
	return "np." + identifier(namespace) + "." + identifier(name)
}

// DefaultDenyPortGroup is the port group of a namespace's pods that some
// policy selects for direction d.
func DefaultDenyPortGroup(namespace string, d Direction) string {
	return "ns." + identifier(namespace) + "." + string(d) + "DefaultDeny"
}

// identifier maps a namespace or object name (DNS labels and subdomains:
// [a-z0-9.-]) into OVN's identifier alphabet ([a-zA-Z0-9_.]) one to one:
// '-' becomes '_', which Kubernetes names never contain. A namespace has no
// '.', so the first '.' after "np." ends it and names cannot collide.
func identifier(s string) string { return strings.ReplaceAll(s, "-", "_") }

// NamedPort narrows a peer set to the pods whose containers declare a port
// of this name and protocol, with this number.
type NamedPort struct {
	Name     string
	Protocol corev1.Protocol
	Number   int32
}

// PeerSet is the pods one address set holds: pods matching Pods in
// Namespace, or in every namespace matching Namespaces when Namespace is
// empty; optionally narrowed by a named port.
type PeerSet struct {
	Namespace  string
	Namespaces labels.Selector
	Pods       labels.Selector
	Port       *NamedPort
}

// Key is the canonical text of the set: equal sets have equal keys.
func (p PeerSet) Key() string {
	var b strings.Builder
	if p.Namespace != "" {
		b.WriteString("namespace=" + p.Namespace)
	} else {
		b.WriteString("namespaces=[" + p.Namespaces.String() + "]")
	}
	b.WriteString(" pods=[" + p.Pods.String() + "]")
	if p.Port != nil {
		fmt.Fprintf(&b, " port=%s/%s/%d", p.Port.Name, p.Port.Protocol, p.Port.Number)
	}
	return b.String()
}

// Name is the address set's name: the SHA-256 of the key (selectors do not
// fit OVN's identifier alphabet), which external_ids spell out. A name two
// selectors share would put one selector's pods into the other's
// allow-lists, so the hash is one nobody can find collisions for (a 64-bit
// FNV pair takes minutes of CPU); the controller still refuses a name
// whose registered or recorded selector differs.
func (p PeerSet) Name() string { return "peers." + peerSetHash(p.Key()) }

// peerSetHash is a variable only so that a test can force a collision.
var peerSetHash = func(key string) string {
	h := sha256.Sum256([]byte(key))
	return hex.EncodeToString(h[:])
}

// Selects says whether a pod (with its namespace's labels) belongs to the
// set, leaving aside whether it has an address.
func (p PeerSet) Selects(pod *slim.Pod, nsLabels labels.Set) bool {
	if p.Namespace != "" {
		if pod.Namespace != p.Namespace {
			return false
		}
	} else if !p.Namespaces.Matches(nsLabels) {
		return false
	}
	if !p.Pods.Matches(labels.Set(pod.Labels)) {
		return false
	}
	if p.Port != nil {
		n, ok := pod.ContainerPort(p.Port.Name, p.Port.Protocol)
		return ok && n == p.Port.Number
	}
	return true
}

// MaxUnionParts bounds the values of a namespace selector "key in (v1, ...,
// vn)" that splitUnions splits into one set per value; a longer list stays
// one set.
const MaxUnionParts = 8

// splitUnions replaces each set whose namespace selector is a single "key
// in (v1, ..., vn)" by the n sets of "key=vi" (the selector matchLabels
// writes), which hold the same pods: a namespace has one value for key, so
// the parts are disjoint and their addresses add up to the union's. Where
// other rules name those sets (one team's, one tenant's), a rule naming the
// union inserts no address (make bench: the first admin policies of a burst
// inserted 32,000 addresses, 20,000 of them unions of team sets already
// there), and a namespace moving between two values changes only the sets
// of its value, as with two peers of one value each. Duplicates (by name)
// are dropped, the first kept.
func splitUnions(sets []PeerSet) []PeerSet {
	var out []PeerSet
	seen := map[string]bool{}
	for _, s := range sets {
		for _, part := range s.parts() {
			if name := part.Name(); !seen[name] {
				seen[name] = true
				out = append(out, part)
			}
		}
	}
	return out
}

// parts splits the set as splitUnions says, or is the set alone.
func (p PeerSet) parts() []PeerSet {
	if p.Namespace != "" || p.Namespaces == nil {
		return []PeerSet{p}
	}
	reqs, ok := p.Namespaces.Requirements()
	if !ok || len(reqs) != 1 || reqs[0].Operator() != selection.In || reqs[0].Values().Len() > MaxUnionParts {
		return []PeerSet{p}
	}
	values := reqs[0].Values().List() // sorted: the match names the parts in a stable order
	out := make([]PeerSet, 0, len(values))
	for _, v := range values {
		r, err := labels.NewRequirement(reqs[0].Key(), selection.Equals, []string{v})
		if err != nil { // the key and value were valid in the union
			return []PeerSet{p}
		}
		part := p
		part.Namespaces = labels.NewSelector().Add(*r)
		out = append(out, part)
	}
	return out
}

// AddressSet is the set's row of one family (see topology.FamilySetName),
// with the given addresses of that family.
func (p PeerSet) AddressSet(v6 bool, addrs []string) *nbdb.AddressSet {
	ids := topology.Owner{Type: OwnerPeers, Name: p.Name()}.ExternalIDs()
	ids[PeersKey] = p.Key()
	ids[FamilyKey] = familyName(v6)
	return &nbdb.AddressSet{Name: topology.FamilySetName(p.Name(), v6), Addresses: addrs, ExternalIDs: ids}
}

// FamilyKey is the external_id saying which family an address set holds
// (upstream's key and values).
const FamilyKey = "k8s.ovn.org/ip-family"

func familyName(v6 bool) string {
	if v6 {
		return "v6"
	}
	return "v4"
}

// addrMatch matches the packet's field ("src" or "dst") against address
// sets, named by their IPv4 names, in each of the cluster's families.
func addrMatch(fams topology.Families, field string, sets []string) string {
	var clauses []string
	for _, v6 := range []bool{false, true} {
		if !fams.Has(v6) {
			continue
		}
		refs := make([]string, len(sets))
		for i, s := range sets {
			refs[i] = "$" + topology.FamilySetName(s, v6)
		}
		clauses = append(clauses, ipField(v6, field)+" == "+setOf(refs))
	}
	return or(clauses...)
}

// ipField is the match field of an address of one family ("src", "dst").
func ipField(v6 bool, field string) string {
	return topology.IPLayer(v6) + "." + field
}

// Resolver lists the distinct numbers a named port has among the pods of a
// set (the controller answers from its pod cache).
type Resolver func(set PeerSet, name string, proto corev1.Protocol) []int32

// Logging is a namespace's ACL logging: the severity for allowed and denied
// packets, "" for none.
type Logging struct {
	Allow, Deny string
	Meter       string
}

// Rows are one policy's desired rows.
type Rows struct {
	PortGroup *nbdb.PortGroup // without ports: the controller fills them
	ACLs      []*nbdb.ACL
	// PeerSets, NodeSets and DomainSets are the address sets the ACLs name.
	PeerSets   []PeerSet
	NodeSets   []NodeSet
	DomainSets []DomainSet
	// PodSelector selects the pods of the port group in the policy's namespace.
	PodSelector labels.Selector
	// Subject, for an admin policy, is the pods of the port group.
	Subject *PeerSet
	// Ingress and Egress say which directions the policy isolates.
	Ingress, Egress bool
	// Problems are parts of the policy that could not be turned into rows
	// (which the API server's validation should have refused).
	Problems []string
	// NamedPorts are the named ports the policy's rules name (NamedPortKey),
	// resolved or not.
	NamedPorts []string
	// Refused says why the policy is over a limit (limits.go): its rules
	// are left out whole; "" when it is not.
	Refused string
}

// dropCollisions leaves out the peer sets with these names and the ACLs
// naming them: a rule whose peers cannot be told apart allows nothing
// rather than too much.
func (r *Rows) dropCollisions(names []string) {
	bad := map[string]bool{}
	for _, n := range names {
		bad[n] = true
	}
	r.PeerSets = slices.DeleteFunc(r.PeerSets, func(s PeerSet) bool { return bad[s.Name()] })
	r.NodeSets = slices.DeleteFunc(r.NodeSets, func(s NodeSet) bool { return bad[s.Name()] })
	r.DomainSets = slices.DeleteFunc(r.DomainSets, func(s DomainSet) bool { return bad[s.Name()] })
	r.ACLs = slices.DeleteFunc(r.ACLs, func(a *nbdb.ACL) bool {
		sets, _ := topology.MatchReferences(a.Match)
		return slices.ContainsFunc(sets, func(n string) bool { return bad[strings.TrimSuffix(n, topology.V6SetSuffix)] })
	})
	for _, n := range names {
		r.Problems = append(r.Problems, fmt.Sprintf("address set %s: its name is another peer selector's", n))
	}
}

// Policy computes a policy's rows. resolve answers named ports; log is its
// namespace's ACL logging; fams are the cluster's IP families, each of
// which its peers are matched in.
func Policy(np *networkingv1.NetworkPolicy, resolve Resolver, log Logging, fams topology.Families) Rows {
	pg := PolicyPortGroup(np.Namespace, np.Name)
	key := np.Namespace + "/" + np.Name
	r := Rows{PortGroup: &nbdb.PortGroup{Name: pg, ExternalIDs: topology.Owner{Type: OwnerPolicy, Name: key}.ExternalIDs()}}
	sel, in, eg, err := Isolates(np)
	if err != nil {
		r.Problems = append(r.Problems, fmt.Sprintf("podSelector: %v", err))
	}
	r.PodSelector, r.Ingress, r.Egress = sel, in, eg
	if why := tooLarge(np); why != "" {
		r.refuse(why)
		return r
	}
	b := builder{owner: topology.Owner{Type: OwnerPolicy, Name: key}, pg: pg, aclName: aclName(np.Namespace + "_" + np.Name),
		target: PeerSet{Namespace: np.Namespace, Pods: sel}, resolve: resolve, fams: fams, rows: &r, seen: map[string]bool{}}
	allow := verdict{action: nbdb.ACLActionAllowRelated, priority: PriorityAllow, tier: TierNetworkPolicy, severity: log.Allow, meter: log.Meter}
	if r.Ingress {
		for i, rule := range np.Spec.Ingress {
			b.npRule(Ingress, i, np.Namespace, rule.From, rule.Ports, allow)
		}
	}
	if r.Egress {
		for i, rule := range np.Spec.Egress {
			b.npRule(Egress, i, np.Namespace, rule.To, rule.Ports, allow)
		}
	}
	if len(r.ACLs) > MaxACLsPerPolicy {
		r.refuse(fmt.Sprintf("%d ACLs (rules times the numbers its named ports resolve to), more than %d; split it into several policies", len(r.ACLs), MaxACLsPerPolicy))
	}
	return r
}

// Isolates is what a policy isolates whatever its rules say: the pods its
// selector picks (none, and the error, when the selector is malformed) in
// each direction. The namespace's default-deny groups need only this, not
// the policy's rows (Policy).
func Isolates(np *networkingv1.NetworkPolicy) (pods labels.Selector, ingress, egress bool, err error) {
	pods, err = metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
	if err != nil {
		pods = labels.Nothing()
	}
	ingress, egress = directions(np)
	return pods, ingress, egress, err
}

// directions applies the API's defaults: Ingress always, Egress when the
// policy has egress rules, unless policyTypes says otherwise.
func directions(np *networkingv1.NetworkPolicy) (ingress, egress bool) {
	if len(np.Spec.PolicyTypes) == 0 {
		return true, len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		switch t {
		case networkingv1.PolicyTypeIngress:
			ingress = true
		case networkingv1.PolicyTypeEgress:
			egress = true
		}
	}
	return ingress, egress
}

// builder turns rules of any policy API into ACLs on one port group, with
// the address sets they name.
type builder struct {
	owner   topology.Owner // of the ACLs
	pg      string         // the port group of the selected pods
	aclName *string
	// target is the selected pods, on which an ingress rule's named ports
	// resolve.
	target  PeerSet
	resolve Resolver
	fams    topology.Families
	rows    *Rows
	seen    map[string]bool // address set names already listed
}

// verdict is what a rule's ACLs do, in which tier and at which priority.
type verdict struct {
	action          string
	priority, tier  int
	severity, meter string
}

// peers are a rule's remote ends, sorted by how they are matched: pod
// selectors, node selectors and DNS names (address sets), CIDR groups;
// any means every address (a NetworkPolicy rule without peers).
type peers struct {
	sets    []PeerSet
	nodes   []NodeSet
	domains []DomainSet
	blocks  [][]netip.Prefix
	any     bool
}

func (p peers) empty() bool {
	return !p.any && len(p.sets) == 0 && len(p.nodes) == 0 && len(p.domains) == 0 && len(p.blocks) == 0
}

// npRule adds the ACLs of one NetworkPolicy rule.
func (b *builder) npRule(d Direction, i int, namespace string, from []networkingv1.NetworkPolicyPeer, ports []networkingv1.NetworkPolicyPort, v verdict) {
	where := fmt.Sprintf("%s[%d]", d, i)
	ps := b.npPeers(where, namespace, from)
	if ps.empty() {
		return // only unusable peers: the rule allows nothing
	}
	numbered, named := b.npPorts(where, ports)
	b.emit(d, where, ps, len(ports) == 0, numbered, named, v)
}

// emit adds the ACLs of one rule: one for its numbered ports (or for every
// port when allPorts) and one per number each named port resolves to.
func (b *builder) emit(d Direction, where string, ps peers, allPorts bool, numbered []string, named []namedPortRef, v verdict) {
	if allPorts || len(numbered) > 0 {
		b.acl(d, where+"/ports", and(b.peerClause(d, ps), or(numbered...)), v)
	}
	for _, np := range named {
		b.namedPortACLs(d, where, np, ps, v)
	}
}

// namedPortACLs resolves a named port: on the selected pods for ingress, on
// the peer pods for egress (a CIDR or node peer has no ports to name).
func (b *builder) namedPortACLs(d Direction, where string, np namedPortRef, ps peers, v verdict) {
	if d == Ingress {
		peerClause := b.peerClause(d, ps)
		for _, n := range sortedNumbers(b.resolve(b.target, np.name, np.proto)) {
			t := b.target
			t.Port = &NamedPort{Name: np.name, Protocol: np.proto, Number: n}
			b.addSet(t)
			b.acl(d, fmt.Sprintf("%s/port:%s/%s/%d", where, np.name, np.proto, n),
				and(peerClause, addrMatch(b.fams, "dst", []string{t.Name()}), portMatch(np.proto, n, 0)), v)
		}
		return
	}
	sets := ps.sets
	if ps.any {
		sets = []PeerSet{{Namespaces: labels.Everything(), Pods: labels.Everything()}}
	}
	numbers := map[int32][]PeerSet{}
	for _, s := range sets {
		for _, n := range b.resolve(s, np.name, np.proto) {
			t := s
			t.Port = &NamedPort{Name: np.name, Protocol: np.proto, Number: n}
			numbers[n] = append(numbers[n], t)
		}
	}
	for _, n := range sortedKeys(numbers) {
		var names []string
		for _, t := range numbers[n] {
			b.addSet(t)
			names = append(names, t.Name())
		}
		b.acl(d, fmt.Sprintf("%s/port:%s/%s/%d", where, np.name, np.proto, n),
			and(addrMatch(b.fams, "dst", names), portMatch(np.proto, n, 0)), v)
	}
}

// npPeers sorts a NetworkPolicy rule's peers into selector sets and
// ipBlocks; no peers at all is every address.
func (b *builder) npPeers(where, namespace string, list []networkingv1.NetworkPolicyPeer) peers {
	if len(list) == 0 {
		return peers{any: true}
	}
	var ps peers
	for j, p := range list {
		switch {
		case p.IPBlock != nil:
			prefixes, err := blockPrefixes(p.IPBlock)
			if err != nil {
				b.rows.Problems = append(b.rows.Problems, fmt.Sprintf("%s.peers[%d]: ipBlock %q except %q: %v", where, j, p.IPBlock.CIDR, p.IPBlock.Except, err))
				continue
			}
			if len(prefixes) > 0 { // its exceptions may cover it all
				ps.blocks = append(ps.blocks, prefixes)
			}
		case p.PodSelector != nil || p.NamespaceSelector != nil:
			s, err := npPeerSet(namespace, p)
			if err != nil {
				b.rows.Problems = append(b.rows.Problems, fmt.Sprintf("%s.peers[%d]: %v", where, j, err))
				continue
			}
			ps.sets = append(ps.sets, s)
		}
	}
	ps.sets = splitUnions(ps.sets)
	return ps
}

func npPeerSet(namespace string, p networkingv1.NetworkPolicyPeer) (PeerSet, error) {
	s := PeerSet{Namespace: namespace, Pods: labels.Everything()}
	if p.NamespaceSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.NamespaceSelector)
		if err != nil {
			return s, err
		}
		s.Namespace, s.Namespaces = "", sel
	}
	if p.PodSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(p.PodSelector)
		if err != nil {
			return s, err
		}
		s.Pods = sel
	}
	return s, nil
}

// peerClause matches the remote address of a rule ("" for any) and lists
// the address sets it names.
func (b *builder) peerClause(d Direction, ps peers) string {
	if ps.any {
		return ""
	}
	field := "src"
	if d == Egress {
		field = "dst"
	}
	var clauses, names []string
	for _, s := range ps.sets {
		b.addSet(s)
		names = append(names, s.Name())
	}
	for _, n := range ps.nodes {
		b.addNodeSet(n)
		names = append(names, n.Name())
	}
	for _, n := range ps.domains {
		if !b.seen[n.Name()] {
			b.seen[n.Name()] = true
			b.rows.DomainSets = append(b.rows.DomainSets, n)
		}
		names = append(names, n.Name())
	}
	if len(names) > 0 {
		clauses = append(clauses, addrMatch(b.fams, field, names))
	}
	for _, blk := range ps.blocks {
		clauses = append(clauses, blockClause(field, blk))
	}
	return or(clauses...)
}

// blockPrefixes is an ipBlock as the prefixes it matches: its CIDR less its
// exceptions, as a positive set (see subtractPrefixes).
func blockPrefixes(blk *networkingv1.IPBlock) ([]netip.Prefix, error) {
	cidr, err := netip.ParsePrefix(blk.CIDR)
	if err != nil {
		return nil, fmt.Errorf("not a CIDR")
	}
	if len(blk.Except) > MaxExceptsPerIPBlock {
		return nil, fmt.Errorf("%d exceptions, more than %d", len(blk.Except), MaxExceptsPerIPBlock)
	}
	var except []netip.Prefix
	for _, e := range blk.Except {
		p, err := netip.ParsePrefix(e)
		if err != nil || p.Addr().Is6() != cidr.Addr().Is6() {
			return nil, fmt.Errorf("not CIDRs of one family")
		}
		except = append(except, p)
	}
	return subtractPrefixes(cidr, except), nil
}

// blockClause matches the remote address against an ipBlock's prefixes.
func blockClause(field string, prefixes []netip.Prefix) string {
	var items []string
	for _, p := range prefixes {
		items = append(items, p.String())
	}
	return ipField(prefixes[0].Addr().Is6(), field) + " == " + setOf(items)
}

// NamedPortKey identifies a named port of a protocol.
func NamedPortKey(proto corev1.Protocol, name string) string { return string(proto) + "/" + name }

type namedPortRef struct {
	name  string
	proto corev1.Protocol
}

// npPorts sorts a NetworkPolicy rule's ports into match clauses for numbers
// and ranges, and named ports to resolve.
func (b *builder) npPorts(where string, ports []networkingv1.NetworkPolicyPort) (numbered []string, named []namedPortRef) {
	for j, p := range ports {
		proto := corev1.ProtocolTCP
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if protoName(proto) == "" {
			b.rows.Problems = append(b.rows.Problems, fmt.Sprintf("%s.ports[%d]: protocol %q is not TCP, UDP or SCTP", where, j, proto))
			continue
		}
		switch {
		case p.Port == nil:
			numbered = append(numbered, protoName(proto))
		case p.Port.Type == intstr.String:
			named = append(named, b.namedPort(p.Port.StrVal, proto))
		default:
			end := int32(0)
			if p.EndPort != nil {
				end = *p.EndPort
			}
			numbered = append(numbered, portMatch(proto, p.Port.IntVal, end))
		}
	}
	return numbered, named
}

func protoName(p corev1.Protocol) string {
	switch p {
	case corev1.ProtocolTCP:
		return "tcp"
	case corev1.ProtocolUDP:
		return "udp"
	case corev1.ProtocolSCTP:
		return "sctp"
	}
	return ""
}

// portMatch matches a destination port or range of one protocol.
func portMatch(proto corev1.Protocol, port, end int32) string {
	p := protoName(proto)
	if end > port {
		return fmt.Sprintf("%s && %s.dst >= %d && %s.dst <= %d", p, p, port, p, end)
	}
	return fmt.Sprintf("%s && %s.dst == %d", p, p, port)
}

// namedPort records that the rows depend on a named port.
func (b *builder) namedPort(name string, proto corev1.Protocol) namedPortRef {
	if k := NamedPortKey(proto, name); !slices.Contains(b.rows.NamedPorts, k) {
		b.rows.NamedPorts = append(b.rows.NamedPorts, k)
	}
	return namedPortRef{name: name, proto: proto}
}

func (b *builder) addSet(s PeerSet) {
	if !b.seen[s.Name()] {
		b.seen[s.Name()] = true
		b.rows.PeerSets = append(b.rows.PeerSets, s)
	}
}

func (b *builder) addNodeSet(s NodeSet) {
	if !b.seen[s.Name()] {
		b.seen[s.Name()] = true
		b.rows.NodeSets = append(b.rows.NodeSets, s)
	}
}

// acl adds an ACL for the selected pods with a match on the traffic.
func (b *builder) acl(d Direction, id, traffic string, v verdict) {
	port := "outport"
	if d == Egress {
		port = "inport"
	}
	acl := NewACL(d, v.priority, and(port+" == @"+b.pg, traffic), v.action, b.owner, id, v.severity, v.meter)
	acl.Name = b.aclName
	inTier(acl, v.tier)
	b.rows.ACLs = append(b.rows.ACLs, acl)
}

// inTier places an ACL in an OVN ACL tier (ovndb.ACLTierKey).
func inTier(acl *nbdb.ACL, tier int) {
	if tier != 0 {
		acl.ExternalIDs[ovndb.ACLTierKey] = strconv.Itoa(tier)
	}
}

// NewACL builds an ACL of ours. Egress ACLs apply after load balancing, so
// they judge a service's backend rather than its VIP. severity "" logs nothing.
func NewACL(d Direction, priority int, match, action string, owner topology.Owner, id, severity, meter string) *nbdb.ACL {
	ids := owner.ExternalIDs()
	ids[ACLIDKey] = id
	acl := &nbdb.ACL{Priority: priority, Match: match, Action: action, ExternalIDs: ids, Options: map[string]string{}}
	if d == Ingress {
		acl.Direction = nbdb.ACLDirectionToLport
	} else {
		acl.Direction = nbdb.ACLDirectionFromLport
		acl.Options["apply-after-lb"] = "true"
	}
	if severity != "" {
		sev := severity
		acl.Log, acl.Severity = true, &sev
		if meter != "" {
			m := meter
			acl.Meter = &m
		}
	}
	return acl
}

// aclName fits OVN's 63-character limit on ACL names.
func aclName(s string) *string {
	if len(s) > 63 {
		s = s[:63]
	}
	return &s
}

// DefaultDeny computes a namespace's default-deny port group for direction
// d (without ports) and its ACLs: drop everything, except ARP/ND and
// (ingress) the pod's own traffic coming back through a service (hairpin,
// from the hairpin address of each of the cluster's families).
func DefaultDeny(namespace string, d Direction, log Logging, fams topology.Families) (*nbdb.PortGroup, []*nbdb.ACL) {
	pg := DefaultDenyPortGroup(namespace, d)
	owner := topology.Owner{Type: OwnerNamespace, Name: namespace}
	port := "outport"
	if d == Egress {
		port = "inport"
	}
	acls := []*nbdb.ACL{
		NewACL(d, PriorityDefaultDeny, port+" == @"+pg, nbdb.ACLActionDrop, owner, string(d)+"/deny", log.Deny, log.Meter),
		NewACL(d, PriorityAlways, port+" == @"+pg+" && (arp || nd)", nbdb.ACLActionAllow, owner, string(d)+"/arp", "", ""),
	}
	if d == Ingress {
		var hairpin []string
		if fams.V4 {
			hairpin = append(hairpin, "ip4.src == "+topology.HairpinSNATIP)
		}
		if fams.V6 {
			hairpin = append(hairpin, "ip6.src == "+topology.HairpinSNATIPv6)
		}
		acls = append(acls, NewACL(d, PriorityAlways, and(port+" == @"+pg, or(hairpin...)),
			nbdb.ACLActionAllowRelated, owner, string(d)+"/hairpin", "", ""))
	}
	for _, a := range acls {
		inTier(a, TierNetworkPolicy)
	}
	return &nbdb.PortGroup{Name: pg, ExternalIDs: owner.ExternalIDs()}, acls
}

// and joins clauses; or parenthesises what it joins, so and never needs to.
func and(parts ...string) string {
	var kept []string
	for _, p := range parts {
		if p != "" {
			kept = append(kept, p)
		}
	}
	return strings.Join(kept, " && ")
}

func or(parts ...string) string {
	if len(parts) <= 1 {
		return strings.Join(parts, "")
	}
	var wrapped []string
	for _, p := range parts {
		if strings.Contains(p, "&&") {
			p = "(" + p + ")"
		}
		wrapped = append(wrapped, p)
	}
	return "(" + strings.Join(wrapped, " || ") + ")"
}

func setOf(items []string) string {
	if len(items) == 1 {
		return items[0]
	}
	return "{" + strings.Join(items, ", ") + "}"
}

func sortedNumbers(ns []int32) []int32 {
	out := append([]int32(nil), ns...)
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func sortedKeys(m map[int32][]PeerSet) []int32 {
	var out []int32
	for k := range m {
		out = append(out, k)
	}
	return sortedNumbers(out)
}
