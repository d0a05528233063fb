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

// HostNodePortRules are the chain's rules, as `iptables -S` prints them.
func HostNodePortRules(svcs []*corev1.Service, policy services.AddressPolicy) []string {
	var out []string
	for _, svc := range svcs {
		ip, err := netip.ParseAddr(svc.Spec.ClusterIP)
		if err != nil || !ip.Is4() || !services.Handled(svc) {
			continue
		}
		for _, p := range svc.Spec.Ports {
			if !hasNodePort(svc, p, policy) {
				continue
			}
			proto := strings.ToLower(string(p.Protocol))
			if proto == "" {
				proto = "tcp"
			}
			out = append(out, fmt.Sprintf("-A %s -p %s -m addrtype --dst-type LOCAL -m %s --dport %d -j DNAT --to-destination %s",
				HostNodePortChain, proto, proto, p.NodePort, netip.AddrPortFrom(ip, uint16(p.Port))))
		}
	}
	sort.Strings(out)
	return out
}

// hostNAT keeps HostNodePortChain and its jump from OUTPUT exactly as wanted.
type hostNAT struct{}

// drift describes how the chain differs from rules ("" when it does not).
func (hostNAT) drift(ctx context.Context, rules []string) string {
	if _, err := iptables(ctx, "-t", "nat", "-C", "OUTPUT", "-j", HostNodePortChain); err != nil {
		return "no jump from OUTPUT"
	}
	out, err := iptables(ctx, "-t", "nat", "-S", HostNodePortChain)
	if err != nil {
		return "no chain " + HostNodePortChain
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
func (hostNAT) replace(ctx context.Context, rules []string) error {
	in := "*nat\n:" + HostNodePortChain + " - [0:0]\n" + strings.Join(append(rules, "COMMIT"), "\n") + "\n"
	cmd := exec.CommandContext(ctx, "iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(in)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore of %s: %w: %s", HostNodePortChain, err, strings.TrimSpace(string(out)))
	}
	if _, err := iptables(ctx, "-t", "nat", "-C", "OUTPUT", "-j", HostNodePortChain); err != nil {
		if _, err := iptables(ctx, "-t", "nat", "-A", "OUTPUT", "-j", HostNodePortChain); err != nil {
			return err
		}
	}
	return nil
}

// remove deletes the jump and the chain.
func (hostNAT) remove(ctx context.Context) error {
	for {
		if _, err := iptables(ctx, "-t", "nat", "-D", "OUTPUT", "-j", HostNodePortChain); err != nil {
			break
		}
	}
	if _, err := iptables(ctx, "-t", "nat", "-S", HostNodePortChain); err != nil {
		return nil
	}
	if _, err := iptables(ctx, "-t", "nat", "-F", HostNodePortChain); err != nil {
		return err
	}
	_, err := iptables(ctx, "-t", "nat", "-X", HostNodePortChain)
	return err
}

func iptables(ctx context.Context, args ...string) (string, error) {
	out, err := exec.CommandContext(ctx, "iptables", append([]string{"-w"}, args...)...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("iptables %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
