package master

import (
	"context"
	"fmt"
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
	var list []any
	for _, ip := range ips {
		list = append(list, ip)
	}
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "EgressIP",
		"metadata": map[string]any{"name": name, "creationTimestamp": time.Now().UTC().Format(time.RFC3339)},
		"spec":     map[string]any{"egressIPs": list, "namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}}}
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
