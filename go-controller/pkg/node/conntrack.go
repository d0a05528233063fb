package node

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

// Conntrack hygiene. A UDP (or SCTP) client that keeps one flow going (DNS,
// a tunnel, a game) keeps the conntrack entry of its first packet, and with
// it the backend that packet was balanced to, for as long as it sends. When
// that backend goes away, or the service's target port changes, the flow
// must be re-balanced: its entry has to go. ovn-controller removes OVN's
// entries of a backend that leaves a balancer (options:ct_flush), but only
// for changes it sees while running, and never the host's own. The node
// daemon sweeps the kernel's table (every zone, both families) after every
// change of services and now and then, and deletes exactly the entries
// that ConntrackPlan calls stale. TCP is left alone: its connections to a
// terminating pod drain and end by themselves.

// ctKey is a frontend as conntrack sees it: protocol number and the
// original destination.
type ctKey struct {
	proto uint8
	dst   netip.AddrPort
}

// ConntrackPlan says which UDP and SCTP entries are stale, from the
// node's view of its services. It only ever matches an entry whose
// original destination is one of the services' frontends:
//   - in OVN's zones (any but 0), an entry NATed to an address that is not
//     a backend of that frontend in any of the node's balancers;
//   - in the host's zone (0), an entry to one of the node's addresses at a
//     NodePort that the host's chain (OVN-KUBE-NODEPORT) does not send,
//     or no longer sends, where it went (the ClusterIP, or another node's
//     NodePort for externalTrafficPolicy Local): a flow started before the
//     rule existed, the port now belongs to another service, or the nodes
//     with endpoints changed.
//
// It implements netlink.CustomConntrackFilter.
type ConntrackPlan struct {
	ovn  map[ctKey]map[netip.AddrPort]bool
	host map[ctKey]map[netip.AddrPort]bool
}

// NewConntrackPlan computes the plan from the node's services and their
// EndpointSlices (peers.Slices), with self the node (services.GatewayOf),
// policy the node's service address policy and peers what the host's chain
// knows of the other nodes.
func NewConntrackPlan(svcs []*corev1.Service, self services.NodeGateway, policy services.AddressPolicy, peers Peers) ConntrackPlan {
	p := ConntrackPlan{ovn: map[ctKey]map[netip.AddrPort]bool{}, host: map[ctKey]map[netip.AddrPort]bool{}}
	policy.Nodes = map[netip.Addr]string{}
	for _, ip := range self.Own {
		policy.Nodes[ip] = self.Node // as the master does: no external IP may be the node's
	}
	nodes := []services.NodeGateway{self}
	for _, svc := range svcs {
		if !datagrams(svc) {
			continue
		}
		d := services.LoadBalancers(svc, peers.Slices[svc.Namespace+"/"+svc.Name], nodes, nodes, policy)
		for _, lb := range d.Cluster {
			p.addLB(lb)
		}
		for _, lb := range d.Switch {
			p.addLB(lb)
		}
		for _, lb := range d.PerNode {
			p.addLB(lb)
		}
		for _, lb := range d.PerNodeSwitch {
			p.addLB(lb)
		}
	}
	for _, np := range hostNodePorts(svcs, policy, peers) {
		proto, ok := protoNumber(np.proto)
		if !ok {
			continue
		}
		for _, ip := range self.Own {
			if ip.Is6() != np.targets[0].Addr().Is6() {
				continue
			}
			k := ctKey{proto, netip.AddrPortFrom(ip, uint16(np.nodePort))}
			if p.host[k] == nil {
				p.host[k] = map[netip.AddrPort]bool{}
			}
			for _, t := range np.targets {
				p.host[k][t] = true
			}
		}
	}
	return p
}

// datagrams says whether svc has a UDP or SCTP port.
func datagrams(svc *corev1.Service) bool {
	for _, p := range svc.Spec.Ports {
		if _, ok := protoNumber(p.Protocol); ok {
			return true
		}
	}
	return false
}

// protoNumber is the IP protocol number of the protocols swept (UDP, SCTP).
func protoNumber(p corev1.Protocol) (uint8, bool) {
	switch p {
	case corev1.ProtocolUDP:
		return 17, true
	case corev1.ProtocolSCTP:
		return 132, true
	}
	return 0, false
}

func (p ConntrackPlan) addLB(lb *nbdb.LoadBalancer) {
	var proto uint8
	switch {
	case lb.Protocol == nil:
		return
	case *lb.Protocol == nbdb.LoadBalancerProtocolUDP:
		proto = 17
	case *lb.Protocol == nbdb.LoadBalancerProtocolSCTP:
		proto = 132
	default:
		return
	}
	for vip, backends := range lb.Vips {
		fe, err := netip.ParseAddrPort(vip)
		if err != nil {
			continue
		}
		k := ctKey{proto, unmap(fe)}
		if p.ovn[k] == nil {
			p.ovn[k] = map[netip.AddrPort]bool{}
		}
		for _, s := range strings.Split(backends, ",") {
			if b, err := netip.ParseAddrPort(s); err == nil {
				p.ovn[k][unmap(b)] = true
			}
		}
	}
}

func unmap(ap netip.AddrPort) netip.AddrPort { return netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()) }

func tupleAddr(ip net.IP, port uint16) netip.AddrPort {
	a, _ := netip.AddrFromSlice(ip)
	return netip.AddrPortFrom(a.Unmap(), port)
}

// Frontends is how many frontends the plan knows (OVN's, the host's).
func (p ConntrackPlan) Frontends() (ovn, host int) { return len(p.ovn), len(p.host) }

// MatchConntrackFlow says whether f is stale (see ConntrackPlan).
func (p ConntrackPlan) MatchConntrackFlow(f *netlink.ConntrackFlow) bool {
	k := ctKey{f.Forward.Protocol, tupleAddr(f.Forward.DstIP, f.Forward.DstPort)}
	replyFrom := tupleAddr(f.Reverse.SrcIP, f.Reverse.SrcPort)
	if f.Zone == 0 {
		targets, ok := p.host[k]
		return ok && !targets[replyFrom]
	}
	backends, ok := p.ovn[k]
	return ok && replyFrom != k.dst && !backends[replyFrom]
}

// Equal says whether two plans would match the same entries.
func (p ConntrackPlan) Equal(o ConntrackPlan) bool {
	if len(p.ovn) != len(o.ovn) || len(p.host) != len(o.host) {
		return false
	}
	return sameSets(p.host, o.host) && sameSets(p.ovn, o.ovn)
}

func sameSets(a, b map[ctKey]map[netip.AddrPort]bool) bool {
	for k, as := range a {
		bs, ok := b[k]
		if !ok || len(bs) != len(as) {
			return false
		}
		for x := range as {
			if !bs[x] {
				return false
			}
		}
	}
	return true
}

// conntrackTable is the part of netlink's API the sweep uses (a Handle, or
// one in a test's network namespace).
type conntrackTable interface {
	ConntrackDeleteFilters(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error)
}

// SweepConntrack deletes the entries plan calls stale in both families and
// says how many went.
func SweepConntrack(table conntrackTable, plan ConntrackPlan) (uint, error) {
	var total uint
	for _, fam := range []netlink.InetFamily{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		n, err := table.ConntrackDeleteFilters(netlink.ConntrackTable, fam, plan)
		total += n
		if err != nil {
			return total, err
		}
	}
	return total, nil
}

// conntrackSweepEvery is how often the table is swept without a change of
// services: entries a missed event (or a flow that began while a change
// was being applied) left behind go within that time.
const conntrackSweepEvery = 2 * time.Minute

// runConntrack sweeps after every kick (a change of services, slices or
// the node) whose plan differs from the last one swept, at most once a
// second, and every conntrackSweepEvery.
func runConntrack(ctx context.Context, table conntrackTable, plan func() (ConntrackPlan, error), kick <-chan struct{}, log logr.Logger) {
	periodic := time.NewTicker(conntrackSweepEvery)
	defer periodic.Stop()
	var last ConntrackPlan
	swept, force := false, true
	lastErr := ""
	for {
		if p, err := plan(); err == nil && (force || !swept || !p.Equal(last)) {
			n, err := SweepConntrack(table, p)
			if n > 0 {
				log.V(1).Info("removed stale conntrack entries", "entries", n)
			}
			swept, last = err == nil, p
			if err != nil && err.Error() != lastErr {
				log.Error(err, "conntrack sweep failed; retrying at the next change or sweep")
			}
			lastErr = ""
			if err != nil {
				lastErr = err.Error()
			}
		}
		force = false
		select {
		case <-ctx.Done():
			return
		case <-kick:
		case <-periodic.C:
			force = true
		}
		select { // collapse a burst of changes into one sweep
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}
