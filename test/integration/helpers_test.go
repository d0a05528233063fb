package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// cluster is one test's control plane: OVN central, the API server and a master.
type cluster struct {
	t      *testing.T
	ovn    *harness.OVNCentral
	kube   *harness.KubeAPI
	nb     *harness.NBWatcher
	logDir string
	master *harness.Process
	starts int
	// masterArgs are the flags of the master's last start.
	masterArgs []string
}

func newCluster(t *testing.T) *cluster {
	c := &cluster{t: t, ovn: harness.StartOVNCentral(t), kube: harness.StartKubeAPI(t), logDir: t.TempDir()}
	c.nb = harness.WatchNB(t, c.ovn, nbdb.LogicalSwitchTable, nbdb.LogicalSwitchPortTable, nbdb.LogicalRouterTable, nbdb.LogicalRouterPortTable)
	t.Cleanup(func() {
		if t.Failed() && c.master != nil {
			t.Logf("master log tail:\n%s", c.master.Tail(40))
		}
	})
	t.Cleanup(c.checkReferences)
	return c
}

// checkReferences is the invariant every test ends on: no ACL names an
// address set or port group that does not exist (OVN would ignore it).
func (c *cluster) checkReferences() {
	if c.t.Failed() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	nb, err := ovndb.ConnectNBFull(ctx, c.ovn.NBEndpoints(), logr.Discard()) // a fresh cache of the NB as it is now
	if err != nil {
		c.t.Logf("the NB is not reachable at the end of the test (%v); its ACLs are not checked", err)
		return
	}
	defer nb.Close()
	harness.Eventually(c.t, 10*time.Second, "every ACL's sets and groups exist", func() error {
		if d := ovndbtest.DanglingReferences(nb); len(d) > 0 {
			return fmt.Errorf("%s", strings.Join(d, "; "))
		}
		return nil
	})
}

func (c *cluster) startMaster(extra ...string) {
	c.starts++
	c.masterArgs = extra
	c.master = harness.StartMaster(c.t, c.logDir, fmt.Sprintf("master-%d", c.starts), c.ovn, c.kube, extra...)
}

func (c *cluster) waitSynced() {
	harness.WaitForLog(c.t, c.master, "initial sync done", 60*time.Second)
}

func (c *cluster) ctx() context.Context { return context.Background() }

func (c *cluster) createNode(name string, ann map[string]string) {
	c.t.Helper()
	_, err := c.kube.Client.CoreV1().Nodes().Create(c.ctx(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) deleteNode(name string) {
	c.t.Helper()
	if err := c.kube.Client.CoreV1().Nodes().Delete(c.ctx(), name, metav1.DeleteOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// podSpec is a pod scheduled on node.
func podSpec(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
			AutomountServiceAccountToken: new(bool)},
	}
}

func (c *cluster) createPod(ns, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	c.t.Helper()
	pod := podSpec(ns, name, node)
	for _, f := range mutate {
		f(pod)
	}
	out, err := c.kube.Client.CoreV1().Pods(ns).Create(c.ctx(), pod, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

func (c *cluster) deletePod(ns, name string) {
	c.t.Helper()
	zero := int64(0)
	if err := c.kube.Client.CoreV1().Pods(ns).Delete(c.ctx(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		c.t.Fatal(err)
	}
}

// nodeSubnet waits for the node's subnet annotation and returns it.
func (c *cluster) nodeSubnet(name string) netip.Prefix {
	c.t.Helper()
	var subnet netip.Prefix
	harness.Eventually(c.t, 30*time.Second, "subnet annotation on node "+name, func() error {
		node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		subnets, err := annotations.ParseNodeSubnets(node.Annotations[annotations.NodeSubnets])
		if err != nil {
			return err
		}
		subnet = subnets[0]
		return nil
	})
	return subnet
}

// podNetwork waits for the pod's annotation and returns it.
func (c *cluster) podNetwork(ns, name string) annotations.PodNetwork {
	c.t.Helper()
	var pn annotations.PodNetwork
	harness.Eventually(c.t, 30*time.Second, "pod-networks annotation on "+ns+"/"+name, func() error {
		pod, err := c.kube.Client.CoreV1().Pods(ns).Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pn, err = annotations.ParsePodNetworks(pod.Annotations[annotations.PodNetworks])
		return err
	})
	return pn
}

func (c *cluster) lsp(name string) *nbdb.LogicalSwitchPort {
	lsp := &nbdb.LogicalSwitchPort{Name: name}
	if err := c.nb.Get(c.ctx(), lsp); err != nil {
		return nil
	}
	return lsp
}

func (c *cluster) switchNamed(name string) *nbdb.LogicalSwitch {
	var found []nbdb.LogicalSwitch
	_ = c.nb.WhereCache(func(ls *nbdb.LogicalSwitch) bool { return ls.Name == name }).List(c.ctx(), &found)
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}

func (c *cluster) routerNamed(name string) *nbdb.LogicalRouter {
	var found []nbdb.LogicalRouter
	_ = c.nb.WhereCache(func(lr *nbdb.LogicalRouter) bool { return lr.Name == name }).List(c.ctx(), &found)
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}

func (c *cluster) lrp(name string) *nbdb.LogicalRouterPort {
	lrp := &nbdb.LogicalRouterPort{Name: name}
	if err := c.nb.Get(c.ctx(), lrp); err != nil {
		return nil
	}
	return lrp
}

// waitPort waits until the LSP exists on the switch and passes check.
func (c *cluster) waitPort(sw, name string, check func(*nbdb.LogicalSwitchPort) error) *nbdb.LogicalSwitchPort {
	c.t.Helper()
	var lsp *nbdb.LogicalSwitchPort
	harness.Eventually(c.t, 30*time.Second, "LSP "+name+" on switch "+sw, func() error {
		lsp = c.lsp(name)
		if lsp == nil {
			return fmt.Errorf("no LSP %s", name)
		}
		ls := c.switchNamed(sw)
		if ls == nil || !contains(ls.Ports, lsp.UUID) {
			return fmt.Errorf("LSP %s not on switch %s", name, sw)
		}
		if check != nil {
			return check(lsp)
		}
		return nil
	})
	return lsp
}

// warningEvent is nil once the API holds a Warning Event with reason about
// object name in namespace ns ("default" for cluster-scoped objects).
func (c *cluster) warningEvent(ns, name, reason string) error {
	evs, err := c.kube.Client.CoreV1().Events(ns).List(c.ctx(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		return err
	}
	var seen []string
	for _, e := range evs.Items {
		if e.Reason == reason && e.Type == corev1.EventTypeWarning {
			return nil
		}
		seen = append(seen, e.Type+" "+e.Reason)
	}
	return fmt.Errorf("no Warning %s event about %s/%s; events seen: %v", reason, ns, name, seen)
}

func (c *cluster) waitNoPort(name string) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, "LSP "+name+" removed", func() error {
		if c.lsp(name) != nil {
			return fmt.Errorf("LSP %s still exists", name)
		}
		return nil
	})
}

// idleWrites restarts nothing; it measures NB row changes over a quiet period.
func (c *cluster) changesDuring(f func()) int64 {
	time.Sleep(300 * time.Millisecond)
	before := c.nb.Changes()
	f()
	time.Sleep(500 * time.Millisecond)
	return c.nb.Changes() - before
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// externalNIC gives node n a "physical" NIC eth1 wired to an external router
// namespace answering on 172.18.0.1/24; each of ipArgs then runs as
// `ip -n <node ns> ARGS...` (addresses, routes).
func externalNIC(t *testing.T, n *harness.Node, ipArgs ...[]string) harness.NetNS {
	t.Helper()
	ext := harness.NewNetNS(t, "ext")
	cmds := [][]string{
		{"ip", "link", "add", "eth1", "netns", n.NS.Name, "type", "veth", "peer", "name", "up0", "netns", ext.Name},
		{"ip", "-n", ext.Name, "addr", "add", "172.18.0.1/24", "dev", "up0"},
		{"ip", "-n", ext.Name, "link", "set", "up0", "up"},
		{"ip", "-n", n.NS.Name, "link", "set", "eth1", "up"},
	}
	for _, a := range ipArgs {
		cmds = append(cmds, append([]string{"ip", "-n", n.NS.Name}, a...))
	}
	for _, args := range cmds {
		if _, err := harness.Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return ext
}

// sameSet reports whether two lists hold the same strings, in any order.
func sameSet(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}
