package policy

import (
	"context"
	"fmt"
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

// Syncs creating the same address set at once insert it once, and none of
// them fails: each insert goes under the set name's lock, after a look at
// the cache the previous holder's commit has filled.
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
	const syncs = 8
	errs := make(chan error, syncs)
	for i := range syncs {
		go func() {
			txn := ovndb.NewTxn(nb)
			shared := PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"team": "a"}), Pods: labels.Everything()}
			own := PeerSet{Namespace: fmt.Sprintf("ns-%d", i), Pods: labels.Everything()}
			for _, s := range []PeerSet{shared, own} {
				ensureAddressSet(txn, ovndb.Lookup(txn, &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), false)}), s.AddressSet(false, nil))
			}
			if _, err := txn.Ops(); err != nil {
				errs <- err
				return
			}
			errs <- c.createSets(context.Background(), setInserts(txn))
		}()
	}
	for range syncs {
		if err := <-errs; err != nil {
			t.Errorf("a sync creating the shared set failed: %v", err)
		}
	}
	var sets []nbdb.AddressSet
	if err := nb.List(context.Background(), &sets); err != nil {
		t.Fatal(err)
	}
	if len(sets) != syncs+1 || inserts.Load() != syncs+1 {
		t.Errorf("%d address sets in the NB after %d inserts; want %d of each (one shared, one per sync)", len(sets), inserts.Load(), syncs+1)
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
