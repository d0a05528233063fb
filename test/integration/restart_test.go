package integration

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func TestMasterRestartConvergesAndIdleRestartWritesNothing(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	for _, n := range []string{"n1", "n2", "n3"} {
		c.createNode(n, nil)
	}
	c.kube.EnsureNamespace(t, "ns")
	for pod, node := range map[string]string{"a": "n1", "b": "n1", "c": "n2", "d": "n3"} {
		c.createPod("ns", pod, node)
	}
	ips := map[string]netip.Prefix{}
	for _, p := range []string{"a", "b", "c", "d"} {
		ips[p] = c.podNetwork("ns", p).IPs[0]
	}
	subnets := map[string]netip.Prefix{"n1": c.nodeSubnet("n1"), "n2": c.nodeSubnet("n2")}
	c.waitPort("n3", "ns_d", nil)

	// Rows someone else owns, including a port on one of our switches.
	for _, args := range [][]string{{"ls-add", "foreign-sw"}, {"lsp-add", "n1", "foreign-port"}, {"lr-add", "foreign-router"}} {
		if _, err := c.ovn.NBCtl(args...); err != nil {
			t.Fatal(err)
		}
	}

	// While the master is down: a pod and a node go, a pod and a node come.
	c.master.Stop()
	c.deletePod("ns", "b")
	c.deletePod("ns", "d")
	c.deleteNode("n3")
	c.createNode("n4", nil)
	c.createPod("ns", "e", "n2")
	c.createPod("ns", "f", "n4")

	c.startMaster()
	c.waitSynced()
	c.waitNoPort("ns_b")
	c.waitNoPort("ns_d")
	harness.Eventually(t, 10*time.Second, "n3 rows removed", func() error {
		if c.switchNamed("n3") != nil || c.lrp("rtos-n3") != nil {
			return fmt.Errorf("n3 rows remain")
		}
		return nil
	})
	for _, p := range []string{"a", "c"} {
		if got := c.podNetwork("ns", p).IPs[0]; got != ips[p] {
			t.Errorf("pod %s moved from %s to %s across the restart", p, ips[p], got)
		}
	}
	for n, s := range subnets {
		if got := c.nodeSubnet(n); got != s {
			t.Errorf("node %s moved from %s to %s", n, s, got)
		}
	}
	c.podNetwork("ns", "e")
	c.podNetwork("ns", "f")
	c.waitPort("n2", "ns_e", nil)
	c.waitPort("n4", "ns_f", nil)
	if s4 := c.nodeSubnet("n4"); s4 == subnets["n1"] || s4 == subnets["n2"] {
		t.Errorf("n4 got a subnet in use: %s", s4)
	}

	// No address is held twice among pod ports.
	var ports []nbdb.LogicalSwitchPort
	if err := c.nb.List(c.ctx(), &ports); err != nil {
		t.Fatal(err)
	}
	seen := map[netip.Addr]string{}
	for _, p := range ports {
		if o, ok := topology.OwnerOf(p.ExternalIDs); !ok || o.Type != topology.OwnerPod {
			continue
		}
		_, addrs, _ := topology.ParseLSPAddress(p.Addresses[0])
		if prev, dup := seen[addrs[0]]; dup {
			t.Errorf("%s and %s share %s", prev, p.Name, addrs[0])
		}
		seen[addrs[0]] = p.Name
	}

	// Foreign rows untouched.
	if c.switchNamed("foreign-sw") == nil || c.routerNamed("foreign-router") == nil || c.lsp("foreign-port") == nil {
		t.Error("a row ovn-k8s does not own was deleted")
	}
	n1 := c.switchNamed("n1")
	if fp := c.lsp("foreign-port"); fp == nil || !contains(n1.Ports, fp.UUID) {
		t.Error("foreign port was detached from n1")
	}

	// An idle restart writes nothing: no NB row changes, no API writes.
	before, _ := c.kube.Client.CoreV1().Pods("ns").Get(c.ctx(), "a", metav1.GetOptions{})
	beforeNode, _ := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	changes := c.changesDuring(func() {
		c.master.Stop()
		c.startMaster()
		c.waitSynced()
	})
	if changes != 0 {
		t.Errorf("idle restart changed %d NB rows", changes)
	}
	if !strings.Contains(c.master.Tail(1000), "nbTransactions=0") {
		t.Errorf("idle restart sent NB transactions:\n%s", c.master.Tail(20))
	}
	after, _ := c.kube.Client.CoreV1().Pods("ns").Get(c.ctx(), "a", metav1.GetOptions{})
	afterNode, _ := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	if before.ResourceVersion != after.ResourceVersion || beforeNode.ResourceVersion != afterNode.ResourceVersion {
		t.Error("idle restart rewrote an annotation")
	}
}

func TestMasterSurvivesNBOutages(t *testing.T) {
	c := newCluster(t)
	c.ovn.StopNB() // unreachable at start
	c.startMaster()
	c.createNode("n1", nil)
	c.kube.EnsureNamespace(t, "ns")
	c.createPod("ns", "p1", "n1")
	harness.WaitForLog(t, c.master, "OVSDB not reachable yet", 20*time.Second)
	c.ovn.StartNB()
	c.nb = harness.WatchNB(t, c.ovn)
	c.waitPort("n1", "ns_p1", nil)
	c.podNetwork("ns", "p1")

	// Lost later: changes made during the outage are applied after it.
	c.ovn.StopNB()
	c.createPod("ns", "p2", "n1")
	c.deletePod("ns", "p1")
	time.Sleep(2 * time.Second)
	c.ovn.StartNB()
	c.nb = harness.WatchNB(t, c.ovn)
	c.waitPort("n1", "ns_p2", nil)
	c.waitNoPort("ns_p1")
	c.podNetwork("ns", "p2")
}

func TestMasterInitIsIdempotentAndAdoptedByMaster(t *testing.T) {
	c := newCluster(t)
	bin := harness.Binary(t, "ovnkube")
	run := func() {
		out, err := harness.Run(bin, "master-init", "--nb-address", c.ovn.NBAddress(), "--cluster-ip-subnet", "10.244.0.0/16",
			"--master-switch-subnet", "10.244.0.0/24", "--node-name", "ctrl")
		if err != nil {
			t.Fatalf("master-init: %v\n%s", err, out)
		}
	}
	run()
	if n := c.changesDuring(run); n != 0 {
		t.Errorf("second master-init changed %d rows", n)
	}
	show, err := c.ovn.NBCtl("show")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"(ctrl)", "port stor-ctrl", "router-port: rtos-ctrl", "port k8s-ctrl", `addresses: ["0a:58:0a:f4:00:02 10.244.0.2"]`,
		"(join)", "port jtor-ovn_cluster_router", "router-port: rtoj-ovn_cluster_router",
		"router", "(ovn_cluster_router)", "port rtos-ctrl", `mac: "0a:58:0a:f4:00:01"`, `networks: ["10.244.0.1/24"]`,
		"port rtoj-ovn_cluster_router", `networks: ["100.64.0.1/16"]`,
	} {
		if !strings.Contains(show, want) {
			t.Errorf("ovn-nbctl show lacks %q:\n%s", want, show)
		}
	}
	// The master adopts those rows for the node as they are.
	c.createNode("ctrl", map[string]string{"k8s.ovn.org/node-subnets": `{"default":"10.244.0.0/24"}`})
	if n := c.changesDuring(func() { c.startMaster(); c.waitSynced() }); n != 0 {
		t.Errorf("master rewrote %d rows master-init made", n)
	}
}

func TestNBCtlShowReadsLikeOVNKubernetes(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("worker1", nil)
	c.kube.EnsureNamespace(t, "demo")
	c.createPod("demo", "web", "worker1")
	c.podNetwork("demo", "web")
	c.waitPort("worker1", "demo_web", nil)
	show, err := c.ovn.NBCtl("show")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ovn-nbctl show:\n%s", show)
	// Sections in the order ovn-nbctl prints them, each with its ports.
	order := []string{"switch", "(worker1)", "port", "router", "(ovn_cluster_router)"}
	pos := 0
	for _, w := range order {
		i := strings.Index(show[pos:], w)
		if i < 0 {
			t.Fatalf("expected %q after offset %d in:\n%s", w, pos, show)
		}
		pos += i
	}
	for _, want := range []string{"port demo_web", "port k8s-worker1", "port stor-worker1", "port rtos-worker1", "(join)", "port jtor-ovn_cluster_router", "port rtoj-ovn_cluster_router"} {
		if !strings.Contains(show, want) {
			t.Errorf("show lacks %q", want)
		}
	}
}

func TestMasterRepairsRowsDeletedByHand(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	c.kube.EnsureNamespace(t, "ns")
	c.createPod("ns", "p", "n1")
	c.waitPort("n1", "ns_p", nil)
	for _, args := range [][]string{{"lsp-del", "ns_p"}, {"ls-del", "join"}, {"lrp-del", "rtos-n1"}} {
		if _, err := c.ovn.NBCtl(args...); err != nil {
			t.Fatal(err)
		}
	}
	c.waitPort("n1", "ns_p", nil)
	c.waitPort("join", "jtor-ovn_cluster_router", nil)
	harness.Eventually(t, 10*time.Second, "rtos-n1 back on the cluster router", func() error {
		lrp, r := c.lrp("rtos-n1"), c.routerNamed("ovn_cluster_router")
		if lrp == nil || r == nil || !contains(r.Ports, lrp.UUID) {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	if _, err := c.ovn.NBCtl("ls-del", "n1"); err != nil {
		t.Fatal(err)
	}
	c.waitPort("n1", "k8s-n1", nil)
	c.waitPort("n1", "ns_p", nil)
}
