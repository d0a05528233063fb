package egressip

// assign.go decides which node hosts each egress IP. It is pure: no I/O, no
// Kubernetes or OVN types, so the rules can be tested exhaustively.

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"time"
)

// Node is what assignment knows of a node.
type Node struct {
	// Name is the node's name (unique among nodes).
	Name string
	// Networks are its gateway networks (e.g. 172.18.0.3/16, fc00::3/64):
	// an egress IP must be inside one to be hosted by the node.
	Networks []netip.Prefix
	// Eligible is true when the node is labelled
	// k8s.ovn.org/egress-assignable, Ready and reachable.
	Eligible bool
}

// Request is one EgressIP object.
type Request struct {
	// Name is the EgressIP's name (unique among requests).
	Name string
	// Created is the object's creation time: older requests win conflicts.
	Created time.Time
	// IPs are the wanted egress IPs (already parsed and validated by the
	// caller).
	IPs []netip.Addr
	// Current is the request's status today, IP -> node: what a previous
	// leader decided.
	Current map[netip.Addr]string
}

// Assignment is an egress IP on a node.
type Assignment struct {
	// IP is the egress IP.
	IP netip.Addr
	// Node is the name of the node hosting it.
	Node string
}

// Result is every request's assignments and what could not be assigned.
type Result struct {
	// Assigned holds, by request name, the request's assignments sorted by
	// IP. Requests with none are absent.
	Assigned map[string][]Assignment
	// Problems holds, by request name, one sentence per IP not assigned,
	// naming the IP and why, in IP order. Requests with none are absent.
	Problems map[string][]string
}

// Assign decides which node hosts each egress IP of reqs. The rules, in
// order:
//
//  1. Requests are considered oldest first (Created, then Name). An IP
//     wanted by two requests belongs to the older one; the younger gets a
//     problem naming the IP and its owner ("egress IP X is EgressIP Y's").
//  2. Stability first: an IP keeps its current node (Request.Current) if
//     that node is eligible, has a network containing the IP, and does not
//     already hold another IP of the same request (rule 4; of a request's
//     IPs currently on one node, the lowest keeps it) — even if another
//     node holds fewer IPs. Nothing moves for balance: moving an egress IP
//     breaks the connections using it. Every request's kept IPs are placed
//     before any IP is placed anew.
//  3. Otherwise the IP goes to the eligible node with a network containing
//     it that holds the fewest egress IPs so far (every request's, kept ones
//     included), ties broken by node name. Requests are served oldest first
//     and, within a request, IPs in increasing order.
//  4. One request never puts two of its IPs on the same node (an EgressIP's
//     addresses are spread over nodes for redundancy). If that leaves no
//     node, the IP is a problem ("no other eligible node has a network
//     containing X").
//  5. No eligible node has a network containing the IP: problem ("no
//     eligible node has a network containing X (label nodes
//     k8s.ovn.org/egress-assignable)").
//  6. Duplicate IPs within a request count once. IPv4-mapped IPv6 addresses
//     (in IPs, Current and Networks of 96 bits or more) are treated as IPv4.
//     A network contains an IP as its masked prefix's Contains says (so a
//     zoned IP is in no network). An invalid (zero) IP is a problem.
//  7. The result is deterministic: it depends neither on the order of the
//     reqs, nodes, IPs and Networks slices nor on map iteration, and no
//     request is ever given an IP another request holds, whatever Current
//     says (when two requests' Current claim an IP, the older keeps it).
//
// Names are expected to be unique. Should two nodes share a name, they are
// merged (networks united, eligible only if both are). Should two requests
// share a name, only the first in the order of rule 1 (then by IPs, then
// Current) is considered; the others are ignored.
//
// Cost: sorting, plus per IP a lookup per distinct network length among the
// eligible nodes and O(log nodes) heap work per network containing it (more
// only when the request's own nodes are the least loaded).
func Assign(reqs []Request, nodes []Node) Result {
	a := newAssigner(nodes)
	rs := normalizeRequests(reqs)
	res := Result{Assigned: map[string][]Assignment{}, Problems: map[string][]string{}}
	problems := make([][]ipProblem, len(rs))

	// Rule 1: ownership, oldest first.
	owner := map[netip.Addr]int{}
	owned := make([][]netip.Addr, len(rs))
	for i, r := range rs {
		for _, ip := range r.ips {
			switch o, taken := owner[ip]; {
			case !ip.IsValid():
				problems[i] = append(problems[i], ipProblem{ip, "an egress IP is the invalid (zero) address"})
			case taken:
				problems[i] = append(problems[i], ipProblem{ip, fmt.Sprintf("egress IP %s is EgressIP %s's", ip, rs[o].name)})
			default:
				owner[ip] = i
				owned[i] = append(owned[i], ip)
			}
		}
	}

	// Rule 2: every request's kept IPs first.
	assigned := make([][]Assignment, len(rs))
	placed := map[netip.Addr]bool{}
	for i, r := range rs {
		a.stamp++
		for _, ip := range owned[i] {
			cur, ok := r.current[ip]
			if !ok {
				continue
			}
			n, ok := a.byName[cur]
			if !ok || !a.nodes[n].eligible || a.usedBy[n] == a.stamp || !a.nodes[n].contains(ip) {
				continue
			}
			a.place(n)
			placed[ip] = true
			assigned[i] = append(assigned[i], Assignment{IP: ip, Node: a.nodes[n].name})
		}
	}

	// Rules 3-5: the rest to the least loaded eligible node.
	for i := range rs {
		a.stamp++
		for _, as := range assigned[i] {
			a.usedBy[a.byName[as.Node]] = a.stamp
		}
		for _, ip := range owned[i] {
			if placed[ip] {
				continue
			}
			n, found := a.best(ip)
			switch {
			case !found:
				problems[i] = append(problems[i], ipProblem{ip, fmt.Sprintf("no eligible node has a network containing %s (label nodes k8s.ovn.org/egress-assignable)", ip)})
			case n < 0:
				problems[i] = append(problems[i], ipProblem{ip, fmt.Sprintf("no other eligible node has a network containing %s (each node hosts at most one of an EgressIP's addresses)", ip)})
			default:
				a.place(n)
				assigned[i] = append(assigned[i], Assignment{IP: ip, Node: a.nodes[n].name})
			}
		}
	}

	for i, r := range rs {
		if len(assigned[i]) > 0 {
			slices.SortFunc(assigned[i], func(x, y Assignment) int { return x.IP.Compare(y.IP) })
			res.Assigned[r.name] = assigned[i]
		}
		if len(problems[i]) > 0 {
			slices.SortStableFunc(problems[i], func(x, y ipProblem) int { return x.ip.Compare(y.ip) })
			msgs := make([]string, len(problems[i]))
			for j, p := range problems[i] {
				msgs[j] = p.msg
			}
			res.Problems[r.name] = msgs
		}
	}
	return res
}

// ipProblem is why an IP was not assigned.
type ipProblem struct {
	ip  netip.Addr
	msg string
}

// request is a Request normalised: IPs unmapped, sorted and deduplicated,
// Current keyed by unmapped IPs.
type request struct {
	name    string
	created time.Time
	ips     []netip.Addr
	current map[netip.Addr]string
	curKeys []netip.Addr // current's keys, sorted (for the order only)
}

// normalizeRequests normalises reqs and sorts them by rule 1 (then by IPs and
// Current, so the order is total), dropping later requests of a name.
func normalizeRequests(reqs []Request) []request {
	rs := make([]request, 0, len(reqs))
	for _, q := range reqs {
		r := request{name: q.Name, created: q.Created, ips: make([]netip.Addr, len(q.IPs)), current: make(map[netip.Addr]string, len(q.Current))}
		for i, ip := range q.IPs {
			r.ips[i] = ip.Unmap()
		}
		slices.SortFunc(r.ips, netip.Addr.Compare)
		r.ips = slices.Compact(r.ips)
		for ip, n := range q.Current {
			ip = ip.Unmap()
			if old, ok := r.current[ip]; ok && old <= n {
				continue // two keys for one IP (mapped and not): the lower node name, whatever the map order
			}
			r.current[ip] = n
		}
		r.curKeys = make([]netip.Addr, 0, len(r.current))
		for ip := range r.current {
			r.curKeys = append(r.curKeys, ip)
		}
		slices.SortFunc(r.curKeys, netip.Addr.Compare)
		rs = append(rs, r)
	}
	slices.SortFunc(rs, compareRequests)
	seen := make(map[string]bool, len(rs))
	return slices.DeleteFunc(rs, func(r request) bool {
		dup := seen[r.name]
		seen[r.name] = true
		return dup
	})
}

// compareRequests orders requests oldest first, then by name, then (for
// requests sharing a name) by IPs and Current.
func compareRequests(x, y request) int {
	if c := x.created.Compare(y.created); c != 0 {
		return c
	}
	if c := cmp.Compare(x.name, y.name); c != 0 {
		return c
	}
	if c := slices.CompareFunc(x.ips, y.ips, netip.Addr.Compare); c != 0 {
		return c
	}
	if c := slices.CompareFunc(x.curKeys, y.curKeys, netip.Addr.Compare); c != 0 {
		return c
	}
	for _, ip := range x.curKeys {
		if c := cmp.Compare(x.current[ip], y.current[ip]); c != 0 {
			return c
		}
	}
	return 0
}

// assigner holds the nodes and their loads. Eligible nodes are indexed by
// masked network: each network is a min-heap of its nodes by (load, name).
type assigner struct {
	nodes  []anode // sorted by name: an index orders as the name
	byName map[string]int
	load   []int
	// groups are the eligible nodes' networks; bits, per family (0: IPv4,
	// 1: IPv6), the distinct lengths of their prefixes.
	groups map[netip.Prefix]*group
	bits   [2][]int
	// usedBy[n] == stamp when node n holds an IP of the request being
	// served (rule 4).
	usedBy []int
	stamp  int
}

// anode is a node with normalised networks and its places in the heaps.
type anode struct {
	name     string
	networks []netip.Prefix // masked, unmapped, sorted, deduplicated
	eligible bool
	in       []*member
}

// group is the eligible nodes of one network, a min-heap by (load, name).
type group struct {
	prefix netip.Prefix
	heap   []*member
}

// member is a node's place in a group's heap.
type member struct {
	g    *group
	node int
	pos  int
}

func newAssigner(nodes []Node) *assigner {
	ns := make([]anode, 0, len(nodes))
	for _, n := range nodes {
		an := anode{name: n.Name, eligible: n.Eligible}
		for _, p := range n.Networks {
			if p = normalizePrefix(p); p.IsValid() {
				an.networks = append(an.networks, p)
			}
		}
		ns = append(ns, an)
	}
	slices.SortStableFunc(ns, func(x, y anode) int { return cmp.Compare(x.name, y.name) })
	// Merge nodes sharing a name (rule 7 wants the result independent of
	// their order).
	merged := ns[:0]
	for _, n := range ns {
		if l := len(merged) - 1; l >= 0 && merged[l].name == n.name {
			merged[l].networks = append(merged[l].networks, n.networks...)
			merged[l].eligible = merged[l].eligible && n.eligible
			continue
		}
		merged = append(merged, n)
	}
	ns = merged

	a := &assigner{nodes: ns, byName: make(map[string]int, len(ns)), load: make([]int, len(ns)),
		groups: map[netip.Prefix]*group{}, usedBy: make([]int, len(ns))}
	total := 0
	for i := range ns {
		n := &ns[i]
		slices.SortFunc(n.networks, comparePrefixes)
		n.networks = slices.Compact(n.networks)
		if n.eligible {
			total += len(n.networks)
		}
	}
	members := make([]member, 0, total) // never grows: pointers into it stay valid
	for i := range ns {
		n := &ns[i]
		a.byName[n.name] = i
		if !n.eligible {
			continue
		}
		n.in = make([]*member, 0, len(n.networks))
		for _, p := range n.networks {
			g := a.groups[p]
			if g == nil {
				g = &group{prefix: p}
				a.groups[p] = g
				f := 0
				if p.Addr().Is6() {
					f = 1
				}
				a.bits[f] = append(a.bits[f], p.Bits())
			}
			// Nodes are added in name order with load 0: the heap
			// property holds without sifting.
			members = append(members, member{g: g, node: i, pos: len(g.heap)})
			m := &members[len(members)-1]
			g.heap = append(g.heap, m)
			n.in = append(n.in, m)
		}
	}
	for f := range a.bits {
		slices.Sort(a.bits[f])
		a.bits[f] = slices.Compact(a.bits[f])
	}
	return a
}

// normalizePrefix masks p and unmaps an IPv4-mapped prefix of 96 bits or
// more; it returns the zero Prefix for an invalid p.
func normalizePrefix(p netip.Prefix) netip.Prefix {
	if !p.IsValid() {
		return netip.Prefix{}
	}
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

func comparePrefixes(x, y netip.Prefix) int {
	if c := x.Addr().Compare(y.Addr()); c != 0 {
		return c
	}
	return cmp.Compare(x.Bits(), y.Bits())
}

// contains reports whether one of n's networks contains ip.
func (n *anode) contains(ip netip.Addr) bool {
	for _, p := range n.networks {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// less orders nodes by load, then name.
func (a *assigner) less(x, y int) bool {
	if a.load[x] != a.load[y] {
		return a.load[x] < a.load[y]
	}
	return x < y
}

// best returns the least loaded eligible node with a network containing ip
// that holds no IP of the request being served. found is false when no
// eligible node has a network containing ip; n is -1 when all that do hold
// one of the request's IPs.
func (a *assigner) best(ip netip.Addr) (n int, found bool) {
	n = -1
	f := 0
	if ip.Is6() {
		f = 1
	}
	for _, bits := range a.bits[f] {
		p, err := ip.Prefix(bits)
		if err != nil {
			continue
		}
		g := a.groups[p]
		if g == nil || !g.prefix.Contains(ip) {
			continue
		}
		found = true
		if c := a.bestIn(g); c >= 0 && (n < 0 || a.less(c, n)) {
			n = c
		}
	}
	return n, found
}

// bestIn returns g's least loaded node not used by the request being
// served, or -1. It walks the heap from the root, descending only below used
// nodes, so it visits at most 1+2·(used nodes) entries.
func (a *assigner) bestIn(g *group) int {
	best := -1
	var stack [16]int
	todo := append(stack[:0], 0)
	for len(todo) > 0 {
		i := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if i >= len(g.heap) {
			continue
		}
		n := g.heap[i].node
		if a.usedBy[n] == a.stamp {
			todo = append(todo, 2*i+1, 2*i+2)
			continue
		}
		if best < 0 || a.less(n, best) {
			best = n
		}
	}
	return best
}

// place puts an IP on node n: its load grows, it is used by the request
// being served.
func (a *assigner) place(n int) {
	a.load[n]++
	a.usedBy[n] = a.stamp
	for _, m := range a.nodes[n].in {
		a.siftDown(m)
	}
}

// siftDown restores m's heap after its node's load grew.
func (a *assigner) siftDown(m *member) {
	h := m.g.heap
	i := m.pos
	for {
		c := 2*i + 1
		if c >= len(h) {
			break
		}
		if r := c + 1; r < len(h) && a.less(h[r].node, h[c].node) {
			c = r
		}
		if !a.less(h[c].node, h[i].node) {
			break
		}
		h[i], h[c] = h[c], h[i]
		h[i].pos, h[c].pos = i, c
		i = c
	}
}
