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
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// GatewayConfig is what gateway-init needs.
type GatewayConfig struct {
	NodeName string
	Bridge   string // OVS bridge holding the NIC (nics-to-bridge makes br<NIC>)
	// PhysicalIPs are the node's addresses on that network, one per
	// family; DefaultGWs the next hops of its default routes (a family
	// without one has no default route).
	PhysicalIPs []netip.Prefix
	DefaultGWs  []netip.Addr
	OVSAddress  string // the local OVS database; the bridge's management socket is next to it
	// Services says which external addresses and node ports the bridge
	// sends to the gateway router (the master's policy, with this node's
	// own address among those never taken).
	Services services.AddressPolicy
	// EgressIPs is the client the node daemon follows EgressIPs through,
	// when the API server serves them, to announce the IPv6 egress IPs this
	// node takes on the bridge (egressip.go); nil: none are followed.
	EgressIPs dynamic.Interface
}

// addrs are the node's addresses on the external network.
func (cfg GatewayConfig) addrs() []netip.Addr {
	out := make([]netip.Addr, len(cfg.PhysicalIPs))
	for i, p := range cfg.PhysicalIPs {
		out[i] = p.Addr()
	}
	return out
}

// hostChains are the host's nat chains of each family the node has an
// address of on the external network, with mgmt its management addresses.
func (cfg GatewayConfig) hostChains(svcs []*corev1.Service, peers Peers, mgmt []netip.Addr) []hostChain {
	var out []hostChain
	for _, p := range cfg.PhysicalIPs {
		var m netip.Addr
		for _, a := range mgmt {
			if a.Is6() == p.Addr().Is6() {
				m = a
			}
		}
		out = append(out, hostChains(svcs, cfg.Services, peers, m, p.Addr())...)
	}
	return out
}

// GatewayInit prepares the node's side of its shared gateway and asks the
// master for the rest: it maps the physical network to the bridge
// (ovn-bridge-mappings), publishes k8s.ovn.org/l3-gateway-config (from which
// the master builds GR_<node>, ext_<node>, SNAT and routes) and puts the
// bridge's flows in place. Idempotent.
func GatewayInit(ctx context.Context, cfg GatewayConfig, sw *ovs.Client, kube kubernetes.Interface, services []ServiceFlow, log logr.Logger) error {
	mac, err := gatewayOVS(ctx, cfg, sw)
	if err != nil {
		return err
	}
	if err := annotateNode(ctx, kube, cfg.NodeName, map[string]string{annotations.NodeL3GatewayConfig: gatewayAnnotation(cfg, mac)}); err != nil {
		return err
	}
	return replaceBridgeFlows(ctx, cfg, sw, mac, services, log)
}

// replaceBridgeFlows makes the bridge's flow table exactly the desired one.
func replaceBridgeFlows(ctx context.Context, cfg GatewayConfig, sw *ovs.Client, mac net.HardwareAddr, services []ServiceFlow, log logr.Logger) error {
	flows, err := bridgeFlows(ctx, cfg, sw, mac, services)
	if err != nil {
		return err
	}
	if err := NewFlowTable(cfg.Bridge, cfg.OVSAddress).Replace(ctx, flows); err != nil {
		return err
	}
	log.V(2).Info("gateway bridge flows replaced", "node", cfg.NodeName, "bridge", cfg.Bridge, "physicalIPs", cfg.PhysicalIPs, "flows", len(flows))
	return nil
}

// gatewayOVS maps the physical network to the bridge and returns the
// bridge's MAC, which the gateway router shares with the host.
func gatewayOVS(ctx context.Context, cfg GatewayConfig, sw *ovs.Client) (net.HardwareAddr, error) {
	root, err := sw.Root(ctx)
	if err != nil {
		return nil, err
	}
	if root.ExternalIDs["system-id"] == "" {
		return nil, fmt.Errorf("OVS has no external_ids:system-id: run `ovnkube minion-init` first")
	}
	mappings := mergeBridgeMappings(root.ExternalIDs["ovn-bridge-mappings"], topology.DefaultPhysNet, cfg.Bridge)
	if _, err := sw.SetExternalIDs(ctx, map[string]string{"ovn-bridge-mappings": mappings}); err != nil {
		return nil, fmt.Errorf("setting ovn-bridge-mappings: %w", err)
	}
	return bridgeMAC(ctx, sw, cfg.Bridge)
}

func gatewayAnnotation(cfg GatewayConfig, mac net.HardwareAddr) string {
	gw := annotations.L3GatewayConfig{
		Mode: "shared", InterfaceID: topology.LocalnetPort(cfg.Bridge, cfg.NodeName), MAC: mac,
		IPs: cfg.PhysicalIPs, NextHops: cfg.DefaultGWs, NodePortEnable: true,
	}
	return annotations.FormatL3GatewayConfig(gw)
}

// bridgeFlows computes the bridge's desired flows from its ports in OVS.
func bridgeFlows(ctx context.Context, cfg GatewayConfig, sw *ovs.Client, mac net.HardwareAddr, services []ServiceFlow) ([]string, error) {
	ifaces, err := sw.BridgeInterfaces(ctx, cfg.Bridge)
	if err != nil {
		return nil, fmt.Errorf("%w (run `ovnkube nics-to-bridge NIC` first)", err)
	}
	in := BridgeFlows{MAC: mac, IPs: cfg.addrs(), Services: services}
	var nics []string
	for _, i := range ifaces {
		if i.Ofport == nil || *i.Ofport <= 0 {
			continue
		}
		switch {
		case i.Name == cfg.Bridge:
		case i.Type == "patch":
			in.PatchPort = *i.Ofport
		default:
			nics = append(nics, i.Name)
			in.NICPort = *i.Ofport
		}
	}
	if len(nics) != 1 {
		return nil, fmt.Errorf("bridge %s must hold exactly one NIC besides the patch port to br-int; it has %v", cfg.Bridge, nics)
	}
	return in.Flows(), nil
}

// RemoveGateway undoes GatewayInit on the node: the annotation goes (the
// master then removes GR_<node> and its rows), the bridge mapping goes
// (ovn-controller removes its patch port) and the bridge gets back the one
// flow it had before, a plain learning switch.
func RemoveGateway(ctx context.Context, cfg GatewayConfig, sw *ovs.Client, kube kubernetes.Interface, log logr.Logger) error {
	if err := annotateNode(ctx, kube, cfg.NodeName, map[string]string{annotations.NodeL3GatewayConfig: ""}); err != nil {
		return err
	}
	root, err := sw.Root(ctx)
	if err != nil {
		return err
	}
	mappings := removeBridgeMapping(root.ExternalIDs["ovn-bridge-mappings"], topology.DefaultPhysNet, cfg.Bridge)
	if _, err := sw.SetExternalIDs(ctx, map[string]string{"ovn-bridge-mappings": mappings}); err != nil {
		return fmt.Errorf("removing ovn-bridge-mappings: %w", err)
	}
	if err := NewFlowTable(cfg.Bridge, cfg.OVSAddress).Replace(ctx, []string{"priority=0,actions=NORMAL"}); err != nil {
		return err
	}
	log.Info("gateway removed", "node", cfg.NodeName, "bridge", cfg.Bridge)
	return nil
}

// WaitForGatewayRouter waits until the master has built the node's gateway router.
func WaitForGatewayRouter(ctx context.Context, nb libovsdbclient.Client, node string) error {
	name := topology.GatewayRouter(node)
	for {
		var found []nbdb.LogicalRouter
		if err := nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == name }).List(ctx, &found); err == nil && len(found) > 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s not built by the master yet (is `ovnkube master` running?): %w", name, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// mergeBridgeMappings sets physnet→bridge in an "net:bridge,net:bridge" list.
func mergeBridgeMappings(existing, physnet, bridge string) string {
	m := map[string]string{}
	for _, pair := range strings.Split(existing, ",") {
		if k, v, ok := strings.Cut(strings.TrimSpace(pair), ":"); ok {
			m[k] = v
		}
	}
	if bridge == "" {
		delete(m, physnet)
	} else {
		m[physnet] = bridge
	}
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

// removeBridgeMapping drops physnet from the list if it maps to bridge.
func removeBridgeMapping(existing, physnet, bridge string) string {
	for _, pair := range strings.Split(existing, ",") {
		if strings.TrimSpace(pair) == physnet+":"+bridge {
			return mergeBridgeMappings(existing, physnet, "")
		}
	}
	return existing
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
