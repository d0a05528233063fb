package topology

import (
	"net"
	"net/netip"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// RowIDKey identifies nameless rows (NAT, static routes) among those of one owner.
const RowIDKey = "k8s.ovn.org/id"

// GatewayClusterRouteIDPrefix starts the RowIDKey of the cluster router's
// routes that belong to a node's gateway: "gateway-src:<subnet>" sends the
// node's pods out through its gateway router, "gateway-join:<ip>" sends
// replies to that router's join address straight to it (without it a reply
// from another node's pod would follow that node's source route to the
// wrong gateway router).
const GatewayClusterRouteIDPrefix = "gateway-"

// DefaultPhysNet is the localnet network name the gateway's bridge maps to.
const DefaultPhysNet = "physnet"

// Gateway names.
func RouterToGatewayJoinPort(node string) string { return routerToJoin + GatewayRouter(node) }
func JoinToGatewayPort(node string) string       { return joinToRouter + GatewayRouter(node) }
func ExternalSwitch(node string) string          { return externalSwitchPrefix + node }
func ExternalToGatewayPort(node string) string   { return externalToRouter + GatewayRouter(node) }
func GatewayToExternalPort(node string) string   { return routerToExternal + GatewayRouter(node) }
func LocalnetPort(bridge, node string) string    { return bridge + "_" + node + "_localnet" }

// GatewayInput is what a node's gateway depends on.
type GatewayInput struct {
	Node     string
	SystemID string // the chassis the gateway router is bound to
	// Per family of the cluster, the primary first: the router's join
	// addresses, the join subnets, the node's addresses on the external
	// network and its next hops (a family without one has no default route).
	JoinIPs        []netip.Prefix
	JoinSubnets    []netip.Prefix
	ClusterSubnets []netip.Prefix
	HostSubnets    []netip.Prefix
	PhysicalIPs    []netip.Prefix
	BridgeMAC      net.HardwareAddr
	Bridge         string // OVS bridge holding the NIC, e.g. breth0
	PhysNet        string
	DefaultGWs     []netip.Addr
	LBGroup        string // UUID of the cluster LB group
	// Zone (zone mode) gives the cluster router a default route per family
	// via this gateway router: the traffic another zone's pods send here to
	// leave through an egress IP this node hosts comes from subnets no
	// source route of this zone covers, and a packet no route takes is
	// dropped before the EgressIP's reroute policy sees it. ovn-ic does not
	// advertise default routes (ic-route-adv-default is off).
	Zone bool
}

// ofFamily is the first prefix of a family in ps.
func ofFamily(ps []netip.Prefix, v6 bool) (netip.Prefix, bool) {
	for _, p := range ps {
		if p.Addr().Is6() == v6 {
			return p, true
		}
	}
	return netip.Prefix{}, false
}

// GatewayRows are a node's gateway rows.
type GatewayRows struct {
	Router        *nbdb.LogicalRouter
	RouterToJoin  *nbdb.LogicalRouterPort
	JoinToRouter  *nbdb.LogicalSwitchPort
	External      *nbdb.LogicalSwitch
	Localnet      *nbdb.LogicalSwitchPort
	ExtToRouter   *nbdb.LogicalSwitchPort
	RouterToExt   *nbdb.LogicalRouterPort
	SNATs         []*nbdb.NAT
	Routes        []*nbdb.LogicalRouterStaticRoute // on GR_<node>
	ClusterRoutes []*nbdb.LogicalRouterStaticRoute // on ovn_cluster_router
}

// Gateway computes the shared-gateway topology of one node: GR_<node> on
// the join switch and on ext_<node> (whose localnet port reaches the NIC's
// bridge), SNAT of the cluster to the node IP, a default route to the
// node's next hop, the way back to the cluster via the cluster router, and
// on the cluster router a source route sending the node's pods out here.
func Gateway(in GatewayInput) GatewayRows {
	owner := Owner{Type: OwnerNode, Name: in.Node}
	ids := owner.ExternalIDs
	withID := func(id string) map[string]string {
		m := ids()
		m[RowIDKey] = id
		return m
	}
	gr := GatewayRouter(in.Node)
	var joinNets, extNets []string
	for _, j := range in.JoinIPs {
		joinNets = append(joinNets, j.String())
	}
	for _, p := range in.PhysicalIPs {
		extNets = append(extNets, p.String())
	}
	rows := GatewayRows{
		Router: &nbdb.LogicalRouter{
			Name:              gr,
			Options:           map[string]string{"chassis": in.SystemID, "lb_force_snat_ip": "router_ip", "always_learn_from_arp_request": "false", "dynamic_neigh_routers": "true"},
			ExternalIDs:       ids(),
			LoadBalancerGroup: []string{in.LBGroup},
		},
		RouterToJoin: &nbdb.LogicalRouterPort{
			Name:        RouterToGatewayJoinPort(in.Node),
			MAC:         MACFromIP(in.JoinIPs[0].Addr()).String(),
			Networks:    joinNets,
			ExternalIDs: ids(),
		},
		JoinToRouter: &nbdb.LogicalSwitchPort{
			Name:        JoinToGatewayPort(in.Node),
			Type:        "router",
			Addresses:   []string{"router"},
			Options:     map[string]string{"router-port": RouterToGatewayJoinPort(in.Node)},
			ExternalIDs: ids(),
		},
		External: &nbdb.LogicalSwitch{Name: ExternalSwitch(in.Node), ExternalIDs: ids()},
		Localnet: &nbdb.LogicalSwitchPort{
			Name:        LocalnetPort(in.Bridge, in.Node),
			Type:        "localnet",
			Addresses:   []string{"unknown"},
			Options:     map[string]string{"network_name": in.PhysNet},
			ExternalIDs: ids(),
		},
		ExtToRouter: &nbdb.LogicalSwitchPort{
			Name:      ExternalToGatewayPort(in.Node),
			Type:      "router",
			Addresses: []string{"router"},
			// ovn-controller announces (GARP) the router's NAT addresses,
			// an egress IP among them, when they move here; not its load
			// balancers' addresses, which an outside router routes.
			Options:     map[string]string{"router-port": GatewayToExternalPort(in.Node), "nat-addresses": "router", "exclude-lb-vips-from-garp": "true"},
			ExternalIDs: ids(),
		},
		RouterToExt: &nbdb.LogicalRouterPort{
			Name:        GatewayToExternalPort(in.Node),
			MAC:         in.BridgeMAC.String(),
			Networks:    extNets,
			ExternalIDs: ids(),
		},
	}
	for _, cs := range in.ClusterSubnets {
		phys, ok := ofFamily(in.PhysicalIPs, cs.Addr().Is6())
		join, ok2 := ofFamily(in.JoinSubnets, cs.Addr().Is6())
		if !ok || !ok2 {
			continue
		}
		rows.SNATs = append(rows.SNATs, &nbdb.NAT{
			Type: nbdb.NATTypeSNAT, LogicalIP: cs.String(), ExternalIP: phys.Addr().String(),
			ExternalIDs: withID("snat:" + cs.String()),
		})
		rows.Routes = append(rows.Routes, &nbdb.LogicalRouterStaticRoute{
			IPPrefix: cs.String(), Nexthop: nthAddr(join, 1).String(),
			ExternalIDs: withID("cluster:" + cs.String()),
		})
	}
	for _, gw := range in.DefaultGWs {
		out := GatewayToExternalPort(in.Node)
		dst, id := "0.0.0.0/0", "default"
		if gw.Is6() {
			dst, id = "::/0", "default6" // the IPv4 route keeps the ID it always had
		}
		rows.Routes = append(rows.Routes, &nbdb.LogicalRouterStaticRoute{
			IPPrefix: dst, Nexthop: gw.String(), OutputPort: &out,
			ExternalIDs: withID(id),
		})
	}
	policy := nbdb.LogicalRouterStaticRoutePolicySrcIP
	for _, hs := range in.HostSubnets {
		joinIP, ok := ofFamily(in.JoinIPs, hs.Addr().Is6())
		if !ok {
			continue
		}
		rows.ClusterRoutes = append(rows.ClusterRoutes, &nbdb.LogicalRouterStaticRoute{
			IPPrefix: hs.String(), Nexthop: joinIP.Addr().String(), Policy: &policy,
			ExternalIDs: withID(GatewayClusterRouteIDPrefix + "src:" + hs.String()),
		})
	}
	for _, j := range in.JoinIPs {
		host := netip.PrefixFrom(j.Addr(), j.Addr().BitLen())
		rows.ClusterRoutes = append(rows.ClusterRoutes, &nbdb.LogicalRouterStaticRoute{
			IPPrefix: host.String(), Nexthop: j.Addr().String(),
			ExternalIDs: withID(GatewayClusterRouteIDPrefix + "join:" + host.Addr().String()),
		})
		if in.Zone {
			all := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
			if j.Addr().Is6() {
				all = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
			}
			rows.ClusterRoutes = append(rows.ClusterRoutes, &nbdb.LogicalRouterStaticRoute{
				IPPrefix: all.String(), Nexthop: j.Addr().String(),
				ExternalIDs: withID(GatewayClusterRouteIDPrefix + "zone-default:" + IPLayer(j.Addr().Is6())),
			})
		}
	}
	return rows
}
