package node

import (
	"context"
	"net"
	"net/netip"
	"slices"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ndp"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
)

// The gateway router GR_<node> SNATs the pods an EgressIP selects to the
// egress IPs the master assigns to this node, answering for them on the
// external network with the bridge's MAC. ovn-controller announces an IPv4
// one when the node takes it (gratuitous ARP, nat-addresses=router) but
// not an IPv6 one, so the node daemon does: an unsolicited neighbour
// advertisement of each IPv6 egress IP this node newly holds, on the
// bridge with its MAC, announceRounds times announceEvery apart.
const (
	announceRounds = 3
	announceEvery  = time.Second
)

// heldEgressIPs follows which IPv6 egress IPs the EgressIPs' statuses
// assign to one node, EgressIP by EgressIP.
type heldEgressIPs struct {
	node   string
	byName map[string][]netip.Addr
	held   map[netip.Addr]bool
}

func newHeldEgressIPs(node string) *heldEgressIPs {
	return &heldEgressIPs{node: node, byName: map[string][]netip.Addr{}, held: map[netip.Addr]bool{}}
}

// set records the EgressIP name as eip (nil: deleted) and returns the
// addresses the node holds now and did not before, sorted. An address it
// no longer holds is forgotten: held again later, it is returned again.
func (h *heldEgressIPs) set(name string, eip *k8sovnv1.EgressIP) []netip.Addr {
	if eip == nil {
		delete(h.byName, name)
	} else {
		h.byName[name] = ipv6On(eip, h.node)
	}
	cur := map[netip.Addr]bool{}
	var gained []netip.Addr
	for _, ips := range h.byName {
		for _, ip := range ips {
			if !cur[ip] && !h.held[ip] {
				gained = append(gained, ip)
			}
			cur[ip] = true
		}
	}
	h.held = cur
	slices.SortFunc(gained, func(a, b netip.Addr) int { return a.Compare(b) })
	return gained
}

// ipv6On is the IPv6 egress IPs eip's status assigns to node (IPv4 ones
// OVN announces; a malformed one the master never writes).
func ipv6On(eip *k8sovnv1.EgressIP, node string) []netip.Addr {
	var out []netip.Addr
	for _, it := range eip.Status.Items {
		ip, err := netip.ParseAddr(it.EgressIP)
		if it.Node == node && err == nil && ip.Is6() && !ip.Is4In6() && ip.Zone() == "" {
			out = append(out, ip)
		}
	}
	return out
}

// announceRound sends one advertisement of each of ips and returns the
// error of each it could not send.
type announceRound func(ips []netip.Addr) map[netip.Addr]error

// followEgressIPs announces the IPv6 egress IPs node takes (see
// announceRounds), following the EgressIPs through dyn when the API server
// serves them. When it cannot (no CRD, no RBAC) it says so once and
// returns: the rest of the daemon goes on without announcements.
func followEgressIPs(ctx context.Context, dyn dynamic.Interface, disc discovery.DiscoveryInterface, node string, round announceRound, log logr.Logger) {
	if !k8sovnv1.ServesEgressIP(disc) {
		log.Info("the API server does not serve EgressIPs (their CRD is not installed): IPv6 egress IPs are not announced")
		return
	}
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		log.Error(err, "cannot list EgressIPs: IPv6 egress IPs this node takes are not announced (the node's ServiceAccount needs list and watch on egressips.k8s.ovn.org: dist/kubernetes/11-rbac-node.yaml); restart the node daemon once granted")
		return
	}
	h := newHeldEgressIPs(node)
	announce := func(ips []netip.Addr) {
		if len(ips) > 0 {
			go announceBurst(ctx, ips, round, announceRounds, announceEvery, log)
		}
	}
	inf := k8sovnv1.NewEgressIPInformer(dyn, 0)
	// One handler, called for one event at a time in order: every
	// assignment is seen, even one undone before a later read could see it.
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if e, ok := o.(*k8sovnv1.EgressIP); ok {
				announce(h.set(e.Name, e))
			}
		},
		UpdateFunc: func(_, o any) {
			if e, ok := o.(*k8sovnv1.EgressIP); ok {
				announce(h.set(e.Name, e))
			}
		},
		DeleteFunc: func(o any) {
			if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(o); err == nil {
				h.set(key, nil) // cluster-scoped: the key is the name
			}
		},
	})
	log.Info("following EgressIPs to announce the IPv6 ones this node takes", "node", node)
	inf.RunWithContext(ctx)
}

// announceBurst runs round on ips rounds times, every apart, until ctx
// ends. It logs the burst once, and each address that fails once.
func announceBurst(ctx context.Context, ips []netip.Addr, round announceRound, rounds int, every time.Duration, log logr.Logger) {
	log.Info("announcing IPv6 egress IPs this node took (unsolicited neighbour advertisements)", "egressIPs", ips, "times", rounds, "every", every)
	failed := map[netip.Addr]bool{}
	t := time.NewTimer(0)
	defer t.Stop()
	for i := 0; i < rounds; i++ {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		errs := round(ips)
		for _, ip := range ips {
			if err := errs[ip]; err != nil && !failed[ip] {
				failed[ip] = true
				log.Error(err, "cannot announce an IPv6 egress IP", "egressIP", ip)
			}
		}
		t.Reset(every)
	}
}

// ndpRound is an announceRound on the gateway bridge, with its MAC, from
// its link-local address.
func ndpRound(ctx context.Context, sw *ovs.Client, bridge string) announceRound {
	return func(ips []netip.Addr) map[netip.Addr]error {
		mac, err := bridgeMAC(ctx, sw, bridge)
		if err != nil {
			return allFailed(ips, err)
		}
		return sendNAs(bridge, mac, ips)
	}
}

// sendNAs sends an unsolicited neighbour advertisement of each of ips at
// mac on iface.
func sendNAs(iface string, mac net.HardwareAddr, ips []netip.Addr) map[netip.Addr]error {
	a, err := ndp.OpenAnnouncer(iface, mac)
	if err != nil {
		return allFailed(ips, err)
	}
	defer a.Close()
	errs := map[netip.Addr]error{}
	for _, ip := range ips {
		if err := a.Announce(ip); err != nil {
			errs[ip] = err
		}
	}
	return errs
}

func allFailed(ips []netip.Addr, err error) map[netip.Addr]error {
	out := make(map[netip.Addr]error, len(ips))
	for _, ip := range ips {
		out[ip] = err
	}
	return out
}
