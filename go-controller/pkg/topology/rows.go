package topology

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// ACLLogMeter is the meter of logging ACLs (upstream's name) and
// ACLLogRate its limit, in logged packets per second per ACL.
const (
	ACLLogMeter = "acl-logging"
	ACLLogRate  = 20
)

// ClusterRows are the cluster-wide rows: the distributed router and the join
// switch, linked by rtoj-/jtor-ovn_cluster_router.
type ClusterRows struct {
	Router        *nbdb.LogicalRouter
	RouterToJoin  *nbdb.LogicalRouterPort
	Join          *nbdb.LogicalSwitch
	JoinToRouter  *nbdb.LogicalSwitchPort
	LBGroup       *nbdb.LoadBalancerGroup
	SwitchLBGroup *nbdb.LoadBalancerGroup
	// ACLLogMeter rate-limits the packets logged by ACLs of namespaces
	// that ask for logging (fair: each ACL gets its own share).
	ACLLogMeter     *nbdb.Meter
	ACLLogMeterBand *nbdb.MeterBand
}

// Cluster computes the cluster-wide rows for the join subnets, one per
// family (the cluster router at .1 of each).
func Cluster(joinSubnets []netip.Prefix) ClusterRows {
	owner := Owner{Type: OwnerCluster, Name: ClusterRouter}.ExternalIDs()
	var networks []string
	for _, j := range joinSubnets {
		networks = append(networks, cidrOf(nthAddr(j, 1), j))
	}
	fair := true
	return ClusterRows{
		Router: &nbdb.LogicalRouter{Name: ClusterRouter, ExternalIDs: owner},
		RouterToJoin: &nbdb.LogicalRouterPort{
			Name:        RouterToJoin,
			MAC:         MACFromIP(nthAddr(joinSubnets[0], 1)).String(),
			Networks:    networks,
			ExternalIDs: owner,
		},
		Join: &nbdb.LogicalSwitch{Name: JoinSwitch, ExternalIDs: owner},
		JoinToRouter: &nbdb.LogicalSwitchPort{
			Name:        JoinToRouter,
			Type:        "router",
			Addresses:   []string{"router"},
			Options:     map[string]string{"router-port": RouterToJoin},
			ExternalIDs: owner,
		},
		LBGroup:         &nbdb.LoadBalancerGroup{Name: ClusterLBGroup},
		SwitchLBGroup:   &nbdb.LoadBalancerGroup{Name: ClusterSwitchLBGroup},
		ACLLogMeter:     &nbdb.Meter{Name: ACLLogMeter, Unit: nbdb.MeterUnitPktps, Fair: &fair, ExternalIDs: owner},
		ACLLogMeterBand: &nbdb.MeterBand{Action: nbdb.MeterBandActionDrop, Rate: ACLLogRate, ExternalIDs: owner},
	}
}

// NodeRows are the rows one node needs: its switch, the router port into it
// and the switch's two fixed ports.
type NodeRows struct {
	Switch         *nbdb.LogicalSwitch
	RouterToSwitch *nbdb.LogicalRouterPort
	SwitchToRouter *nbdb.LogicalSwitchPort
	Management     *nbdb.LogicalSwitchPort
	// MgmtAllow, on the switch, lets the node's management port reach its
	// pods whatever their policies say (kubelet probes), above every tier.
	MgmtAllow *nbdb.ACL
	// HostRoutes, on ovn_cluster_router, send pod traffic for the node's own
	// addresses into its management port, so pods reach host-network
	// endpoints (the API server, hostNetwork pods) on every node without a
	// gateway and the host sees the pod's address.
	HostRoutes []*nbdb.LogicalRouterStaticRoute
	// HostPolicies replace HostRoutes on a node with a gateway router: only
	// the node's own pods are sent into its management port for its
	// addresses; other nodes' pods reach them through their own gateway
	// routers (their source routes), as upstream's do. A reply to a
	// connection a gateway router took in from another node (a NodePort with
	// externalTrafficPolicy Local keeps the client's address) then leaves
	// through that router, which undoes its DNAT, instead of going straight
	// to the client node's management port.
	HostPolicies []*nbdb.LogicalRouterPolicy
	// ReplyMark, on the switch, marks the replies of connections made to
	// its pods from outside the cluster (ReplyPktMark), so that
	// ovn_cluster_router sends them back the way their requests came (an
	// EgressIP's reroute skips them: a NodePort with externalTrafficPolicy
	// Local on a node that is not the pod's egress node). See replyMarkRow.
	ReplyMark *nbdb.QoS
}

// replyMarkRow is a node switch's QoS rule marking the replies its pods
// send out of the cluster (NodeRows.ReplyMark): to a destination outside
// internal (the pod and join subnets). Replies inside stay unmarked: they
// need no exemption, and a marked packet cannot be tunnelled by OVS's
// userspace datapath (its route lookup for the Geneve tunnel takes the
// mark, and no route has one). Nil without subnets or internal ranges.
func replyMarkRow(name string, subnets, internal []netip.Prefix) *nbdb.QoS {
	if len(subnets) == 0 || len(internal) == 0 {
		return nil
	}
	ids := Owner{Type: OwnerNode, Name: name}.ExternalIDs()
	ids[RowIDKey] = ReplyMarkID
	internal = slices.Clone(internal) // in address order: one match whoever computes it
	slices.SortFunc(internal, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	var clauses []string
	for _, s := range subnets {
		fam := IPLayer(s.Addr().Is6())
		clause := fam + ".src == " + s.String()
		for _, in := range internal {
			if in.Addr().Is6() == s.Addr().Is6() {
				clause += " && " + fam + ".dst != " + in.String()
			}
		}
		clauses = append(clauses, "("+clause+")")
	}
	return &nbdb.QoS{Direction: nbdb.QoSDirectionFromLport, Priority: ReplyMarkPriority,
		Match:  fmt.Sprintf("ct.trk && ct.rpl && (%s)", strings.Join(clauses, " || ")),
		Action: map[string]int{"mark": ReplyPktMark}, ExternalIDs: ids}
}

// ReplyPktMark is the packet mark of replies to connections made to pods
// (NodeRows.ReplyMark); ReplyMarkPriority its QoS rule's priority and
// ReplyMarkID its row id. A pod cannot forge the mark: the kernel clears a
// packet's mark when it leaves the pod's network namespace.
const (
	ReplyPktMark      = 42
	ReplyMarkPriority = 103
	ReplyMarkID       = "node/reply-mark"
)

// HostPolicyPriority is the priority of the node-address reroutes on
// ovn_cluster_router (upstream's for the same policies).
const HostPolicyPriority = 1004

// MgmtAllowACLID is the RowIDKey of a node switch's management-port ACL.
const MgmtAllowACLID = "mgmt-port-allow"

// HostRouteIDPrefix starts the RowIDKey of a node's host routes.
const HostRouteIDPrefix = "node-ip:"

// Node computes a node's rows from its host subnets, the cluster's internal
// ranges (pod and join subnets: see replyMarkRow; none: no reply mark), its
// addresses, whether it has a gateway router and, when the node has
// published one, its management port MAC (else the MAC derived from .2).
// lbGroups are the UUIDs of the load balancer groups the switch carries.
func Node(name string, subnets, internal []netip.Prefix, hostIPs []netip.Addr, gateway bool, mgmtMAC net.HardwareAddr, lbGroups ...string) NodeRows {
	owner := Owner{Type: OwnerNode, Name: name}.ExternalIDs()
	var cidrs, gws, mgmtIPs, exclude []string
	var gwIPs, mgmtAddrs []netip.Addr
	for _, s := range subnets {
		gw, mgmt := GatewayIP(s), ManagementIP(s)
		cidrs = append(cidrs, s.String())
		gws = append(gws, cidrOf(gw, s))
		gwIPs = append(gwIPs, gw)
		mgmtIPs = append(mgmtIPs, mgmt.String())
		mgmtAddrs = append(mgmtAddrs, mgmt)
		exclude = append(exclude, mgmt.String())
	}
	otherConfig := map[string]string{}
	for i, s := range subnets {
		if s.Addr().Is4() {
			otherConfig["subnet"] = cidrs[i]
			otherConfig["exclude_ips"] = exclude[i]
		} else {
			otherConfig["ipv6_prefix"] = s.Addr().String()
		}
	}
	if mgmtMAC == nil && len(mgmtAddrs) > 0 {
		mgmtMAC = MACFromIP(mgmtAddrs[0])
	}
	routerMAC := net.HardwareAddr(nil)
	if len(gwIPs) > 0 {
		routerMAC = MACFromIP(gwIPs[0])
	}
	var hostRoutes []*nbdb.LogicalRouterStaticRoute
	var hostPolicies []*nbdb.LogicalRouterPolicy
	for _, ip := range hostIPs {
		for i, s := range subnets {
			if s.Addr().Is4() != ip.Is4() {
				continue
			}
			out := NodeRouterToSwitchPort(name)
			ids := Owner{Type: OwnerNode, Name: name}.ExternalIDs()
			ids[RowIDKey] = HostRouteIDPrefix + ip.String()
			if gateway {
				fam := IPLayer(ip.Is6())
				hostPolicies = append(hostPolicies, &nbdb.LogicalRouterPolicy{
					Priority: HostPolicyPriority, Match: fmt.Sprintf("inport == %q && %s.dst == %s", out, fam, ip),
					Action: nbdb.LogicalRouterPolicyActionReroute, Nexthops: []string{mgmtIPs[i]}, ExternalIDs: ids, Options: map[string]string{},
				})
				break
			}
			hostRoutes = append(hostRoutes, &nbdb.LogicalRouterStaticRoute{
				IPPrefix: netip.PrefixFrom(ip, ip.BitLen()).String(), Nexthop: mgmtIPs[i], OutputPort: &out, ExternalIDs: ids,
			})
			break
		}
	}
	var mgmtAllow *nbdb.ACL
	if len(mgmtAddrs) > 0 {
		ids := Owner{Type: OwnerNode, Name: name}.ExternalIDs()
		ids[RowIDKey] = MgmtAllowACLID
		var clauses []string
		for _, a := range mgmtAddrs {
			clauses = append(clauses, IPLayer(a.Is6())+".src == "+a.String())
		}
		mgmtAllow = &nbdb.ACL{Direction: nbdb.ACLDirectionToLport, Priority: ACLPriorityAlways, Match: strings.Join(clauses, " || "),
			Action: nbdb.ACLActionAllowRelated, ExternalIDs: ids, Options: map[string]string{}}
	}
	replyMark := replyMarkRow(name, subnets, internal)
	return NodeRows{
		ReplyMark:    replyMark,
		MgmtAllow:    mgmtAllow,
		HostRoutes:   hostRoutes,
		HostPolicies: hostPolicies,
		Switch:       &nbdb.LogicalSwitch{Name: name, OtherConfig: otherConfig, ExternalIDs: owner, LoadBalancerGroup: lbGroups},
		RouterToSwitch: &nbdb.LogicalRouterPort{
			Name:        NodeRouterToSwitchPort(name),
			MAC:         routerMAC.String(),
			Networks:    gws,
			ExternalIDs: owner,
		},
		SwitchToRouter: &nbdb.LogicalSwitchPort{
			Name:        NodeSwitchToRouterPort(name),
			Type:        "router",
			Addresses:   []string{"router"},
			Options:     map[string]string{"router-port": NodeRouterToSwitchPort(name)},
			ExternalIDs: owner,
		},
		Management: &nbdb.LogicalSwitchPort{
			Name:        ManagementPort(name),
			Addresses:   []string{lspAddress(mgmtMAC, mgmtAddrs...)},
			ExternalIDs: owner,
		},
	}
}

// PodInfo is what the pod port depends on.
type PodInfo struct {
	Namespace, Name, UID, Node string
	IPs                        []netip.Addr
	MAC                        net.HardwareAddr
}

// Key is the pod's namespace/name.
func (p PodInfo) Key() string { return p.Namespace + "/" + p.Name }

// Pod computes the LSP of a pod. requested-chassis pins the binding to the
// pod's node; iface-id-ver makes ovn-controller bind only the interface of this
// pod incarnation (a recreated pod with the same name has a new UID).
func Pod(p PodInfo) *nbdb.LogicalSwitchPort {
	addr := lspAddress(p.MAC, p.IPs...)
	ids := Owner{Type: OwnerPod, Name: p.Key()}.ExternalIDs()
	ids["namespace"] = p.Namespace
	return &nbdb.LogicalSwitchPort{
		Name:         PodPort(p.Namespace, p.Name),
		Addresses:    []string{addr},
		PortSecurity: []string{addr},
		Options:      map[string]string{"requested-chassis": p.Node, "iface-id-ver": p.UID},
		ExternalIDs:  ids,
	}
}

// ParseLSPAddress splits an LSP "MAC IP..." address into its parts; ok is
// false for "router", "dynamic" and malformed strings.
func ParseLSPAddress(s string) (net.HardwareAddr, []netip.Addr, bool) {
	fields := strings.Fields(s)
	if len(fields) < 2 {
		return nil, nil, false
	}
	mac, err := net.ParseMAC(fields[0])
	if err != nil {
		return nil, nil, false
	}
	var ips []netip.Addr
	for _, f := range fields[1:] {
		ip, err := netip.ParseAddr(f)
		if err != nil {
			return nil, nil, false
		}
		ips = append(ips, ip)
	}
	return mac, ips, true
}
