package master

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// withEgressIPs makes the master follow EgressIPs from a fake dynamic
// client, which it returns.
func (e *env) withEgressIPs() *dynamicfake.FakeDynamicClient {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{k8sovnv1.EgressIPResource: "EgressIPList"})
	e.apis.EgressIP = &egressip.API{Dynamic: dyn, Informer: k8sovnv1.NewEgressIPInformer(dyn, 0)}
	return dyn
}

// egressNode is a node with a gateway, Ready and labelled egress-assignable.
func (e *env) egressNode(name, ip string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{k8sovnv1.EgressAssignableLabel: ""}},
		Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if _, err := e.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.annotateGateway(name, ip, "")
}

func egressIPObject(name string, ips ...string) *unstructured.Unstructured {
	return egressIPSelecting(name, map[string]string{"env": "prod"}, ips...)
}

// egressIPSelecting is an EgressIP of the pods of the namespaces labelled ns.
func egressIPSelecting(name string, ns map[string]string, ips ...string) *unstructured.Unstructured {
	labels := map[string]any{}
	for k, v := range ns {
		labels[k] = v
	}
	var list []any
	for _, ip := range ips {
		list = append(list, ip)
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "EgressIP",
		"metadata": map[string]any{"name": name, "creationTimestamp": time.Now().UTC().Format(time.RFC3339)},
		"spec":     map[string]any{"egressIPs": list, "namespaceSelector": map[string]any{"matchLabels": labels}}}}
}

// egressRows counts the rows of one EgressIP in the NB: SNATs, reroutes.
func (e *env) egressRows(name string) (nats, reroutes int) {
	owned := func(ids map[string]string) bool {
		o, ok := topology.OwnerOf(ids)
		return ok && o.Type == egressip.OwnerEgressIP && o.Name == name
	}
	var ns []nbdb.NAT
	_ = e.nb.WhereCache(func(n *nbdb.NAT) bool { return owned(n.ExternalIDs) }).List(context.Background(), &ns)
	var ps []nbdb.LogicalRouterPolicy
	_ = e.nb.WhereCache(func(p *nbdb.LogicalRouterPolicy) bool { return owned(p.ExternalIDs) }).List(context.Background(), &ps)
	return len(ns), len(ps)
}

// An EgressIP's transaction committed while its reply is lost is not sent
// again from the stale cache: the retry finds the rows, one of each.
func TestEgressIPAfterLostReply(t *testing.T) {
	e := newEnv(t)
	dyn := e.withEgressIPs()
	e.egressNode("n1", "172.18.0.2")
	e.createNamespace("prod", map[string]string{"env": "prod"})
	e.createPod("prod", "a", "n1")
	e.createPod("prod", "b", "n1")
	e.start()
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.2]")
	e.podNetwork("prod", "a")
	e.podNetwork("prod", "b")
	harness.Eventually(t, 10*time.Second, "the master idle", func() error {
		if !e.m.nodeQueue.Idle() || !e.m.podQueue.Idle() || !e.m.eips.Idle() {
			return fmt.Errorf("busy")
		}
		return nil
	})
	lost := e.proxy.LoseNextReply()
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).Create(context.Background(), egressIPObject("eip1", "172.18.0.100"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	harness.Eventually(t, 10*time.Second, "one SNAT per pod and one reroute", func() error {
		if nats, reroutes := e.egressRows("eip1"); nats != 2 || reroutes != 1 {
			return fmt.Errorf("%d SNATs, %d reroutes", nats, reroutes)
		}
		o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(context.Background(), "eip1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if items, _, _ := unstructured.NestedSlice(o.Object, "status", "items"); len(items) != 1 {
			return fmt.Errorf("status items %v", items)
		}
		return nil
	})
}

// grEgressNATs counts the EgressIP NATs a gateway router holds.
func (e *env) grEgressNATs(node string) int {
	var grs []nbdb.LogicalRouter
	_ = e.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == topology.GatewayRouter(node) }).List(context.Background(), &grs)
	count := 0
	for _, gr := range grs {
		for _, uuid := range gr.Nat {
			var ns []nbdb.NAT
			_ = e.nb.WhereCache(func(n *nbdb.NAT) bool { return n.UUID == uuid }).List(context.Background(), &ns)
			for _, n := range ns {
				if o, _ := topology.OwnerOf(n.ExternalIDs); o.Type == egressip.OwnerEgressIP {
					count++
				}
			}
		}
	}
	return count
}

// An egress IP that moves takes its NATs from the old node's gateway router
// to the new one's, and a NAT of the EgressIP that names no node (written
// by an older version, on a router the rows do not name) is removed too.
func TestEgressIPMovesItsNATs(t *testing.T) {
	e := newEnv(t)
	dyn := e.withEgressIPs()
	e.egressNode("n1", "172.18.0.2")
	e.egressNode("n2", "172.18.0.3")
	e.createNamespace("prod", map[string]string{"env": "prod"})
	e.createPod("prod", "a", "n1")
	e.createPod("prod", "b", "n2")
	e.start()
	e.podNetwork("prod", "a")
	e.podNetwork("prod", "b")
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).Create(context.Background(), egressIPObject("eip1", "172.18.0.100"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var from, to string
	harness.Eventually(t, 10*time.Second, "both SNATs on one gateway router", func() error {
		n1, n2 := e.grEgressNATs("n1"), e.grEgressNATs("n2")
		switch {
		case n1 == 2 && n2 == 0:
			from, to = "n1", "n2"
		case n2 == 2 && n1 == 0:
			from, to = "n2", "n1"
		default:
			return fmt.Errorf("GR_n1 %d, GR_n2 %d", n1, n2)
		}
		return nil
	})
	// A NAT of eip1 without the node key, on the router the IP leaves.
	old := &nbdb.NAT{UUID: "old", Type: nbdb.NATTypeSNAT, LogicalIP: "10.244.9.9", ExternalIP: "172.18.0.100",
		ExternalIDs: topology.Owner{Type: egressip.OwnerEgressIP, Name: "eip1"}.ExternalIDs()}
	old.ExternalIDs[topology.RowIDKey] = egressip.RowID("eip1", "snat", "10.244.9.9")
	var grs []nbdb.LogicalRouter
	if err := e.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == topology.GatewayRouter(from) }).List(context.Background(), &grs); err != nil || len(grs) != 1 {
		t.Fatal(grs, err)
	}
	gr := &grs[0]
	ops, err := e.nb.Create(old)
	if err != nil {
		t.Fatal(err)
	}
	mut, err := e.nb.Where(gr).Mutate(gr, model.Mutation{Field: &gr.Nat, Mutator: ovsdb.MutateOperationInsert, Value: []string{"old"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.Transact(context.Background(), append(ops, mut...)...); err != nil {
		t.Fatal(err)
	}
	n, err := e.kube.CoreV1().Nodes().Get(context.Background(), from, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	delete(n.Labels, k8sovnv1.EgressAssignableLabel)
	if _, err := e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "both SNATs on the other gateway router, none left behind", func() error {
		if f, t := e.grEgressNATs(from), e.grEgressNATs(to); f != 0 || t != 2 {
			return fmt.Errorf("GR_%s %d, GR_%s %d", from, f, to, t)
		}
		return nil
	})
}

// freshEgressIPInformer gives the next start of the master an EgressIP
// informer of its own (a stopped informer cannot run again), as a new
// process would have.
func (e *env) freshEgressIPInformer(dyn *dynamicfake.FakeDynamicClient) {
	e.apis.EgressIP = &egressip.API{Dynamic: dyn, Informer: k8sovnv1.NewEgressIPInformer(dyn, 0)}
}

// eipRowsAre is nil when an EgressIP's status and NB rows are exactly those
// of ip alone, assigned to node (any node when ""), for the pods with these
// addresses: its status one item; its SNATs, every one in the NB held by
// GR_<its node>, one per pod, each to ip; one reroute to that node's gateway
// router; its address set the pods. No NAT of anyone's gives stale. It
// returns the node.
func (e *env) eipRowsAre(dyn *dynamicfake.FakeDynamicClient, name, ip, node string, pods []string, stale string) (string, error) {
	ctx := context.Background()
	o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
	if len(items) != 1 {
		return "", fmt.Errorf("status items %v, want one for %s", items, ip)
	}
	it, _ := items[0].(map[string]any)
	got, _ := it["node"].(string)
	if it["egressIP"] != ip || got == "" || (node != "" && got != node) {
		return "", fmt.Errorf("status items %v, want %s on %q", items, ip, node)
	}
	node = got
	// Which router holds each NAT.
	var routers []nbdb.LogicalRouter
	if err := e.nb.List(ctx, &routers); err != nil {
		return "", err
	}
	holder := map[string][]string{}
	for _, r := range routers {
		for _, u := range r.Nat {
			holder[u] = append(holder[u], r.Name)
		}
	}
	var nats []nbdb.NAT
	if err := e.nb.List(ctx, &nats); err != nil {
		return "", err
	}
	var logical, bad []string
	for _, n := range nats {
		owner, _ := topology.OwnerOf(n.ExternalIDs)
		mine := owner.Type == egressip.OwnerEgressIP && owner.Name == name
		if n.ExternalIP == stale && stale != "" {
			bad = append(bad, fmt.Sprintf("%s>%s on %v (owner %v)", n.LogicalIP, n.ExternalIP, holder[n.UUID], owner))
			continue
		}
		if !mine {
			continue
		}
		if n.ExternalIP != ip || n.Type != nbdb.NATTypeSNAT || !slices.Equal(holder[n.UUID], []string{topology.GatewayRouter(node)}) {
			bad = append(bad, fmt.Sprintf("%s %s>%s on %v", n.Type, n.LogicalIP, n.ExternalIP, holder[n.UUID]))
			continue
		}
		logical = append(logical, n.LogicalIP)
	}
	if len(bad) > 0 {
		return "", fmt.Errorf("NATs not of %s on %s: %v", ip, node, bad)
	}
	slices.Sort(logical)
	want := slices.Sorted(slices.Values(pods))
	if !slices.Equal(logical, want) {
		return "", fmt.Errorf("SNATs of %v on GR_%s, want %v", logical, node, want)
	}
	n, err := e.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	joins, err := annotations.ParseGatewayJoinIPs(n.Annotations[annotations.NodeGatewayJoinIP])
	if err != nil || len(joins) == 0 {
		return "", fmt.Errorf("node %s's join address: %v", node, err)
	}
	var reroutes []string
	var lrps []nbdb.LogicalRouterPolicy
	_ = e.nb.WhereCache(func(p *nbdb.LogicalRouterPolicy) bool {
		o, _ := topology.OwnerOf(p.ExternalIDs)
		return o.Type == egressip.OwnerEgressIP && o.Name == name
	}).List(ctx, &lrps)
	for _, p := range lrps {
		reroutes = append(reroutes, fmt.Sprintf("%d %s %s %v", p.Priority, p.Match, p.Action, p.Nexthops))
	}
	wantReroute := fmt.Sprintf("%d ip4.src == $%s %s [%s]", egressip.ReroutePriority, egressip.SetName(name), nbdb.LogicalRouterPolicyActionReroute, joins[0].Addr())
	if !slices.Equal(reroutes, []string{wantReroute}) {
		return "", fmt.Errorf("reroutes %q, want %q", reroutes, wantReroute)
	}
	set := &nbdb.AddressSet{Name: egressip.SetName(name)}
	if err := e.nb.Get(ctx, set); err != nil {
		return "", fmt.Errorf("address set %s: %w", set.Name, err)
	}
	if members := slices.Sorted(slices.Values(set.Addresses)); !slices.Equal(members, want) {
		return "", fmt.Errorf("address set %s holds %v, want %v", set.Name, members, want)
	}
	return node, nil
}

// An EgressIP deleted and at once created again under the same name, with
// another IP (and, in variants, selecting other pods, or while the master is
// stopped, its old node no longer assignable), ends with exactly the new
// object's rows: every SNAT of it gives the new IP on the new assignment's
// gateway router, no NAT gives the old IP, the reroute goes to the new
// node alone, the address set holds only the newly selected pods, and the
// status lists the new IP only.
func TestEgressIPDeletedAndRecreatedWithTheSameName(t *testing.T) {
	prod, dev := map[string]string{"env": "prod"}, map[string]string{"env": "dev"}
	for _, tc := range []struct {
		name    string
		ns      map[string]string // the re-created one's namespace selector
		stopped bool              // re-created while the master is stopped; the old node unassignable meanwhile
	}{
		{"another IP", prod, false},
		{"another IP and other pods", dev, false},
		{"while the master is stopped", dev, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			dyn := e.withEgressIPs()
			e.egressNode("n1", "172.18.0.2")
			e.egressNode("n2", "172.18.0.3")
			e.createNamespace("prod", prod)
			e.createNamespace("dev", dev)
			for _, p := range [][3]string{{"prod", "a", "n1"}, {"prod", "b", "n2"}, {"dev", "c", "n1"}, {"dev", "d", "n2"}} {
				e.createPod(p[0], p[1], p[2])
			}
			e.start()
			addrs := map[string][]string{}
			for _, p := range [][2]string{{"prod", "a"}, {"prod", "b"}, {"dev", "c"}, {"dev", "d"}} {
				pn := e.podNetwork(p[0], p[1])
				addrs[p[0]] = append(addrs[p[0]], pn.IPs[0].Addr().String())
			}
			eips := dyn.Resource(k8sovnv1.EgressIPResource)
			if _, err := eips.Create(context.Background(), egressIPObject("eip1", "172.18.0.100"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			var oldNode string
			harness.Eventually(t, 10*time.Second, "eip1 programmed with 172.18.0.100", func() (err error) {
				oldNode, err = e.eipRowsAre(dyn, "eip1", "172.18.0.100", "", addrs["prod"], "")
				return err
			})

			if tc.stopped {
				e.stop()
			}
			if err := eips.Delete(context.Background(), "eip1", metav1.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if _, err := eips.Create(context.Background(), egressIPSelecting("eip1", tc.ns, "172.18.0.101"), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			wantNode, pods := "", addrs["prod"]
			if tc.ns["env"] == "dev" {
				pods = addrs["dev"]
			}
			if tc.stopped {
				// The old rows are on the old node's router; the new IP
				// must go to the other one.
				n, err := e.kube.CoreV1().Nodes().Get(context.Background(), oldNode, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				delete(n.Labels, k8sovnv1.EgressAssignableLabel)
				if _, err := e.kube.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
					t.Fatal(err)
				}
				wantNode = map[string]string{"n1": "n2", "n2": "n1"}[oldNode]
				e.freshEgressIPInformer(dyn)
				e.start()
			}
			var newNode string
			harness.Eventually(t, 10*time.Second, "eip1 with 172.18.0.101 only, nothing of 172.18.0.100", func() (err error) {
				newNode, err = e.eipRowsAre(dyn, "eip1", "172.18.0.101", wantNode, pods, "172.18.0.100")
				return err
			})
			// And it stays so once the master has nothing left to do.
			harness.Eventually(t, 10*time.Second, "the master idle", func() error {
				if !e.m.eips.Idle() {
					return fmt.Errorf("busy")
				}
				return nil
			})
			if _, err := e.eipRowsAre(dyn, "eip1", "172.18.0.101", newNode, pods, "172.18.0.100"); err != nil {
				t.Fatalf("once idle: %v", err)
			}
			t.Logf("172.18.0.100 was on %s, 172.18.0.101 is on %s", oldNode, newNode)
		})
	}
}
