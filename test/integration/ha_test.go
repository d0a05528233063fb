package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// leaseHolder is the identity in the master's Lease ("" when free or absent).
func (c *cluster) leaseHolder() string {
	l, err := c.kube.Client.CoordinationV1().Leases(leader.DefaultNamespace).Get(c.ctx(), leader.DefaultLeaseName, metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// churn creates pods (and deletes a third of them) until stopped, and
// returns the pods that should exist.
type churn struct {
	c       *cluster
	mu      sync.Mutex
	pods    map[string]bool
	created map[string]time.Time
	kept    map[string]bool // pods a test watches: never deleted
	stop    chan struct{}
	done    chan struct{}
	err     error
}

func startChurn(c *cluster, nodes []string) *churn {
	ch := &churn{c: c, pods: map[string]bool{}, created: map[string]time.Time{}, kept: map[string]bool{}, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(ch.done)
		rng := rand.New(rand.NewSource(1))
		for i := 0; ; i++ {
			select {
			case <-ch.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			name := fmt.Sprintf("p%04d", i)
			pod := podSpec("default", name, nodes[i%len(nodes)])
			if _, err := c.kube.Client.CoreV1().Pods("default").Create(c.ctx(), pod, metav1.CreateOptions{}); err != nil {
				ch.err = err
				return
			}
			ch.mu.Lock()
			ch.pods[name] = true
			ch.created[name] = time.Now()
			if victim := anyKey(rng, ch.pods); rng.Intn(3) == 0 && !ch.kept[victim] {
				zero := int64(0)
				if err := c.kube.Client.CoreV1().Pods("default").Delete(c.ctx(), victim, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
					ch.err = err
					ch.mu.Unlock()
					return
				}
				delete(ch.pods, victim)
			}
			ch.mu.Unlock()
		}
	}()
	return ch
}

// finishConverged churns a second longer, stops, and waits until the NB and
// the annotations are exactly what the remaining pods want; it returns them.
func (ch *churn) finishConverged(t *testing.T, nodes []string) map[string]bool {
	t.Helper()
	time.Sleep(time.Second)
	pods := ch.finish(t)
	harness.Eventually(t, 60*time.Second, "NB and annotations converged with no duplicate", func() error {
		return checkConverged(ch.c, nodes, pods, map[string]bool{})
	})
	return pods
}

func (ch *churn) finish(t *testing.T) map[string]bool {
	close(ch.stop)
	<-ch.done
	if ch.err != nil {
		t.Fatal(ch.err)
	}
	return ch.pods
}

// podCreatedAfter waits for the churn to create a pod after since and
// returns the first such pod; the churn never deletes it.
func (ch *churn) podCreatedAfter(t *testing.T, since time.Time) string {
	t.Helper()
	var pod string
	harness.Eventually(t, 10*time.Second, "a pod created after "+since.Format(time.StampMilli), func() error {
		var ok bool
		if pod, ok = ch.firstCreatedAfter(since); !ok {
			return fmt.Errorf("none yet")
		}
		return nil
	})
	return pod
}

// firstCreatedAfter is the first pod created after since (kept from now on).
func (ch *churn) firstCreatedAfter(since time.Time) (string, bool) {
	ch.mu.Lock()
	defer ch.mu.Unlock()
	best, bestAt := "", time.Time{}
	for name, at := range ch.created {
		if at.After(since) && ch.pods[name] && (best == "" || at.Before(bestAt)) {
			best, bestAt = name, at
		}
	}
	if best != "" {
		ch.kept[best] = true
	}
	return best, best != ""
}

// Several masters, one leader: SIGKILL the leader while pods are created and
// deleted, again and again until one replica is left. Each time another
// replica must hold the lease within 15 s and write again, and in the end
// the NB and the annotations are exactly what the pods want: every pod its
// own address and one port, nothing stale.
func TestLeaderKilledMidChurnIsReplacedAndNothingIsDuplicated(t *testing.T) {
	t.Parallel() // wait-bound (leases, restarts), on its own API server and databases
	for _, replicas := range []int{2, 3} {
		t.Run(fmt.Sprintf("%d-masters", replicas), func(t *testing.T) {
			c := newCluster(t)
			nodes := []string{"n1", "n2"}
			for _, n := range nodes {
				c.createNode(n, nil)
			}
			masters := map[string]*harness.Process{}
			for i := 0; i < replicas; i++ {
				id := fmt.Sprintf("m%d", i)
				masters[id] = harness.StartMaster(t, c.logDir, "master-"+id, c.ovn, c.kube, "--leader-elect-identity", id)
			}
			t.Cleanup(func() {
				if t.Failed() {
					for id, p := range masters {
						t.Logf("%s log tail:\n%s", id, p.Tail(25))
					}
				}
			})
			var holder string
			harness.Eventually(t, 30*time.Second, "a leader", func() error {
				if holder = c.leaseHolder(); masters[holder] == nil {
					return fmt.Errorf("lease holder %q", holder)
				}
				return nil
			})
			c.nodeSubnet("n1")
			ch := startChurn(c, nodes)
			for kill := 1; kill < replicas; kill++ {
				time.Sleep(2 * time.Second) // churn under this leader first
				killedAt := time.Now()
				masters[holder].Kill()
				old := holder
				delete(masters, old)
				harness.Eventually(t, 15*time.Second, "another replica holding the lease after "+old+" was killed", func() error {
					if holder = c.leaseHolder(); masters[holder] == nil {
						return fmt.Errorf("lease holder %q", holder)
					}
					return nil
				})
				tookOver := time.Since(killedAt)
				// Writing again: a pod created after the kill gets its address.
				pod := ch.podCreatedAfter(t, killedAt)
				harness.Eventually(t, 20*time.Second, "pod "+pod+" annotated by the new leader "+holder, func() error {
					p, err := c.kube.Client.CoreV1().Pods("default").Get(c.ctx(), pod, metav1.GetOptions{})
					if err != nil {
						return err
					}
					_, err = annotations.ParsePodNetworks(p.Annotations[annotations.PodNetworks])
					return err
				})
				t.Logf("kill %d: %s killed; %s held the lease after %s and annotated %s %s after the kill",
					kill, old, holder, tookOver.Round(100*time.Millisecond), pod, time.Since(killedAt).Round(100*time.Millisecond))
			}
			pods := ch.finishConverged(t, nodes)
			t.Logf("%d pods in place after %d leader kills", len(pods), replicas-1)
		})
	}
}

// A replica without the lease never writes: a standby started alone next to
// a lease held by someone else (not expiring: renewed by the test) leaves
// the NB and the API untouched, and takes over once the lease is released.
func TestStandbyWritesNothingUntilItHoldsTheLease(t *testing.T) {
	t.Parallel() // wait-bound (leases, restarts), on its own API server and databases
	c := newCluster(t)
	c.createNode("n1", nil)
	// Someone else holds the lease and keeps renewing it.
	ctx, cancel := context.WithCancel(context.Background())
	other, err := leader.New(leader.Config{Namespace: leader.DefaultNamespace, Name: leader.DefaultLeaseName, Identity: "elsewhere",
		LeaseDuration: leader.DefaultLeaseDuration, RenewDeadline: leader.DefaultRenewDeadline, RetryPeriod: leader.DefaultRetryPeriod}, testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	otherDone := make(chan error, 1)
	go func() {
		otherDone <- other.Run(ctx, c.kube.Client, func(ctx context.Context) error { <-ctx.Done(); return nil })
	}()
	t.Cleanup(func() { cancel(); <-otherDone })
	harness.Eventually(t, 15*time.Second, "lease held elsewhere", func() error {
		if h := c.leaseHolder(); h != "elsewhere" {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	before := c.nb.Changes()
	c.startMaster("--leader-elect-identity", "standby")
	c.createPod("default", "waiting", "n1")
	// Longer than the lease: a standby that ignored the lease would write by now.
	time.Sleep(leader.DefaultLeaseDuration + 3*time.Second)
	if n := c.nb.Changes() - before; n != 0 {
		t.Fatalf("the standby changed %d NB rows", n)
	}
	node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := node.Annotations[annotations.NodeSubnets]; ok {
		t.Fatalf("the standby annotated the node: %s", v)
	}
	cancel() // the holder releases the lease
	harness.Eventually(t, 15*time.Second, "standby holding the lease", func() error {
		if h := c.leaseHolder(); h != "standby" {
			return fmt.Errorf("holder %q", h)
		}
		return nil
	})
	c.podNetwork("default", "waiting")
}
