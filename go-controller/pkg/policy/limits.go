package policy

import (
	"fmt"

	networkingv1 "k8s.io/api/networking/v1"
)

// What one NetworkPolicy may cost. Kubernetes bounds none of these, so one
// object could make thousands of address sets of every pod, or thousands of
// ACLs; a policy past a limit is refused whole: its rules allow nothing (the
// default deny of the pods it selects still applies, so it fails closed),
// and it gets a Warning Event saying which limit and how to split it.
const (
	// MaxPeersPerPolicy bounds the peers (selectors and ipBlocks) of all
	// of a policy's rules together.
	MaxPeersPerPolicy = 256
	// MaxPortsPerPolicy bounds the ports of all of a policy's rules together.
	MaxPortsPerPolicy = 256
	// MaxACLsPerPolicy bounds the ACLs a policy becomes (a rule is one, plus
	// one per number each named port resolves to).
	MaxACLsPerPolicy = 1024
	// MaxExceptsPerIPBlock bounds one ipBlock's exceptions.
	MaxExceptsPerIPBlock = 128
)

// tooLarge says why a policy is over a limit before its rows are built
// ("" when it is not).
func tooLarge(np *networkingv1.NetworkPolicy) string {
	peers, ports := 0, 0
	for _, r := range np.Spec.Ingress {
		peers, ports = peers+len(r.From), ports+len(r.Ports)
	}
	for _, r := range np.Spec.Egress {
		peers, ports = peers+len(r.To), ports+len(r.Ports)
	}
	switch {
	case peers > MaxPeersPerPolicy:
		return fmt.Sprintf("%d peers, more than %d; split it into several policies", peers, MaxPeersPerPolicy)
	case ports > MaxPortsPerPolicy:
		return fmt.Sprintf("%d ports, more than %d; use port ranges (endPort) or split it", ports, MaxPortsPerPolicy)
	}
	return ""
}

// refuse empties the rows of a policy over a limit, keeping what isolates
// its pods (selector and directions).
func (r *Rows) refuse(why string) {
	r.ACLs, r.PeerSets, r.Refused = nil, nil, why
}
