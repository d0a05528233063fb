package policy

import (
	"cmp"
	"context"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Node peers (egress rules "to nodes") match the addresses the selected
// nodes report in Node.status.addresses. Who writes them: each node's
// kubelet, for its own Node only (NodeRestriction), and the control plane.
// So the worst writer is one compromised node, and what it reports is kept
// to what cannot be anyone else's: an address inside the cluster's own
// ranges (pods, join, services) is never a node's, and an address two
// Nodes report belongs to the older one. Otherwise a node could put a pod
// of another tenant, a Service or another node under a rule meant for it
// (an Admin tier Accept overrides the NetworkPolicies of the pods it
// reaches).

// nodePeerIndex indexes Nodes by the InternalIP and ExternalIP addresses
// they report, so that an address's holder is found without listing every
// Node.
const nodePeerIndex = "policy.nodePeerAddresses"

func indexNodePeerAddresses(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ip := range reportedAddresses(n) {
		out = append(out, ip.String())
	}
	return out, nil
}

// reportedAddresses are the InternalIP and ExternalIP addresses a Node
// reports (both families, IPv4-mapped IPv6 as IPv4, each once).
func reportedAddresses(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(strings.TrimSpace(a.Address)); err == nil && !ip.Is4In6() && ip.Zone() == "" {
			out = append(out, ip)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

// NodeAddresses are the addresses of one family a node peer set holds for
// a node: those it reports outside the internal ranges, less those an older
// Node reports too (holder names the Node that keeps an address; nil: no
// other Node is known).
func NodeAddresses(n *corev1.Node, v6 bool, internal []netip.Prefix, holder func(netip.Addr) string) []string {
	var out []string
	for _, ip := range reportedAddresses(n) {
		if ip.Is6() != v6 || slices.ContainsFunc(internal, func(p netip.Prefix) bool { return p.Contains(ip) }) {
			continue
		}
		if holder != nil && holder(ip) != n.Name {
			continue
		}
		out = append(out, ip.String())
	}
	return out
}

// addressHolder is the Node that keeps an address several report (the
// first in ClaimOrder).
func (c *Controller) addressHolder(ip netip.Addr) string {
	objs, err := c.nodeIndexer.ByIndex(nodePeerIndex, ip.String())
	if err != nil {
		return ""
	}
	var best *corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok && (best == nil || ClaimOrder(n, best) < 0) {
			best = n
		}
	}
	if best == nil {
		return ""
	}
	return best.Name
}

// ClaimOrder orders Nodes claiming one thing (an address, a chassis): the
// oldest first, then by name. The first keeps it, so that a newcomer never
// takes what an older Node holds.
func ClaimOrder(a, b *corev1.Node) int {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		if a.CreationTimestamp.Before(&b.CreationTimestamp) {
			return -1
		}
		return 1
	}
	return strings.Compare(a.Name, b.Name)
}

// syncNodeSet makes one node address set's rows hold the addresses of
// exactly the nodes it selects, or deletes them when no policy names it.
func (c *Controller) syncNodeSet(ctx context.Context, name string) error {
	c.mu.RLock()
	e := c.nodeSets[name]
	c.mu.RUnlock()
	var row setRow
	if e != nil {
		row = func(v6 bool) *nbdb.AddressSet { return NodeSetRow(e.set, v6, c.nodeMembers(e.set, v6)) }
	}
	return c.syncSet(ctx, name, topology.Owner{Type: OwnerNodePeers, Name: name}, row)
}

func (c *Controller) nodeMembers(s NodeSet, v6 bool) []string {
	if c.nodeLister == nil {
		return nil
	}
	nodes, _ := c.nodeLister.List(s.Nodes)
	var out []string
	for _, n := range nodes {
		out = append(out, NodeAddresses(n, v6, c.opts.InternalRanges, c.addressHolder)...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// nodeChanged queues the node sets a node enters, leaves or changes the
// addresses of; when it reports an address another Node reports too (before
// or after the change), every node set, as the address may change hands.
func (c *Controller) nodeChanged(old, cur *corev1.Node) {
	if !c.started.Load() {
		return
	}
	var was, is []netip.Addr
	if old != nil {
		was = reportedAddresses(old)
	}
	if cur != nil {
		is = reportedAddresses(cur)
	}
	moved := !slices.Equal(was, is)
	shared := moved && c.reportedByOthers(cur, old, append(was, is...))
	c.mu.RLock()
	defer c.mu.RUnlock()
	for name, e := range c.nodeSets {
		inWas := old != nil && e.set.Nodes.Matches(labels.Set(old.Labels))
		inIs := cur != nil && e.set.Nodes.Matches(labels.Set(cur.Labels))
		if inWas != inIs || (inIs && moved) || shared {
			c.queue.Add(nodesKey + name)
		}
	}
}

// reportedByOthers says whether a Node other than n's reports one of the
// addresses (the index holds the Nodes as they are now).
func (c *Controller) reportedByOthers(cur, old *corev1.Node, addrs []netip.Addr) bool {
	name := ""
	if n := cmp.Or(cur, old); n != nil {
		name = n.Name
	}
	for _, ip := range addrs {
		objs, _ := c.nodeIndexer.ByIndex(nodePeerIndex, ip.String())
		for _, o := range objs {
			if n, ok := o.(*corev1.Node); ok && n.Name != name {
				return true
			}
		}
	}
	return false
}
