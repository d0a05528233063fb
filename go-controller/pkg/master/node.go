package master

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/allocator"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// syncNode makes the NB and the node's annotation match the node (or its absence).
func (m *Master) syncNode(ctx context.Context, name string) error {
	node, err := m.nodeLister.Get(name)
	if apierrors.IsNotFound(err) {
		return m.deleteNode(ctx, name)
	}
	if err != nil {
		return err
	}
	if !m.inZone(node) {
		// Another zone's. One built here left: its pods' ports go with it
		// (every pod is synced at start, so a restart needs no re-queue).
		if _, built := m.nodesReady.Load(name); built {
			m.enqueuePodsOn(name)
		}
		if err := m.removeNode(ctx, name); err != nil {
			return err
		}
		return m.syncRemoteNode(ctx, node)
	}
	if m.cfg.Zone != "" { // come from another zone: no routes to it as a remote node
		if err := EnsureRemoteNodeRoutes(ctx, m.nb, m.committer.Commit, name, nil); err != nil {
			return err
		}
	}
	subnets, err := m.nodeSubnetsFor(node)
	if errors.Is(err, errSubnetNotYet) {
		// Its annotation's arrival syncs it again (nodeUpdated).
		m.log.V(1).Info("node waits for its host subnet", "node", name, "annotation", annotations.NodeSubnets)
		return nil
	}
	if err != nil {
		if errors.Is(err, allocator.ErrExhausted) {
			m.log.Error(err, "cannot give node a host subnet; add a cluster subnet or remove nodes", "node", name)
			m.recorder.Eventf(node, corev1.EventTypeWarning, "SubnetAllocationFailed",
				"no host subnet for node %s: %v; add a --cluster-subnet or remove nodes", name, err)
		}
		return err
	}
	// A node whose gateway router is being built (or stays) has its
	// addresses reached through policies rather than routes.
	_, gwErr := m.gatewayInput(node, subnets)
	if err := EnsureNode(ctx, m.nb, m.committer.Commit, name, subnets, m.internalRanges(), m.claimedIPs(node), gwErr == nil, mgmtMAC(node, m), m.cfg.GuardedDBs); err != nil {
		return fmt.Errorf("node %s: %w", name, err)
	}
	want := annotations.FormatNodeSubnets(subnets)
	if had, ok := node.Annotations[annotations.NodeSubnets]; had != want {
		if ok {
			m.reportNodeSubnetsDrop(node, had, subnets)
		}
		if err := m.patchAnnotation(ctx, node, annotations.NodeSubnets, want); err != nil {
			return fmt.Errorf("annotating node %s with %s: %w", name, want, err)
		}
	}
	if err := m.syncGateway(ctx, node, subnets); err != nil {
		return err
	}
	if err := m.syncTransitPort(ctx, node, subnets); err != nil {
		return err
	}
	// Pods whose node had no subnet yet retry with backoff; the node becoming
	// ready (first successful sync since start, deletion or failure) calls
	// them now rather than at their next retry.
	if _, was := m.nodesReady.LoadOrStore(name, true); !was {
		m.enqueuePodsOn(name)
	}
	return nil
}

// errSubnetNotYet is a node of a zone whose host subnet the cluster-wide
// part has not annotated yet.
var errSubnetNotYet = errors.New("no host subnet allocated yet")

// nodeSubnetsFor returns the subnets the node holds, honouring a valid
// existing annotation, else allocating.
func (m *Master) nodeSubnetsFor(node *corev1.Node) ([]netip.Prefix, error) {
	if s := m.ipam.nodeSubnets(node.Name); s != nil {
		return s, nil
	}
	if v, ok := node.Annotations[annotations.NodeSubnets]; ok {
		subnets, err := m.annotatedNodeSubnets(v)
		if err == nil {
			err = m.ipam.claimNodeSubnets(node.Name, subnets)
		}
		if err == nil {
			return subnets, nil
		}
		if m.cfg.Zone != "" {
			return nil, fmt.Errorf("node %s: host subnet annotation %s=%q unusable: %w", node.Name, annotations.NodeSubnets, v, err)
		}
		m.log.Info("ignoring node's host subnet annotation; allocating a new subnet", "node", node.Name, "annotation", v, "reason", err.Error())
	}
	if m.cfg.Zone != "" {
		// Allocated cluster-wide, not by a zone.
		return nil, errSubnetNotYet
	}
	return m.ipam.allocateNodeSubnets(node.Name)
}

// annotatedNodeSubnets reads the node-subnets annotation's subnets of the
// cluster's families (the others are reported when it is rewritten).
func (m *Master) annotatedNodeSubnets(v string) ([]netip.Prefix, error) {
	subnets, err := annotations.ParseNodeSubnets(v)
	if err != nil {
		return nil, err
	}
	return m.ofClusterFamilies(annotations.NodeSubnets, subnets)
}

// reportNodeSubnetsDrop reports a node-subnets annotation, about to be
// rewritten as subnets, that held a family the cluster lacks.
func (m *Master) reportNodeSubnetsDrop(node *corev1.Node, had string, subnets []netip.Prefix) {
	if ps, err := annotations.ParseNodeSubnets(had); err == nil {
		m.reportFamilyDrop(node, familyDrop{holder: "node", name: node.Name, annotation: annotations.NodeSubnets,
			noun: "host subnet", had: ps, now: subnets})
	}
}

func mgmtMAC(node *corev1.Node, m *Master) net.HardwareAddr {
	v, ok := node.Annotations[annotations.NodeMgmtPortMAC]
	if !ok {
		return nil
	}
	mac, err := annotations.ParseMAC(v)
	if err != nil {
		m.log.Info("ignoring malformed management port MAC annotation; using the derived MAC", "node", node.Name, "annotation", annotations.NodeMgmtPortMAC, "reason", err.Error())
		return nil
	}
	return mac
}

// internalIPs are the node's InternalIP addresses (what the kubelet reports).
func internalIPs(node *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if ip, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, ip.Unmap())
		}
	}
	return out
}

// internalRanges are the cluster's pod and join subnets.
func (m *Master) internalRanges() []netip.Prefix {
	out := slices.Clone(m.cfg.JoinSubnets)
	for _, s := range m.cfg.ClusterSubnets {
		out = append(out, s.CIDR)
	}
	return out
}

// EnsureNode creates or repairs a node's switch, its router port, its
// management port LSP and the routes to its addresses in one transaction.
func EnsureNode(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, name string, subnets, internal []netip.Prefix, hostIPs []netip.Addr, gateway bool, mac net.HardwareAddr, guardedDBs []netip.AddrPort) error {
	t := ovndb.NewTxn(nb)
	group := ovndb.Require(t, &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup})
	switchGroup := ovndb.Require(t, &nbdb.LoadBalancerGroup{Name: topology.ClusterSwitchLBGroup})
	router := ovndb.Require(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if t.Err() != nil {
		return t.Err()
	}
	// The node's own routes and policies, through the owner index: a pass
	// over the cluster router's would make every node's sync cost as much
	// as the cluster has nodes.
	owner := topology.Owner{Type: topology.OwnerNode, Name: name}
	ownRoutes := ovndb.OwnedChildren[nbdb.LogicalRouterStaticRoute](nb, owner, router.StaticRoutes)
	ownPolicies := ovndb.OwnedChildren[nbdb.LogicalRouterPolicy](nb, owner, router.Policies)
	t.KnownChildren(router, &router.StaticRoutes, topology.RowIDKey, ownRoutes)
	t.KnownChildren(router, &router.Policies, topology.RowIDKey, ownPolicies)
	rows := topology.Node(name, subnets, internal, hostIPs, gateway, mac, group.UUID, switchGroup.UUID)
	if !ovndb.HasQoSMark(nb) {
		rows.ReplyMark = nil // replies are not marked: see docs/design.md, EgressIP
	}
	stor := t.Ensure(rows.SwitchToRouter, topology.LSPColumns(rows.SwitchToRouter), nil)
	mgmt := t.Ensure(rows.Management, topology.LSPColumns(rows.Management), nil)
	sw := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: name})
	acls := slices.DeleteFunc([]*nbdb.ACL{rows.MgmtAllow, topology.DBGuard(name, guardedDBs)}, func(a *nbdb.ACL) bool { return a == nil })
	if sw == nil {
		for _, a := range acls {
			rows.Switch.ACLs = append(rows.Switch.ACLs, t.Create(a))
		}
		if rows.ReplyMark != nil {
			rows.Switch.QOSRules = append(rows.Switch.QOSRules, t.Create(rows.ReplyMark))
		}
	}
	t.Ensure(rows.Switch, []any{&rows.Switch.OtherConfig, &rows.Switch.ExternalIDs, &rows.Switch.LoadBalancerGroup}, &rows.Switch.Ports, stor, mgmt)
	if sw != nil {
		for _, a := range acls {
			t.EnsureChild(sw, &sw.ACLs, topology.RowIDKey, a, topology.ACLColumns(a))
		}
		if rows.ReplyMark != nil {
			t.EnsureChild(sw, &sw.QOSRules, topology.RowIDKey, rows.ReplyMark, topology.QoSColumns(rows.ReplyMark))
		}
		if len(guardedDBs) == 0 { // a guard left from a run that had endpoints
			t.RemoveChildren(sw, &sw.ACLs, t.ChildrenWhere(sw.ACLs, func(ids map[string]string) bool {
				return topology.OwnedBy(ids, topology.Owner{Type: topology.OwnerNode, Name: name}) && ids[topology.RowIDKey] == topology.DBGuardACLID
			}, &nbdb.ACL{})...)
		}
	}
	rtos := t.Ensure(rows.RouterToSwitch, topology.LRPColumns(rows.RouterToSwitch), nil)
	t.AddChildren(router, &router.Ports, rtos)
	wanted := map[string]bool{}
	for _, r := range rows.HostRoutes {
		wanted[r.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(router, &router.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	t.RemoveChildren(router, &router.StaticRoutes, ovndb.UUIDsWhere(ownRoutes, func(ids map[string]string) bool {
		id := ids[topology.RowIDKey]
		return strings.HasPrefix(id, topology.HostRouteIDPrefix) && !wanted[id]
	})...)
	wantedPolicies := map[string]bool{}
	for _, p := range rows.HostPolicies {
		wantedPolicies[p.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(router, &router.Policies, topology.RowIDKey, p, topology.PolicyColumns(p))
	}
	t.RemoveChildren(router, &router.Policies, ovndb.UUIDsWhere(ownPolicies, func(ids map[string]string) bool {
		id := ids[topology.RowIDKey]
		return strings.HasPrefix(id, topology.HostRouteIDPrefix) && !wantedPolicies[id]
	})...)
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return commit(ctx, ops)
}

// deleteNode removes the rows of a node that no longer exists and frees its
// subnet, but only once no pod bound to it holds an address: a node deleted
// and re-registered while its pods run (the kubelet re-creates its Node
// object) keeps its subnet, switch and pod ports, so its pods never notice.
// The last such pod's deletion queues the node again.
func (m *Master) deleteNode(ctx context.Context, name string) error {
	if m.cfg.Zone != "" {
		if err := EnsureRemoteNodeRoutes(ctx, m.nb, m.committer.Commit, name, nil); err != nil {
			return err
		}
	}
	if n := m.podsHoldingOn(name); n > 0 {
		m.nodesReady.Delete(name)
		m.log.Info("node is gone but pods bound to it remain; keeping its subnet and rows until they are gone", "node", name, "pods", n)
		return nil
	}
	return m.removeNode(ctx, name)
}

// removeNode removes the node's rows and releases its addresses.
func (m *Master) removeNode(ctx context.Context, name string) error {
	m.nodesReady.Delete(name)
	m.forgetFamilyDrops("node", name, annotations.NodeSubnets, annotations.NodeGatewayJoinIP)
	m.reported.Delete(gatewayKey(name))
	owner := topology.Owner{Type: topology.OwnerNode, Name: name}
	t := ovndb.NewTxn(m.nb)
	if sw := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: name}); sw != nil && topology.OwnedBy(sw.ExternalIDs, owner) {
		t.Delete(sw) // its ports are garbage-collected with it
	}
	router := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	for _, port := range []string{topology.NodeRouterToSwitchPort(name), topology.TransitRouterPort(name)} {
		lrp := ovndb.Lookup(t, &nbdb.LogicalRouterPort{Name: port})
		if lrp != nil && router != nil && topology.OwnedBy(lrp.ExternalIDs, owner) {
			t.RemoveChildren(router, &router.Ports, lrp.UUID)
		}
	}
	if lsp := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: topology.TransitSwitchPort(name)}); lsp != nil && topology.OwnedBy(lsp.ExternalIDs, owner) {
		ts := &nbdb.LogicalSwitch{}
		t.Detach(ts, &ts.Ports, lsp.UUID)
	}
	removeGatewayRows(t, name)
	if router != nil {
		all := func(map[string]string) bool { return true }
		t.RemoveChildren(router, &router.StaticRoutes,
			ovndb.UUIDsWhere(ovndb.OwnedChildren[nbdb.LogicalRouterStaticRoute](m.nb, owner, router.StaticRoutes), all)...)
		t.RemoveChildren(router, &router.Policies,
			ovndb.UUIDsWhere(ovndb.OwnedChildren[nbdb.LogicalRouterPolicy](m.nb, owner, router.Policies), all)...)
	}
	ops, err := t.Ops()
	if err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	if err := m.committer.Commit(ctx, ops); err != nil {
		return fmt.Errorf("deleting node %s: %w", name, err)
	}
	if len(ops) > 0 {
		m.log.Info("removed deleted node's rows", "node", name)
	}
	m.ipam.releaseNode(name)
	m.ipam.releaseGatewayJoinIPs(name)
	return nil
}

func (m *Master) nodeUpdated(old, cur any) {
	o, ok1 := old.(*corev1.Node)
	n, ok2 := cur.(*corev1.Node)
	if ok1 && ok2 &&
		o.Annotations[annotations.NodeSubnets] == n.Annotations[annotations.NodeSubnets] &&
		o.Annotations[annotations.NodeMgmtPortMAC] == n.Annotations[annotations.NodeMgmtPortMAC] &&
		o.Annotations[annotations.NodeChassisID] == n.Annotations[annotations.NodeChassisID] &&
		o.Annotations[annotations.NodeL3GatewayConfig] == n.Annotations[annotations.NodeL3GatewayConfig] &&
		o.Annotations[annotations.NodeGatewayJoinIP] == n.Annotations[annotations.NodeGatewayJoinIP] &&
		o.Annotations[annotations.NodeZone] == n.Annotations[annotations.NodeZone] &&
		slices.Equal(internalIPs(o), internalIPs(n)) {
		return
	}
	m.enqueue(m.nodeQueue, cur)
	if ok1 && ok2 && (!slices.Equal(internalIPs(o), internalIPs(n)) ||
		o.Annotations[annotations.NodeChassisID] != n.Annotations[annotations.NodeChassisID]) {
		m.enqueueClaimPeers(o)
		m.enqueueClaimPeers(n)
	}
}

// podsHoldingOn counts the pods bound to node that hold, or may still be
// given, an address in its subnet.
func (m *Master) podsHoldingOn(node string) int {
	held := m.ipam.podsOn(node)
	for _, pod := range m.podLister.ByIndex(podNodeIndex, node) {
		if pod.Networked() {
			held[pod.Namespace+"/"+pod.Name] = true
		}
	}
	return len(held)
}

func (m *Master) enqueuePodsOn(node string) {
	for _, pod := range m.podLister.ByIndex(podNodeIndex, node) {
		m.enqueue(m.podQueue, pod)
	}
}
