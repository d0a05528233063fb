// Package topology is the pure core of ovn-k8s: it computes the Northbound
// rows the cluster should have from plain inputs, with no I/O. The ovndb
// package diffs these rows against the database; tests check them by table.
package topology

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
)

// Row and port names follow upstream OVN-Kubernetes so its tooling and the
// people who know it recognise the database.
const (
	ClusterRouter  = "ovn_cluster_router"
	JoinSwitch     = "join"
	RouterToJoin   = routerToJoin + ClusterRouter
	JoinToRouter   = joinToRouter + ClusterRouter
	routerToSwitch = "rtos-"
	switchToRouter = "stor-"
	routerToJoin   = "rtoj-"
	joinToRouter   = "jtor-"
	// A gateway router's port to its node's external switch, and back.
	routerToExternal     = "rtoe-"
	externalToRouter     = "etor-"
	externalSwitchPrefix = "ext_"
	serviceLBPrefix      = "Service_" // services.ClusterLBName and its kin
	mgmtPortPrefix       = "k8s-"
	// ClusterLBGroup holds every cluster-wide service load balancer; attaching
	// it to a switch or router attaches them all in one reference.
	ClusterLBGroup = "clusterLBGroup"
	// ClusterSwitchLBGroup holds the load balancers only node switches carry:
	// NodePorts on every node's address, so a pod reaching any node's
	// NodePort is balanced where it starts, as upstream's switch balancers do.
	ClusterSwitchLBGroup = "clusterSwitchLBGroup"
	gatewayRouterPrefix  = "GR_"
	// HairpinSNATIP is the source OVN gives a pod's packets that a service
	// balanced back to the pod itself (load balancer option hairpin_snat_ip),
	// so policies can tell hairpin traffic apart and always allow it.
	HairpinSNATIP = "169.254.169.5"
	// ACLPriorityAlways is the priority of what no policy can deny (node →
	// pod through the management port, ARP/ND, hairpin); see package policy.
	ACLPriorityAlways = 30000
)

// Owner external_ids: every row ovn-k8s writes names its controller, the kind
// of object that wants it and that object's key, so a sync can find (and only
// ever delete) its own stale rows.
const (
	OwnerControllerKey = "k8s.ovn.org/owner-controller"
	OwnerTypeKey       = "k8s.ovn.org/owner-type"
	OwnerNameKey       = "k8s.ovn.org/name"
	ControllerName     = "ovn-k8s"

	OwnerCluster = "Cluster"
	OwnerNode    = "Node"
	OwnerPod     = "Pod"
	OwnerService = "Service"
)

// Owner identifies the object a row belongs to.
type Owner struct {
	Type string
	Name string
}

// ExternalIDs are the owner external_ids of a row.
func (o Owner) ExternalIDs() map[string]string {
	return map[string]string{OwnerControllerKey: ControllerName, OwnerTypeKey: o.Type, OwnerNameKey: o.Name}
}

func (o Owner) String() string { return o.Type + " " + o.Name }

// OwnedBy says whether a row's external_ids name want as its owner.
func OwnedBy(externalIDs map[string]string, want Owner) bool {
	o, ok := OwnerOf(externalIDs)
	return ok && o == want
}

// OwnerOf reads the owner of a row from its external_ids; ok is false for rows
// ovn-k8s did not write.
func OwnerOf(externalIDs map[string]string) (Owner, bool) {
	if externalIDs[OwnerControllerKey] != ControllerName {
		return Owner{}, false
	}
	return Owner{Type: externalIDs[OwnerTypeKey], Name: externalIDs[OwnerNameKey]}, true
}

// OurName says whether a switch, router, port or load balancer name is of
// the kind the master gives its rows (by prefix, or a cluster-wide row's
// name): such a row that no owner external_ids mark is in our way (ovnkube
// diff reports it; the master never deletes it). Node switches, named after
// their nodes, and pod ports, after their pods, cannot be told apart this way.
func OurName(name string) bool {
	switch name {
	case ClusterRouter, JoinSwitch:
		return true
	}
	for _, p := range []string{routerToSwitch, switchToRouter, mgmtPortPrefix, gatewayRouterPrefix, routerToJoin, joinToRouter,
		routerToExternal, externalToRouter, externalSwitchPrefix, serviceLBPrefix, routerToTransit} {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// NodeSwitchToRouterPort is the LSP on a node switch that faces the cluster router.
func NodeSwitchToRouterPort(node string) string { return switchToRouter + node }

// NodeRouterToSwitchPort is the cluster router's LRP toward a node switch.
func NodeRouterToSwitchPort(node string) string { return routerToSwitch + node }

// ManagementPort is the LSP of the node's ovn-k8s-mp0 interface.
func ManagementPort(node string) string { return mgmtPortPrefix + node }

// GatewayRouter is the name of a node's gateway router.
func GatewayRouter(node string) string { return gatewayRouterPrefix + node }

// GatewayRouterNode is the node of a gateway router name; ok is false for other names.
func GatewayRouterNode(router string) (string, bool) {
	if len(router) > len(gatewayRouterPrefix) && router[:len(gatewayRouterPrefix)] == gatewayRouterPrefix {
		return router[len(gatewayRouterPrefix):], true
	}
	return "", false
}

// PodPort is the LSP name (and OVS iface-id) of a pod.
func PodPort(namespace, name string) string { return namespace + "_" + name }

// MACFromIP derives the MAC OVN uses for an address it assigns: 0a:58 followed by
// the last four bytes of the address (10.244.1.5 → 0a:58:0a:f4:01:05).
func MACFromIP(ip netip.Addr) net.HardwareAddr {
	b := ip.As16()
	return net.HardwareAddr{0x0a, 0x58, b[12], b[13], b[14], b[15]}
}

// GatewayIP is the host subnet's .1, the cluster router's address on the node switch.
func GatewayIP(subnet netip.Prefix) netip.Addr { return nthAddr(subnet, 1) }

// ManagementIP is the host subnet's .2, the node's ovn-k8s-mp0 address.
func ManagementIP(subnet netip.Prefix) netip.Addr { return nthAddr(subnet, 2) }

// ManagementAddresses is an OVN masked constant matching the management
// port address (.2) of every host subnet of hostLen bits in cluster, e.g.
// 10.244.0.2/255.255.0.255 for 10.244.0.0/16 cut into /24s: the cluster's
// bits and the host part's, with the subnet-number bits left free.
func ManagementAddresses(cluster netip.Prefix, hostLen int) string {
	value := ManagementIP(netip.PrefixFrom(cluster.Addr(), hostLen))
	bits := cluster.Addr().BitLen()
	mask := make([]byte, bits/8)
	for i := 0; i < bits; i++ {
		if i < cluster.Bits() || i >= hostLen {
			mask[i/8] |= 0x80 >> (i % 8)
		}
	}
	m, _ := netip.AddrFromSlice(mask)
	return value.String() + "/" + m.String()
}

func nthAddr(p netip.Prefix, n int) netip.Addr {
	a := p.Masked().Addr()
	for i := 0; i < n; i++ {
		a = a.Next()
	}
	return a
}

// lspAddress is the "MAC IP..." string of an LSP's addresses and port_security.
func lspAddress(mac net.HardwareAddr, ips ...netip.Addr) string {
	s := mac.String()
	for _, ip := range ips {
		s += " " + ip.String()
	}
	return s
}

func cidrOf(ip netip.Addr, subnet netip.Prefix) string {
	return fmt.Sprintf("%s/%d", ip, subnet.Bits())
}
