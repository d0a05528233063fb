// Package egressip gives the pods an EgressIP (k8s.ovn.org/v1) selects a
// fixed source address for what they send out of the cluster: each egress
// IP is hosted by one node (assign.go), the selected pods' traffic to
// anything outside the cluster is rerouted on ovn_cluster_router to the
// gateway routers of the nodes hosting the EgressIP's addresses, and each
// of those routers SNATs it to its egress IP. OVN itself answers ARP and
// neighbour solicitations for the address on that node's external network
// (a gateway router answers for its SNAT addresses) and announces it when it
// moves (the external switch port's nat-addresses=router), so the node
// daemon has nothing to do.
//
// rows.go is the pure core: a plan (assignments, selected pods, the egress
// nodes' join addresses) in, the NB rows out.
package egressip

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Owner types of the rows this package writes.
const (
	// OwnerEgressIP owns one EgressIP's rows (named by the object).
	OwnerEgressIP = "EgressIP"
	// OwnerCluster owns the rows every EgressIP shares: the no-reroute
	// policies and the nodes' address set.
	OwnerCluster = "EgressIPCluster"
)

// Router policy priorities on ovn_cluster_router: below the node-address
// reroutes (topology.HostPolicyPriority); the no-reroute policies above the
// EgressIPs' reroutes.
const (
	NoReroutePriority = 102
	ReroutePriority   = 100
)

// NodesSet is the address set of every node's addresses (and its IPv6
// twin): traffic to a node is never rerouted.
const NodesSet = "egressip.nodes"

// Pod is a selected pod: its addresses.
type Pod struct {
	Namespace, Name string
	IPs             []netip.Addr
}

// Plan is what one EgressIP's rows depend on.
type Plan struct {
	Name        string
	Assignments []Assignment
	Pods        []Pod
	// NextHops are, by node in Assignments, where the cluster router sends
	// the traffic of the addresses it hosts (one per family): its gateway
	// router's join addresses (in zone mode, for another zone's node, its
	// transit addresses).
	NextHops map[string][]netip.Addr
}

// Rows are one EgressIP's rows.
type Rows struct {
	// Sets holds the selected pods' addresses: eip.<name> (+ _v6), one per
	// family of the cluster.
	Sets []*nbdb.AddressSet
	// Reroutes, on ovn_cluster_router, one per family with an egress IP:
	// the set's traffic to the gateway routers of the nodes hosting one.
	Reroutes []*nbdb.LogicalRouterPolicy
	// SNATs, by node (on GR_<node>): each selected pod address to the egress
	// IP of its family the node hosts.
	SNATs map[string][]*nbdb.NAT
}

// SetName is the address set of an EgressIP's pods.
func SetName(name string) string { return "eip." + strings.ReplaceAll(name, "-", "_") }

// RowID identifies a row of an EgressIP among its router's children (ids
// are unique per router column across owners).
func RowID(name string, parts ...string) string {
	return "egressip/" + name + "/" + strings.Join(parts, "/")
}

// NodeKey names, in an EgressIP's NAT, the node whose gateway router holds
// it (the node is in its row id too: a NAT that moves is a new row, and the
// deletion of the old one is no news to the controller).
const NodeKey = "k8s.ovn.org/node"

// Compute builds an EgressIP's rows.
func Compute(p Plan, fams topology.Families) Rows {
	owner := topology.Owner{Type: OwnerEgressIP, Name: p.Name}
	r := Rows{SNATs: map[string][]*nbdb.NAT{}}
	for _, v6 := range []bool{false, true} {
		if !fams.Has(v6) {
			continue
		}
		var addrs []string
		for _, pod := range p.Pods {
			for _, ip := range pod.IPs {
				if ip.Is6() == v6 {
					addrs = append(addrs, ip.String())
				}
			}
		}
		slices.Sort(addrs)
		ids := owner.ExternalIDs()
		r.Sets = append(r.Sets, &nbdb.AddressSet{Name: topology.FamilySetName(SetName(p.Name), v6), Addresses: slices.Compact(addrs), ExternalIDs: ids})
		var hops []string
		for _, a := range p.Assignments {
			if a.IP.Is6() != v6 {
				continue
			}
			for _, j := range p.NextHops[a.Node] {
				if j.Is6() == v6 {
					hops = append(hops, j.String())
				}
			}
			r.SNATs[a.Node] = append(r.SNATs[a.Node], snats(p, a, v6)...)
		}
		if len(hops) == 0 {
			continue // no node hosts an egress IP of this family: its traffic leaves as any pod's
		}
		slices.Sort(hops)
		ids = owner.ExternalIDs()
		fam := topology.IPLayer(v6)
		ids[topology.RowIDKey] = RowID(p.Name, "reroute", fam)
		r.Reroutes = append(r.Reroutes, &nbdb.LogicalRouterPolicy{Priority: ReroutePriority,
			Match:  fmt.Sprintf("%s.src == $%s", fam, topology.FamilySetName(SetName(p.Name), v6)),
			Action: nbdb.LogicalRouterPolicyActionReroute, Nexthops: slices.Compact(hops), ExternalIDs: ids, Options: map[string]string{}})
	}
	return r
}

// snats are the NAT rows giving the pods of a family the egress IP a.
func snats(p Plan, a Assignment, v6 bool) []*nbdb.NAT {
	var out []*nbdb.NAT
	for _, pod := range p.Pods {
		for _, ip := range pod.IPs {
			if ip.Is6() != v6 {
				continue
			}
			ids := topology.Owner{Type: OwnerEgressIP, Name: p.Name}.ExternalIDs()
			ids[topology.RowIDKey] = RowID(p.Name, "snat", a.Node, ip.String())
			ids[NodeKey] = a.Node
			out = append(out, &nbdb.NAT{Type: nbdb.NATTypeSNAT, LogicalIP: ip.String(), ExternalIP: a.IP.String(), ExternalIDs: ids})
		}
	}
	return out
}

// NoReroutes are the policies keeping the selected pods' traffic inside the
// cluster on its way: to the pod subnets, to the join subnets (replies to
// gateway routers) and to the nodes' addresses (the set NodesSet), and
// replies to connections made to pods on their way back.
func NoReroutes(clusterSubnets, joinSubnets []netip.Prefix) []*nbdb.LogicalRouterPolicy {
	var out []*nbdb.LogicalRouterPolicy
	add := func(id, match string) {
		ids := topology.Owner{Type: OwnerCluster, Name: "default"}.ExternalIDs()
		ids[topology.RowIDKey] = "egressip/no-reroute/" + id
		out = append(out, &nbdb.LogicalRouterPolicy{Priority: NoReroutePriority, Match: match,
			Action: nbdb.LogicalRouterPolicyActionAllow, ExternalIDs: ids, Options: map[string]string{}})
	}
	// Replies to connections made to pods (the node switches mark them) go
	// back the way the requests came: a NodePort with externalTrafficPolicy
	// Local answered by a selected pod on a node that is not its egress node.
	add("replies", fmt.Sprintf("pkt.mark == %d", topology.ReplyPktMark))
	for _, cs := range clusterSubnets {
		fam := topology.IPLayer(cs.Addr().Is6())
		add("pods/"+cs.String(), fmt.Sprintf("%s.src == %s && %s.dst == %s", fam, cs, fam, cs))
		for _, j := range joinSubnets {
			if j.Addr().Is6() == cs.Addr().Is6() {
				add("join/"+cs.String(), fmt.Sprintf("%s.src == %s && %s.dst == %s", fam, cs, fam, j))
			}
		}
		add("nodes/"+cs.String(), fmt.Sprintf("%s.src == %s && %s.dst == $%s", fam, cs, fam, topology.FamilySetName(NodesSet, cs.Addr().Is6())))
	}
	return out
}

// NodesSetRows are the nodes' address sets, one per family of the cluster.
func NodesSetRows(addrs []netip.Addr, fams topology.Families) []*nbdb.AddressSet {
	var out []*nbdb.AddressSet
	for _, v6 := range []bool{false, true} {
		if !fams.Has(v6) {
			continue
		}
		var list []string
		for _, a := range addrs {
			if a.Is6() == v6 {
				list = append(list, a.String())
			}
		}
		slices.Sort(list)
		out = append(out, &nbdb.AddressSet{Name: topology.FamilySetName(NodesSet, v6), Addresses: slices.Compact(list),
			ExternalIDs: topology.Owner{Type: OwnerCluster, Name: "default"}.ExternalIDs()})
	}
	return out
}
