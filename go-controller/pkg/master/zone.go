package master

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// EnsureGlobal writes the NB_Global options the master keeps
// (topology.GlobalOptions: northd's backoff; in zone mode, OVN
// interconnection's route exchange, issue 38, by which the zone advertises
// its cluster router's routes and learns the other zones', all but those
// inside the ranges every zone has alike) and, in zone mode, names the
// zone's NB. Only the keys of want are written: ovn-northd keeps its own
// options there. An empty zone leaves the name alone.
func EnsureGlobal(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, zone string, want map[string]string) error {
	var globals []nbdb.NBGlobal
	if err := nb.List(ctx, &globals); err != nil {
		return err
	}
	if len(globals) == 0 {
		ops, err := nb.Create(&nbdb.NBGlobal{Name: zone, Options: want})
		if err != nil {
			return err
		}
		return commit(ctx, ops)
	}
	g := &globals[0]
	var ops []ovsdb.Operation
	if zone != "" && g.Name != zone {
		g.Name = zone
		o, err := nb.Where(g).Update(g, &g.Name)
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	var stale []string
	changed := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := g.Options[k]; !ok || v != want[k] {
			changed[k] = want[k]
			if ok {
				stale = append(stale, k)
			}
		}
	}
	if len(stale) > 0 {
		o, err := nb.Where(g).Mutate(g, model.Mutation{Field: &g.Options, Mutator: ovsdb.MutateOperationDelete, Value: stale})
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	if len(changed) > 0 {
		o, err := nb.Where(g).Mutate(g, model.Mutation{Field: &g.Options, Mutator: ovsdb.MutateOperationInsert, Value: changed})
		if err != nil {
			return err
		}
		ops = append(ops, o...)
	}
	if len(ops) == 0 {
		return nil
	}
	return commit(ctx, ops)
}

// EnsureTransitPort creates or repairs a node's port on the transit switch
// (topology.Transit): the cluster router's port with the node's transit
// addresses, gatewayed on the node's chassis, and the switch's port facing
// it. The transit switch is ovn-ic's, made from the IC NB's: until it is in
// this zone's NB the port waits, with an error that says so.
func EnsureTransitPort(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, node, chassis string, addrs []netip.Prefix) error {
	if len(addrs) == 0 || chassis == "" {
		return fmt.Errorf("node %s: a transit port needs the node's transit addresses and its chassis", node)
	}
	rows := topology.Transit(node, chassis, addrs)
	t := ovndb.NewTxn(nb)
	ts := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: topology.TransitSwitch})
	switch {
	case t.Err() != nil:
		return t.Err()
	case ts == nil:
		return fmt.Errorf("node %s: no switch %s in this zone's NB yet: ovn-ic makes it from the IC NB's (is ovn-ic running, and the transit switch in the IC NB?)", node, topology.TransitSwitch)
	case ts.OtherConfig["interconn-ts"] == "":
		return fmt.Errorf("node %s: switch %s in this zone's NB is not a transit switch (no other_config:interconn-ts): remove it; ovn-ic makes the transit switch", node, topology.TransitSwitch)
	}
	router := ovndb.Require(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	gw := t.Ensure(rows.Gateway, []any{&rows.Gateway.ChassisName, &rows.Gateway.Priority, &rows.Gateway.ExternalIDs}, nil)
	rows.RouterPort.GatewayChassis = []string{gw}
	lrp := t.Ensure(rows.RouterPort, append(topology.LRPColumns(rows.RouterPort), &rows.RouterPort.GatewayChassis), nil)
	// ovn-ic keeps the port's tunnel key among its options
	// (requested-tnl-key): of them only router-port is ours.
	if cur := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: rows.SwitchPort.Name}); cur != nil && cur.Options != nil {
		opts := maps.Clone(cur.Options)
		maps.Copy(opts, rows.SwitchPort.Options)
		rows.SwitchPort.Options = opts
	}
	lsp := t.Ensure(rows.SwitchPort, topology.LSPColumns(rows.SwitchPort), nil)
	if router != nil {
		t.AddChildren(router, &router.Ports, lrp)
	}
	t.AddChildren(ts, &ts.Ports, lsp)
	ops, err := t.Ops()
	if err != nil {
		return fmt.Errorf("node %s's transit port: %w", node, err)
	}
	return commit(ctx, ops)
}

// inZone says whether the master programs node: every node in central
// mode, the nodes annotated with its zone in zone mode.
func (m *Master) inZone(node *corev1.Node) bool {
	return m.cfg.Zone == "" || node.Annotations[annotations.NodeZone] == m.cfg.Zone
}

// syncTransitPort gives a node of this zone its port on the transit switch
// (zone mode), gatewayed on the chassis the node reports, at the addresses
// its host subnets number.
func (m *Master) syncTransitPort(ctx context.Context, node *corev1.Node, subnets []netip.Prefix) error {
	if m.cfg.Zone == "" {
		return nil
	}
	chassis := node.Annotations[annotations.NodeChassisID]
	if chassis == "" {
		return fmt.Errorf("node %s: no chassis reported yet (annotation %s, written by its node daemon)", node.Name, annotations.NodeChassisID)
	}
	if owner := m.chassisOwner(chassis); owner != node.Name {
		return fmt.Errorf("node %s: %s %q is also reported by node %s, which reported it first; each node's daemon reports its own OVS system-id",
			node.Name, annotations.NodeChassisID, chassis, owner)
	}
	addrs, err := config.NodeAddrs(m.cfg.TransitSubnets, m.cfg.ClusterSubnets, subnets)
	if err != nil {
		return fmt.Errorf("node %s: %w", node.Name, err)
	}
	return EnsureTransitPort(ctx, m.nb, m.committer.Commit, node.Name, chassis, addrs)
}

// transitAddrs are a node's transit addresses, numbered by the host
// subnets its annotation gives.
func (m *Master) transitAddrs(node *corev1.Node) ([]netip.Addr, error) {
	subnets, err := m.annotatedNodeSubnets(node.Annotations[annotations.NodeSubnets])
	if err != nil {
		return nil, fmt.Errorf("node %s: %s: %w", node.Name, annotations.NodeSubnets, err)
	}
	ps, err := config.NodeAddrs(m.cfg.TransitSubnets, m.cfg.ClusterSubnets, subnets)
	if err != nil {
		return nil, err
	}
	out := make([]netip.Addr, len(ps))
	for i, p := range ps {
		out[i] = p.Addr()
	}
	return out, nil
}

// syncRemoteNode keeps this zone's routes to a node of another zone
// (topology.RemoteNodeRoutes), from the host subnets its annotation gives
// (none yet: none).
func (m *Master) syncRemoteNode(ctx context.Context, node *corev1.Node) error {
	var routes []*nbdb.LogicalRouterStaticRoute
	if v, ok := node.Annotations[annotations.NodeSubnets]; ok {
		subnets, err := m.annotatedNodeSubnets(v)
		if err != nil {
			return fmt.Errorf("node %s of zone %q: %s: %w", node.Name, node.Annotations[annotations.NodeZone], annotations.NodeSubnets, err)
		}
		join, err := config.NodeAddrs(m.cfg.JoinSubnets, m.cfg.ClusterSubnets, subnets)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
		transit, err := config.NodeAddrs(m.cfg.TransitSubnets, m.cfg.ClusterSubnets, subnets)
		if err != nil {
			return fmt.Errorf("node %s: %w", node.Name, err)
		}
		routes = topology.RemoteNodeRoutes(node.Name, join, transit)
	}
	return EnsureRemoteNodeRoutes(ctx, m.nb, m.committer.Commit, node.Name, routes)
}

// EnsureRemoteNodeRoutes makes the cluster router's routes owned by a node
// of another zone exactly routes (nil: none, for a node gone or come into
// this zone).
func EnsureRemoteNodeRoutes(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, node string, routes []*nbdb.LogicalRouterStaticRoute) error {
	t := ovndb.NewTxn(nb)
	router := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if router == nil {
		if len(routes) == 0 {
			return nil
		}
		return fmt.Errorf("node %s of another zone: no %s yet", node, topology.ClusterRouter)
	}
	owned := ovndb.OwnedChildren[nbdb.LogicalRouterStaticRoute](nb, topology.Owner{Type: topology.OwnerRemoteNode, Name: node}, router.StaticRoutes)
	t.KnownChildren(router, &router.StaticRoutes, topology.RowIDKey, owned)
	wanted := map[string]bool{}
	for _, r := range routes {
		wanted[r.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(router, &router.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	t.RemoveChildren(router, &router.StaticRoutes, ovndb.UUIDsWhere(owned, func(ids map[string]string) bool { return !wanted[ids[topology.RowIDKey]] })...)
	ops, err := t.Ops()
	if err != nil || len(ops) == 0 {
		return err
	}
	return commit(ctx, ops)
}

// enqueuePod queues a pod's sync when wantPod says so.
func (m *Master) enqueuePod(obj any) {
	if m.wantPod(obj) {
		m.enqueue(m.podQueue, obj)
	}
}

// wantPod says whether a pod's event is this master's to sync (and time):
// in zone mode not that of a pod of another zone's node for which it holds
// nothing (every zone's master sees every pod of the cluster, whose
// addresses fill the policies' address sets; such a sync would change
// nothing), nor any before the start has queued every pod.
func (m *Master) wantPod(obj any) bool {
	if m.cfg.Zone == "" {
		return true
	}
	if !m.podsListed.Load() {
		return false // the start queues every pod, once every pod's node is known
	}
	pod, ok := obj.(*slim.Pod)
	return !ok || m.podMayBeOurs(pod)
}

// podMayBeOurs says whether this master may program the pod: always in
// central mode; in zone mode unless its node is known to be another zone's
// and no address is held for the pod. A node that comes into the zone
// queues its pods itself (syncNode), and one that leaves queues those it
// had; the pods of a node not known yet are synced and wait for it.
func (m *Master) podMayBeOurs(pod *slim.Pod) bool {
	if m.cfg.Zone == "" || pod.NodeName == "" {
		return true
	}
	if _, held := m.ipam.pod(pod.Namespace + "/" + pod.Name); held {
		return true
	}
	node, err := m.nodeLister.Get(pod.NodeName)
	return err != nil || m.inZone(node)
}
