// Package config holds the parsed, validated settings of each ovnkube command.
// Values are passed explicitly to the components that need them; nothing here is global.
package config

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// ClusterSubnet is one pod address range and the size of the per-node slice
// carved out of it ("10.244.0.0/16/24": /24 host subnets from 10.244.0.0/16).
type ClusterSubnet struct {
	CIDR             netip.Prefix
	HostSubnetLength int
}

func (c ClusterSubnet) String() string {
	return fmt.Sprintf("%s/%d", c.CIDR, c.HostSubnetLength)
}

// ParseClusterSubnet parses "CIDR[/hostlen]". Without a host length, IPv4
// ranges get /24 host subnets and IPv6 ranges /64, as upstream does. A host
// length is decimal digits only: "-1", "+24" or "" is refused, not defaulted.
func ParseClusterSubnet(s string) (ClusterSubnet, error) {
	s = strings.TrimSpace(s)
	cidr, hostLenText, explicit := s, "", strings.Count(s, "/") == 2
	if explicit {
		i := strings.LastIndex(s, "/")
		cidr, hostLenText = s[:i], s[i+1:]
	}
	p, err := ParseCIDR(cidr)
	if err != nil {
		return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: %v", s, err)
	}
	hostLen := defaultHostSubnetLength(p)
	if explicit {
		if hostLen, err = parseDecimal(hostLenText, 0, 128); err != nil {
			return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: host subnet length %v (want e.g. 10.244.0.0/16/24)", s, err)
		}
	}
	maxLen := p.Addr().BitLen()
	if p.Addr().Is6() && (hostLen < 64 || hostLen > 120) {
		return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: IPv6 host subnets are /64 to /120, not /%d", s, hostLen)
	}
	if p.Addr().Is4() && hostLen > 30 {
		return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: host subnet /%d leaves no room for gateway, management port and pods", s, hostLen)
	}
	if hostLen <= p.Bits() || hostLen > maxLen {
		return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: host subnet length %d must be longer than the prefix length %d and at most %d", s, hostLen, p.Bits(), maxLen)
	}
	if hostLen-p.Bits() > 24 {
		return ClusterSubnet{}, fmt.Errorf("cluster subnet %q: %d host subnet bits is more than the 24 supported (16M nodes)", s, hostLen-p.Bits())
	}
	return ClusterSubnet{CIDR: p, HostSubnetLength: hostLen}, nil
}

// defaultHostSubnetLength is the host subnet length when none is given.
func defaultHostSubnetLength(p netip.Prefix) int {
	if p.Addr().Is6() {
		return 64
	}
	return 24
}

// ParseClusterSubnets parses a list of cluster subnets; entries may also be comma-separated.
func ParseClusterSubnets(values []string) ([]ClusterSubnet, error) {
	var out []ClusterSubnet
	for _, v := range splitList(values) {
		cs, err := ParseClusterSubnet(v)
		if err != nil {
			return nil, err
		}
		for _, prev := range out {
			if prev.CIDR.Overlaps(cs.CIDR) {
				return nil, fmt.Errorf("cluster subnets %s and %s overlap", prev.CIDR, cs.CIDR)
			}
		}
		out = append(out, cs)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no cluster subnet given")
	}
	cidrs := make([]netip.Prefix, len(out))
	for i, cs := range out {
		cidrs[i] = cs.CIDR
	}
	return out, onePerFamily(cidrs, "cluster subnets")
}

// ParseServiceCIDRs parses the service ranges: one per family, the
// primary family first, as kube-apiserver's --service-cluster-ip-range.
func ParseServiceCIDRs(values []string) ([]netip.Prefix, error) {
	out, err := ParseCIDRs(values)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no service CIDR given")
	}
	return out, onePerFamily(out, "service CIDRs")
}

// ParseJoinSubnets parses --join-subnet and keeps the ranges of the
// cluster's families, refusing a cluster family without one.
func ParseJoinSubnets(values []string, cluster []ClusterSubnet) ([]netip.Prefix, error) {
	return PerClusterFamily(values, cluster, "join subnets", DefaultJoinSubnetFlag)
}

// PerClusterFamily parses ranges given one per family (what: their name in
// errors, example: a valid value) and keeps those of the cluster subnets'
// families, in their order.
func PerClusterFamily(values []string, cluster []ClusterSubnet, what, example string) ([]netip.Prefix, error) {
	all, err := ParseCIDRs(values)
	if err != nil {
		return nil, err
	}
	if err := onePerFamily(all, what); err != nil {
		return nil, err
	}
	var out []netip.Prefix
	for _, cs := range cluster {
		i := slices.IndexFunc(all, func(p netip.Prefix) bool { return p.Addr().Is6() == cs.CIDR.Addr().Is6() })
		if i < 0 {
			return nil, fmt.Errorf("no range of the family of cluster subnet %s (give one per family, e.g. %s)", cs.CIDR, example)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// ParseHostAddresses parses a comma-separated list of a host's
// address/length, one per family ("172.18.0.2/24,fc00::2/64").
func ParseHostAddresses(s string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, part := range splitList([]string{s}) {
		p, err := netip.ParsePrefix(part)
		if err != nil || p.Addr().Zone() != "" || p.Addr().Is4In6() || !p.Addr().IsGlobalUnicast() {
			return nil, fmt.Errorf("%q is not a unicast address/length such as 172.18.0.2/24 or fc00::2/64", part)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no address given")
	}
	return out, onePerFamily(out, "addresses")
}

// ParseAddrs parses a comma-separated list of addresses, one per family.
func ParseAddrs(s string) ([]netip.Addr, error) {
	var out []netip.Addr
	var asPrefixes []netip.Prefix
	for _, part := range splitList([]string{s}) {
		a, err := netip.ParseAddr(part)
		if err != nil || a.Zone() != "" || a.Is4In6() {
			return nil, fmt.Errorf("%q is not an IP address", part)
		}
		out = append(out, a)
		asPrefixes = append(asPrefixes, netip.PrefixFrom(a, a.BitLen()))
	}
	return out, onePerFamily(asPrefixes, "addresses")
}

// onePerFamily refuses a second range of a family: a cluster is IPv4,
// IPv6 or dual-stack with one range of each, as Kubernetes' own flags.
func onePerFamily(ranges []netip.Prefix, what string) error {
	for i, a := range ranges {
		for _, b := range ranges[:i] {
			if a.Addr().Is4() == b.Addr().Is4() {
				return fmt.Errorf("%s %s and %s are of one family: give one range per family (IPv4, IPv6, or both comma-separated, the primary first)", what, b, a)
			}
		}
	}
	return nil
}

// ParseCIDR parses a network prefix and insists that it is the network
// address itself: "10.244.1.0/16" is refused because it almost always means a typo.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(strings.TrimSpace(s))
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (want e.g. 10.244.0.0/16)", s)
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q: zones are not allowed in a CIDR", s)
	}
	if p.Masked() != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, p.Masked())
	}
	return p, nil
}

// ParseCIDRs parses a list of CIDRs; entries may also be comma-separated.
func ParseCIDRs(values []string) ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, v := range splitList(values) {
		p, err := ParseCIDR(v)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func splitList(values []string) []string {
	var out []string
	for _, v := range values {
		for _, part := range strings.Split(v, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	return out
}
