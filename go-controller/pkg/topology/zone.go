package topology

import (
	"maps"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// Zone mode (OVN interconnection, issue 38): each zone's NB is joined to the
// others' by ovn-ic through a transit switch. The transit switch itself and
// the other zones' ports on it (type remote) are ovn-ic's rows, made from
// the IC databases; a zone writes only its own nodes' ports on it.
const (
	// TransitSwitch is the transit switch's name, in the IC NB and (made
	// by ovn-ic) in every zone's NB.
	TransitSwitch   = "transit_switch"
	routerToTransit = "rtots-"
	transitToRouter = "tstor-"
)

// TransitRouterPort is the cluster router's port on the transit switch for a node.
func TransitRouterPort(node string) string { return routerToTransit + node }

// TransitSwitchPort is the transit switch's port facing a node's
// TransitRouterPort; in every other zone ovn-ic makes a remote port of the
// same name.
func TransitSwitchPort(node string) string { return transitToRouter + node }

// TransitRows are a node's rows on the transit switch: the cluster router's
// port with the node's transit addresses, the switch's router port facing
// it, and the port's gateway, the node's chassis (so that the other zones'
// traffic to it tunnels there).
type TransitRows struct {
	RouterPort *nbdb.LogicalRouterPort
	SwitchPort *nbdb.LogicalSwitchPort
	Gateway    *nbdb.GatewayChassis
}

// Transit computes a node's transit rows for its transit addresses (one per
// family) and its chassis.
func Transit(node, chassis string, addrs []netip.Prefix) TransitRows {
	owner := Owner{Type: OwnerNode, Name: node}.ExternalIDs()
	var networks []string
	for _, a := range addrs {
		networks = append(networks, a.String())
	}
	rtots := TransitRouterPort(node)
	return TransitRows{
		RouterPort: &nbdb.LogicalRouterPort{Name: rtots, MAC: MACFromIP(addrs[0].Addr()).String(), Networks: networks, ExternalIDs: owner},
		SwitchPort: &nbdb.LogicalSwitchPort{Name: TransitSwitchPort(node), Type: "router", Addresses: []string{"router"},
			Options: map[string]string{"router-port": rtots}, ExternalIDs: owner},
		Gateway: &nbdb.GatewayChassis{Name: rtots + "-" + chassis, ChassisName: chassis, Priority: 1, ExternalIDs: owner},
	}
}

// NorthdBackoffOption is the NB_Global option bounding how soon ovn-northd
// runs again after a run: by as long as the run took, at most this many
// milliseconds (OVN 23.09 and later; older northds ignore it). Changes
// arriving meanwhile are taken in one run: under churn northd recomputes
// less often and leaves the cores to the NB and the master.
const NorthdBackoffOption = "northd-backoff-interval-ms"

// GlobalOptions are the NB_Global options the master keeps (no others are
// written: ovn-northd keeps its own there): northd's backoff, and in zone
// mode (zone set) the zone's route exchange (ZoneOptions).
func GlobalOptions(zone string, sameInEveryZone []netip.Prefix, northdBackoff time.Duration) map[string]string {
	want := map[string]string{NorthdBackoffOption: strconv.FormatInt(northdBackoff.Milliseconds(), 10)}
	if zone != "" {
		maps.Copy(want, ZoneOptions(sameInEveryZone))
	}
	return want
}

// ZoneOptions are the NB_Global options of a zone: route exchange through
// ovn-ic on, but for the ranges every zone has alike (both spellings of the
// list's key: ic-route-denylist since OVN 23.06, ic-route-blacklist before).
func ZoneOptions(sameInEveryZone []netip.Prefix) map[string]string {
	var deny []string
	for _, p := range sameInEveryZone {
		deny = append(deny, p.Masked().String())
	}
	list := strings.Join(deny, ",")
	return map[string]string{"ic-route-adv": "true", "ic-route-learn": "true", "ic-route-denylist": list, "ic-route-blacklist": list}
}

// OwnerRemoteNode owns a zone's rows for a node of another zone (zone mode):
// routes to what that node's zone does not advertise.
const OwnerRemoteNode = "RemoteNode"

// RemoteNodeRoutes are the routes a zone's cluster router needs to a node
// of another zone beyond those ovn-ic learns: to its gateway router's join
// addresses (one per family; the ranges are alike in every zone, so
// denied to ovn-ic), via its transit address of the family. A NodePort
// connection the node's gateway router sends to a backend in this zone
// comes from that join address (lb_force_snat_ip), and its replies must go
// back there. Addresses of a family without its twin are left out.
func RemoteNodeRoutes(node string, joinIPs, transit []netip.Prefix) []*nbdb.LogicalRouterStaticRoute {
	var out []*nbdb.LogicalRouterStaticRoute
	for _, j := range joinIPs {
		for _, tr := range transit {
			if tr.Addr().Is4() != j.Addr().Is4() {
				continue
			}
			ids := Owner{Type: OwnerRemoteNode, Name: node}.ExternalIDs()
			ids[RowIDKey] = "gateway-join:" + j.Addr().String()
			out = append(out, &nbdb.LogicalRouterStaticRoute{
				IPPrefix: netip.PrefixFrom(j.Addr(), j.Addr().BitLen()).String(), Nexthop: tr.Addr().String(), ExternalIDs: ids,
			})
		}
	}
	return out
}
