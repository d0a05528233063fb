package policy

import (
	"slices"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

func TestPodMemoAnswersUntilTheNamespaceChanges(t *testing.T) {
	m := newPodMemo(4)
	var epoch ovndb.Epoch
	computed := 0
	answer := func(v string) func() []string {
		return func() []string { computed++; return []string{v} }
	}
	ask := func(ns, q, v string, want string, wantComputed int) {
		t.Helper()
		if got := m.get(ns, q, epoch, answer(v)); !slices.Equal(got, []string{want}) || computed != wantComputed {
			t.Fatalf("get(%s, %s) = %v after %d computations, want [%s] after %d", ns, q, got, computed, want, wantComputed)
		}
	}
	ask("a", "q1", "x", "x", 1)
	ask("a", "q1", "y", "x", 1) // memoized
	ask("a", "q2", "z", "z", 2) // another question
	ask("b", "q1", "w", "w", 3) // another namespace
	m.changed("a")
	ask("a", "q1", "y", "y", 4) // a's answers are computed again
	ask("b", "q1", "v", "w", 4) // b's are kept
	// Past its bound (4 entries) the memo starts afresh, and answers stay right.
	ask("c", "q1", "u", "u", 5)
	ask("e", "q1", "s", "s", 6) // the fifth: the others are dropped
	ask("b", "q1", "r", "r", 7)
	// A change while computing leaves the answer untrusted.
	m.get("d", "q1", epoch, func() []string { m.changed("d"); computed++; return []string{"old"} })
	ask("d", "q1", "new", "new", 9)
	// Another NB cache epoch (a reconnect refilled the cache): computed again.
	epoch = ovndb.CurrentEpoch(ovndbtest.Connect(t, ovndbtest.NewServer(t)))
	ask("d", "q1", "newer", "newer", 10)
}
