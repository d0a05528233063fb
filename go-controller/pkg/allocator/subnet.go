package allocator

import (
	"errors"
	"fmt"
	"math/big"
	"net/netip"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// ErrExhausted means every host subnet of the cluster subnet(s) is taken.
var ErrExhausted = errors.New("no free host subnet")

// SubnetAllocator hands out host subnets from the cluster subnets.
type SubnetAllocator struct {
	ranges []*subnetRange
}

type subnetRange struct {
	cluster config.ClusterSubnet
	used    *bitmap
}

// NewSubnetAllocator builds an allocator over the given cluster subnets.
func NewSubnetAllocator(clusterSubnets []config.ClusterSubnet) *SubnetAllocator {
	a := &SubnetAllocator{}
	for _, cs := range clusterSubnets {
		n := 1 << (cs.HostSubnetLength - cs.CIDR.Bits())
		a.ranges = append(a.ranges, &subnetRange{cluster: cs, used: newBitmap(n)})
	}
	return a
}

// Allocate returns a free host subnet of each IP family present (one for a
// single-stack cluster, an IPv4 and an IPv6 one for dual-stack).
func (a *SubnetAllocator) Allocate() ([]netip.Prefix, error) {
	var out []netip.Prefix
	for _, is6 := range []bool{false, true} {
		var found, tried bool
		for _, r := range a.ranges {
			if r.cluster.CIDR.Addr().Is6() != is6 {
				continue
			}
			tried = true
			if i, ok := r.used.allocate(); ok {
				out = append(out, r.subnet(i))
				found = true
				break
			}
		}
		if tried && !found {
			a.Release(out)
			return nil, fmt.Errorf("%w: all %d host subnets of %s are in use", ErrExhausted, a.capacity(is6), a.describe(is6))
		}
	}
	return out, nil
}

// Reserve marks subnets as used, as when honouring an existing node annotation.
// It fails, reserving nothing, if a subnet is outside the cluster subnets, has
// the wrong length, or is already taken.
func (a *SubnetAllocator) Reserve(subnets []netip.Prefix) error {
	type slot struct {
		r *subnetRange
		i int
	}
	var slots []slot
	for _, s := range subnets {
		r, i, err := a.locate(s)
		if err != nil {
			return err
		}
		if r.used.has(i) {
			return fmt.Errorf("host subnet %s is already allocated", s)
		}
		for _, prev := range slots {
			if prev.r == r && prev.i == i {
				return fmt.Errorf("host subnet %s listed twice", s)
			}
		}
		slots = append(slots, slot{r, i})
	}
	for _, s := range slots {
		s.r.used.set(s.i)
	}
	return nil
}

// Release frees subnets; unknown ones are ignored.
func (a *SubnetAllocator) Release(subnets []netip.Prefix) {
	for _, s := range subnets {
		if r, i, err := a.locate(s); err == nil {
			r.used.clear(i)
		}
	}
}

func (a *SubnetAllocator) locate(s netip.Prefix) (*subnetRange, int, error) {
	for _, r := range a.ranges {
		if !r.cluster.CIDR.Contains(s.Addr()) {
			continue
		}
		if s.Bits() != r.cluster.HostSubnetLength || s.Masked() != s {
			return nil, 0, fmt.Errorf("%s is not a /%d host subnet of %s", s, r.cluster.HostSubnetLength, r.cluster.CIDR)
		}
		return r, r.index(s), nil
	}
	return nil, 0, fmt.Errorf("%s is outside the cluster subnets", s)
}

func (r *subnetRange) subnet(i int) netip.Prefix {
	base := new(big.Int).SetBytes(r.cluster.CIDR.Addr().AsSlice())
	step := uint(r.cluster.CIDR.Addr().BitLen() - r.cluster.HostSubnetLength)
	base.Add(base, new(big.Int).Lsh(big.NewInt(int64(i)), step))
	return netip.PrefixFrom(addrFromInt(base, r.cluster.CIDR.Addr().Is4()), r.cluster.HostSubnetLength)
}

func (r *subnetRange) index(s netip.Prefix) int {
	off := new(big.Int).Sub(new(big.Int).SetBytes(s.Addr().AsSlice()), new(big.Int).SetBytes(r.cluster.CIDR.Addr().AsSlice()))
	return int(off.Rsh(off, uint(s.Addr().BitLen()-r.cluster.HostSubnetLength)).Int64())
}

func (a *SubnetAllocator) capacity(is6 bool) int {
	n := 0
	for _, r := range a.ranges {
		if r.cluster.CIDR.Addr().Is6() == is6 {
			n += r.used.size
		}
	}
	return n
}

func (a *SubnetAllocator) describe(is6 bool) string {
	s := ""
	for _, r := range a.ranges {
		if r.cluster.CIDR.Addr().Is6() == is6 {
			if s != "" {
				s += ", "
			}
			s += r.cluster.String()
		}
	}
	return s
}

func addrFromInt(v *big.Int, is4 bool) netip.Addr {
	n := 16
	if is4 {
		n = 4
	}
	buf := make([]byte, n)
	v.FillBytes(buf)
	a, _ := netip.AddrFromSlice(buf)
	return a
}
