package config

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// DefaultTransitSubnets are the ranges of zone mode's transit switch (OVN
// interconnection), one per family, as upstream's.
var DefaultTransitSubnets = []netip.Prefix{netip.MustParsePrefix("100.88.0.0/16"), netip.MustParsePrefix("fd97::/64")}

// DefaultTransitSubnetFlag is DefaultTransitSubnets as --transit-subnet takes them.
const DefaultTransitSubnetFlag = "100.88.0.0/16,fd97::/64"

// NodeAddrs are a node's addresses in ranges alike in every zone (the
// transit switch's; in zone mode, the join switch's too), one per host
// subnet, each in the range of its family: a host subnet is the n-th of the
// cluster ranges of its family (counted across them, in order), and its
// address is the (n+2)-th of the range (the network's own and the first,
// a router's, left free). They need no state of their own and are unique
// cluster-wide: the host subnets are already the node's alone. A host
// subnet in no cluster range, a family without a range, or a range too
// small for n is an error naming the fix.
func NodeAddrs(ranges []netip.Prefix, cluster []ClusterSubnet, hostSubnets []netip.Prefix) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(hostSubnets))
	for _, host := range hostSubnets {
		n, err := hostSubnetNumber(cluster, host)
		if err != nil {
			return nil, err
		}
		n.Add(n, big.NewInt(2))
		i := slices.IndexFunc(ranges, func(t netip.Prefix) bool { return t.Addr().Is4() == host.Addr().Is4() })
		if i < 0 {
			return nil, fmt.Errorf("no range of the family of host subnet %s among %v: give one", host, ranges)
		}
		a, ok := nthAddr(ranges[i].Masked(), n)
		if !ok {
			return nil, fmt.Errorf("range %s has no address for host subnet %s (number %s): give a larger one", ranges[i], host, n)
		}
		out = append(out, netip.PrefixFrom(a, ranges[i].Bits()))
	}
	return out, nil
}

// hostSubnetNumber numbers a host subnet among the cluster ranges of its family.
func hostSubnetNumber(cluster []ClusterSubnet, sub netip.Prefix) (*big.Int, error) {
	base := new(big.Int)
	for _, c := range cluster {
		if c.CIDR.Addr().Is4() != sub.Addr().Is4() {
			continue
		}
		free := c.HostSubnetLength - c.CIDR.Bits() // bits numbering the host subnets
		if sub.Bits() == c.HostSubnetLength && c.CIDR.Contains(sub.Addr()) {
			// The host subnet's number is its address's bits between the
			// cluster prefix and its own.
			v := new(big.Int).SetBytes(addrBytes(sub.Masked().Addr()))
			v.Rsh(v, uint(sub.Addr().BitLen()-sub.Bits()))
			v.And(v, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), uint(free)), big.NewInt(1)))
			return v.Add(v, base), nil
		}
		base.Add(base, new(big.Int).Lsh(big.NewInt(1), uint(free)))
	}
	var ranges []string
	for _, c := range cluster {
		ranges = append(ranges, c.String())
	}
	return nil, fmt.Errorf("host subnet %s is in no cluster subnet (%s)", sub, strings.Join(ranges, ", "))
}

// nthAddr is p's address n, false when p holds fewer.
func nthAddr(p netip.Prefix, n *big.Int) (netip.Addr, bool) {
	size := new(big.Int).Lsh(big.NewInt(1), uint(p.Addr().BitLen()-p.Bits()))
	if n.Cmp(size) >= 0 {
		return netip.Addr{}, false
	}
	v := new(big.Int).SetBytes(addrBytes(p.Addr()))
	v.Add(v, n)
	b := make([]byte, p.Addr().BitLen()/8)
	v.FillBytes(b)
	a, _ := netip.AddrFromSlice(b)
	return a, true
}

func addrBytes(a netip.Addr) []byte { return a.AsSlice() }
