package node

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

// ServiceFlows lists the service addresses that new connections from
// outside reach through the gateway router: every NodePort (on the node's
// addresses), ExternalIP and LoadBalancer ingress IP with its port, as far
// as the policy allows them (the master's, see services.AddressPolicy): an
// external address that is this node's own, or a node port outside the
// node port range, would take a port the host listens on (ssh, the
// kubelet) away from it.
func ServiceFlows(svcs []*corev1.Service, policy services.AddressPolicy) []ServiceFlow {
	var out []ServiceFlow
	for _, svc := range svcs {
		if !services.Handled(svc) {
			continue
		}
		ips := externalAddrs(svc, policy)
		for _, p := range svc.Spec.Ports {
			if hasNodePort(svc, p, policy) {
				out = append(out, ServiceFlow{Protocol: p.Protocol, Port: p.NodePort})
			}
			for _, ip := range ips {
				out = append(out, ServiceFlow{Protocol: p.Protocol, IP: ip, Port: p.Port})
			}
		}
	}
	return out
}

// externalAddrs are a service's external IPs and, for a LoadBalancer, its
// ingress IPs, those the policy allows.
func externalAddrs(svc *corev1.Service, policy services.AddressPolicy) []netip.Addr {
	candidates := svc.Spec.ExternalIPs
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer {
		for _, ing := range svc.Status.LoadBalancer.Ingress {
			candidates = append(candidates[:len(candidates):len(candidates)], ing.IP)
		}
	}
	var ips []netip.Addr
	for _, s := range candidates {
		if ip, err := netip.ParseAddr(s); err == nil && policy.Refuse(ip) == "" && !slices.Contains(ips, ip) {
			ips = append(ips, ip)
		}
	}
	if services.TooManyExternalFrontends(len(ips), len(svc.Spec.Ports)) != "" {
		return nil // the master refuses them all too
	}
	return ips
}

func hasNodePort(svc *corev1.Service, p corev1.ServicePort, policy services.AddressPolicy) bool {
	return (svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer) &&
		policy.NodePortRange().Contains(p.NodePort)
}

// HostNodePortChain is the nat chain that lets processes on the node reach
// the node's own NodePorts: a connection to a local address never leaves
// the host, so it is sent to the service's ClusterIP of that family
// (routed through the management port) instead, or, for
// externalTrafficPolicy Local, to the nodes that have endpoints (Peers).
const HostNodePortChain = "OVN-KUBE-NODEPORT"

// Peers is what the host's chain needs to know of the other nodes: with
// externalTrafficPolicy Local, a connection from the node to its own
// NodePort is kube-proxy's short-circuit (it may reach any endpoint, keeping
// the node's address as its source, as Kubernetes' e2e checks). Through the
// ClusterIP it would leave SNATed to the management address (MgmtSNATChain);
// sent instead to the NodePort of a node that has endpoints, that node's
// gateway router keeps the client's address (skip_snat) and answers over
// the node network, where the host's conntrack undoes the DNAT. The zero
// value knows no nodes: every NodePort goes to its ClusterIP.
type Peers struct {
	Self   string
	Nodes  []services.NodeGateway                // every node (services.GatewayOf)
	Slices map[string][]*discovery.EndpointSlice // namespace/service → its slices
}

// NewPeers indexes slices by service (self "" and no nodes: every NodePort
// goes to its ClusterIP).
func NewPeers(self string, nodes []services.NodeGateway, slices []*discovery.EndpointSlice) Peers {
	p := Peers{Self: self, Nodes: nodes, Slices: map[string][]*discovery.EndpointSlice{}}
	for _, sl := range slices {
		k := sl.Namespace + "/" + sl.Labels[discovery.LabelServiceName]
		p.Slices[k] = append(p.Slices[k], sl)
	}
	sort.Slice(p.Nodes, func(i, j int) bool { return p.Nodes[i].Node < p.Nodes[j].Node })
	return p
}

// hostNodePort is one NodePort of one family in the host's chain and where
// it sends connections: a ClusterIP of the service and its port, or other
// nodes' addresses at the NodePort, taken in turn.
type hostNodePort struct {
	proto    corev1.Protocol
	nodePort int32
	targets  []netip.AddrPort
}

// hostNodePorts are the NodePorts of the host's chains, for each of the
// service's ClusterIP families (see HostNodePortRules).
func hostNodePorts(svcs []*corev1.Service, policy services.AddressPolicy, peers Peers) []hostNodePort {
	var out []hostNodePort
	for _, svc := range svcs {
		if !services.Handled(svc) {
			continue
		}
		ips := svc.Spec.ClusterIPs
		if len(ips) == 0 {
			ips = []string{svc.Spec.ClusterIP}
		}
		var d *services.Desired
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal && peers.Self != "" {
			lbs := services.LoadBalancers(svc, peers.Slices[svc.Namespace+"/"+svc.Name], peers.Nodes, nil, policy)
			d = &lbs
		}
		for _, s := range ips {
			ip, err := netip.ParseAddr(s)
			if err != nil {
				continue
			}
			for _, p := range svc.Spec.Ports {
				if !hasNodePort(svc, p, policy) {
					continue
				}
				proto := p.Protocol
				if proto == "" {
					proto = corev1.ProtocolTCP
				}
				targets := peers.elsewhere(d, p, ip.Is6())
				if len(targets) == 0 {
					targets = []netip.AddrPort{netip.AddrPortFrom(ip, uint16(p.Port))}
				}
				out = append(out, hostNodePort{proto, p.NodePort, targets})
			}
		}
	}
	return out
}

// elsewhere are, for a Local service's port (d: its balancers for every
// node) on a node without endpoints of its own, the other nodes' NodePorts
// of the family that have some; nil when the node has its own (the
// ClusterIP then serves) or nobody has any.
func (p Peers) elsewhere(d *services.Desired, sp corev1.ServicePort, v6 bool) []netip.AddrPort {
	if d == nil {
		return nil
	}
	var out []netip.AddrPort
	for _, n := range p.Nodes {
		for _, ip := range n.IPs {
			if ip.Is6() != v6 || d.GatewayBackends(n.Node, sp.Protocol, ip, sp.NodePort) == 0 {
				continue
			}
			if n.Node == p.Self {
				return nil
			}
			out = append(out, netip.AddrPortFrom(ip, uint16(sp.NodePort)))
			break
		}
	}
	return out
}

// HostNodePortRules are the chain's rules of one family, as `iptables -S`
// (ip6tables for IPv6) prints them, in the chain's order: a NodePort with
// several targets has one rule per target, each but the last taking every
// n-th of the connections that reach it, so that they share the
// connections evenly.
func HostNodePortRules(svcs []*corev1.Service, policy services.AddressPolicy, peers Peers, v6 bool) []string {
	nps := hostNodePorts(svcs, policy, peers)
	sort.SliceStable(nps, func(i, j int) bool {
		if nps[i].proto != nps[j].proto {
			return nps[i].proto < nps[j].proto
		}
		return nps[i].nodePort < nps[j].nodePort
	})
	var out []string
	for _, np := range nps {
		if np.targets[0].Addr().Is6() != v6 {
			continue
		}
		proto := strings.ToLower(string(np.proto))
		match := fmt.Sprintf("-A %s -p %s -m addrtype --dst-type LOCAL -m %s --dport %d", HostNodePortChain, proto, proto, np.nodePort)
		for i, t := range np.targets {
			nth := ""
			if left := len(np.targets) - i; left > 1 {
				nth = fmt.Sprintf(" -m statistic --mode nth --every %d --packet 0", left)
			}
			out = append(out, fmt.Sprintf("%s%s -j DNAT --to-destination %s", match, nth, t))
		}
	}
	return out
}

// HostEndpointChain is the nat chain, jumped to from PREROUTING, that hands
// the node's host-network servers what OVN sends to its management address:
// from its own switch the node's host-network endpoints are reached at that
// address (services.NodeGateway.atMgmt), and a server bound only to the
// node's address (as many are) would not see it there.
const HostEndpointChain = "OVN-KUBE-HOST-ENDPOINT"

// HostEndpointRules are that chain's rules: what arrives through the
// management port for the management address goes to the node's address
// (both of one family; none when either is missing).
func HostEndpointRules(mgmt, nodeIP netip.Addr) []string {
	if !mgmt.IsValid() || !nodeIP.IsValid() || mgmt.Is4() != nodeIP.Is4() {
		return nil
	}
	return []string{fmt.Sprintf("-A %s -d %s -i %s -j DNAT --to-destination %s", HostEndpointChain, hostPrefix(mgmt), ManagementPortName, nodeIP)}
}

// MgmtSNATChain is the nat chain, jumped to from POSTROUTING, that gives
// what the node sends into the management port from its own address (a
// connection to its own NodePort, sent on to the ClusterIP) the management
// address instead: answers to the node's address would leave the cluster
// router through the answering pod's gateway (a node address is reached
// that way from other nodes' pods), and the node's own host-network
// endpoint would get its own address back (a martian).
const MgmtSNATChain = "OVN-KUBE-MGMT-SNAT"

// MgmtSNATRules are that chain's rules (both addresses of one family).
func MgmtSNATRules(mgmt, nodeIP netip.Addr) []string {
	if !mgmt.IsValid() || !nodeIP.IsValid() || mgmt.Is4() != nodeIP.Is4() {
		return nil
	}
	return []string{fmt.Sprintf("-A %s -s %s -o %s -j SNAT --to-source %s", MgmtSNATChain, hostPrefix(nodeIP), ManagementPortName, mgmt)}
}

// hostPrefix is addr as a one-address prefix, as iptables prints it.
func hostPrefix(a netip.Addr) netip.Prefix { return netip.PrefixFrom(a, a.BitLen()) }

// hostNAT keeps one nat chain of ours (in one family's table) and its jump
// from a built-in chain exactly as wanted.
type hostNAT struct {
	chain, from string
	v6          bool
}

// hostChain is one of the host's nat chains with the rules it should hold.
type hostChain struct {
	h     hostNAT
	rules []string
}

// hostChains are the host's nat chains of one family and their rules,
// for the node's address of that family and its management address.
func hostChains(svcs []*corev1.Service, policy services.AddressPolicy, peers Peers, mgmt, nodeIP netip.Addr) []hostChain {
	v6 := nodeIP.Is6()
	return []hostChain{
		{hostNAT{HostNodePortChain, "OUTPUT", v6}, HostNodePortRules(svcs, policy, peers, v6)},
		{hostNAT{HostEndpointChain, "PREROUTING", v6}, HostEndpointRules(mgmt, nodeIP)},
		{hostNAT{MgmtSNATChain, "POSTROUTING", v6}, MgmtSNATRules(mgmt, nodeIP)},
	}
}

// drift describes how the chain differs from rules ("" when it does not),
// in order: a NodePort's rules take connections in turn.
func (h hostNAT) drift(ctx context.Context, rules []string) string {
	if _, err := h.iptables(ctx, "-t", "nat", "-C", h.from, "-j", h.chain); err != nil {
		return "no jump from " + h.from
	}
	out, err := h.iptables(ctx, "-t", "nat", "-S", h.chain)
	if err != nil {
		return "no chain " + h.chain
	}
	var have []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			have = append(have, strings.TrimSpace(l))
		}
	}
	if strings.Join(have, "\n") != strings.Join(rules, "\n") {
		return fmt.Sprintf("%d rules, want %d", len(have), len(rules))
	}
	return ""
}

// replace writes the whole chain in one restore and adds the jump.
func (h hostNAT) replace(ctx context.Context, rules []string) error {
	in := "*nat\n:" + h.chain + " - [0:0]\n" + strings.Join(append(rules, "COMMIT"), "\n") + "\n"
	restore := "iptables-restore"
	if h.v6 {
		restore = "ip6tables-restore"
	}
	cmd := exec.CommandContext(ctx, restore, "--noflush")
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s of %s: %w: %s", restore, h.chain, err, strings.TrimSpace(string(out)))
	}
	if _, err := h.iptables(ctx, "-t", "nat", "-C", h.from, "-j", h.chain); err != nil {
		if _, err := h.iptables(ctx, "-t", "nat", "-A", h.from, "-j", h.chain); err != nil {
			return err
		}
	}
	return nil
}

// iptables runs iptables, or ip6tables for an IPv6 chain.
func (h hostNAT) iptables(ctx context.Context, args ...string) (string, error) {
	bin := "iptables"
	if h.v6 {
		bin = "ip6tables"
	}
	out, err := exec.CommandContext(ctx, bin, append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", bin, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
