package services

import (
	"fmt"
	"net/netip"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// Which service addresses outside clients may be given, and which node
// ports may be programmed (the CVE-2020-8554 class). Any user who may create
// a Service may write spec.externalIPs, and any identity that may update a
// Service's status may write status.loadBalancer.ingress: trusted as they
// come, a Service naming a node's own address takes over that node's ports
// from outside, and one naming 8.8.8.8 captures every pod's traffic to it
// (its DNS, on port 53). So an external or ingress IP is programmed only
// inside the ranges the operator allows (--external-ip-cidrs; none by
// default, as Kubernetes advises), and never when it is a node's address, in
// the cluster, join or service ranges, or not a unicast address at all.

// AddressPolicy is what LoadBalancers checks external IPs, LoadBalancer
// ingress IPs and node ports against. The zero policy refuses every external
// and ingress IP and allows the default node port range.
type AddressPolicy struct {
	// Allowed are the only ranges external and ingress IPs may be in
	// (--external-ip-cidrs). Empty: every one is refused.
	Allowed []netip.Prefix
	// Reserved are ranges no external or ingress IP may be in, even inside
	// Allowed: the cluster subnets, the join subnet, the service CIDRs.
	Reserved []ReservedRange
	// Nodes maps every node address (InternalIP, ExternalIP, gateway
	// address) to its node: never an external or ingress IP.
	Nodes map[netip.Addr]string
	// NodePorts is the range node ports must be in
	// (--service-node-port-range); zero: config.DefaultNodePortRange.
	NodePorts config.PortRange
}

// ReservedRange is a range of the cluster's own addresses, and what it is
// ("cluster subnet", "join subnet", "service CIDR").
type ReservedRange struct {
	Prefix netip.Prefix
	What   string
}

// ReservedRanges are the cluster's own ranges, never an external or ingress
// IP: its cluster subnets, join subnet (if valid) and service CIDRs.
func ReservedRanges(clusterSubnets, joinSubnets, serviceCIDRs []netip.Prefix) []ReservedRange {
	var out []ReservedRange
	for _, p := range clusterSubnets {
		out = append(out, ReservedRange{Prefix: p.Masked(), What: "cluster subnet"})
	}
	for _, p := range joinSubnets {
		out = append(out, ReservedRange{Prefix: p.Masked(), What: "join subnet"})
	}
	for _, p := range serviceCIDRs {
		out = append(out, ReservedRange{Prefix: p.Masked(), What: "service CIDR"})
	}
	return out
}

// Refusal is one external IP, ingress IP or node port left out of a
// service's load balancers, with why and what to do about it.
type Refusal struct {
	Kind   RefusalKind
	Value  string // the address or port as the Service spells it
	Reason string
}

// RefusalKind says what a Refusal refused; it is the Event's reason.
type RefusalKind string

const (
	RefusedExternalIP RefusalKind = "ExternalIPRefused"
	RefusedIngressIP  RefusalKind = "LoadBalancerIPRefused"
	RefusedNodePort   RefusalKind = "NodePortRefused"
)

// Message is the Event's text.
func (r Refusal) Message() string {
	switch r.Kind {
	case RefusedExternalIP:
		return fmt.Sprintf("external IP %s is not programmed: %s", r.Value, r.Reason)
	case RefusedIngressIP:
		return fmt.Sprintf("load balancer ingress IP %s is not programmed: %s", r.Value, r.Reason)
	}
	return r.Reason
}

// allowedHint is what a refusal tells the user to do.
const allowedHint = "use an address inside the ranges the cluster administrator allows with ovnkube master --external-ip-cidrs"

// Refuse says why ip may not be an external or ingress IP ("" if it may).
// The cluster's own addresses are refused even inside Allowed: an operator
// allowing 0.0.0.0/0 still keeps the nodes, pods and services.
func (p AddressPolicy) Refuse(ip netip.Addr) string {
	switch {
	case ip.Zone() != "":
		return "an address with a zone is not a service address; " + allowedHint
	case ip.Is4In6():
		return fmt.Sprintf("an IPv4-mapped IPv6 address is refused (write %s); %s", ip.Unmap(), allowedHint)
	case ip.IsUnspecified(), ip.IsLoopback(), ip.IsMulticast(), ip.IsLinkLocalUnicast(),
		ip == netip.AddrFrom4([4]byte{255, 255, 255, 255}):
		return "it is not a unicast address a service may take (unspecified, loopback, link-local, multicast or broadcast); " + allowedHint
	}
	if node, ok := p.Nodes[ip]; ok {
		return fmt.Sprintf("it is node %s's address, and a service may not take over a node's ports; %s, that no node has", node, allowedHint)
	}
	for _, r := range p.Reserved {
		if r.Prefix.Contains(ip) {
			return fmt.Sprintf("it is inside the %s %s, which belongs to the cluster; %s, outside the cluster's own ranges", r.What, r.Prefix, allowedHint)
		}
	}
	for _, a := range p.Allowed {
		if a.Contains(ip) {
			return ""
		}
	}
	if len(p.Allowed) == 0 {
		return "no external IPs are allowed in this cluster (ovnkube master --external-ip-cidrs is empty, the default); the cluster administrator allows ranges with it"
	}
	return fmt.Sprintf("it is outside the allowed ranges %s; %s", prefixList(p.Allowed), allowedHint)
}

// MaxExternalFrontends bounds a Service's external and ingress IPs times its
// ports: each is a VIP on every node's gateway router and a flow on every
// node's bridge (2,000 external IPs times 50 ports made 100,016 flows on
// every node). Past it, every external and ingress IP of the Service is
// refused (its cluster IPs and node ports stay).
const MaxExternalFrontends = 256

// TooManyExternalFrontends says why a Service's addrs external and ingress
// IPs with ports ports are too many ("" when they are not).
func TooManyExternalFrontends(addrs, ports int) string {
	if addrs*max(ports, 1) <= MaxExternalFrontends {
		return ""
	}
	return fmt.Sprintf("%d external and ingress IPs times %d ports is more than %d frontends a Service may have; none of them is programmed: split the Service", addrs, ports, MaxExternalFrontends)
}

func prefixList(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ",")
}

// NodePortRange is the range node ports must be in.
func (p AddressPolicy) NodePortRange() config.PortRange {
	if p.NodePorts == (config.PortRange{}) {
		return config.DefaultNodePortRange
	}
	return p.NodePorts
}
