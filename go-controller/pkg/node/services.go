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
// the host, so it is sent to the service's ClusterIP (routed through the
// management port) instead.
const HostNodePortChain = "OVN-KUBE-NODEPORT"

// hostNodePort is one NodePort the host's chain sends to a ClusterIP.
type hostNodePort struct {
	proto    corev1.Protocol
	nodePort int32
	target   netip.AddrPort // the service's IPv4 ClusterIP and port
}

// hostNodePorts are the NodePorts of the host's chain (see HostNodePortRules).
func hostNodePorts(svcs []*corev1.Service, policy services.AddressPolicy) []hostNodePort {
	var out []hostNodePort
	for _, svc := range svcs {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !ip.Is4() || !services.Handled(svc) {
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
			out = append(out, hostNodePort{proto, p.NodePort, netip.AddrPortFrom(ip, uint16(p.Port))})
		}
	}
	return out
}

// HostNodePortRules are the chain's rules, as `iptables -S` prints them.
func HostNodePortRules(svcs []*corev1.Service, policy services.AddressPolicy) []string {
	var out []string
	for _, np := range hostNodePorts(svcs, policy) {
		proto := strings.ToLower(string(np.proto))
		out = append(out, fmt.Sprintf("-A %s -p %s -m addrtype --dst-type LOCAL -m %s --dport %d -j DNAT --to-destination %s",
			HostNodePortChain, proto, proto, np.nodePort, np.target))
	}
	sort.Strings(out)
	return out
}

// HostEndpointChain is the nat chain, jumped to from PREROUTING, that hands
// the node's host-network servers what OVN sends to its management address:
// from its own switch the node's host-network endpoints are reached at that
// address (services.NodeGateway.atMgmt), and a server bound only to the
// node's address (as many are) would not see it there.
const HostEndpointChain = "OVN-KUBE-HOST-ENDPOINT"

// HostEndpointRules are that chain's rules: what arrives through the
// management port for the management address goes to the node's address.
func HostEndpointRules(mgmt, nodeIP netip.Addr) []string {
	if !mgmt.IsValid() || !nodeIP.IsValid() || !mgmt.Is4() || !nodeIP.Is4() {
		return nil
	}
	return []string{fmt.Sprintf("-A %s -d %s/32 -i %s -j DNAT --to-destination %s", HostEndpointChain, mgmt, ManagementPortName, nodeIP)}
}

// MgmtSNATChain is the nat chain, jumped to from POSTROUTING, that gives
// what the node sends into the management port from its own address (a
// connection to its own NodePort, sent on to the ClusterIP) the management
// address instead: answers to the node's address would leave the cluster
// router through the answering pod's gateway (a node address is reached
// that way from other nodes' pods), and the node's own host-network
// endpoint would get its own address back (a martian).
const MgmtSNATChain = "OVN-KUBE-MGMT-SNAT"

// MgmtSNATRules are that chain's rules.
func MgmtSNATRules(mgmt, nodeIP netip.Addr) []string {
	if !mgmt.IsValid() || !nodeIP.IsValid() || !mgmt.Is4() || !nodeIP.Is4() {
		return nil
	}
	return []string{fmt.Sprintf("-A %s -s %s/32 -o %s -j SNAT --to-source %s", MgmtSNATChain, nodeIP, ManagementPortName, mgmt)}
}

// hostNAT keeps one nat chain of ours and its jump from a built-in chain
// exactly as wanted.
type hostNAT struct{ chain, from string }

var (
	nodePortNAT     = hostNAT{HostNodePortChain, "OUTPUT"}
	hostEndpointNAT = hostNAT{HostEndpointChain, "PREROUTING"}
	mgmtSNAT        = hostNAT{MgmtSNATChain, "POSTROUTING"}
)

// drift describes how the chain differs from rules ("" when it does not).
func (h hostNAT) drift(ctx context.Context, rules []string) string {
	if _, err := iptables(ctx, "-t", "nat", "-C", h.from, "-j", h.chain); err != nil {
		return "no jump from " + h.from
	}
	out, err := iptables(ctx, "-t", "nat", "-S", h.chain)
	if err != nil {
		return "no chain " + h.chain
	}
	var have []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "-A ") {
			have = append(have, strings.TrimSpace(l))
		}
	}
	sort.Strings(have)
	if strings.Join(have, "\n") != strings.Join(rules, "\n") {
		return fmt.Sprintf("%d rules, want %d", len(have), len(rules))
	}
	return ""
}

// replace writes the whole chain in one iptables-restore and adds the jump.
func (h hostNAT) replace(ctx context.Context, rules []string) error {
	in := "*nat\n:" + h.chain + " - [0:0]\n" + strings.Join(append(rules, "COMMIT"), "\n") + "\n"
	cmd := exec.CommandContext(ctx, "iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore of %s: %w: %s", h.chain, err, strings.TrimSpace(string(out)))
	}
	if _, err := iptables(ctx, "-t", "nat", "-C", h.from, "-j", h.chain); err != nil {
		if _, err := iptables(ctx, "-t", "nat", "-A", h.from, "-j", h.chain); err != nil {
			return err
		}
	}
	return nil
}

func iptables(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
