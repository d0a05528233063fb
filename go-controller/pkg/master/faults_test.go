package master

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ovn-org/libovsdb/ovsdb"
	dto "github.com/prometheus/client_model/go"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func addrs(pn annotations.PodNetwork) string { return fmt.Sprint(pn.IPs, pn.MAC) }

// newEnvWithPod starts a master with node n1 and its pod ns/p1 annotated.
func newEnvWithPod(t *testing.T) (*env, []netip.Prefix, annotations.PodNetwork) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	subnets := e.nodeSubnets("n1")
	e.createPod("ns", "p1", "n1")
	return e, subnets, e.podNetwork("ns", "p1")
}

// expectReregistered checks, after node n1 (holding subnets, its pod ns/p1
// holding pn) was deleted while p1 runs: a new node n2 does not get n1's
// subnet, n1 registered again gets it back, and p1 keeps its addresses.
func (e *env) expectReregistered(subnets []netip.Prefix, pn annotations.PodNetwork) {
	e.t.Helper()
	e.createNode("n2")
	if s := e.nodeSubnets("n2"); slices.Equal(s, subnets) {
		e.t.Fatalf("n2 got subnet %v of deleted node n1, whose pod still runs", s)
	}
	e.createNode("n1")
	if s := e.nodeSubnets("n1"); !slices.Equal(s, subnets) {
		e.t.Fatalf("re-registered n1 got %v, had %v", s, subnets)
	}
	if got := e.podNetwork("ns", "p1"); addrs(got) != addrs(pn) {
		e.t.Fatalf("pod re-addressed: %s, had %s", addrs(got), addrs(pn))
	}
}

// Item 1: the NB replaced by an empty database under a running master.
// Everything comes back (services included), with no duplicates.
func TestNBReplacedByEmptyDatabase(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.createPod("ns", "p1", "n1")
	pn := e.podNetwork("ns", "p1")
	e.createService("ns", "web", "10.96.0.10", pn.IPs[0].Addr().String())
	lbName := "Service_ns/web_TCP_cluster"
	wantVIPs := map[string]string{"10.96.0.10:80": pn.IPs[0].Addr().String() + ":8080"}
	e.waitVIPs(lbName, wantVIPs)

	e.replaceNB()
	start := time.Now()
	e.lsp(topology.PodPort("ns", "p1"), nil)
	e.lsp(topology.ManagementPort("n1"), nil)
	e.waitVIPs(lbName, wantVIPs)
	e.waitOneBalancerInClusterGroup(lbName, 15*time.Second)
	t.Logf("everything back %v after the NB was replaced", time.Since(start))
	// A service change after the replacement syncs (no stale index of old UUIDs).
	e.createSlice("ns", "web-y", "web", "10.244.9.9")
	e.waitVIPs(lbName, map[string]string{"10.96.0.10:80": pn.IPs[0].Addr().String() + ":8080,10.244.9.9:8080"})
}

// The NB replaced by one whose NB_Global row ovn-northd has already made
// (without the master's options): the reconnect's resync finds every node and
// pod drifted and counts them as its repairs. The row's arrival puts back
// only NB_Global's options; queueing the nodes then too (51116fd) had them
// repaired ahead of the resync, uncounted.
func TestNBReplacedRepairsCountedByTheResync(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.createPod("ns", "p1", "n1")
	e.podNetwork("ns", "p1")
	nodes, pods := resyncRepairs(t, "nodes"), resyncRepairs(t, "pods")

	sock := ovndbtest.NewServer(t)
	northd := ovndbtest.Connect(t, sock)
	ops, err := northd.Create(&nbdb.NBGlobal{Options: map[string]string{"mac_prefix": "0a:00:00"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := northd.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	e.proxy.SwitchTo(sock)
	t.Cleanup(e.checkReferences)
	e.lsp(topology.PodPort("ns", "p1"), nil)
	e.lsp(topology.ManagementPort("n1"), nil)
	harness.Eventually(t, 10*time.Second, "the resync's repairs counted", func() error {
		if n, p := resyncRepairs(t, "nodes")-nodes, resyncRepairs(t, "pods")-pods; n < 1 || p < 1 {
			return fmt.Errorf("the resync counted %v node and %v pod repairs; want at least 1 of each", n, p)
		}
		return nil
	})
}

// resyncRepairs reads ovnkube_resync_repairs_total for queue.
func resyncRepairs(t *testing.T, queue string) float64 {
	var m dto.Metric
	if err := metrics.ResyncRepairs.WithLabelValues(queue).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// Item 1: a reconnect faster than any poll (drop and immediate reconnect)
// to a database that lost rows is still noticed.
func TestFastReconnectToNewDatabaseIsNoticed(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.createService("ns", "web", "10.96.0.10", "10.244.0.5")
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.0.5:8080"})
	for i := 0; i < 3; i++ {
		e.replaceNB()
	}
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.0.5:8080"})
	e.lsp(topology.ManagementPort("n1"), nil)
}

// Item 3: a node deleted and re-registered while its pods run keeps its
// subnet, and its pods keep their addresses and ports.
func TestNodeReregisteredWithRunningPods(t *testing.T) {
	e, subnets, pn := newEnvWithPod(t)
	lsp := e.lsp(topology.PodPort("ns", "p1"), nil)

	e.deleteNode("n1")
	e.expectReregistered(subnets, pn)
	e.lsp(topology.PodPort("ns", "p1"), func(l *nbdb.LogicalSwitchPort) error {
		if l.UUID != lsp.UUID || !slices.Equal(l.Addresses, lsp.Addresses) {
			return fmt.Errorf("port %s %v, had %s %v", l.UUID, l.Addresses, lsp.UUID, lsp.Addresses)
		}
		return nil
	})

	// Deleted for good: the subnet is freed once the last pod is gone.
	e.deleteNode("n1")
	e.deletePod("ns", "p1")
	harness.Eventually(t, 10*time.Second, "n1's switch removed", func() error {
		if err := e.nb.Get(context.Background(), &nbdb.LogicalSwitch{Name: "n1"}); err == nil {
			return errors.New("switch n1 still there")
		}
		return nil
	})
	harness.Eventually(t, 10*time.Second, "n1's subnet freed", func() error {
		if s := e.m.ipam.nodeSubnets("n1"); s != nil {
			return fmt.Errorf("n1 still holds %v", s)
		}
		return nil
	})
}

// Item 3 across a restart: the master restarts while a deleted node's pods
// still run; the node's subnet is not handed to a new node.
func TestRestartKeepsDeletedNodesSubnetWhilePodsRun(t *testing.T) {
	e, subnets, pn := newEnvWithPod(t)
	e.deleteNode("n1")
	e.stop()
	e.start()
	e.expectReregistered(subnets, pn)
}

// Item 4: the node's annotation PATCH fails after its subnet was allocated;
// its pods are annotated all the same once it succeeds.
func TestPodsNotStrandedWhenNodeSyncFails(t *testing.T) {
	e := newEnv(t)
	var failures atomic.Int32
	failures.Store(3)
	e.kube.PrependReactor("patch", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		if failures.Add(-1) >= 0 {
			return true, nil, apierrors.NewTooManyRequests("injected", 0)
		}
		return false, nil, nil
	})
	e.start()
	e.createPod("ns", "p1", "n1") // before its node exists
	e.createNode("n1")
	e.podNetwork("ns", "p1")
}

// Items 5 and 6: an annotation copied from an earlier incarnation (other
// UID) is not honoured, and the MAC always follows the master's address.
func TestCopiedAnnotationAndMACAreNotHonoured(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.createPod("ns", "a", "n1")
	taken := e.podNetwork("ns", "a")
	copied := taken
	copied.PodUID = "uid-of-an-earlier-incarnation"
	copied.MAC = []byte{0x02, 0, 0, 0, 0, 0x66}
	e.createPod("ns", "b", "n1", func(p *corev1.Pod) {
		p.Annotations = map[string]string{annotations.PodNetworks: annotations.FormatPodNetworks(copied)}
	})
	got := e.podNetwork("ns", "b")
	if got.IPs[0] == taken.IPs[0] {
		t.Fatalf("pod b was given pod a's address %v from a copied annotation", got.IPs[0])
	}
	if got.MAC.String() != topology.MACFromIP(got.IPs[0].Addr()).String() {
		t.Fatalf("pod b's MAC %s does not follow its address %s", got.MAC, got.IPs[0])
	}
	// A user patching the MAC of a pod the master annotated changes nothing.
	mine := got
	mine.MAC = taken.MAC
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotations.PodNetworks, annotations.FormatPodNetworks(mine))
	if _, err := e.kube.CoreV1().Pods("ns").Patch(context.Background(), "b", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	e.lsp(topology.PodPort("ns", "b"), func(l *nbdb.LogicalSwitchPort) error {
		if want := topology.MACFromIP(got.IPs[0].Addr()).String() + " " + got.IPs[0].Addr().String(); l.Addresses[0] != want {
			return fmt.Errorf("port addresses %v, want %q", l.Addresses, want)
		}
		return nil
	})
	harness.Eventually(t, 10*time.Second, "annotation restored", func() error {
		if pn := e.podNetwork("ns", "b"); pn.MAC.String() != got.MAC.String() {
			return fmt.Errorf("annotation MAC %s", pn.MAC)
		}
		return nil
	})
}

// Item 7: a dual-stack node whose master stopped between creating its
// switch and annotating it keeps both families after a restart.
func TestDualStackSubnetsRebuiltFromRouterPort(t *testing.T) {
	e := newEnv(t)
	v4 := netip.MustParsePrefix("10.244.7.0/24")
	v6 := netip.MustParsePrefix("fd00:10:244:7::/64")
	cs := e.cfg.ClusterSubnets
	cs6, err := config.ParseClusterSubnet("fd00:10:244::/48/64")
	if err != nil {
		t.Fatal(err)
	}
	e.cfg.ClusterSubnets = append(cs, cs6)
	e.start()
	if err := EnsureNode(context.Background(), e.nb, func(ctx context.Context, ops []ovsdb.Operation) error {
		_, err := e.nb.Transact(ctx, ops...)
		return err
	}, "n1", []netip.Prefix{v4, v6}, nil, nil, false, nil, nil); err != nil {
		t.Fatal(err)
	}
	e.stop()
	e.createNode("n1") // no annotation: the master stopped before writing it
	e.start()
	if s := e.nodeSubnets("n1"); !slices.Equal(s, []netip.Prefix{v4, v6}) {
		t.Fatalf("n1 annotated %v, its rows have %v", s, []netip.Prefix{v4, v6})
	}
}

// Item 9: an EndpointSlice relabelled from service A to B leaves A.
func TestRelabelledSliceLeavesOldService(t *testing.T) {
	e := newEnv(t)
	e.start()
	e.createService("ns", "a", "10.96.0.10")
	e.createService("ns", "b", "10.96.0.11")
	e.createSlice("ns", "moving", "a", "10.244.0.5")
	e.waitVIPs("Service_ns/a_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.0.5:8080"})
	s, err := e.kube.DiscoveryV1().EndpointSlices("ns").Get(context.Background(), "moving", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.Labels[discovery.LabelServiceName] = "b"
	if _, err := e.kube.DiscoveryV1().EndpointSlices("ns").Update(context.Background(), s, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVIPs("Service_ns/b_TCP_cluster", map[string]string{"10.96.0.11:80": "10.244.0.5:8080"})
	e.waitVIPs("Service_ns/a_TCP_cluster", map[string]string{"10.96.0.10:80": ""})
}

// Item 13: the periodic resync repairs a drift no event reports (a port's
// addresses edited by hand produce an update, which is not followed).
func TestPeriodicResyncRepairsDrift(t *testing.T) {
	e := newEnv(t)
	e.cfg.ResyncInterval = 300 * time.Millisecond
	e.createNode("n1")
	e.start()
	e.createPod("ns", "p1", "n1")
	pn := e.podNetwork("ns", "p1")
	lsp := e.lsp(topology.PodPort("ns", "p1"), nil)
	want := lsp.Addresses
	lsp.Addresses = []string{"0a:58:0a:f4:00:99 10.244.0.99"}
	ops, err := e.nb.Where(lsp).Update(lsp, &lsp.Addresses)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	e.lsp(topology.PodPort("ns", "p1"), func(l *nbdb.LogicalSwitchPort) error {
		if !slices.Equal(l.Addresses, want) {
			return fmt.Errorf("addresses %v, want %v (pod has %v)", l.Addresses, want, pn.IPs)
		}
		return nil
	})
}

// Issue 31 item 5: at a restart (or leader failover) the NB's ports, written
// only by the master, are trusted before annotations. A pod whose owner
// patched its annotation with a running pod's address (for its own UID,
// first in name order) gets a new address; the running pod keeps its own.
// A pod created with a hand-written annotation (no UID marker) gets a fresh
// address, not the one it asks for.
func TestAnnotationCannotTakeARunningPodsAddress(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	victim := forgeVictimAddresses(t, e)
	e.start()
	harness.Eventually(t, 10*time.Second, "the attacker re-addressed, the victim unchanged", func() error {
		a, v := e.podNetwork("ns", "attacker"), e.podNetwork("ns", "victim")
		if v.IPs[0] != victim.IPs[0] {
			return fmt.Errorf("victim moved from %v to %v", victim.IPs[0], v.IPs[0])
		}
		if a.IPs[0] == victim.IPs[0] {
			return fmt.Errorf("attacker holds the victim's address %v", a.IPs[0])
		}
		return nil
	})
	e.lsp(topology.PodPort("ns", "victim"), func(l *nbdb.LogicalSwitchPort) error {
		if want := victim.MAC.String() + " " + victim.IPs[0].Addr().String(); l.Addresses[0] != want {
			return fmt.Errorf("victim's port addresses %v, want %q", l.Addresses, want)
		}
		return nil
	})

	// A hand-written annotation without the UID marker asks for a free address.
	free := victim
	free.PodUID = ""
	free.IPs = []netip.Prefix{netip.MustParsePrefix(victim.IPs[0].Addr().Next().Next().Next().String() + "/24")}
	e.createPod("ns", "handwritten", "n1", func(p *corev1.Pod) {
		p.Annotations = map[string]string{annotations.PodNetworks: annotations.FormatPodNetworks(free)}
	})
	if got := e.podNetwork("ns", "handwritten"); got.IPs[0] == free.IPs[0] {
		t.Fatalf("a hand-written annotation chose the pod's address %v", got.IPs[0])
	}
}

// forgeVictimAddresses runs pods victim and attacker on n1, stops the
// master and writes the victim's pod-networks annotation, marked with the
// attacker's UID, onto the attacker, as the attacker's owner could; it
// returns the victim's annotation.
func forgeVictimAddresses(t *testing.T, e *env) annotations.PodNetwork {
	t.Helper()
	e.createPod("ns", "victim", "n1")
	attacker := e.createPod("ns", "attacker", "n1")
	victim := e.podNetwork("ns", "victim")
	e.podNetwork("ns", "attacker")
	e.stop()
	forged := victim
	forged.PodUID = string(attacker.UID)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotations.PodNetworks, annotations.FormatPodNetworks(forged))
	if _, err := e.kube.CoreV1().Pods("ns").Patch(context.Background(), "attacker", "application/merge-patch+json", []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	return victim
}

// A service's first transaction (its balancer and the balancer's insert
// into the cluster group, whose members the master does not monitor)
// committed with its reply lost: the retry finds the balancer, reads the
// group's members from the server, and leaves one balancer, in the group.
func TestServiceAfterLostReply(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	lbName := "Service_ns/web_TCP_cluster"
	lost := e.proxy.LoseNextReply()
	e.createService("ns", "web", "10.96.0.10", "10.244.0.5")
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	e.waitVIPs(lbName, map[string]string{"10.96.0.10:80": "10.244.0.5:8080"})
	e.waitOneBalancerInClusterGroup(lbName, 10*time.Second)
}

// waitOneBalancerInClusterGroup waits until exactly one balancer has that
// name and the cluster load balancer group holds it.
func (e *env) waitOneBalancerInClusterGroup(lbName string, timeout time.Duration) {
	e.t.Helper()
	harness.Eventually(e.t, timeout, "one balancer "+lbName+", in the cluster group", func() error {
		g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
		if err := e.nb.Get(context.Background(), g); err != nil {
			return err
		}
		var lbs []nbdb.LoadBalancer
		_ = e.nb.WhereCache(func(l *nbdb.LoadBalancer) bool { return l.Name == lbName }).List(context.Background(), &lbs)
		if len(lbs) != 1 || !slices.Contains(g.LoadBalancer, lbs[0].UUID) {
			return fmt.Errorf("group %v, load balancers %v", g.LoadBalancer, lbs)
		}
		return nil
	})
}
