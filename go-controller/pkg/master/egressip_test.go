package master

import (
	"context"
	"fmt"
	"testing"
	"time"

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
