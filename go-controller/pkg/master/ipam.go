package master

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/allocator"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// ipam is the address state of the cluster: which node holds which host
// subnet and which pod holds which address. It is rebuilt from annotations
// and the NB at start, before anything new is handed out.
type ipam struct {
	mu      sync.Mutex
	hosts   *allocator.HostSubnets
	nodes   map[string]*nodeIPAM      // the address allocators of each node holding subnets
	pods    map[string]podAddr        // by namespace/name
	joins   []*allocator.IPAllocator  // one per join subnet (family), the primary first
	joinIPs map[string][]netip.Prefix // gateway routers' join addresses, by node, in joins' order
}

type nodeIPAM struct {
	ips []*allocator.IPAllocator
}

// podAddr is what a pod holds; kept small, since there is one per pod.
type podAddr struct {
	uid  string
	node string
	ips  []netip.Addr
}

func newIPAM(clusterSubnets []config.ClusterSubnet, joinSubnets []netip.Prefix) *ipam {
	m := &ipam{
		hosts:   allocator.NewHostSubnets(clusterSubnets),
		nodes:   map[string]*nodeIPAM{},
		pods:    map[string]podAddr{},
		joinIPs: map[string][]netip.Prefix{},
	}
	for _, j := range joinSubnets {
		m.joins = append(m.joins, allocator.NewJoinAllocator(j))
	}
	return m
}

// gatewayJoinIPs returns the node's gateway join addresses, one per join
// subnet: the ones it holds, else for each family the address of that
// family in want when it is free (restored from an annotation or the NB),
// else a new one. It takes all or nothing.
func (m *ipam) gatewayJoinIPs(node string, want []netip.Prefix) ([]netip.Prefix, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if ps, ok := m.joinIPs[node]; ok {
		return ps, nil
	}
	if len(m.joins) == 0 {
		return nil, fmt.Errorf("no join subnet configured")
	}
	var out []netip.Prefix
	for _, a := range m.joins {
		bits := a.Subnet().Bits()
		i := slices.IndexFunc(want, func(p netip.Prefix) bool { return p.Addr().Is6() == a.Subnet().Addr().Is6() })
		if i >= 0 && want[i].Bits() == bits && a.Reserve(want[i].Addr()) == nil {
			out = append(out, want[i])
			continue
		}
		ip, err := a.Allocate()
		if err != nil {
			for j, p := range out {
				m.joins[j].Release(p.Addr())
			}
			return nil, fmt.Errorf("join subnet %s has no address left for gateway router of node %s; remove stale nodes or widen --join-subnet: %w", a.Subnet(), node, err)
		}
		out = append(out, netip.PrefixFrom(ip, bits))
	}
	m.joinIPs[node] = out
	return out, nil
}

// releaseGatewayJoinIPs frees the node's join addresses.
func (m *ipam) releaseGatewayJoinIPs(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for i, p := range m.joinIPs[node] {
		m.joins[i].Release(p.Addr())
	}
	delete(m.joinIPs, node)
}

// nodeSubnets returns the node's host subnets, nil if it has none yet.
func (m *ipam) nodeSubnets(node string) []netip.Prefix { return m.hosts.Held(node) }

// claimNodeSubnets gives the node the subnets it already carries, if they are
// valid and free (allocator.HostSubnets.Claim).
func (m *ipam) claimNodeSubnets(node string, subnets []netip.Prefix) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err := m.hosts.Claim(node, subnets); err != nil {
		return err
	}
	m.addNodeLocked(node, subnets)
	return nil
}

// allocateNodeSubnets hands the node new subnets (one per IP family).
func (m *ipam) allocateNodeSubnets(node string) ([]netip.Prefix, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	subnets, err := m.hosts.Allocate(node)
	if err != nil {
		return nil, err
	}
	m.addNodeLocked(node, subnets)
	return subnets, nil
}

// addNodeLocked gives a node holding subnets its address allocators.
func (m *ipam) addNodeLocked(node string, subnets []netip.Prefix) {
	if m.nodes[node] == nil {
		m.nodes[node] = newNodeIPAM(subnets)
	}
}

// releaseNode frees the node's subnets and forgets its pods' addresses
// (their ports went away with the node's switch).
func (m *ipam) releaseNode(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.hosts.Release(node) {
		return
	}
	delete(m.nodes, node)
	for key, p := range m.pods {
		if p.node == node {
			delete(m.pods, key)
		}
	}
}

// podsOn returns the keys of the pods holding addresses on node.
func (m *ipam) podsOn(node string) map[string]bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := map[string]bool{}
	for key, p := range m.pods {
		if p.node == node {
			out[key] = true
		}
	}
	return out
}

// pod returns what the pod holds.
func (m *ipam) pod(key string) (podAddr, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p, ok := m.pods[key]
	return p, ok
}

// claimPod gives the pod the addresses it already carries (annotation or NB),
// if they fit its node's subnets and no other pod holds them. Whatever the pod
// held before is released.
func (m *ipam) claimPod(key, uid, node string, ips []netip.Addr) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pods[key]; ok && p.uid == uid && p.node == node && slices.Equal(p.ips, ips) {
		return nil
	}
	n := m.nodes[node]
	if n == nil {
		return fmt.Errorf("node %s has no host subnet yet", node)
	}
	if len(ips) != len(n.ips) {
		return fmt.Errorf("%d addresses for %d host subnets of node %s", len(ips), len(n.ips), node)
	}
	m.releasePodLocked(key)
	for i, ip := range ips {
		if err := n.ips[i].Reserve(ip); err != nil {
			for j, done := range ips[:i] {
				n.ips[j].Release(done)
			}
			return err
		}
	}
	m.pods[key] = podAddr{uid: uid, node: node, ips: ips}
	return nil
}

// allocatePod hands the pod fresh addresses from its node's subnets, or
// returns what this pod incarnation already holds.
func (m *ipam) allocatePod(key, uid, node string) ([]netip.Addr, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p, ok := m.pods[key]; ok && p.uid == uid && p.node == node {
		return p.ips, nil
	}
	n := m.nodes[node]
	if n == nil {
		return nil, fmt.Errorf("node %s has no host subnet yet", node)
	}
	m.releasePodLocked(key)
	ips := make([]netip.Addr, 0, len(n.ips))
	for _, a := range n.ips {
		ip, err := a.Allocate()
		if err != nil {
			for i, done := range ips {
				n.ips[i].Release(done)
			}
			return nil, err
		}
		ips = append(ips, ip)
	}
	m.pods[key] = podAddr{uid: uid, node: node, ips: ips}
	return ips, nil
}

// releasePod frees the pod's addresses.
func (m *ipam) releasePod(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.releasePodLocked(key)
}

func (m *ipam) releasePodLocked(key string) {
	p, ok := m.pods[key]
	if !ok {
		return
	}
	if n := m.nodes[p.node]; n != nil {
		for i, ip := range p.ips {
			if i < len(n.ips) {
				n.ips[i].Release(ip)
			}
		}
	}
	delete(m.pods, key)
}

func newNodeIPAM(subnets []netip.Prefix) *nodeIPAM {
	n := &nodeIPAM{}
	for _, s := range subnets {
		n.ips = append(n.ips, allocator.NewIPAllocator(s))
	}
	return n
}
