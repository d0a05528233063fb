package integration

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/util/retry"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// gatewayNode creates a Ready node with a shared gateway on 172.18.0.0/24
// (its address ip), as its node daemon would have annotated it, and lets
// the master build GR_<name>.
func (c *cluster) gatewayNode(name, ip string, lbls map[string]string) {
	c.t.Helper()
	c.createGatewayNode(name, ip, lbls)
	c.waitGatewayRouter(name)
}

// createGatewayNode is gatewayNode without waiting for the master.
func (c *cluster) createGatewayNode(name, ip string, lbls map[string]string) {
	c.t.Helper()
	gw := fmt.Sprintf(`{"default":{"mode":"shared","interface-id":"breth0_%s_localnet","mac-address":"0a:00:00:00:00:%s","ip-addresses":["%s/24"],"next-hops":["172.18.0.1"],"node-port-enable":"true"}}`,
		name, ip[len(ip)-2:], ip)
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls,
		Annotations: map[string]string{annotations.NodeChassisID: "chassis-" + name, annotations.NodeL3GatewayConfig: gw}}}
	if _, err := c.kube.Client.CoreV1().Nodes().Create(c.ctx(), node, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.setNodeStatus(name, ip, true)
}

// setNodeStatus sets a node's address and Ready condition, as its kubelet
// would.
func (c *cluster) setNodeStatus(name, ip string, ready bool) {
	c.t.Helper()
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}}
		_, err = c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

// labelNode sets a node's labels.
func (c *cluster) labelNode(name string, lbls map[string]string) {
	c.t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Labels = lbls
		_, err = c.kube.Client.CoreV1().Nodes().Update(c.ctx(), node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) waitGatewayRouter(node string) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, "GR_"+node, func() error {
		if c.routerNamed("GR_"+node) == nil {
			return fmt.Errorf("no GR_%s", node)
		}
		return nil
	})
}

func (c *cluster) createEIP(name string, ips []string, ns, pods map[string]string) {
	c.t.Helper()
	e := &k8sovnv1.EgressIP{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressIP"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: k8sovnv1.EgressIPSpec{EgressIPs: ips, NamespaceSelector: metav1.LabelSelector{MatchLabels: ns},
			PodSelector: metav1.LabelSelector{MatchLabels: pods}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		c.t.Fatal(err)
	}
	if _, err := dynamicFor(c.t, c.kube.Config).Resource(k8sovnv1.EgressIPResource).Create(c.ctx(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// eipStatus waits for an EgressIP's status to list exactly these
// "ip@node" assignments, and returns the object.
func (c *cluster) eipStatus(name string, want ...string) *unstructured.Unstructured {
	c.t.Helper()
	var out *unstructured.Unstructured
	slices.Sort(want)
	harness.Eventually(c.t, 30*time.Second, "EgressIP "+name+" assigned "+strings.Join(want, ","), func() error {
		o, err := dynamicFor(c.t, c.kube.Config).Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
		var got []string
		for _, it := range items {
			m, _ := it.(map[string]any)
			got = append(got, fmt.Sprintf("%v@%v", m["egressIP"], m["node"]))
		}
		slices.Sort(got)
		if !slices.Equal(got, want) {
			return fmt.Errorf("status items %v", got)
		}
		out = o
		return nil
	})
	return out
}

// egressVia waits until a pod's new connection to dst leaves through the
// gateway router of node with source snat (ovn-trace on the real SB).
func (tr *tracer) egressVia(what string, from tracePod, dst, node, snat string) {
	tr.t.Helper()
	tr.leavesVia(what, flow{from: from, dstIP: dst, dport: 80, ct: "new"}, node, snat)
}

// leavesVia checks that f leaves the cluster through node's gateway router,
// SNATed to snat unless that is empty.
func (tr *tracer) leavesVia(what string, f flow, node, snat string) {
	tr.t.Helper()
	from := f.from
	harness.Eventually(tr.t, 30*time.Second, what, func() error {
		_, out := tr.trace(f)
		if !strings.Contains(out, `output to "etor-GR_`+node+`"`) && !strings.Contains(out, `outport == "rtoe-GR_`+node+`"`) && !strings.Contains(out, `ingress(dp="ext_`+node+`"`) {
			return fmt.Errorf("does not leave through GR_%s:\n%s", node, out)
		}
		switch {
		case snat == "":
		case strings.Contains(out, "lr_out_snat"): // the stack's ovn-trace follows the gateway router's SNAT
			if !strings.Contains(out, "ct_snat("+snat+")") {
				return fmt.Errorf("not SNATed to %s:\n%s", snat, out)
			}
		case !tr.c.snatsTo("GR_"+node, from.ip, snat): // OVN 23.03's does not: read the rule it would apply
			return fmt.Errorf("GR_%s has no SNAT of %s to %s", node, from.ip, snat)
		}
		return nil
	})
}

// snatsTo says whether a gateway router has an SNAT rule giving ip the
// address snat (the most specific rule covering ip).
func (c *cluster) snatsTo(router, ip, snat string) bool {
	r := c.routerNamed(router)
	if r == nil {
		return false
	}
	addr := netip.MustParseAddr(ip)
	best, bestBits := "", -1
	for _, uuid := range r.Nat {
		nat := &nbdb.NAT{UUID: uuid}
		if c.nb.Get(c.ctx(), nat) != nil || nat.Type != nbdb.NATTypeSNAT {
			continue
		}
		p, err := netip.ParsePrefix(nat.LogicalIP)
		if err != nil {
			if a, err2 := netip.ParseAddr(nat.LogicalIP); err2 == nil {
				p = netip.PrefixFrom(a, a.BitLen())
			}
		}
		if p.IsValid() && p.Contains(addr) && p.Bits() > bestBits {
			best, bestBits = nat.ExternalIP, p.Bits()
		}
	}
	return best == snat
}

// TestOVNTraceEgressIP checks in the real SB what an EgressIP does: a
// selected pod's traffic out of the cluster is rerouted to the egress
// node's gateway router and leaves with the egress IP, from either node;
// an unselected pod leaves through its own node with its node's address;
// traffic to pods stays inside; the IP moves when its node is no longer
// Ready; a conflicting or unplaceable IP is reported; an idle restart
// writes nothing; a deleted EgressIP restores node SNAT.
func TestOVNTraceEgressIP(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	c.startMaster()
	assignable := map[string]string{k8sovnv1.EgressAssignableLabel: ""}
	c.gatewayNode("n1", "172.18.0.11", nil)
	c.gatewayNode("n2", "172.18.0.12", assignable)
	c.namespace("prod", map[string]string{"env": "prod"})
	c.createPod("prod", "web", "n1", withLabels("app", "web"))
	c.createPod("prod", "web2", "n2", withLabels("app", "web"))
	c.createPod("prod", "other", "n1", withLabels("app", "other"))
	pods := c.tracePods([3]string{"prod", "web", "n1"}, [3]string{"prod", "web2", "n2"}, [3]string{"prod", "other", "n1"})
	tr := newTracer(c, pods)
	tr.egressVia("before: web leaves through its own node", pods["web"], "198.51.100.7", "n1", "172.18.0.11")

	c.createEIP("eip1", []string{"172.18.0.100"}, map[string]string{"env": "prod"}, map[string]string{"app": "web"})
	c.eipStatus("eip1", "172.18.0.100@n2")
	tr.egressVia("web (n1) leaves through n2 as the egress IP", pods["web"], "198.51.100.7", "n2", "172.18.0.100")
	tr.egressVia("web2 (n2) leaves through n2 as the egress IP", pods["web2"], "198.51.100.7", "n2", "172.18.0.100")
	// A reply to a connection made to web (a NodePort with
	// externalTrafficPolicy Local on n1) goes back through n1's gateway
	// router, where the request came in, not to the egress node. (OVN
	// 23.03's QoS rules cannot set the mark that tells replies apart.)
	if ovndb.HasQoSMark(c.nb) {
		tr.leavesVia("web's reply to a client leaves through its own node", flow{from: pods["web"], dstIP: "198.51.100.7", dport: 80, ct: "est,rpl"}, "n1", "")
	}
	tr.egressVia("other (unselected) leaves through its own node", pods["other"], "198.51.100.7", "n1", "172.18.0.11")
	tr.expect("pod to pod stays inside: web → other", tr.to("web", "other", 8080), true)

	// Problems: the same IP in a younger EgressIP, and an IP no node's network holds.
	c.createEIP("eip2", []string{"172.18.0.100", "192.0.2.50"}, map[string]string{"env": "none"}, nil)
	harness.Eventually(t, 20*time.Second, "a Warning Event on eip2", func() error { return c.warningEvent("", "eip2", "EgressIPNotAssigned") })
	c.eipStatus("eip2")

	// Its node is no longer Ready: the IP moves to the other assignable node.
	c.labelNode("n1", assignable)
	c.setNodeStatus("n2", "172.18.0.12", false)
	c.eipStatus("eip1", "172.18.0.100@n1")
	tr.egressVia("after the move: web2 (n2) leaves through n1 as the egress IP", pods["web2"], "198.51.100.7", "n1", "172.18.0.100")
	c.setNodeStatus("n2", "172.18.0.12", true)

	// An idle restart writes nothing (and n2 Ready again does not move it back).
	before := c.eipStatus("eip1", "172.18.0.100@n1")
	c.idleRestartWritesNothing()
	if after := c.eipStatus("eip1", "172.18.0.100@n1"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("an idle restart rewrote the EgressIP's status (resourceVersion %s → %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}

	// Deleted: node SNAT again, and no row of it left.
	if err := dynamicFor(t, c.kube.Config).Resource(k8sovnv1.EgressIPResource).Delete(c.ctx(), "eip1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.egressVia("deleted: web leaves through its own node", pods["web"], "198.51.100.7", "n1", "172.18.0.11")
	harness.Eventually(t, 20*time.Second, "eip1's rows gone", func() error {
		for _, gr := range []string{"GR_n1", "GR_n2"} {
			if show, _ := c.ovn.NBCtl("lr-nat-list", gr); strings.Contains(show, "172.18.0.100") {
				return fmt.Errorf("%s still SNATs to the egress IP:\n%s", gr, show)
			}
		}
		if show, _ := c.ovn.NBCtl("lr-policy-list", "ovn_cluster_router"); strings.Contains(show, "eip.eip1") {
			return fmt.Errorf("the reroute is still there:\n%s", show)
		}
		return nil
	})
}

// eipNATs lists, per gateway router, the egress IPs its SNATs give.
func (c *cluster) eipNATs(routers ...string) map[string][]string {
	out := map[string][]string{}
	for _, gr := range routers {
		r := c.routerNamed(gr)
		if r == nil {
			continue
		}
		for _, uuid := range r.Nat {
			nat := &nbdb.NAT{UUID: uuid}
			if c.nb.Get(c.ctx(), nat) == nil && nat.ExternalIDs[topology.OwnerTypeKey] == "EgressIP" {
				out[gr] = append(out[gr], nat.LogicalIP+">"+nat.ExternalIP)
			}
		}
		slices.Sort(out[gr])
	}
	return out
}

// TestEgressIPFaults: an EgressIP's rows come back after the NB is replaced
// by an empty one; a master killed and restarted keeps every assignment
// where its status put it (no IP moves, none is doubled); one deleted while
// the master is down leaves no row behind.
func TestEgressIPFaults(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	c.startMaster()
	assignable := map[string]string{k8sovnv1.EgressAssignableLabel: ""}
	c.gatewayNode("n1", "172.18.0.11", assignable)
	c.gatewayNode("n2", "172.18.0.12", assignable)
	c.namespace("prod", map[string]string{"env": "prod"})
	c.createPod("prod", "web", "n1", withLabels("app", "web"))
	ip := c.podNetwork("prod", "web").IPs[0].Addr().String()
	c.createEIP("eip1", []string{"172.18.0.100", "172.18.0.101"}, map[string]string{"env": "prod"}, nil)
	st := c.eipStatus("eip1", "172.18.0.100@n1", "172.18.0.101@n2")
	want := map[string][]string{"GR_n1": {ip + ">172.18.0.100"}, "GR_n2": {ip + ">172.18.0.101"}}
	waitNATs := func(what string, want map[string][]string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, what, func() error {
			if got := c.eipNATs("GR_n1", "GR_n2"); fmt.Sprint(got) != fmt.Sprint(want) {
				return fmt.Errorf("egress SNATs %v, want %v", got, want)
			}
			return nil
		})
	}
	waitNATs("programmed", want)

	c.ovn.ResetNB() // an empty database (a restore, a new central)
	waitNATs("rows back after the NB was replaced", want)

	// Killed and restarted: the assignment stays where the status put it.
	c.waitSynced()
	c.master.Kill()
	c.startMaster(c.masterArgs...)
	c.waitSynced()
	waitNATs("the same after a restart", want)
	if after := c.eipStatus("eip1", "172.18.0.100@n1", "172.18.0.101@n2"); after.GetResourceVersion() != st.GetResourceVersion() {
		t.Errorf("a restart rewrote the status (resourceVersion %s → %s)", st.GetResourceVersion(), after.GetResourceVersion())
	}

	// Deleted while the master is down: stale at the next start.
	c.master.Stop()
	if err := dynamicFor(t, c.kube.Config).Resource(k8sovnv1.EgressIPResource).Delete(c.ctx(), "eip1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.startMaster(c.masterArgs...)
	waitNATs("stale rows removed at start", map[string][]string{})
	harness.Eventually(t, 20*time.Second, "the reroute and the pods' set gone", func() error {
		if show, _ := c.ovn.NBCtl("lr-policy-list", "ovn_cluster_router"); strings.Contains(show, "eip.eip1") {
			return fmt.Errorf("the reroute is still there:\n%s", show)
		}
		if out, _ := c.ovn.NBCtl("--bare", "--columns=name", "find", "Address_Set", "name=eip.eip1"); strings.TrimSpace(out) != "" {
			return fmt.Errorf("address set eip.eip1 still there")
		}
		return nil
	})
}
