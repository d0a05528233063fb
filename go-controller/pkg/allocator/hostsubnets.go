package allocator

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// HostSubnets is which node holds which host subnets (one per cluster
// family), over a SubnetAllocator: what central mode's master and zone
// mode's cluster manager both keep. It is safe for concurrent use.
type HostSubnets struct {
	mu      sync.Mutex
	subnets *SubnetAllocator
	held    map[string][]netip.Prefix // by node
}

// NewHostSubnets holds nothing yet.
func NewHostSubnets(clusterSubnets []config.ClusterSubnet) *HostSubnets {
	return &HostSubnets{subnets: NewSubnetAllocator(clusterSubnets), held: map[string][]netip.Prefix{}}
}

// Held is the node's subnets (nil: none).
func (h *HostSubnets) Held(node string) []netip.Prefix {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.held[node]
}

// Claim gives the node the subnets it already carries, if they are free;
// claiming what it holds again is a no-op. A node keeps what it has: it is
// never moved to other subnets.
func (h *HostSubnets) Claim(node string, subnets []netip.Prefix) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if had, ok := h.held[node]; ok {
		if slices.Equal(had, subnets) {
			return nil
		}
		return fmt.Errorf("node %s already holds %v", node, had)
	}
	if err := h.subnets.Reserve(subnets); err != nil {
		return err
	}
	h.held[node] = subnets
	return nil
}

// Allocate hands the node new subnets, one per family, or returns those it
// holds.
func (h *HostSubnets) Allocate(node string) ([]netip.Prefix, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if had, ok := h.held[node]; ok {
		return had, nil
	}
	subnets, err := h.subnets.Allocate()
	if err != nil {
		return nil, err
	}
	h.held[node] = subnets
	return subnets, nil
}

// Release frees the node's subnets, saying whether it held any.
func (h *HostSubnets) Release(node string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.held[node]
	if ok {
		h.subnets.Release(s)
		delete(h.held, node)
	}
	return ok
}
