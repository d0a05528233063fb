package policy

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// A namespace moved into an admin policy's subject queues the policy's
// members (the sets queue) when its ACLs do not depend on the subject's
// pods, and its full sync (the rows queue) when it names ports, which the
// subject's pods resolve.
func TestNamespaceMoveQueuesAdminMembers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namedPorts []string
		members    bool
	}{
		{"no named ports", nil, true},
		{"a named port", []string{NamedPortKey("TCP", "http")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			c := New(f, ovndbtest.Connect(t, ovndbtest.NewServer(t)), nil, Options{}, logr.Discard(), time.Second)
			subject := &PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"tenant": "a"}), Pods: labels.Everything()}
			c.register(adminKey+KindCNP+"/p", "", &Rows{Subject: subject, NamedPorts: tc.namedPorts})
			c.mu.RLock()
			c.adminNamespaceChanged(labels.Set{"tenant": "b"}, labels.Set{"tenant": "b", "x": "y"}) // not moved
			c.mu.RUnlock()
			if !c.queue.sets.Idle() || !c.queue.rows.Idle() {
				t.Fatal("a label change that moves no namespace queued a key")
			}
			c.mu.RLock()
			c.adminNamespaceChanged(labels.Set{"tenant": "b"}, labels.Set{"tenant": "a"})
			c.mu.RUnlock()
			if members := !c.queue.sets.Idle() && c.queue.rows.Idle(); members != tc.members {
				t.Errorf("members alone queued: %v, want %v (sets queue idle %v, rows queue idle %v)",
					members, tc.members, c.queue.sets.Idle(), c.queue.rows.Idle())
			}
		})
	}
}

// Syncs creating the same address sets at once insert each once, none of
// them fails and none waits for ever: a sync inserts its new sets with the
// rest under their names' locks, taken only when all are free; one finding
// a set busy holds nothing while it waits, creates each set on its own
// under that set's lock, then builds again from the cache. Here each sync
// shares two of three sets with others (a and b, or b and c) beside one of
// its own.
func TestConcurrentSyncsCreateASharedSetOnce(t *testing.T) {
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	var inserts atomic.Int64
	commit := func(ctx context.Context, ops []ovsdb.Operation) error {
		for _, op := range ops {
			if op.Op == ovsdb.OperationInsert && op.Table == nbdb.AddressSetTable {
				inserts.Add(1)
			}
		}
		return ovndb.Transact(ctx, nb, ops)
	}
	c := New(informers.NewSharedInformerFactory(fake.NewClientset(), 0), nb, commit, Options{}, logr.Discard(), time.Second)
	team := func(name string) PeerSet {
		return PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"team": name}), Pods: labels.Everything()}
	}
	const syncs = 8
	errs := make(chan error, syncs)
	for i := range syncs {
		sets := []PeerSet{team("b"), team([]string{"a", "c"}[i%2]), {Namespace: fmt.Sprintf("ns-%d", i), Pods: labels.Everything()}}
		if i%4 == 0 {
			sets[0], sets[1] = sets[1], sets[0] // a transaction's order is not the locks' order
		}
		go func() {
			errs <- c.commitBuilt(context.Background(), func(txn *ovndb.Txn) {
				for _, s := range sets {
					ensureAddressSet(txn, ovndb.Lookup(txn, &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), false)}), s.AddressSet(false, nil))
				}
			})
		}()
	}
	deadline := time.After(30 * time.Second)
	for n := range syncs {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("a sync creating shared sets failed: %v", err)
			}
		case <-deadline:
			t.Fatalf("%d of %d syncs still running after 30 s (deadlocked on the sets' locks?)", syncs-n, syncs)
		}
	}
	var sets []nbdb.AddressSet
	if err := nb.List(context.Background(), &sets); err != nil {
		t.Fatal(err)
	}
	if want := syncs + 3; len(sets) != want || inserts.Load() != int64(want) {
		t.Errorf("%d address sets in the NB after %d inserts; want %d of each (three shared, one per sync)", len(sets), inserts.Load(), want)
	}
	if n := c.setLocks.held(); n != 0 {
		t.Errorf("%d set names still locked after every sync returned", n)
	}
}

// A sync that alone creates address sets commits them with the rows
// naming them in one transaction, and builds them once.
func TestNewSetsCommitWithTheirRows(t *testing.T) {
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	var txns [][]ovsdb.Operation
	commit := func(ctx context.Context, ops []ovsdb.Operation) error {
		txns = append(txns, ops)
		return ovndb.Transact(ctx, nb, ops)
	}
	c := New(informers.NewSharedInformerFactory(fake.NewClientset(), 0), nb, commit, Options{}, logr.Discard(), time.Second)
	builds := 0
	sets := []PeerSet{{Namespace: "a", Pods: labels.Everything()}, {Namespace: "b", Pods: labels.Everything()}}
	err := c.commitBuilt(context.Background(), func(txn *ovndb.Txn) {
		builds++
		for _, s := range sets {
			ensureAddressSet(txn, ovndb.Lookup(txn, &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), false)}), s.AddressSet(false, []string{"10.0.0.1"}))
		}
		txn.Create(&nbdb.PortGroup{Name: "pg", ExternalIDs: map[string]string{"owner": "test"}})
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(txns) != 1 || builds != 1 {
		t.Fatalf("%d transactions after %d builds, want 1 of each: %v", len(txns), builds, txns)
	}
	tables := map[string]int{}
	for _, op := range txns[0] {
		if op.Op == ovsdb.OperationInsert {
			tables[op.Table]++
		}
	}
	if tables[nbdb.AddressSetTable] != 2 || tables[nbdb.PortGroupTable] != 1 {
		t.Errorf("inserts of the one transaction by table: %v, want 2 address sets and 1 port group", tables)
	}
	if n := c.setLocks.held(); n != 0 {
		t.Errorf("%d set names still locked after the commit", n)
	}
}

// A sync still running when the NB client is closed (the master stopping)
// gets an error from its transaction, not a panic on the nil cache.
func TestSelectedPortsAfterTheClientCloses(t *testing.T) {
	cs := fake.NewClientset(&corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "a"},
		Spec:       corev1.PodSpec{NodeName: "node1"},
	})
	f := informers.NewSharedInformerFactory(cs, 0)
	_ = f.Core().V1().Pods().Informer().SetTransform(slim.Transform)
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	c := New(f, nb, nil, Options{}, logr.Discard(), time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	nb.Close()
	deadline := time.Now().Add(10 * time.Second)
	for nb.Cache() != nil {
		if time.Now().After(deadline) {
			t.Fatal("the closed client still has a cache after 10 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	txn := ovndb.NewTxn(nb)
	if got := c.selectedPorts(txn, "ns", func(*slim.Pod) bool { return true }); len(got) != 0 {
		t.Errorf("ports selected with no NB: %v", got)
	}
	if _, err := txn.Ops(); err == nil {
		t.Error("the transaction of a sync on a closed client did not fail")
	}
}

// A peer set no policy names any more is deleted only once no ACL of ours
// names it: after a restart the sets' queue may reach it before the rows
// queue has rewritten the ACLs of a policy changed while the master was
// down, and an ACL never names a set that does not exist.
func TestUnusedSetWaitsForItsACLs(t *testing.T) {
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	commit := func(ctx context.Context, ops []ovsdb.Operation) error { return ovndb.Transact(ctx, nb, ops) }
	c := New(informers.NewSharedInformerFactory(fake.NewClientset(), 0), nb, commit, Options{}, logr.Discard(), time.Second)
	ctx := context.Background()
	old := PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"team": "a"}), Pods: labels.Everything()}
	other := PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"team": "ab"}), Pods: labels.Everything()}
	owner := topology.Owner{Type: OwnerPolicy, Name: "x/p"}
	pg := &nbdb.PortGroup{Name: PolicyPortGroup("x", "p"), ExternalIDs: owner.ExternalIDs()}
	acl := func(set PeerSet) *nbdb.ACL {
		return NewACL(Ingress, 1001, "outport == @"+pg.Name+" && "+addrMatch(topology.Families{V4: true, V6: true}, "src", []string{set.Name()}),
			nbdb.ACLActionAllowRelated, owner, "ingress[0]/ports", "", "")
	}
	write := func(a *nbdb.ACL, sets ...PeerSet) {
		t.Helper()
		txn := ovndb.NewTxn(nb)
		for _, s := range sets {
			for _, v6 := range []bool{false, true} {
				ensureAddressSet(txn, nil, s.AddressSet(v6, nil))
			}
		}
		c.ensurePortGroup(txn, pg, []*nbdb.ACL{a}, nil)
		ops, err := txn.Ops()
		if err == nil {
			err = ovndb.Transact(ctx, nb, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	sets := func() int {
		var out []nbdb.AddressSet
		if err := nb.List(ctx, &out); err != nil {
			t.Fatal(err)
		}
		return len(out)
	}
	write(acl(old), old, other)
	// Neither set is registered: the old one is named by the ACL, the
	// other by nothing.
	if err := c.syncPeers(ctx, old.Name()); err == nil || !strings.Contains(err.Error(), "ingress[0]/ports") {
		t.Fatalf("sync of a set an ACL still names: %v, want an error naming the ACL", err)
	}
	if n := sets(); n != 4 {
		t.Fatalf("%d address sets after that sync, want the 4 rows still there", n)
	}
	if err := c.syncPeers(ctx, other.Name()); err != nil {
		t.Fatalf("sync of a set no ACL names: %v", err)
	}
	// The policy's sync rewrites its ACL to name another set; the old one
	// then goes.
	write(acl(other), other)
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := c.syncPeers(ctx, old.Name())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the set is still kept after its ACL was rewritten: %v", err)
		}
		time.Sleep(10 * time.Millisecond) // the cache catching up with the rewrite
	}
	if n := sets(); n != 2 {
		t.Errorf("%d address sets, want the 2 rows of the set the ACL names now", n)
	}
}

func TestNamesSet(t *testing.T) {
	for _, tc := range []struct {
		match, name string
		want        bool
	}{
		{"ip4.src == $peers.ab", "peers.ab", true},
		{"ip4.src == {$peers.ab, $peers.c} && tcp", "peers.ab", true},
		{"ip4.src == {$peers.c, $peers.ab}", "peers.ab", true},
		{"ip6.src == $peers.ab_v6", "peers.ab", false},
		{"ip6.src == $peers.ab_v6", "peers.ab_v6", true},
		{"ip4.src == $peers.abc || ip4.src == $peers.ab", "peers.ab", true},
		{"ip4.src == $peers.abc", "peers.ab", false},
		{"ip4.src == 10.0.0.1", "peers.ab", false},
	} {
		if got := namesSet(tc.match, tc.name); got != tc.want {
			t.Errorf("namesSet(%q, %q) = %v, want %v", tc.match, tc.name, got, tc.want)
		}
	}
}
