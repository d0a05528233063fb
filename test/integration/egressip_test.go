package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
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
	c.createGatewayNodeAddrs(name, []string{ip}, lbls)
}

// dualStackGatewayNode is gatewayNode with an IPv6 address ip6 too, on
// fc00:f853::/64 (next hop fc00:f853::1), as the node daemon of a
// dual-stack node annotates it.
func (c *cluster) dualStackGatewayNode(name, ip, ip6 string, lbls map[string]string) {
	c.t.Helper()
	c.createGatewayNodeAddrs(name, []string{ip, ip6}, lbls)
	c.waitGatewayRouter(name)
}

// createGatewayNodeAddrs creates a Ready gateway node with these addresses
// (the first IPv4, on 172.18.0.0/24; an IPv6 one on fc00:f853::/64).
func (c *cluster) createGatewayNodeAddrs(name string, ips []string, lbls map[string]string) {
	c.t.Helper()
	var nets, hops []string
	for _, ip := range ips {
		if strings.Contains(ip, ":") {
			nets, hops = append(nets, `"`+ip+`/64"`), append(hops, `"fc00:f853::1"`)
		} else {
			nets, hops = append(nets, `"`+ip+`/24"`), append(hops, `"172.18.0.1"`)
		}
	}
	ip := ips[0]
	gw := fmt.Sprintf(`{"default":{"mode":"shared","interface-id":"breth0_%s_localnet","mac-address":"0a:00:00:00:00:%s","ip-addresses":[%s],"next-hops":[%s],"node-port-enable":"true"}}`,
		name, ip[len(ip)-2:], strings.Join(nets, ","), strings.Join(hops, ","))
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls,
		Annotations: map[string]string{annotations.NodeChassisID: "chassis-" + name, annotations.NodeL3GatewayConfig: gw}}}
	if _, err := c.kube.Client.CoreV1().Nodes().Create(c.ctx(), node, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.setNodeStatusAddrs(name, ips, true)
}

// setNodeStatus sets a node's address and Ready condition, as its kubelet
// would.
func (c *cluster) setNodeStatus(name, ip string, ready bool) {
	c.t.Helper()
	c.setNodeStatusAddrs(name, []string{ip}, ready)
}

// setNodeStatusAddrs is setNodeStatus with an address of each family.
func (c *cluster) setNodeStatusAddrs(name string, ips []string, ready bool) {
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
		node.Status.Addresses = nil
		for _, ip := range ips {
			node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
		}
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
	harness.CreateEgressIP(c.t, c.kube.Config, name, ips, ns, pods)
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
	src := f.from.ip
	if strings.Contains(f.dstIP, ":") { // as trace: an IPv6 flow leaves from the pod's IPv6 address
		src = f.from.ip6
	}
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
		case !tr.c.snatsTo("GR_"+node, src, snat): // OVN 23.03's does not: read the rule it would apply
			return fmt.Errorf("GR_%s has no SNAT of %s to %s", node, src, snat)
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

// eipRows are the EgressIP rows of the NB at one moment (one ovn-nbctl
// run reads one snapshot): each SNAT as "<router holding it> <pod>><egress
// IP>" and each reroute as "<match> → <next hops>", by row UUID.
type eipRows struct {
	nats, reroutes map[string]string
}

// eipRowsNow reads the EgressIP rows with one ovn-nbctl run (its commands
// see the same snapshot of the database).
func (c *cluster) eipRowsNow() (eipRows, error) {
	owned := `external_ids:"` + topology.OwnerTypeKey + `"=EgressIP`
	cmd := exec.Command("ovn-nbctl", "--db="+c.ovn.NBAddress(), "--format=json",
		"--", "--columns=_uuid,name,nat", "list", "Logical_Router",
		"--", "--columns=_uuid,logical_ip,external_ip", "find", "NAT", owned,
		"--", "--columns=_uuid,match,nexthops", "find", "Logical_Router_Policy", owned)
	out, err := cmd.Output()
	if err != nil {
		return eipRows{}, fmt.Errorf("ovn-nbctl: %w", err)
	}
	var tables [3]struct{ Data [][]any }
	dec := json.NewDecoder(bytes.NewReader(out))
	for i := range tables {
		if err := dec.Decode(&tables[i]); err != nil {
			return eipRows{}, fmt.Errorf("ovn-nbctl output %d: %w:\n%s", i, err, out)
		}
	}
	holder := map[string][]string{}
	for _, r := range tables[0].Data {
		name, _ := r[1].(string)
		for _, nat := range ovsdbAtoms(r[2]) {
			holder[nat] = append(holder[nat], name)
		}
	}
	rows := eipRows{nats: map[string]string{}, reroutes: map[string]string{}}
	for _, r := range tables[1].Data {
		uuid := ovsdbAtoms(r[0])[0]
		routers := holder[uuid]
		slices.Sort(routers)
		rows.nats[uuid] = fmt.Sprintf("%s %v>%v", strings.Join(routers, "+"), r[1], r[2])
	}
	for _, r := range tables[2].Data {
		hops := ovsdbAtoms(r[2])
		slices.Sort(hops)
		rows.reroutes[ovsdbAtoms(r[0])[0]] = fmt.Sprintf("%v → %s", r[1], strings.Join(hops, ","))
	}
	return rows, nil
}

// ovsdbAtoms are the atoms of an OVSDB JSON value: a uuid, a set, a scalar.
func ovsdbAtoms(v any) []string {
	pair, ok := v.([]any)
	if !ok || len(pair) != 2 {
		return []string{fmt.Sprint(v)}
	}
	switch pair[0] {
	case "uuid":
		return []string{fmt.Sprint(pair[1])}
	case "set":
		var out []string
		list, _ := pair[1].([]any)
		for _, e := range list {
			out = append(out, ovsdbAtoms(e)...)
		}
		return out
	}
	return []string{fmt.Sprint(v)}
}

// descs are the rows' descriptions, sorted, without those mentioning any
// of skip.
func descs(rows map[string]string, skip ...string) []string {
	var out []string
	for _, d := range rows {
		if !slices.ContainsFunc(skip, func(s string) bool { return strings.Contains(d, s) }) {
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out
}

// doubled names what the rows give twice: an egress IP SNATed on two
// gateway routers (or on none), a reroute of an EgressIP of one address to
// more than one node.
func (r eipRows) doubled() []string {
	var out []string
	routers := map[string]map[string]bool{} // egress IP → routers
	for _, d := range r.nats {
		gr, rest, _ := strings.Cut(d, " ")
		_, ip, _ := strings.Cut(rest, ">")
		if routers[ip] == nil {
			routers[ip] = map[string]bool{}
		}
		routers[ip][gr] = true
		if gr == "" || strings.Contains(gr, "+") {
			out = append(out, "NAT "+d)
		}
	}
	for ip, grs := range routers {
		if len(grs) > 1 {
			out = append(out, fmt.Sprintf("%s SNATed on %v", ip, slices.Sorted(maps.Keys(grs))))
		}
	}
	for _, d := range r.reroutes {
		if _, hops, _ := strings.Cut(d, " → "); strings.Contains(hops, ",") {
			out = append(out, "reroute "+d)
		}
	}
	slices.Sort(out)
	return out
}

// eipStatusDoubled names the egress IPs the EgressIPs' status items give
// more than once.
func eipStatusDoubled(ctx context.Context, dyn dynamic.Interface) ([]string, error) {
	list, err := dyn.Resource(k8sovnv1.EgressIPResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	seen := map[string][]string{}
	for _, o := range list.Items {
		items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
		for _, it := range items {
			m, _ := it.(map[string]any)
			ip := fmt.Sprint(m["egressIP"])
			seen[ip] = append(seen[ip], fmt.Sprintf("%s@%v", o.GetName(), m["node"]))
		}
	}
	var out []string
	for ip, where := range seen {
		if len(where) > 1 {
			out = append(out, fmt.Sprintf("%s in %v", ip, where))
		}
	}
	slices.Sort(out)
	return out, nil
}

// doubleWatch polls the NB and the EgressIPs' status for an egress IP given
// twice, until finished.
type doubleWatch struct {
	stop, done      chan struct{}
	polls, failures int
	seen            []string
}

func (c *cluster) watchDoubles(dyn dynamic.Interface) *doubleWatch {
	w := &doubleWatch{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			rows, err := c.eipRowsNow()
			st, err2 := eipStatusDoubled(c.ctx(), dyn)
			if err != nil || err2 != nil {
				w.failures++
				continue
			}
			w.polls++
			for _, d := range append(rows.doubled(), st...) {
				if len(w.seen) < 20 {
					w.seen = append(w.seen, time.Now().Format("15:04:05.000 ")+d)
				}
			}
		}
	}()
	return w
}

func (w *doubleWatch) finish(t *testing.T) {
	t.Helper()
	close(w.stop)
	<-w.done
	t.Logf("%d snapshots of the NB and the status polled (%d failed reads)", w.polls, w.failures)
	if w.polls == 0 {
		t.Errorf("no snapshot could be read")
	}
	if len(w.seen) > 0 {
		t.Errorf("an egress IP given twice:\n%s", strings.Join(w.seen, "\n"))
	}
}

// joinIP is a node's gateway router join address (IPv4).
func (c *cluster) joinIP(node string) string {
	c.t.Helper()
	var ip string
	harness.Eventually(c.t, 30*time.Second, "node "+node+"'s join address", func() error {
		n, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		joins, err := annotations.ParseGatewayJoinIPs(n.Annotations[annotations.NodeGatewayJoinIP])
		if err != nil {
			return err
		}
		ip = joins[0].Addr().String()
		return nil
	})
	return ip
}

// Two masters with leader election over four EgressIPs on two egress nodes,
// laid out as a fresh assignment would not lay them out. The leader killed,
// the other takes over and moves nothing — each status item names the same
// node (the status not even rewritten), the EgressIP rows are the very same
// (the same UUIDs, routers, pods and addresses) — and programs an EgressIP
// created after. Then eip0's node made NotReady right before the new leader
// is killed: the replacement moves that node's addresses to the other one.
// Throughout, no egress IP is on two nodes at any moment polled: not in one
// NB snapshot (SNATs on two gateway routers, a reroute to two nodes), not
// in the status.
func TestEgressIPAcrossLeaderFailover(t *testing.T) {
	t.Parallel() // wait-bound (leases, restarts), on its own API server and databases
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	dyn := dynamicFor(t, c.kube.Config)
	masters := map[string]*harness.Process{}
	startMaster := func(id string) {
		masters[id] = harness.StartMaster(t, c.logDir, "master-"+id, c.ovn, c.kube, "--leader-elect-identity", id)
	}
	t.Cleanup(func() {
		if t.Failed() {
			for id, p := range masters {
				t.Logf("%s log tail:\n%s", id, p.Tail(30))
			}
		}
	})
	startMaster("m0")
	startMaster("m1")
	leader := func(what string, not string) string {
		t.Helper()
		var holder string
		harness.Eventually(t, 30*time.Second, what, func() error {
			if holder = c.leaseHolder(); masters[holder] == nil || holder == not {
				return fmt.Errorf("lease holder %q", holder)
			}
			return nil
		})
		return holder
	}
	holder := leader("a leader", "")

	assignable := map[string]string{k8sovnv1.EgressAssignableLabel: ""}
	nodeIPs := map[string]string{"n1": "172.18.0.11", "n2": "172.18.0.12"}
	c.gatewayNode("n1", nodeIPs["n1"], assignable)
	c.gatewayNode("n2", nodeIPs["n2"], nil) // assignable from eip2 on
	joins := map[string]string{"n1": c.joinIP("n1"), "n2": c.joinIP("n2")}
	other := map[string]string{"n1": "n2", "n2": "n1"}
	c.namespace("prod", map[string]string{"env": "prod"})
	type eip struct{ name, ip, pod, podIP, node string }
	var eips []*eip
	add := func(i int) *eip {
		e := &eip{name: fmt.Sprintf("eip%d", i), ip: fmt.Sprintf("172.18.0.%d", 100+i), pod: fmt.Sprintf("p%d", i)}
		c.createPod("prod", e.pod, []string{"n1", "n2"}[i%2], withLabels("eip", fmt.Sprint(i)))
		e.podIP = c.podNetwork("prod", e.pod).IPs[0].Addr().String()
		c.createEIP(e.name, []string{e.ip}, map[string]string{"env": "prod"}, map[string]string{"eip": fmt.Sprint(i)})
		eips = append(eips, e)
		return e
	}
	// assigned waits for each EgressIP's single status item and records its node.
	assigned := func(es ...*eip) {
		t.Helper()
		for _, e := range es {
			harness.Eventually(t, 30*time.Second, e.name+" assigned", func() error {
				o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), e.name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
				if len(items) != 1 {
					return fmt.Errorf("status items %v", items)
				}
				m, _ := items[0].(map[string]any)
				if m["egressIP"] != e.ip || (m["node"] != "n1" && m["node"] != "n2") {
					return fmt.Errorf("status items %v", items)
				}
				e.node = m["node"].(string)
				return nil
			})
		}
	}
	// programmed waits until the NB holds exactly the rows of the EgressIPs
	// on the nodes their status gives.
	programmed := func(what string) eipRows {
		t.Helper()
		var want, wantReroutes []string
		for _, e := range eips {
			want = append(want, fmt.Sprintf("GR_%s %s>%s", e.node, e.podIP, e.ip))
			wantReroutes = append(wantReroutes, fmt.Sprintf("ip4.src == $%s → %s", "eip."+e.name, joins[e.node]))
		}
		slices.Sort(want)
		slices.Sort(wantReroutes)
		var rows eipRows
		harness.Eventually(t, 30*time.Second, what, func() (err error) {
			if rows, err = c.eipRowsNow(); err != nil {
				return err
			}
			if got := descs(rows.nats); !slices.Equal(got, want) {
				return fmt.Errorf("SNATs %q, want %q", got, want)
			}
			if got := descs(rows.reroutes); !slices.Equal(got, wantReroutes) {
				return fmt.Errorf("reroutes %q, want %q", got, wantReroutes)
			}
			return nil
		})
		return rows
	}
	statusVersions := func() map[string]string {
		out := map[string]string{}
		for _, e := range eips {
			o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), e.name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
			out[e.name] = fmt.Sprintf("%v rv=%s", items, o.GetResourceVersion())
		}
		return out
	}
	// eip0 and eip1 on n1 (the only assignable node then), eip2 and eip3
	// on n2: not the layout a master forgetting the status would compute
	// from scratch (eip0 and eip2 on n1, eip1 and eip3 on n2), which would
	// move two of them.
	assigned(add(0), add(1))
	c.labelNode("n2", assignable)
	assigned(add(2), add(3))
	before := programmed("4 EgressIPs programmed by " + holder)
	nodesBefore := map[string]string{}
	for _, e := range eips {
		nodesBefore[e.name] = e.node
	}
	if want := map[string]string{"eip0": "n1", "eip1": "n1", "eip2": "n2", "eip3": "n2"}; !maps.Equal(nodesBefore, want) {
		t.Fatalf("assigned %v, want %v", nodesBefore, want)
	}
	statusBefore := statusVersions()
	watch := c.watchDoubles(dyn)
	defer watch.finish(t) // also when the test fails before its end

	// The leader killed: the other takes over and moves nothing.
	killedAt := time.Now()
	masters[holder].Kill()
	old := holder
	holder = leader("the standby holding the lease after "+old+" was killed", old)
	harness.WaitForLog(t, masters[holder], "initial sync done", 60*time.Second)
	t.Logf("%s killed; %s held the lease and synced %s after", old, holder, time.Since(killedAt).Round(100*time.Millisecond))
	assigned(eips...)
	for _, e := range eips {
		if e.node != nodesBefore[e.name] {
			t.Errorf("%s moved from %s to %s across the failover", e.name, nodesBefore[e.name], e.node)
		}
	}
	compare := func(what string, after eipRows) {
		t.Helper()
		for _, kind := range []struct {
			name          string
			before, after map[string]string
		}{{"SNATs", before.nats, after.nats}, {"reroutes", before.reroutes, after.reroutes}} {
			if b, a := descs(kind.before), descs(kind.after, "172.18.0.104", "eip.eip4"); !slices.Equal(b, a) {
				t.Errorf("%s: %s %q, before the failover %q", what, kind.name, a, b)
			}
			for uuid, d := range kind.before {
				if kind.after[uuid] != d {
					t.Errorf("%s: %s row %s (%s) is now %q: rewritten", what, kind.name, uuid, d, kind.after[uuid])
				}
			}
		}
	}
	after, err := c.eipRowsNow()
	if err != nil {
		t.Fatal(err)
	}
	compare("once "+holder+" synced", after)
	if got := statusVersions(); fmt.Sprint(got) != fmt.Sprint(statusBefore) {
		t.Errorf("the status changed across the failover:\n%v\nbefore:\n%v", got, statusBefore)
	}

	// The new leader programs a new EgressIP.
	assigned(add(4))
	compare("with eip4 programmed", programmed("eip4 programmed by "+holder))

	// A replacement standby; the leader killed right after eip0's node
	// went NotReady: its addresses end on the other node, once.
	startMaster("m2")
	gone := eips[0].node
	c.setNodeStatus(gone, nodeIPs[gone], false)
	killedAt = time.Now()
	masters[holder].Kill()
	old = holder
	holder = leader("m2 holding the lease after "+old+" was killed", old)
	var moved []string
	for _, e := range eips {
		if e.node == gone {
			e.node = other[gone]
			moved = append(moved, e.name)
		}
	}
	for _, e := range eips {
		c.eipStatus(e.name, e.ip+"@"+e.node)
	}
	programmed(fmt.Sprintf("%v moved from %s to %s by %s", moved, gone, other[gone], holder))
	t.Logf("%s killed right after %s went NotReady; %s moved %v to %s %s after the kill",
		old, gone, holder, moved, other[gone], time.Since(killedAt).Round(100*time.Millisecond))
}

// TestOVNTraceEgressIPDualStack checks in the real SB an EgressIP with an
// IPv4 and an IPv6 egress IP on a dual-stack cluster (the two on different
// nodes: an EgressIP never puts two of its addresses on one node): a
// selected pod's IPv6 traffic out of the cluster leaves through the node
// holding the IPv6 egress IP, SNATed to it, and its IPv4 traffic through the
// IPv4 egress IP's node, from either node; an unselected pod's IPv6 traffic
// leaves through its own node with its node's IPv6 address; pod to pod over
// IPv6 stays inside; a reply over IPv6 to a connection made to a selected
// pod leaves through its own node.
func TestOVNTraceEgressIPDualStack(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	c.startMaster("--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64")
	assignable := map[string]string{k8sovnv1.EgressAssignableLabel: ""}
	c.dualStackGatewayNode("n1", "172.18.0.11", "fc00:f853::11", assignable)
	c.dualStackGatewayNode("n2", "172.18.0.12", "fc00:f853::12", assignable)
	nodeIP := map[string][2]string{"n1": {"172.18.0.11", "fc00:f853::11"}, "n2": {"172.18.0.12", "fc00:f853::12"}}
	c.namespace("prod", map[string]string{"env": "prod"})
	c.createPod("prod", "web", "n1", withLabels("app", "web"))
	c.createPod("prod", "web2", "n2", withLabels("app", "web"))
	c.createPod("prod", "other", "n1", withLabels("app", "other"))
	pods := c.tracePods([3]string{"prod", "web", "n1"}, [3]string{"prod", "web2", "n2"}, [3]string{"prod", "other", "n1"})
	for name, p := range pods {
		if p.ip6 == "" {
			t.Fatalf("pod %s has no IPv6 address: %+v", name, p)
		}
	}
	tr := newTracer(c, pods)
	const dst4, dst6 = "198.51.100.7", "2001:db8:51::7"
	tr.egressVia("before: web leaves over IPv6 through its own node", pods["web"], dst6, "n1", "fc00:f853::11")

	const eip4, eip6 = "172.18.0.100", "fc00:f853::100"
	c.createEIP("eip1", []string{eip4, eip6}, map[string]string{"env": "prod"}, map[string]string{"app": "web"})
	// Which node holds which: not one node both.
	var node4, node6 string
	dyn := dynamicFor(t, c.kube.Config)
	harness.Eventually(t, 30*time.Second, "eip1's two addresses assigned", func() error {
		o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), "eip1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
		node4, node6 = "", ""
		for _, it := range items {
			m, _ := it.(map[string]any)
			switch m["egressIP"] {
			case eip4:
				node4, _ = m["node"].(string)
			case eip6:
				node6, _ = m["node"].(string)
			}
		}
		if len(items) != 2 || node4 == "" || node6 == "" {
			return fmt.Errorf("status items %v", items)
		}
		return nil
	})
	if node4 == node6 {
		t.Fatalf("both egress IPs on %s", node4)
	}
	t.Logf("%s on %s, %s on %s", eip4, node4, eip6, node6)
	for _, name := range []string{"web", "web2"} {
		p := pods[name]
		tr.egressVia(fmt.Sprintf("%s (%s) over IPv6 leaves through %s as %s", name, p.node, node6, eip6), p, dst6, node6, eip6)
		tr.egressVia(fmt.Sprintf("%s (%s) over IPv4 leaves through %s as %s", name, p.node, node4, eip4), p, dst4, node4, eip4)
	}
	tr.egressVia("other (unselected) over IPv6 leaves through its own node", pods["other"], dst6, "n1", nodeIP["n1"][1])
	tr.egressVia("other (unselected) over IPv4 leaves through its own node", pods["other"], dst4, "n1", nodeIP["n1"][0])
	tr.expect("pod to pod over IPv6 stays inside: web → other", tr.to6("web", "other", 8080), true)
	// A reply to a connection made to a selected pod from outside goes back
	// through its own node's gateway router (OVN 23.03's QoS rules cannot
	// set the mark that tells replies apart). The pod on the node that does
	// not hold the IPv6 egress IP is the one a reroute would take elsewhere.
	if ovndb.HasQoSMark(c.nb) {
		for _, name := range []string{"web", "web2"} {
			if p := pods[name]; p.node != node6 {
				tr.leavesVia(name+"'s IPv6 reply to a client leaves through its own node", flow{from: p, dstIP: dst6, dport: 80, ct: "est,rpl"}, p.node, "")
			}
		}
	}
}
