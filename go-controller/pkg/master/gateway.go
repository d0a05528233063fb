package master

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// errNoGateway: the node asks for no gateway (no l3-gateway-config).
var errNoGateway = errors.New("no gateway asked for")

// errGatewayNotYet: the node asks for a gateway but has not published
// everything it needs yet (its chassis); its next update queues it again.
var errGatewayNotYet = errors.New("gateway not ready yet")

// syncGateway makes the node's gateway rows match what its annotations ask
// for: GR_<node>, its join port, ext_<node>, SNAT and routes, built from
// k8s.ovn.org/l3-gateway-config (written by the node's gateway-init) and its
// chassis; removed when the node asks for none. A malformed annotation
// changes nothing and is reported.
func (m *Master) syncGateway(ctx context.Context, node *corev1.Node, subnets []netip.Prefix) error {
	in, err := m.gatewayInput(node, subnets)
	switch {
	case errors.Is(err, errNoGateway):
		return m.removeGateway(ctx, node.Name)
	case errors.Is(err, errGatewayNotYet):
		return nil
	case err != nil:
		// Once per node and problem: every update of the node (a heartbeat)
		// syncs it again.
		if prev, seen := m.reported.Swap(gatewayKey(node.Name), err.Error()); !seen || prev != err.Error() {
			m.log.Error(err, "ignoring the node's gateway annotation; its gateway is left as it is", "node", node.Name)
			m.recorder.Eventf(node, corev1.EventTypeWarning, "GatewayConfigInvalid",
				"gateway of node %s not changed: %v; run gateway-init on the node again", node.Name, err)
		}
		return nil
	}
	m.reported.Delete(gatewayKey(node.Name))
	if err := EnsureGateway(ctx, m.nb, m.committer.Commit, in); err != nil {
		return fmt.Errorf("gateway of node %s: %w", node.Name, err)
	}
	if want := annotations.FormatGatewayJoinIPs(in.JoinIPs); node.Annotations[annotations.NodeGatewayJoinIP] != want {
		m.reportJoinIPsDrop(node, in.JoinIPs)
		if err := m.patchAnnotation(ctx, node, annotations.NodeGatewayJoinIP, want); err != nil {
			return fmt.Errorf("annotating node %s with its gateway join address: %w", node.Name, err)
		}
	}
	return nil
}

func gatewayKey(node string) string { return "gateway " + node }

// reportJoinIPsDrop reports a join address annotation, about to be
// rewritten as joinIPs, that held a family the cluster lacks. Restoring
// needs nothing more: a family without a join subnet takes no address.
func (m *Master) reportJoinIPsDrop(node *corev1.Node, joinIPs []netip.Prefix) {
	if ps, err := annotations.ParseGatewayJoinIPs(node.Annotations[annotations.NodeGatewayJoinIP]); err == nil {
		m.reportFamilyDrop(node, familyDrop{holder: "node", name: node.Name, annotation: annotations.NodeGatewayJoinIP,
			noun: "gateway join address", had: ps, now: joinIPs})
	}
}

// gatewayInput is what the node's gateway is built from.
func (m *Master) gatewayInput(node *corev1.Node, subnets []netip.Prefix) (topology.GatewayInput, error) {
	var in topology.GatewayInput
	v, ok := node.Annotations[annotations.NodeL3GatewayConfig]
	if !ok {
		return in, errNoGateway
	}
	gw, err := annotations.ParseL3GatewayConfig(v)
	if err != nil {
		return in, err
	}
	bridge, err := gatewayBridge(gw, node.Name)
	if err != nil {
		return in, err
	}
	chassis := node.Annotations[annotations.NodeChassisID]
	if chassis == "" {
		return in, errGatewayNotYet
	}
	if owner := m.chassisOwner(chassis); owner != node.Name {
		return in, fmt.Errorf("%s %q is also reported by node %s, which reported it first; each node's daemon reports its own OVS system-id",
			annotations.NodeChassisID, chassis, owner)
	}
	joinIPs, err := m.gatewayJoinIPs(node, subnets)
	if err != nil {
		return in, err
	}
	in = topology.GatewayInput{
		Node: node.Name, SystemID: chassis, JoinIPs: joinIPs, JoinSubnets: m.cfg.JoinSubnets,
		HostSubnets: subnets, BridgeMAC: gw.MAC, Bridge: bridge, PhysNet: topology.DefaultPhysNet, Zone: m.cfg.Zone != "",
	}
	// The node's address and next hop of each family of the cluster (the
	// first of each): a family the node has no address of has no egress.
	for _, cs := range m.cfg.ClusterSubnets {
		in.ClusterSubnets = append(in.ClusterSubnets, cs.CIDR)
		v6 := cs.CIDR.Addr().Is6()
		if i := slices.IndexFunc(gw.IPs, func(p netip.Prefix) bool { return p.Addr().Is6() == v6 }); i >= 0 {
			in.PhysicalIPs = append(in.PhysicalIPs, gw.IPs[i])
		}
		if i := slices.IndexFunc(gw.NextHops, func(a netip.Addr) bool { return a.Is6() == v6 }); i >= 0 {
			in.DefaultGWs = append(in.DefaultGWs, gw.NextHops[i])
		}
	}
	if len(in.PhysicalIPs) == 0 {
		return in, fmt.Errorf("%s: no ip-addresses of the cluster's families", annotations.NodeL3GatewayConfig)
	}
	return in, nil
}

// gatewayJoinIPs are the node's gateway router's join addresses: allocated
// (keeping those it had) in central mode; in zone mode those its host
// subnets number (config.NodeAddrs), unique cluster-wide because other
// zones route replies to them (topology.RemoteNodeRoutes).
func (m *Master) gatewayJoinIPs(node *corev1.Node, subnets []netip.Prefix) ([]netip.Prefix, error) {
	if m.cfg.Zone == "" {
		return m.ipam.gatewayJoinIPs(node.Name, m.existingJoinIPs(node.Name, node.Annotations))
	}
	want, err := config.NodeAddrs(m.cfg.JoinSubnets, m.cfg.ClusterSubnets, subnets)
	if err != nil {
		return nil, fmt.Errorf("node %s: gateway join addresses: %w", node.Name, err)
	}
	got, err := m.ipam.gatewayJoinIPs(node.Name, want)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(got, want) {
		m.ipam.releaseGatewayJoinIPs(node.Name)
		return nil, fmt.Errorf("node %s: gateway join addresses %v, numbered by its host subnets, are held by another node's gateway", node.Name, want)
	}
	return got, nil
}

// gatewayBridge checks a gateway config and returns the bridge its
// localnet port is named after. The port name must be the node's own
// (<bridge>_<node>_localnet), so an annotation cannot take another row's name.
func gatewayBridge(gw annotations.L3GatewayConfig, node string) (string, error) {
	if gw.Mode != "shared" {
		return "", fmt.Errorf("%s: mode %q is not supported (only \"shared\")", annotations.NodeL3GatewayConfig, gw.Mode)
	}
	if len(gw.IPs) == 0 {
		return "", fmt.Errorf("%s: no ip-addresses", annotations.NodeL3GatewayConfig)
	}
	if len(gw.MAC) != 6 {
		return "", fmt.Errorf("%s: no mac-address", annotations.NodeL3GatewayConfig)
	}
	bridge, ok := strings.CutSuffix(gw.InterfaceID, "_"+node+"_localnet")
	if !ok || bridge == "" || topology.LocalnetPort(bridge, node) != gw.InterfaceID {
		return "", fmt.Errorf("%s: interface-id %q is not <bridge>_%s_localnet", annotations.NodeL3GatewayConfig, gw.InterfaceID, node)
	}
	return bridge, nil
}

// existingJoinIPs are the join addresses the node's gateway had: from the
// master's annotation, else from its join port (stopped between the two).
func (m *Master) existingJoinIPs(node string, ann map[string]string) []netip.Prefix {
	if ps, err := annotations.ParseGatewayJoinIPs(ann[annotations.NodeGatewayJoinIP]); err == nil {
		return ps
	}
	lrp := &nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node)}
	if m.nb.Get(context.Background(), lrp) != nil || !topology.OwnedBy(lrp.ExternalIDs, topology.Owner{Type: topology.OwnerNode, Name: node}) {
		return nil
	}
	var out []netip.Prefix
	for _, n := range lrp.Networks {
		if p, err := netip.ParsePrefix(n); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// EnsureGateway creates or repairs a node's gateway rows and removes the NAT
// and routes of its gateway that are no longer wanted. Routers and switches
// come first; NAT and routes hang off them, so a new gateway takes two
// transactions.
func EnsureGateway(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, in topology.GatewayInput) error {
	t := ovndb.NewTxn(nb)
	group := ovndb.Require(t, &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup})
	join := ovndb.Require(t, &nbdb.LogicalSwitch{Name: topology.JoinSwitch})
	if t.Err() != nil {
		return t.Err()
	}
	in.LBGroup = group.UUID
	rows := topology.Gateway(in)
	rtoj := t.Ensure(rows.RouterToJoin, topology.LRPColumns(rows.RouterToJoin), nil)
	rtoe := t.Ensure(rows.RouterToExt, topology.LRPColumns(rows.RouterToExt), nil)
	t.Ensure(rows.Router, []any{&rows.Router.Options, &rows.Router.ExternalIDs, &rows.Router.LoadBalancerGroup}, &rows.Router.Ports, rtoj, rtoe)
	jtor := t.Ensure(rows.JoinToRouter, topology.LSPColumns(rows.JoinToRouter), nil)
	t.AddChildren(join, &join.Ports, jtor)
	localnet := t.Ensure(rows.Localnet, topology.LSPColumns(rows.Localnet), nil)
	etor := t.Ensure(rows.ExtToRouter, topology.LSPColumns(rows.ExtToRouter), nil)
	t.Ensure(rows.External, []any{&rows.External.ExternalIDs}, &rows.External.Ports, localnet, etor)
	if err := removeStaleLocalnets(ctx, t, nb, in.Node, rows.Localnet.Name); err != nil {
		return err
	}
	ops, err := t.Ops()
	if err == nil {
		err = commit(ctx, ops)
	}
	if err != nil {
		return err
	}
	return ensureGatewayChildren(ctx, nb, commit, in.Node, rows)
}

// ensureGatewayChildren is the second pass: the gateway router's NAT and
// routes and the cluster router's source routes, exactly as wanted.
func ensureGatewayChildren(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, node string, rows topology.GatewayRows) error {
	t := ovndb.NewTxn(nb)
	gr := ovndb.Require(t, &nbdb.LogicalRouter{Name: rows.Router.Name})
	cluster := ovndb.Require(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if t.Err() != nil {
		return t.Err()
	}
	want := map[string]bool{}
	for _, nat := range rows.SNATs {
		want[nat.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(gr, &gr.Nat, topology.RowIDKey, nat, topology.NATColumns(nat))
	}
	for _, r := range rows.Routes {
		want[r.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(gr, &gr.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	for _, r := range rows.ClusterRoutes {
		want[r.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(cluster, &cluster.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	// Everything on the gateway router is ours but the egress IPs' SNATs
	// (package egressip); on the cluster router only the node's gateway
	// source routes are this pass's.
	t.RemoveChildren(gr, &gr.Nat, t.ChildrenWhere(gr.Nat, func(ids map[string]string) bool {
		o, _ := topology.OwnerOf(ids)
		return o.Type != egressip.OwnerEgressIP && !want[ids[topology.RowIDKey]]
	}, &nbdb.NAT{})...)
	t.RemoveChildren(gr, &gr.StaticRoutes, t.ChildrenWhere(gr.StaticRoutes, func(ids map[string]string) bool { return !want[ids[topology.RowIDKey]] }, &nbdb.LogicalRouterStaticRoute{})...)
	t.RemoveChildren(cluster, &cluster.StaticRoutes, gatewaySourceRoutes(t, cluster, node, want)...)
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return commit(ctx, ops)
}

// gatewaySourceRoutes are the node's gateway routes on the cluster router
// whose id is not in keep.
func gatewaySourceRoutes(t *ovndb.Txn, cluster *nbdb.LogicalRouter, node string, keep map[string]bool) []string {
	owner := topology.Owner{Type: topology.OwnerNode, Name: node}
	return t.ChildrenWhere(cluster.StaticRoutes, func(ids map[string]string) bool {
		id := ids[topology.RowIDKey]
		return topology.OwnedBy(ids, owner) && strings.HasPrefix(id, topology.GatewayClusterRouteIDPrefix) && !keep[id]
	}, &nbdb.LogicalRouterStaticRoute{})
}

// removeStaleLocalnets drops localnet ports of ours on ext_<node> other than
// keep: one named after another bridge, or the name an older version used
// (<bridge>_<node>, which a pod could take). Two localnet ports on one
// switch would both deliver the physical network's frames.
// A switch's ports are not monitored (ovndb.NBUnmonitored): they are read
// from the server.
func removeStaleLocalnets(ctx context.Context, t *ovndb.Txn, nb libovsdbclient.Client, node, keep string) error {
	ext := &nbdb.LogicalSwitch{Name: topology.ExternalSwitch(node)}
	if found, err := ovndb.FetchByName(ctx, nb, ext, &ext.Ports); err != nil || !found {
		return err
	}
	owner := topology.Owner{Type: topology.OwnerNode, Name: node}
	var stale []string
	for _, uuid := range ext.Ports {
		p := &nbdb.LogicalSwitchPort{UUID: uuid}
		if nb.Get(ctx, p) == nil && p.Type == "localnet" && p.Name != keep && topology.OwnedBy(p.ExternalIDs, owner) {
			stale = append(stale, uuid)
		}
	}
	t.RemoveChildren(ext, &ext.Ports, stale...)
	return nil
}

// removeGateway deletes the node's gateway rows and frees its join address.
func (m *Master) removeGateway(ctx context.Context, name string) error {
	t := ovndb.NewTxn(m.nb)
	removeGatewayRows(t, name)
	ops, err := t.Ops()
	if err == nil && len(ops) > 0 {
		err = m.committer.Commit(ctx, ops)
		if err == nil {
			m.log.Info("removed node's gateway", "node", name)
		}
	}
	if err != nil {
		return fmt.Errorf("removing gateway of node %s: %w", name, err)
	}
	m.ipam.releaseGatewayJoinIPs(name)
	return nil
}

// removeGatewayRows adds to t the deletion of the node's gateway: its
// router and external switch (roots: their ports, NAT and routes go with
// them), its join port and its source routes on the cluster router.
func removeGatewayRows(t *ovndb.Txn, name string) {
	owner := topology.Owner{Type: topology.OwnerNode, Name: name}
	if gr := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.GatewayRouter(name)}); gr != nil && topology.OwnedBy(gr.ExternalIDs, owner) {
		t.Delete(gr)
	}
	if ext := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: topology.ExternalSwitch(name)}); ext != nil && topology.OwnedBy(ext.ExternalIDs, owner) {
		t.Delete(ext)
	}
	join := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: topology.JoinSwitch})
	if jtor := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: topology.JoinToGatewayPort(name)}); jtor != nil && join != nil && topology.OwnedBy(jtor.ExternalIDs, owner) {
		t.RemoveChildren(join, &join.Ports, jtor.UUID)
	}
	if cluster := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter}); cluster != nil {
		t.RemoveChildren(cluster, &cluster.StaticRoutes, gatewaySourceRoutes(t, cluster, name, nil)...)
	}
}
