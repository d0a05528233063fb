package master

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

// Node indexes: by InternalIP address, and by the chassis (OVS system-id)
// the node's daemon reports. Each is a claim only one Node may hold.
const (
	nodeAddrIndex    = "status.addresses.internalIP"
	nodeChassisIndex = "annotations.chassis"
)

func indexNodeChassis(obj any) ([]string, error) {
	if n, ok := obj.(*corev1.Node); ok && n.Annotations[annotations.NodeChassisID] != "" {
		return []string{n.Annotations[annotations.NodeChassisID]}, nil
	}
	return nil, nil
}

func indexNodeAddresses(obj any) ([]string, error) {
	n, ok := obj.(*corev1.Node)
	if !ok {
		return nil, nil
	}
	var out []string
	for _, ip := range internalIPs(n) {
		out = append(out, ip.String())
	}
	return out, nil
}

// claimedIPs are the node's InternalIPs that it alone holds, or that it
// holds first among the Nodes reporting the same address: the oldest Node
// wins, then the first by name. A route to a node address has one next hop,
// so two Nodes reporting one address would otherwise take it from each other
// at every sync (and a node could take another's by reporting its address).
// Each node left without an address it reports, and the one keeping it,
// get a Warning Event, once per conflict.
func (m *Master) claimedIPs(node *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, ip := range internalIPs(node) {
		holders := m.nodesWithAddress(ip)
		if len(holders) <= 1 {
			out = append(out, ip)
			continue
		}
		winner := holders[0]
		for _, h := range holders[1:] {
			m.reportDuplicateAddress(ip, winner, h)
		}
		if winner.Name == node.Name {
			out = append(out, ip)
		}
	}
	return out
}

// nodesWithAddress lists the Nodes reporting ip as an InternalIP, the one
// that keeps it first.
func (m *Master) nodesWithAddress(ip netip.Addr) []*corev1.Node {
	return m.nodesClaiming(nodeAddrIndex, ip.String())
}

// nodesClaiming lists the Nodes whose index value is v, oldest first (then
// by name): the first keeps what they all claim.
func (m *Master) nodesClaiming(index, v string) []*corev1.Node {
	objs, err := m.nodeIndexer.ByIndex(index, v)
	if err != nil {
		return nil
	}
	var nodes []*corev1.Node
	for _, o := range objs {
		if n, ok := o.(*corev1.Node); ok {
			nodes = append(nodes, n)
		}
	}
	slices.SortFunc(nodes, policy.ClaimOrder)
	return nodes
}

// chassisOwner is the Node that keeps a chassis several Nodes report (the
// oldest): a gateway router is pinned to a chassis only for it, so no node
// can move another's gateway router onto its own chassis by reporting it.
func (m *Master) chassisOwner(chassis string) string {
	if nodes := m.nodesClaiming(nodeChassisIndex, chassis); len(nodes) > 0 {
		return nodes[0].Name
	}
	return ""
}

func (m *Master) reportDuplicateAddress(ip netip.Addr, winner, loser *corev1.Node) {
	key := fmt.Sprintf("%s %s/%s %s/%s", ip, winner.Name, winner.UID, loser.Name, loser.UID)
	if _, seen := m.dupAddrReported.LoadOrStore(key, true); seen {
		return
	}
	m.log.Info("two nodes report the same InternalIP; the route to it goes to the older one", "address", ip.String(),
		"kept", winner.Name, "refused", loser.Name)
	m.recorder.Eventf(loser, corev1.EventTypeWarning, "DuplicateNodeAddress",
		"node %s also reports InternalIP %s; pods reach that address on %s (the older node); fix the address of one node", winner.Name, ip, winner.Name)
	m.recorder.Eventf(winner, corev1.EventTypeWarning, "DuplicateNodeAddress",
		"node %s also reports InternalIP %s; pods reach that address on this node (the older one); fix the address of one node", loser.Name, ip)
}

// enqueueClaimPeers queues the other Nodes sharing an InternalIP or a
// chassis with this one: a change of its addresses or chassis, or its
// deletion, can hand them what they claim.
func (m *Master) enqueueClaimPeers(obj any) {
	n := controller.ObjectOf[*corev1.Node](obj)
	if n == nil {
		return
	}
	var peers []*corev1.Node
	for _, ip := range internalIPs(n) {
		peers = append(peers, m.nodesWithAddress(ip)...)
	}
	if c := n.Annotations[annotations.NodeChassisID]; c != "" {
		peers = append(peers, m.nodesClaiming(nodeChassisIndex, c)...)
	}
	for _, peer := range peers {
		if peer.Name != n.Name {
			m.enqueue(m.nodeQueue, peer)
		}
	}
}
