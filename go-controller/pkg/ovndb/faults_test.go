package ovndb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func lb(name, owner string) *nbdb.LoadBalancer {
	return &nbdb.LoadBalancer{Name: name, Protocol: ptr(nbdb.LoadBalancerProtocolTCP), Vips: map[string]string{"10.96.0.1:80": ""},
		ExternalIDs: topology.Owner{Type: topology.OwnerService, Name: owner}.ExternalIDs()}
}

func ptr[T any](v T) *T { return &v }

func ensureOps(t *testing.T, c client.Client, want *nbdb.LoadBalancer) []ovsdb.Operation {
	t.Helper()
	txn := ovndb.NewTxn(c)
	txn.Ensure(want, []any{&want.Vips, &want.ExternalIDs}, nil)
	ops, err := txn.Ops()
	if err != nil {
		t.Fatal(err)
	}
	return ops
}

func countLBs(c client.Client, name string) int {
	var lbs []nbdb.LoadBalancer
	_ = c.WhereCache(func(l *nbdb.LoadBalancer) bool { return l.Name == name }).List(context.Background(), &lbs)
	return len(lbs)
}

// A batch whose reply is lost after the server committed it must not be
// re-sent: every caller gets the error and rebuilds from the fresh cache.
func TestLostBatchReplyIsNotResent(t *testing.T) {
	proxy := ovndbtest.NewProxy(t, ovndbtest.NewServer(t))
	c := ovndbtest.Connect(t, proxy.Sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	committer := ovndb.NewCommitter(c, logr.Discard())
	// Two requests queued before the committer runs share one transaction.
	opsA, opsB := ensureOps(t, c, lb("Service_ns/a_TCP_cluster", "ns/a")), ensureOps(t, c, lb("Service_ns/b_TCP_cluster", "ns/b"))
	lost := proxy.LoseNextReply()
	errs := make(chan error, 2)
	go func() { errs <- committer.Commit(ctx, opsA) }()
	go func() { errs <- committer.Commit(ctx, opsB) }()
	harness.Eventually(t, 5*time.Second, "both requests queued", func() error {
		if n := committer.Queued(); n != 2 {
			return fmt.Errorf("%d queued", n)
		}
		return nil
	})
	go committer.Run(ctx)
	<-lost
	for i := 0; i < 2; i++ {
		if err := <-errs; err == nil {
			t.Fatal("a commit whose reply was lost reported success")
		}
	}
	if n := committer.Transactions(); n != 1 {
		t.Fatalf("%d transactions sent: operations whose reply was lost were sent again", n)
	}
	harness.Eventually(t, 10*time.Second, "the committed rows in the refreshed cache", func() error {
		if a, b := countLBs(c, "Service_ns/a_TCP_cluster"), countLBs(c, "Service_ns/b_TCP_cluster"); a != 1 || b != 1 {
			return fmt.Errorf("a: %d rows, b: %d rows", a, b)
		}
		return nil
	})
	// Rebuilt from the fresh cache, the same sync now changes nothing.
	if ops := ensureOps(t, c, lb("Service_ns/a_TCP_cluster", "ns/a")); len(ops) != 0 {
		t.Fatalf("rebuilt sync sends %d operations", len(ops))
	}
}

// An insert built from a cache that had not seen the row yet cannot create
// a second row of the name.
func TestStaleInsertCannotDuplicate(t *testing.T) {
	c := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	ctx := context.Background()
	first := ensureOps(t, c, lb("Service_ns/a_TCP_cluster", "ns/a"))
	second := ensureOps(t, c, lb("Service_ns/a_TCP_cluster", "ns/a")) // same stale view
	if _, err := c.Transact(ctx, first...); err != nil {
		t.Fatal(err)
	}
	res, err := c.Transact(ctx, second...)
	if err == nil {
		_, err = ovsdb.CheckOperationResults(res, second)
	}
	if err == nil {
		t.Fatal("a second insert of the same name succeeded")
	}
	harness.Eventually(t, 5*time.Second, "one row", func() error {
		if n := countLBs(c, "Service_ns/a_TCP_cluster"); n != 1 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
}

// Duplicates of ours that exist anyway (written by an older version) are
// merged by the next sync; a foreign duplicate is an error for a human.
func TestDuplicatesOfOursAreMerged(t *testing.T) {
	c := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	ctx := context.Background()
	insert := func(l *nbdb.LoadBalancer) {
		ops, err := c.Create(l)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Transact(ctx, ops...); err != nil {
			t.Fatal(err)
		}
	}
	insert(lb("Service_ns/a_TCP_cluster", "ns/a"))
	insert(lb("Service_ns/a_TCP_cluster", "ns/a"))
	harness.Eventually(t, 5*time.Second, "two rows cached", func() error {
		if n := countLBs(c, "Service_ns/a_TCP_cluster"); n != 2 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	want := lb("Service_ns/a_TCP_cluster", "ns/a")
	want.Vips = map[string]string{"10.96.0.1:80": "10.244.0.5:8080"}
	ops := ensureOps(t, c, want)
	if _, err := c.Transact(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Second, "one merged, updated row", func() error {
		var lbs []nbdb.LoadBalancer
		_ = c.WhereCache(func(l *nbdb.LoadBalancer) bool { return l.Name == want.Name }).List(ctx, &lbs)
		if len(lbs) != 1 || lbs[0].Vips["10.96.0.1:80"] != "10.244.0.5:8080" {
			return fmt.Errorf("rows: %+v", lbs)
		}
		return nil
	})

	foreign := lb("Service_ns/b_TCP_cluster", "ns/b")
	foreign.ExternalIDs = map[string]string{"owner": "someone-else"}
	insert(lb("Service_ns/b_TCP_cluster", "ns/b"))
	insert(foreign)
	harness.Eventually(t, 5*time.Second, "two rows cached", func() error {
		if n := countLBs(c, "Service_ns/b_TCP_cluster"); n != 2 {
			return fmt.Errorf("%d rows", n)
		}
		return nil
	})
	txn := ovndb.NewTxn(c)
	b := lb("Service_ns/b_TCP_cluster", "ns/b")
	txn.Ensure(b, []any{&b.Vips}, nil)
	if _, err := txn.Ops(); err == nil {
		t.Fatal("a duplicate owned by someone else was merged")
	}
}

// A transaction built while the client has no cache (closed, or between a
// drop and the reconnect) fails with an error instead of panicking.
func TestTxnWithoutCacheFails(t *testing.T) {
	c := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	c.Close()
	harness.Eventually(t, 5*time.Second, "the closed client drops its cache", func() error {
		if c.Cache() != nil {
			return fmt.Errorf("cache still there")
		}
		return nil
	})
	txn := ovndb.NewTxn(c)
	if r := ovndb.Lookup(txn, &nbdb.LogicalRouter{Name: "r"}); r != nil || !errors.Is(txn.Err(), ovndb.ErrNotConnected) {
		t.Fatalf("Lookup = %v, err %v; want nil and ErrNotConnected", r, txn.Err())
	}
	txn = ovndb.NewTxn(c)
	txn.EnsureChild(&nbdb.LogicalRouter{}, &[]string{}, "id", &nbdb.NAT{ExternalIDs: map[string]string{"id": "x"}}, nil)
	if !errors.Is(txn.Err(), ovndb.ErrNotConnected) {
		t.Fatalf("EnsureChild err %v, want ErrNotConnected", txn.Err())
	}
}
