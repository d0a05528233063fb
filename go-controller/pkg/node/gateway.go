package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"sort"
	"strings"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/vishvananda/netlink"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// GatewayConfig is what gateway-init needs.
type GatewayConfig struct {
	NodeName       string
	ClusterSubnets []netip.Prefix
	JoinSubnet     netip.Prefix
	Bridge         string       // OVS bridge holding the NIC (nics-to-bridge makes br<NIC>)
	PhysicalIP     netip.Prefix // the node's address on that network
	DefaultGW      netip.Addr   // may be invalid: no default route
	PhysNet        string
	HostSubnet     netip.Prefix // else read from the node annotation
	SubnetTimeout  time.Duration
}

// GatewayInit builds the node's gateway router and external switch in the NB,
// maps the physical network to the bridge in OVS and publishes
// k8s.ovn.org/l3-gateway-config. Idempotent.
func GatewayInit(ctx context.Context, cfg GatewayConfig, nb libovsdbclient.Client, sw *ovs.Client, kube kubernetes.Interface, log logr.Logger) error {
	root, err := sw.Root(ctx)
	if err != nil {
		return err
	}
	systemID := root.ExternalIDs["system-id"]
	if systemID == "" {
		return fmt.Errorf("OVS has no external_ids:system-id: run `ovnkube minion-init` first")
	}
	mappings := mergeBridgeMappings(root.ExternalIDs["ovn-bridge-mappings"], cfg.PhysNet, cfg.Bridge)
	if _, err := sw.SetExternalIDs(ctx, map[string]string{"ovn-bridge-mappings": mappings}); err != nil {
		return fmt.Errorf("setting ovn-bridge-mappings: %w", err)
	}
	mac, err := bridgeMAC(ctx, sw, cfg.Bridge)
	if err != nil {
		return err
	}
	subnet := cfg.HostSubnet
	if !subnet.IsValid() {
		if kube == nil {
			return fmt.Errorf("no host subnet given and no Kubernetes client to read node %s's annotation", cfg.NodeName)
		}
		if subnet, err = waitForSubnet(ctx, kube, cfg.NodeName, cfg.SubnetTimeout); err != nil {
			return err
		}
	}
	commit := func(ops []ovsdb.Operation) error { return ovndb.Transact(ctx, nb, ops) }
	var joinIP netip.Prefix
	var rows topology.GatewayRows
	for attempt := 1; ; attempt++ {
		joinIP, rows, err = buildGatewayRouter(ctx, cfg, nb, commit, systemID, subnet, mac)
		if err == nil || !errors.Is(err, errJoinIPTaken) || attempt == 5 {
			break
		}
		select { // another node's gateway took the address: look again
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 100 * time.Millisecond):
		}
	}
	if err != nil {
		return fmt.Errorf("gateway router of node %s: %w", cfg.NodeName, err)
	}
	// Pass 2: NAT and routes hang off the routers, which now exist.
	t := ovndb.NewTxn(nb)
	gr := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: rows.Router.Name})
	cluster := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if gr == nil || cluster == nil {
		return fmt.Errorf("gateway router %s vanished while being built; run again", rows.Router.Name)
	}
	for _, nat := range rows.SNATs {
		t.EnsureChild(gr, &gr.Nat, topology.RowIDKey, nat, topology.NATColumns(nat))
	}
	for _, r := range rows.Routes {
		t.EnsureChild(gr, &gr.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	for _, r := range rows.ClusterRoutes {
		t.EnsureChild(cluster, &cluster.StaticRoutes, topology.RowIDKey, r, topology.RouteColumns(r))
	}
	ops, err := t.Ops()
	if err == nil {
		err = commit(ops)
	}
	if err != nil {
		return fmt.Errorf("gateway NAT and routes of node %s: %w", cfg.NodeName, err)
	}
	if kube != nil {
		gwCfg := annotations.L3GatewayConfig{
			Mode: "shared", InterfaceID: rows.Localnet.Name, MAC: mac,
			IPs: []netip.Prefix{cfg.PhysicalIP}, NodePortEnable: true,
		}
		if cfg.DefaultGW.IsValid() {
			gwCfg.NextHops = []netip.Addr{cfg.DefaultGW}
		}
		if err := annotateNode(ctx, kube, cfg.NodeName, map[string]string{annotations.NodeL3GatewayConfig: annotations.FormatL3GatewayConfig(gwCfg)}); err != nil {
			return err
		}
	}
	log.V(2).Info("gateway configured", "node", cfg.NodeName, "router", rows.Router.Name, "joinIP", joinIP, "physicalIP", cfg.PhysicalIP)
	return nil
}

// errJoinIPTaken: the gateway's transaction failed while claiming a fresh
// join address, most likely taken by another node's gateway at once.
var errJoinIPTaken = errors.New("join address taken meanwhile")

// buildGatewayRouter is gateway-init's first pass: the gateway router, the
// external switch and their ports, with the node's join address.
func buildGatewayRouter(ctx context.Context, cfg GatewayConfig, nb libovsdbclient.Client, commit func([]ovsdb.Operation) error,
	systemID string, subnet netip.Prefix, mac net.HardwareAddr) (netip.Prefix, topology.GatewayRows, error) {
	var none netip.Prefix
	var rows topology.GatewayRows
	t := ovndb.NewTxn(nb)
	group := ovndb.Lookup(t, &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup})
	cluster := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	join := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: topology.JoinSwitch})
	if t.Err() != nil {
		return none, rows, t.Err()
	}
	if group == nil || cluster == nil || join == nil {
		return none, rows, fmt.Errorf("the cluster topology is not there yet (run ovnkube master or master-init)")
	}
	joinIP, fresh, err := gatewayJoinIP(nb, cfg.NodeName, cfg.JoinSubnet)
	if err != nil {
		return none, rows, err
	}
	if fresh {
		guardJoinIP(t, joinIP)
	}
	rows = topology.Gateway(topology.GatewayInput{
		Node: cfg.NodeName, SystemID: systemID, JoinIP: joinIP, JoinSubnet: cfg.JoinSubnet,
		ClusterSubnets: cfg.ClusterSubnets, HostSubnets: []netip.Prefix{subnet},
		PhysicalIP: cfg.PhysicalIP, BridgeMAC: mac, Bridge: cfg.Bridge, PhysNet: cfg.PhysNet,
		DefaultGW: cfg.DefaultGW, LBGroup: group.UUID,
	})
	// Pass 1: routers, switches and their ports.
	rtoj := t.Ensure(rows.RouterToJoin, topology.LRPColumns(rows.RouterToJoin), nil)
	rtoe := t.Ensure(rows.RouterToExt, topology.LRPColumns(rows.RouterToExt), nil)
	t.Ensure(rows.Router, []any{&rows.Router.Options, &rows.Router.ExternalIDs, &rows.Router.LoadBalancerGroup}, &rows.Router.Ports, rtoj, rtoe)
	jtor := t.Ensure(rows.JoinToRouter, topology.LSPColumns(rows.JoinToRouter), nil)
	t.AddChildren(join, &join.Ports, jtor)
	localnet := t.Ensure(rows.Localnet, topology.LSPColumns(rows.Localnet), nil)
	etor := t.Ensure(rows.ExtToRouter, topology.LSPColumns(rows.ExtToRouter), nil)
	t.Ensure(rows.External, []any{&rows.External.ExternalIDs}, &rows.External.Ports, localnet, etor)
	removeLegacyLocalnet(t, cfg.Bridge, cfg.NodeName)
	ops, err := t.Ops()
	if err == nil {
		err = commit(ops)
	}
	if err != nil && fresh {
		// The guard is the likeliest reason; the caller looks again.
		return none, rows, fmt.Errorf("%w: %v", errJoinIPTaken, err)
	}
	return joinIP, rows, err
}

// removeLegacyLocalnet drops the localnet port of ours that an older
// version named <bridge>_<node> (a name a pod could take): two localnet
// ports on ext_<node> would both deliver the physical network's frames.
func removeLegacyLocalnet(t *ovndb.Txn, bridge, node string) {
	old := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: topology.LegacyLocalnetPort(bridge, node)})
	ext := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: topology.ExternalSwitch(node)})
	if old == nil || ext == nil || old.Type != "localnet" {
		return
	}
	if owner, ok := topology.OwnerOf(old.ExternalIDs); ok && owner == (topology.Owner{Type: topology.OwnerNode, Name: node}) {
		t.RemoveChildren(ext, &ext.Ports, old.UUID)
	}
}

// gatewayJoinIP returns the node's join address: the one its gateway port
// already has (fresh false), else the lowest address of the join subnet that
// no router port uses (fresh true), so the addresses of removed gateways
// return to the pool. A fresh address must be committed under guardJoinIP.
func gatewayJoinIP(nb libovsdbclient.Client, node string, joinSubnet netip.Prefix) (ip netip.Prefix, fresh bool, err error) {
	own := &nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node)}
	if nb.Get(context.Background(), own) == nil && len(own.Networks) > 0 {
		p, err := netip.ParsePrefix(own.Networks[0])
		if err == nil && joinSubnet.Contains(p.Addr()) {
			return p, false, nil
		}
	}
	used := map[netip.Addr]bool{}
	var lrps []nbdb.LogicalRouterPort
	_ = nb.List(context.Background(), &lrps)
	for _, lrp := range lrps {
		for _, n := range lrp.Networks {
			if p, err := netip.ParsePrefix(n); err == nil {
				used[p.Addr()] = true
			}
		}
	}
	// .0 is the network, .1 the cluster router's port.
	for a := joinSubnet.Addr().Next().Next(); joinSubnet.Contains(a) && joinSubnet.Contains(a.Next()); a = a.Next() {
		if !used[a] {
			return netip.PrefixFrom(a, joinSubnet.Bits()), true, nil
		}
	}
	return netip.Prefix{}, false, fmt.Errorf("join subnet %s has no address left for gateway router %s; remove stale gateways or widen --join-subnet", joinSubnet, topology.GatewayRouter(node))
}

// guardJoinIP fails the transaction if another gateway took ip meanwhile
// (gateway-init of two nodes at once).
func guardJoinIP(t *ovndb.Txn, ip netip.Prefix) {
	probe := &nbdb.LogicalRouterPort{Networks: []string{ip.String()}}
	t.FailIfExists(probe, &probe.Networks)
}

// mergeBridgeMappings sets physnet→bridge in an "net:bridge,net:bridge" list.
func mergeBridgeMappings(existing, physnet, bridge string) string {
	m := map[string]string{}
	for _, pair := range strings.Split(existing, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(pair), ":"); ok {
			m[k] = v
		}
	}
	m[physnet] = bridge
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + m[k]
	}
	return strings.Join(parts, ",")
}

// bridgeMAC is the MAC of the bridge's local port, which nics-to-bridge made
// the NIC's: the gateway router answers on the wire with it.
func bridgeMAC(ctx context.Context, sw *ovs.Client, bridge string) (net.HardwareAddr, error) {
	if link, err := netlink.LinkByName(bridge); err == nil && len(link.Attrs().HardwareAddr) == 6 {
		return link.Attrs().HardwareAddr, nil
	}
	iface, err := sw.Interface(ctx, bridge)
	if err != nil {
		return nil, fmt.Errorf("bridge %s not found in OVS (run `ovnkube nics-to-bridge NIC` first): %w", bridge, err)
	}
	if iface.MACInUse != nil {
		if mac, err := net.ParseMAC(*iface.MACInUse); err == nil {
			return mac, nil
		}
	}
	return nil, fmt.Errorf("cannot read the MAC of bridge %s", bridge)
}
