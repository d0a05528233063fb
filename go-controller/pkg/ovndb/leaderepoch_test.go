package ovndb_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// leaderOn claims the epoch as id over c and runs a committer carrying it.
func leaderOn(t *testing.T, ctx context.Context, c client.Client, id string) (*ovndb.Committer, *ovndb.LeaderEpoch) {
	t.Helper()
	epoch, err := ovndb.ClaimLeaderEpoch(ctx, c, id, nil, testr.New(t).WithName(id))
	if err != nil {
		t.Fatal(err)
	}
	committer := ovndb.NewCommitter(c, logr.Discard())
	committer.SetLeaderEpoch(epoch)
	go committer.Run(ctx)
	return committer, epoch
}

// lbOnServer says whether the server (not a cache) holds a load balancer named name.
func lbOnServer(t *testing.T, c client.Client, name string) bool {
	t.Helper()
	found, err := ovndb.FetchByName(context.Background(), c, &nbdb.LoadBalancer{Name: name})
	if err != nil {
		t.Fatal(err)
	}
	return found
}

func nbEpoch(t *testing.T, c client.Client) string {
	t.Helper()
	var gs []nbdb.NBGlobal
	if err := c.List(context.Background(), &gs); err != nil || len(gs) != 1 {
		t.Fatalf("NB_Global: %d rows, %v", len(gs), err)
	}
	return gs[0].ExternalIDs[ovndb.LeaderEpochKey]
}

// Leader a's transaction is held by a partition past its lease; b takes
// over, claims the epoch and writes; then a's transaction arrives. It must
// commit nothing, a must learn it is deposed, and send nothing more.
func TestDeposedLeadersHeldTransactionCommitsNothing(t *testing.T) {
	server := ovndbtest.NewServer(t)
	proxy := ovndbtest.NewProxy(t, server)
	a, b := ovndbtest.Connect(t, proxy.Sock), ovndbtest.Connect(t, server)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca, epochA := leaderOn(t, ctx, a, "a")
	if err := ca.Commit(ctx, ensureOps(t, a, lb("Service_ns/early_TCP_cluster", "ns/early"))); err != nil {
		t.Fatalf("a's write while it leads: %v", err)
	}

	held, release := proxy.HoldNextTransact()
	defer release()
	errA := make(chan error, 1)
	go func() { errA <- ca.Commit(ctx, ensureOps(t, a, lb("Service_ns/late_TCP_cluster", "ns/late"))) }()
	select {
	case <-held:
	case <-time.After(5 * time.Second):
		t.Fatal("a's transaction never reached the proxy")
	}

	cb, epochB := leaderOn(t, ctx, b, "b")
	if got, want := epochB.Value(), "b/2"; got != want {
		t.Fatalf("b claimed epoch %q, want %q (one more than a's %q)", got, want, epochA.Value())
	}
	if err := cb.Commit(ctx, ensureOps(t, b, lb("Service_ns/b_TCP_cluster", "ns/b"))); err != nil {
		t.Fatalf("the new leader's write: %v", err)
	}

	release()
	errLate := <-errA
	if lbOnServer(t, b, "Service_ns/late_TCP_cluster") {
		t.Fatalf("the deposed leader's late transaction committed after the new leader claimed the epoch (its result: %v)", errLate)
	}
	if !errors.Is(errLate, ovndb.ErrDeposed) {
		t.Fatalf("a's late transaction: %v, want ErrDeposed", errLate)
	}
	select {
	case <-epochA.Lost():
	default:
		t.Fatal("a's epoch is not marked lost")
	}
	sent := ca.Transactions()
	if err := ca.Commit(ctx, ensureOps(t, a, lb("Service_ns/later_TCP_cluster", "ns/later"))); !errors.Is(err, ovndb.ErrDeposed) {
		t.Fatalf("a's next write: %v, want ErrDeposed", err)
	}
	if ca.Transactions() != sent {
		t.Fatal("the deposed leader sent another transaction")
	}
	harness.Eventually(t, 5*time.Second, "b's epoch in the NB", func() error {
		if got := nbEpoch(t, b); got != "b/2" {
			return fmt.Errorf("epoch %q", got)
		}
		return nil
	})
}

// Two replicas that read the same epoch cannot both claim it: the claim is
// conditional on the value read, and a replica whose lease is gone by the
// time it would try again gives up.
func TestLeaderEpochClaimIsConditional(t *testing.T) {
	server := ovndbtest.NewServer(t)
	proxy := ovndbtest.NewProxy(t, server)
	c, b := ovndbtest.Connect(t, proxy.Sock), ovndbtest.Connect(t, server)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	leaderOn(t, ctx, b, "a") // an earlier leader: a/1

	held, release := proxy.HoldNextTransact()
	defer release()
	var leaseChecks atomic.Int32
	lease := func() error {
		if leaseChecks.Add(1) > 1 {
			return errors.New("lease lost")
		}
		return nil
	}
	claimed := make(chan error, 1)
	go func() {
		_, err := ovndb.ClaimLeaderEpoch(ctx, c, "c", lease, testr.New(t).WithName("c"))
		claimed <- err
	}()
	<-held // c read a/1 and sent its claim
	if _, epoch := leaderOn(t, ctx, b, "b"); epoch.Value() != "b/2" {
		t.Fatalf("b claimed %q, want b/2", epoch.Value())
	}
	release()
	if err := <-claimed; err == nil {
		t.Fatal("c's claim, built on the epoch b replaced, succeeded")
	}
	harness.Eventually(t, 5*time.Second, "b's epoch kept", func() error {
		if got := nbEpoch(t, b); got != "b/2" {
			return fmt.Errorf("epoch %q", got)
		}
		return nil
	})
}

// An NB that lost the epoch (replaced by an empty database) while the lease
// is still ours: the first transaction commits nothing and the epoch is
// claimed again; the rebuilt transaction commits.
func TestLeaderEpochReclaimedOnReplacedNB(t *testing.T) {
	proxy := ovndbtest.NewProxy(t, ovndbtest.NewServer(t))
	a := ovndbtest.Connect(t, proxy.Sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ca, epoch := leaderOn(t, ctx, a, "a")
	before := ovndb.CurrentEpoch(a)
	proxy.SwitchTo(ovndbtest.NewServer(t))
	harness.Eventually(t, 10*time.Second, "reconnected to the empty NB", func() error {
		if a.CurrentEndpoint() == "" || ovndb.CurrentEpoch(a) == before {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	err := ca.Commit(ctx, ensureOps(t, a, lb("Service_ns/x_TCP_cluster", "ns/x")))
	if !errors.Is(err, ovndb.ErrEpochMissing) {
		t.Fatalf("first write to the replaced NB: %v, want ErrEpochMissing", err)
	}
	if epoch.Err() != nil || epoch.Value() != "a/1" {
		t.Fatalf("epoch %q (err %v), want a/1 claimed again", epoch.Value(), epoch.Err())
	}
	if err := ca.Commit(ctx, ensureOps(t, a, lb("Service_ns/x_TCP_cluster", "ns/x"))); err != nil {
		t.Fatalf("the rebuilt write: %v", err)
	}
}
