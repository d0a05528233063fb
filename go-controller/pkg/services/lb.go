// Package services turns Services and their EndpointSlices into OVN load
// balancers. lb.go is the pure part: desired rows from API objects, no I/O.
package services

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// defaultAffinityTimeout is Kubernetes' default ClientIP affinity (3 hours).
const defaultAffinityTimeout = 10800

// NodeGateway is a node and the addresses its NodePorts answer on (for a
// gateway router: the addresses the router answers on).
type NodeGateway struct {
	Node string
	IPs  []netip.Addr
	// Own are all of the node's addresses (a host-network endpoint on it
	// has one of them) and Mgmt its management port's: from the node's own
	// switch, a host-network endpoint of it is reached at Mgmt (see
	// LoadBalancers). Only set in the list of every node.
	Own, Mgmt []netip.Addr
}

// atMgmt rewrites the backends that are one of the node's own addresses to
// its management address of the same family: the node itself, reaching a
// service through its management port, then reaches its own host-network
// endpoint as a hairpin that OVN answers from the hairpin address, instead
// of getting its own packet back (which the kernel drops as a martian).
func (n NodeGateway) atMgmt(b backendSet) backendSet {
	out := make(backendSet, 0, len(b))
	for _, ap := range b {
		if slices.Contains(n.Own, ap.Addr()) {
			for _, m := range n.Mgmt {
				if m.Is4() == ap.Addr().Is4() {
					ap = netip.AddrPortFrom(m, ap.Port())
					break
				}
			}
		}
		out = append(out, ap)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Compare(out[j]) < 0 })
	return out
}

// ServiceProxyNameLabel names the proxy that handles a Service: a Service
// that carries it is another implementation's, as kube-proxy treats it.
const ServiceProxyNameLabel = "service.kubernetes.io/service-proxy-name"

// Handled says whether ovn-k8s implements svc at all. Like kube-proxy, it
// leaves alone a Service labelled for another proxy or labelled headless
// (service.kubernetes.io/headless), whatever its spec says.
func Handled(svc *corev1.Service) bool {
	_, other := svc.Labels[ServiceProxyNameLabel]
	_, headless := svc.Labels[corev1.IsHeadlessService]
	return !other && !headless && svc.Spec.Type != corev1.ServiceTypeExternalName && svc.Spec.ClusterIP != corev1.ClusterIPNone
}

// Desired is every load balancer a service wants, with the problems found in
// its input (each names the object; the rest of the service is still programmed).
type Desired struct {
	Cluster []*nbdb.LoadBalancer          // attached through the cluster LB group
	Switch  []*nbdb.LoadBalancer          // NodePorts on every node address, through the switch LB group
	PerNode map[string]*nbdb.LoadBalancer // node/protocol → NodePort LB on GR_<node>
	// PerNodeSwitch are the ClusterIPs of a service with
	// internalTrafficPolicy Local (node/protocol → an LB on that node's
	// switch with that node's endpoints only) or with a host-network
	// endpoint (every endpoint, the node's own at its management address).
	PerNodeSwitch map[string]*nbdb.LoadBalancer
	// HostBacked: an endpoint is a node's own address.
	HostBacked bool
	Problems   []string
	// Refused are the external addresses and node ports left out because
	// the AddressPolicy does not allow them (each is worth an Event).
	Refused []Refusal
}

// perNodeKey keys PerNode: node and protocol.
func perNodeKey(node, proto string) string { return node + "/" + proto }

// GatewayBackends is how many backends GR_<node> balances the frontend
// ip:nodePort of the service port's protocol proto to (0: none, or no such
// frontend). proto is the port's as LoadBalancers keyed it, unset or not.
func (d Desired) GatewayBackends(node string, proto corev1.Protocol, ip netip.Addr, nodePort int32) int {
	lb := d.PerNode[perNodeKey(node, string(proto))]
	if lb == nil || lb.Vips[vip(ip, nodePort)] == "" {
		return 0
	}
	return strings.Count(lb.Vips[vip(ip, nodePort)], ",") + 1
}

// ClusterLBName is the name of a service's cluster-wide load balancer for a protocol.
func ClusterLBName(namespace, name string, proto corev1.Protocol) string {
	return fmt.Sprintf("Service_%s/%s_%s_cluster", namespace, name, proto)
}

// SwitchLBName is the name of a service's NodePort load balancer on the node switches.
func SwitchLBName(namespace, name string, proto corev1.Protocol) string {
	return fmt.Sprintf("Service_%s/%s_%s_node_switch", namespace, name, proto)
}

// NodeLBName is the name of a service's NodePort load balancer on a node's gateway router.
func NodeLBName(namespace, name string, proto corev1.Protocol, node string) string {
	return fmt.Sprintf("Service_%s/%s_%s_node_router_%s", namespace, name, proto, node)
}

// NodeSwitchLBName is the name of a service's load balancer on one node's
// switch (its ClusterIPs, with internalTrafficPolicy Local).
func NodeSwitchLBName(namespace, name string, proto corev1.Protocol, node string) string {
	return fmt.Sprintf("Service_%s/%s_%s_node_switch_%s", namespace, name, proto, node)
}

// LoadBalancers computes the load balancers of svc from its EndpointSlices,
// the gateways, and every node with the addresses its NodePorts answer on
// (a NodePort answers on all of them for pods, balanced at the pod's own
// switch). External IPs, LoadBalancer ingress IPs and NodePorts are
// programmed only where policy allows them; the others are left out and
// listed in Desired.Refused. Services ovn-k8s does not handle (Handled)
// want none.
//
// Traffic policies follow kube-proxy: internalTrafficPolicy Local balances
// the ClusterIPs on each node's switch over that node's endpoints (so do
// services with a host-network endpoint, over all of them);
// externalTrafficPolicy Local balances a node's NodePorts (from pods and
// from outside) and, from outside, the external addresses over the
// endpoints of that node. "Endpoints" are the ready ones or, when there are
// none (in the cluster, or on the node for a Local policy), the serving
// and terminating ones.
func LoadBalancers(svc *corev1.Service, slices []*discovery.EndpointSlice, gateways, nodes []NodeGateway, policy AddressPolicy) Desired {
	d := Desired{PerNode: map[string]*nbdb.LoadBalancer{}, PerNodeSwitch: map[string]*nbdb.LoadBalancer{}}
	key := svc.Namespace + "/" + svc.Name
	if !Handled(svc) {
		return d
	}
	frontends, externals, problems, refused := frontendIPs(svc, policy)
	d.Refused = append(d.Refused, refused...)
	nodePorts := policy.NodePortRange()
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	internalLocal := svc.Spec.InternalTrafficPolicy != nil && *svc.Spec.InternalTrafficPolicy == corev1.ServiceInternalTrafficPolicyLocal
	isExternal := map[netip.Addr]bool{}
	for _, ip := range externals {
		isExternal[ip] = true
	}
	d.Problems = append(d.Problems, problems...)
	eps := collectEndpoints(key, slices, &d.Problems)
	// ClusterIPs backed by a host-network endpoint are balanced per node
	// switch too, so that each node reaches its own at its management
	// address (NodeGateway.atMgmt).
	d.HostBacked = eps.onHost(nodes)
	perNodeClusterIPs := internalLocal || d.HostBacked
	cluster := map[corev1.Protocol]*nbdb.LoadBalancer{}
	switchLBs := map[corev1.Protocol]*nbdb.LoadBalancer{}
	perNode := func(m map[string]*nbdb.LoadBalancer, node string, proto corev1.Protocol, name string) *nbdb.LoadBalancer {
		k := perNodeKey(node, string(proto))
		if m[k] == nil {
			p, _ := lbProtocol(proto)
			m[k] = newLB(svc, name, p)
		}
		return m[k]
	}
	for _, sp := range svc.Spec.Ports {
		proto, ok := lbProtocol(sp.Protocol)
		if !ok {
			d.Problems = append(d.Problems, fmt.Sprintf("service %s port %q: protocol %q is not TCP, UDP or SCTP; port skipped", key, sp.Name, sp.Protocol))
			continue
		}
		if sp.Port < 1 || sp.Port > 65535 {
			d.Problems = append(d.Problems, fmt.Sprintf("service %s port %q: port %d out of range; port skipped", key, sp.Name, sp.Port))
			continue
		}
		pk := portKey(sp.Name, sp.Protocol)
		backends := eps.backends(pk)
		lb := cluster[sp.Protocol]
		if lb == nil {
			lb = newLB(svc, ClusterLBName(svc.Namespace, svc.Name, sp.Protocol), proto)
			cluster[sp.Protocol] = lb
		}
		// With externalTrafficPolicy Local, outside clients reach external
		// addresses on each gateway router with that node's endpoints only;
		// pods reach them at their switch with all endpoints.
		external := local && (len(externals) > 0)
		for _, ip := range frontends {
			switch {
			case external && isExternal[ip]:
			case perNodeClusterIPs && !isExternal[ip]:
				for _, n := range nodes {
					bs := backends
					if internalLocal {
						bs = eps.local(pk, n.Node)
					}
					nlb := perNode(d.PerNodeSwitch, n.Node, sp.Protocol, NodeSwitchLBName(svc.Namespace, svc.Name, sp.Protocol, n.Node))
					nlb.Vips[vip(ip, sp.Port)] = n.atMgmt(bs).forFamily(ip)
				}
			default:
				lb.Vips[vip(ip, sp.Port)] = backends.forFamily(ip)
			}
		}
		switchLB := func() *nbdb.LoadBalancer {
			slb := switchLBs[sp.Protocol]
			if slb == nil {
				slb = newLB(svc, SwitchLBName(svc.Namespace, svc.Name, sp.Protocol), proto)
				switchLBs[sp.Protocol] = slb
			}
			return slb
		}
		if external {
			for _, ip := range externals {
				switchLB().Vips[vip(ip, sp.Port)] = backends.forFamily(ip)
			}
		}
		nodePort := sp.NodePort != 0 && (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer)
		if nodePort && !nodePorts.Contains(sp.NodePort) {
			// A NodePort answers on every node address: outside the range
			// the API server allocates from, it could shadow a port the
			// host itself listens on (22, 10250, 6443...).
			d.Refused = append(d.Refused, Refusal{Kind: RefusedNodePort, Value: strconv.Itoa(int(sp.NodePort)),
				Reason: fmt.Sprintf("port %q: node port %d is outside the node port range %s (ovnkube master --service-node-port-range, which must match the API server's); it could shadow a port the nodes listen on, so the node port is not programmed", sp.Name, sp.NodePort, nodePorts)})
			nodePort = false
		}
		if nodePort {
			// A pod reaching a node's NodePort gets what a client from
			// outside would get there: with a Local policy, that node's
			// endpoints (none: rejected).
			for _, n := range nodes {
				bs := backends
				if local {
					bs = eps.local(pk, n.Node)
				}
				for _, ip := range n.IPs {
					switchLB().Vips[vip(ip, sp.NodePort)] = bs.forFamily(ip)
				}
			}
		}
		if !nodePort && !external {
			continue
		}
		for _, gw := range gateways {
			nlb := perNode(d.PerNode, gw.Node, sp.Protocol, NodeLBName(svc.Namespace, svc.Name, sp.Protocol, gw.Node))
			bs := backends
			if local {
				nlb.Options["skip_snat"] = "true" // the client's address reaches the pod
				bs = eps.local(pk, gw.Node)
			}
			if nodePort {
				for _, ip := range gw.IPs {
					nlb.Vips[vip(ip, sp.NodePort)] = bs.forFamily(ip)
				}
			}
			if external {
				for _, ip := range externals {
					nlb.Vips[vip(ip, sp.Port)] = bs.forFamily(ip)
				}
			}
		}
	}
	for _, proto := range []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP, corev1.ProtocolSCTP} {
		if lb := cluster[proto]; lb != nil && len(lb.Vips) > 0 {
			d.Cluster = append(d.Cluster, lb)
		}
		if lb := switchLBs[proto]; lb != nil {
			d.Switch = append(d.Switch, lb)
		}
	}
	return d
}

func newLB(svc *corev1.Service, name string, proto nbdb.LoadBalancerProtocol) *nbdb.LoadBalancer {
	ids := topology.Owner{Type: topology.OwnerService, Name: svc.Namespace + "/" + svc.Name}.ExternalIDs()
	// Upstream's keys, so its tooling recognises the rows.
	ids["k8s.ovn.org/kind"] = "Service"
	ids["k8s.ovn.org/owner"] = svc.Namespace + "/" + svc.Name
	// reject=true: a VIP without backends answers with a TCP reset or ICMP
	// unreachable at once instead of letting clients time out. It only acts
	// on VIPs without backends, so it is set on every service LB.
	// hairpin_snat_ip: a pod balanced back to itself sees this source (one
	// per family of the service's cluster IPs), which NetworkPolicy always
	// allows (upstream uses the same addresses).
	opts := map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": hairpinSNAT(svc)}
	if svc.Spec.SessionAffinity == corev1.ServiceAffinityClientIP {
		timeout := int32(defaultAffinityTimeout)
		if c := svc.Spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil {
			timeout = *c.ClientIP.TimeoutSeconds
		}
		opts["affinity_timeout"] = strconv.Itoa(int(timeout))
	}
	if proto == nbdb.LoadBalancerProtocolUDP || proto == nbdb.LoadBalancerProtocolSCTP {
		// ovn-controller flushes the conntrack entries of a backend that
		// leaves a VIP (OVN >= 23.09; older ones ignore the option). A UDP
		// client that keeps one flow going (DNS, a game, a tunnel) would
		// otherwise keep sending to a dead pod for as long as it sends.
		// TCP is left alone: a terminating pod's connections drain.
		opts["ct_flush"] = "true"
	}
	p := proto
	return &nbdb.LoadBalancer{Name: name, Protocol: &p, Vips: map[string]string{}, Options: opts, ExternalIDs: ids}
}

func lbProtocol(p corev1.Protocol) (nbdb.LoadBalancerProtocol, bool) {
	switch p {
	case corev1.ProtocolTCP, "":
		return nbdb.LoadBalancerProtocolTCP, true
	case corev1.ProtocolUDP:
		return nbdb.LoadBalancerProtocolUDP, true
	case corev1.ProtocolSCTP:
		return nbdb.LoadBalancerProtocolSCTP, true
	}
	return "", false
}

// frontendIPs are the ClusterIPs, external IPs and load balancer ingress
// IPs, and apart the latter two (the addresses outside clients use); an
// external or ingress IP the policy refuses is in neither.
func frontendIPs(svc *corev1.Service, policy AddressPolicy) (all, external []netip.Addr, problems []string, refused []Refusal) {
	key := svc.Namespace + "/" + svc.Name
	var out []netip.Addr
	seen := map[netip.Addr]bool{}
	add := func(what, s string) {
		if s == "" || s == corev1.ClusterIPNone {
			return
		}
		ip, err := netip.ParseAddr(s)
		if err != nil {
			problems = append(problems, fmt.Sprintf("service %s: %s %q is not an IP address; skipped", key, what, s))
			return
		}
		if what != "cluster IP" {
			if why := policy.Refuse(ip); why != "" {
				kind := RefusedExternalIP
				if what != "external IP" {
					kind = RefusedIngressIP
				}
				refused = append(refused, Refusal{Kind: kind, Value: s, Reason: why})
				return
			}
		}
		if !seen[ip] {
			seen[ip] = true
			out = append(out, ip)
			if what != "cluster IP" {
				external = append(external, ip)
			}
		}
	}
	for _, s := range clusterIPs(svc) {
		add("cluster IP", s)
	}
	for _, s := range svc.Spec.ExternalIPs {
		add("external IP", s)
	}
	// Ingress IPs are only a LoadBalancer service's: a status left behind when
	// the type changed, or written on another type, opens nothing.
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			if ing.IP != "" {
				add("load balancer ingress IP", ing.IP)
			}
		}
	}
	if why := TooManyExternalFrontends(len(external), len(svc.Spec.Ports)); why != "" {
		out = slices.DeleteFunc(out, func(ip netip.Addr) bool { return slices.Contains(external, ip) })
		refused = append(refused, Refusal{Kind: RefusedExternalIP, Value: fmt.Sprintf("%d addresses", len(external)), Reason: why})
		external = nil
	}
	return out, external, problems, refused
}

// clusterIPs are the service's cluster IPs (ClusterIP alone when an old
// client wrote only that).
func clusterIPs(svc *corev1.Service) []string {
	if len(svc.Spec.ClusterIPs) == 0 {
		return []string{svc.Spec.ClusterIP}
	}
	return svc.Spec.ClusterIPs
}

// hairpinSNAT is the hairpin source of each family of the service's cluster
// IPs, IPv4 when it has none of IPv6.
func hairpinSNAT(svc *corev1.Service) string {
	v4, v6 := false, false
	for _, s := range clusterIPs(svc) {
		if ip, err := netip.ParseAddr(s); err == nil {
			v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
		}
	}
	switch {
	case v4 && v6:
		return topology.HairpinSNATIP + " " + topology.HairpinSNATIPv6
	case v6:
		return topology.HairpinSNATIPv6
	}
	return topology.HairpinSNATIP
}

func vip(ip netip.Addr, port int32) string {
	return netip.AddrPortFrom(ip, uint16(port)).String()
}

// endpoints are the endpoints of a service that can take traffic, per
// service port (portKey): the ready ones, and apart the serving and
// terminating ones, each with its node.
type endpoints struct {
	ready, fallback map[string]map[netip.AddrPort]string // port key → endpoint → node
}

type backendSet []netip.AddrPort

// forFamily renders the backends of the VIP's IP family as OVN wants them.
func (b backendSet) forFamily(vipIP netip.Addr) string {
	var parts []string
	for _, ap := range b {
		if ap.Addr().Is4() == vipIP.Is4() {
			parts = append(parts, ap.String())
		}
	}
	return strings.Join(parts, ",")
}

func portKey(name string, proto corev1.Protocol) string {
	if proto == "" {
		proto = corev1.ProtocolTCP
	}
	return name + "/" + string(proto)
}

// backends are the ready endpoints of a port or, when none is ready, the
// serving and terminating ones (so connections drain instead of failing
// during a rollout).
func (e endpoints) backends(pk string) backendSet {
	if len(e.ready[pk]) > 0 {
		return sorted(e.ready[pk], "")
	}
	return sorted(e.fallback[pk], "")
}

// local are the backends on node: its ready endpoints or, when it has none,
// its serving and terminating ones, whatever other nodes have.
func (e endpoints) local(pk, node string) backendSet {
	if b := sorted(e.ready[pk], node); len(b) > 0 {
		return b
	}
	return sorted(e.fallback[pk], node)
}

// onHost says whether an endpoint is one of a node's own addresses (a
// host-network pod's) on a node whose management address is known.
func (e endpoints) onHost(nodes []NodeGateway) bool {
	own := map[netip.Addr]bool{}
	for _, n := range nodes {
		if len(n.Mgmt) > 0 {
			for _, ip := range n.Own {
				own[ip] = true
			}
		}
	}
	if len(own) == 0 {
		return false
	}
	for _, m := range []map[string]map[netip.AddrPort]string{e.ready, e.fallback} {
		for _, set := range m {
			for ap := range set {
				if own[ap.Addr()] {
					return true
				}
			}
		}
	}
	return false
}

// collectEndpoints gathers the ready and the serving-and-terminating
// endpoints from all slices. Target ports are resolved per slice, as named
// ports may map to different numbers in different slices.
func collectEndpoints(key string, slices []*discovery.EndpointSlice, problems *[]string) endpoints {
	out := endpoints{ready: map[string]map[netip.AddrPort]string{}, fallback: map[string]map[netip.AddrPort]string{}}
	for _, slice := range slices {
		if slice.AddressType == discovery.AddressTypeFQDN {
			continue
		}
		for _, port := range slice.Ports {
			if port.Port == nil || *port.Port < 1 || *port.Port > 65535 {
				*problems = append(*problems, fmt.Sprintf("service %s: EndpointSlice %s has port %s without a valid number; skipped", key, slice.Name, portName(port.Name)))
				continue
			}
			proto := corev1.ProtocolTCP
			if port.Protocol != nil {
				proto = *port.Protocol
			}
			pk := portKey(portName(port.Name), proto)
			for _, ep := range slice.Endpoints {
				if len(ep.Addresses) == 0 {
					continue
				}
				ip, err := netip.ParseAddr(ep.Addresses[0])
				if err != nil {
					*problems = append(*problems, fmt.Sprintf("service %s: EndpointSlice %s has address %q, not an IP; skipped", key, slice.Name, ep.Addresses[0]))
					continue
				}
				ap := netip.AddrPortFrom(ip, uint16(*port.Port))
				node := ""
				if ep.NodeName != nil {
					node = *ep.NodeName
				}
				c := ep.Conditions
				switch {
				case c.Ready == nil || *c.Ready:
					addTo(out.ready, pk, ap, node)
				case c.Serving != nil && *c.Serving && c.Terminating != nil && *c.Terminating:
					addTo(out.fallback, pk, ap, node)
				}
			}
		}
	}
	return out
}

// sorted lists the endpoints of set, only those on node unless node is "".
func sorted(set map[netip.AddrPort]string, node string) backendSet {
	list := make(backendSet, 0, len(set))
	for ap, n := range set {
		if node == "" || n == node {
			list = append(list, ap)
		}
	}
	sort.Slice(list, func(i, j int) bool { return list[i].Compare(list[j]) < 0 })
	return list
}

func portName(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func addTo(m map[string]map[netip.AddrPort]string, k string, ap netip.AddrPort, node string) {
	if m[k] == nil {
		m[k] = map[netip.AddrPort]string{}
	}
	m[k][ap] = node
}
