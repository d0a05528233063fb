package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
)

// SetNodeReady gives a node the Ready condition a kubelet would report
// (the cluster in a box of this package runs none).
func (c *Cluster) SetNodeReady(name string) {
	c.T.Helper()
	ctx := context.Background()
	n, err := c.Kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		c.T.Fatal(err)
	}
	now := metav1.NewTime(time.Now())
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: now, LastTransitionTime: now}}
	if _, err := c.Kube.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{}); err != nil {
		c.T.Fatal(err)
	}
}

// LabelNode adds labels to a node.
func (c *Cluster) LabelNode(name string, labels map[string]string) {
	c.T.Helper()
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels}})
	if _, err := c.Kube.Client.CoreV1().Nodes().Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		c.T.Fatal(err)
	}
}

// CreateEgressIP creates an EgressIP (ClusterOptions.CRDs serves the kind).
func (c *Cluster) CreateEgressIP(name string, ips []string, namespaces, pods map[string]string) {
	c.T.Helper()
	CreateEgressIP(c.T, c.Kube.Config, name, ips, namespaces, pods)
}

// CreateEgressIP creates an EgressIP of these addresses for the pods the
// selectors choose, through the API server of cfg.
func CreateEgressIP(t T, cfg *rest.Config, name string, ips []string, namespaces, pods map[string]string) {
	t.Helper()
	e := &k8sovnv1.EgressIP{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressIP"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: k8sovnv1.EgressIPSpec{EgressIPs: ips, NamespaceSelector: metav1.LabelSelector{MatchLabels: namespaces},
			PodSelector: metav1.LabelSelector{MatchLabels: pods}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		t.Fatal(err)
	}
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).Create(context.Background(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// EgressIPStatus waits until every address of an EgressIP is assigned and
// returns the node hosting each.
func (c *Cluster) EgressIPStatus(name string, ips []string) map[string]string {
	c.T.Helper()
	dyn, err := dynamic.NewForConfig(c.Kube.Config)
	if err != nil {
		c.T.Fatal(err)
	}
	out := map[string]string{}
	Eventually(c.T, 30*time.Second, "EgressIP "+name+" assigned", func() error {
		o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
		clear(out)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				out[fmt.Sprint(m["egressIP"])] = fmt.Sprint(m["node"])
			}
		}
		for _, ip := range ips {
			if out[ip] == "" {
				return fmt.Errorf("status %v: %s not assigned", out, ip)
			}
		}
		return nil
	})
	return out
}
