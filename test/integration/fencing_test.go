package integration

import (
	"context"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// nbLeaderEpoch is NB_Global's leader epoch as the test's client sees it.
func (c *cluster) nbLeaderEpoch() string {
	var gs []nbdb.NBGlobal
	if err := c.nb.List(context.Background(), &gs); err != nil || len(gs) == 0 {
		return ""
	}
	return gs[0].ExternalIDs[ovndb.LeaderEpochKey]
}

// The leader's NB transaction is held by a partition (a proxy that delays
// it) while the leader freezes past its lease; the standby takes the lease,
// claims the NB leader epoch and syncs; then the held transaction reaches
// the real ovsdb-server. It must commit nothing (it would create a port for
// a pod deleted meanwhile, which the new leader knows nothing of), and the
// old leader, thawed, must exit.
func TestDeposedLeadersDelayedTransactionCommitsNothing(t *testing.T) {
	t.Parallel() // wait-bound (leases, restarts), on its own API server and databases
	c := newCluster(t)
	c.createNode("n1", nil)
	proxy := ovndbtest.NewProxy(t, c.ovn.NBSock)
	a := harness.Start(t, c.logDir, "master-a", harness.Binary(t, "ovnkube"), "--loglevel", "4", "master",
		"--kubeconfig", c.kube.Kubeconfig, "--nb-address", "unix:"+proxy.Sock, "--leader-elect-identity", "a")
	t.Cleanup(func() { _ = a.Cmd.Process.Signal(syscall.SIGCONT) })
	harness.WaitForLog(t, a, "initial sync done", 60*time.Second)
	c.nodeSubnet("n1")
	epochA := c.nbLeaderEpoch()
	if !strings.HasPrefix(epochA, "a/") {
		t.Fatalf("NB leader epoch %q after a's start, want a/<n>", epochA)
	}
	b := harness.StartMaster(t, c.logDir, "master-b", c.ovn, c.kube, "--leader-elect-identity", "b")

	held, release := proxy.HoldNextTransact()
	defer release()
	c.createPod("default", "late", "n1")
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatalf("a sent no NB transaction for the pod:\n%s", a.Tail(20))
	}
	if err := a.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	c.deletePod("default", "late")
	harness.Eventually(t, 30*time.Second, "b holding the lease", func() error {
		if h := c.leaseHolder(); h != "b" {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	harness.WaitForLog(t, b, "initial sync done", 60*time.Second)
	if epochB := c.nbLeaderEpoch(); !strings.HasPrefix(epochB, "b/") || epochCount(epochB) != epochCount(epochA)+1 {
		t.Fatalf("NB leader epoch %q after b took over from %q, want b/<n+1>", epochB, epochA)
	}

	before := c.nb.Changes()
	release()
	time.Sleep(3 * time.Second) // the held transaction reaches the server at once
	if c.lsp("default_late") != nil {
		t.Fatal("the deposed leader's delayed transaction created a port for a pod deleted after b took over")
	}
	if n := c.nb.Changes() - before; n != 0 {
		t.Fatalf("the NB changed %d rows after the held transaction was released", n)
	}
	if err := a.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the deposed leader to exit", func() error {
		if !a.Exited() {
			return fmt.Errorf("still running")
		}
		return nil
	})
	t.Logf("a's last words:\n%s", a.Tail(6))
}

func epochCount(epoch string) int {
	var n int
	_, _ = fmt.Sscanf(epoch[strings.LastIndex(epoch, "/")+1:], "%d", &n)
	return n
}
