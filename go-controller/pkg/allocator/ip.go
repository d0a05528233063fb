package allocator

import (
	"fmt"
	"math/big"
	"net/netip"
)

// maxHostSlots caps the addresses tracked per subnet, so an IPv6 /64 costs
// 128 KiB of bitmap rather than being unrepresentable; ~1M pods per node is
// far beyond any kubelet's limit.
const maxHostSlots = 1 << 20

// IPAllocator hands out pod addresses from one host subnet. The network
// address, the gateway (.1), the management port (.2) and, for IPv4, the
// broadcast address are never handed out.
type IPAllocator struct {
	subnet   netip.Prefix
	base     *big.Int
	used     *bitmap
	reserved int // the first addresses, never handed out
}

// NewIPAllocator returns an allocator over subnet with the reserved addresses taken.
func NewIPAllocator(subnet netip.Prefix) *IPAllocator { return newIPAllocator(subnet, 3) }

// NewJoinAllocator hands out gateway routers' join addresses: the network
// address and the cluster router's (.1) are reserved.
func NewJoinAllocator(subnet netip.Prefix) *IPAllocator { return newIPAllocator(subnet, 2) }

func newIPAllocator(subnet netip.Prefix, reserved int) *IPAllocator {
	hostBits := subnet.Addr().BitLen() - subnet.Bits()
	size := maxHostSlots
	if hostBits < 20 {
		size = 1 << hostBits
	}
	a := &IPAllocator{subnet: subnet, base: new(big.Int).SetBytes(subnet.Addr().AsSlice()), used: newBitmap(size), reserved: reserved}
	for i := 0; i < reserved && i < size; i++ {
		a.used.set(i)
	}
	if subnet.Addr().Is4() && hostBits < 20 {
		a.used.set(size - 1)
	}
	a.used.next = reserved
	return a
}

// Subnet is the host subnet this allocator serves.
func (a *IPAllocator) Subnet() netip.Prefix { return a.subnet }

// Allocate returns a free address.
func (a *IPAllocator) Allocate() (netip.Addr, error) {
	i, ok := a.used.allocate()
	if !ok {
		return netip.Addr{}, fmt.Errorf("%w: all addresses of host subnet %s are in use", ErrExhausted, a.subnet)
	}
	return a.addr(i), nil
}

// Reserve marks ip as used; it fails if ip is reserved, taken or outside the subnet.
func (a *IPAllocator) Reserve(ip netip.Addr) error {
	i, err := a.index(ip)
	if err != nil {
		return err
	}
	if !a.used.set(i) {
		return fmt.Errorf("address %s is already in use", ip)
	}
	return nil
}

// Release frees ip; addresses it does not manage are ignored.
func (a *IPAllocator) Release(ip netip.Addr) {
	if i, err := a.index(ip); err == nil {
		a.used.clear(i)
	}
}

// Used reports how many addresses are taken, counting the reserved ones.
func (a *IPAllocator) Used() int { return a.used.used }

func (a *IPAllocator) index(ip netip.Addr) (int, error) {
	if !a.subnet.Contains(ip) {
		return 0, fmt.Errorf("address %s is outside host subnet %s", ip, a.subnet)
	}
	off := new(big.Int).Sub(new(big.Int).SetBytes(ip.AsSlice()), a.base)
	if !off.IsInt64() || off.Int64() >= int64(a.used.size) {
		return 0, fmt.Errorf("address %s is beyond the first %d addresses of %s that ovn-k8s manages", ip, a.used.size, a.subnet)
	}
	i := int(off.Int64())
	if i < a.reserved || a.subnet.Addr().Is4() && i == a.used.size-1 && a.used.size < maxHostSlots {
		return 0, fmt.Errorf("address %s is reserved in %s (network, router, management port or broadcast)", ip, a.subnet)
	}
	return i, nil
}

func (a *IPAllocator) addr(i int) netip.Addr {
	v := new(big.Int).Add(a.base, big.NewInt(int64(i)))
	return addrFromInt(v, a.subnet.Addr().Is4())
}
