package policy

import (
	"fmt"
	"sync"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// podMemo keeps what syncs compute from one namespace's pods (the addresses
// a peer set's selector picks there, the ports of a subject's pods there),
// by namespace and question, until a pod of that namespace or a pod's port
// changes. A namespace's label change moves it into and out of sets and
// subjects that span many namespaces: with the memo their syncs re-read
// only the namespaces whose pods changed, not every namespace they span.
type podMemo struct {
	mu      sync.Mutex
	gen     map[string]uint64 // namespace → its pods' generation; never reset, so that no old entry matches again
	entries map[podMemoKey]podMemoEntry
	max     int // entries kept at most: past it the memo starts afresh
}

type podMemoKey struct{ ns, question string }

type podMemoEntry struct {
	gen   uint64
	epoch ovndb.Epoch // the NB cache's generation: a refilled cache (reconnect, NB replaced) may lack the ports
	vals  []string    // shared: callers copy, never modify
}

func newPodMemo(max int) *podMemo {
	return &podMemo{gen: map[string]uint64{}, entries: map[podMemoKey]podMemoEntry{}, max: max}
}

// changed says that something a namespace's answers are computed from (a
// pod, or a pod's port) changed: every answer for it is computed again.
func (m *podMemo) changed(ns string) {
	m.mu.Lock()
	m.gen[ns]++
	m.mu.Unlock()
}

// get answers a question about a namespace's pods from the memo, or
// computes it. The generation is read before computing: a change made
// while computing leaves the answer stale-marked, never trusted. An answer
// of another NB cache epoch is computed again.
func (m *podMemo) get(ns, question string, epoch ovndb.Epoch, compute func() []string) []string {
	k := podMemoKey{ns, question}
	m.mu.Lock()
	g := m.gen[ns]
	e, ok := m.entries[k]
	m.mu.Unlock()
	if ok && e.gen == g && e.epoch == epoch {
		return e.vals
	}
	vals := compute()
	m.mu.Lock()
	if len(m.entries) >= m.max {
		m.entries = map[podMemoKey]podMemoEntry{}
	}
	m.entries[k] = podMemoEntry{gen: g, epoch: epoch, vals: vals}
	m.mu.Unlock()
	return vals
}

// membersQuestion and portsQuestion name the two questions asked of a
// namespace's pods: a peer selector's addresses of one family, and the
// ports of the pods a subject's pod selector picks.
func membersQuestion(s PeerSet, v6 bool) string {
	q := fmt.Sprintf("members pods=[%s] v6=%t", s.Pods.String(), v6)
	if s.Port != nil {
		q += fmt.Sprintf(" port=%s/%s/%d", s.Port.Name, s.Port.Protocol, s.Port.Number)
	}
	return q
}

func portsQuestion(s PeerSet) string { return "ports pods=[" + s.Pods.String() + "]" }
