package node

import (
	"context"
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

// joinCounterKey on the join switch holds the next gateway join address, so
// an address is never handed out twice, even after its node is gone.
const joinCounterKey = "k8s.ovn.org/next-gateway-join-ip"

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
	commit := func(ops []ovsdb.Operation) error {
		if len(ops) == 0 {
			return nil
		}
		res, err := nb.Transact(ctx, ops...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, ops)
		}
		return err
	}
	joinIP, err := gatewayJoinIP(ctx, nb, commit, cfg.NodeName, cfg.JoinSubnet)
	if err != nil {
		return err
	}
	t := ovndb.NewTxn(nb)
	group, _ := t.Lookup(&nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}).(*nbdb.LoadBalancerGroup)
	cluster, _ := t.Lookup(&nbdb.LogicalRouter{Name: topology.ClusterRouter}).(*nbdb.LogicalRouter)
	join, _ := t.Lookup(&nbdb.LogicalSwitch{Name: topology.JoinSwitch}).(*nbdb.LogicalSwitch)
	if t.Err() != nil {
		return t.Err()
	}
	if group == nil || cluster == nil || join == nil {
		return fmt.Errorf("the cluster topology is not there yet (run ovnkube master or master-init)")
	}
	rows := topology.Gateway(topology.GatewayInput{
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
	if err != nil {
		return fmt.Errorf("gateway router of node %s: %w", cfg.NodeName, err)
	}
	// Pass 2: NAT and routes hang off the routers, which now exist.
	t = ovndb.NewTxn(nb)
	gr, _ := t.Lookup(&nbdb.LogicalRouter{Name: rows.Router.Name}).(*nbdb.LogicalRouter)
	cluster, _ = t.Lookup(&nbdb.LogicalRouter{Name: topology.ClusterRouter}).(*nbdb.LogicalRouter)
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
	ops, err = t.Ops()
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
// already has, else the next from the counter on the join switch, taken in a
// transaction that fails if another node took it first (then retried).
func gatewayJoinIP(ctx context.Context, nb libovsdbclient.Client, commit func([]ovsdb.Operation) error, node string, joinSubnet netip.Prefix) (netip.Prefix, error) {
	for attempt := 0; attempt < 10; attempt++ {
		t := ovndb.NewTxn(nb)
		if lrp, _ := t.Lookup(&nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node)}).(*nbdb.LogicalRouterPort); lrp != nil && len(lrp.Networks) > 0 {
			return netip.ParsePrefix(lrp.Networks[0])
		}
		join, _ := t.Lookup(&nbdb.LogicalSwitch{Name: topology.JoinSwitch}).(*nbdb.LogicalSwitch)
		if t.Err() != nil {
			return netip.Prefix{}, t.Err()
		}
		if join == nil {
			return netip.Prefix{}, fmt.Errorf("switch %s does not exist yet (run ovnkube master or master-init)", topology.JoinSwitch)
		}
		next := joinSubnet.Addr().Next().Next() // .1 is the cluster router
		if v, ok := join.ExternalIDs[joinCounterKey]; ok {
			a, err := netip.ParseAddr(v)
			if err != nil || !joinSubnet.Contains(a) {
				return netip.Prefix{}, fmt.Errorf("join switch %s=%q is not an address of %s; fix or remove it", joinCounterKey, v, joinSubnet)
			}
			next = a
		}
		if !joinSubnet.Contains(next.Next()) {
			return netip.Prefix{}, fmt.Errorf("join subnet %s has no address left for gateway routers", joinSubnet)
		}
		t.Wait(join, &join.ExternalIDs)
		ids := map[string]string{}
		for k, v := range join.ExternalIDs {
			ids[k] = v
		}
		ids[joinCounterKey] = next.Next().String()
		updated := *join
		updated.ExternalIDs = ids
		t.Update(&updated, &updated.ExternalIDs)
		ops, err := t.Ops()
		if err != nil {
			return netip.Prefix{}, err
		}
		if err := commit(ops); err == nil {
			return netip.PrefixFrom(next, joinSubnet.Bits()), nil
		}
		// Someone else moved the counter: read it again.
		select {
		case <-ctx.Done():
			return netip.Prefix{}, ctx.Err()
		default:
		}
	}
	return netip.Prefix{}, fmt.Errorf("could not reserve a join address for node %s (too much contention)", node)
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
