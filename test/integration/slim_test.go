package integration

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The master's pod informer decodes the API server's protobuf itself
// (slim.NewListWatch): against a real API server, what it holds must be
// exactly what slim.FromPod keeps of the pods client-go reads, through list,
// pages, watch events and an expired resource version.
func TestSlimPodListWatchAgainstAPIServer(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const ns = "slim"
	kube.EnsureNamespace(t, ns)
	pod := func(name string, mutate func(*corev1.Pod)) *corev1.Pod {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{"app": name},
				Annotations: map[string]string{"other": "x"}},
			Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{{Name: "c", Image: "busybox",
				Ports: []corev1.ContainerPort{{ContainerPort: 80}, {Name: "http", ContainerPort: 8080},
					{Name: "dns", ContainerPort: 53, Protocol: corev1.ProtocolUDP}}}}},
		}
		if mutate != nil {
			mutate(p)
		}
		return p
	}
	create := func(p *corev1.Pod) {
		t.Helper()
		if _, err := kube.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create(pod("a", nil))
	create(pod("b", func(p *corev1.Pod) { p.Spec.HostNetwork = true; p.Spec.NodeName = "" }))
	create(pod("c", func(p *corev1.Pod) { p.Annotations[annotations.PodNetworks] = "" }))

	lw := slim.NewListWatch(kube.Client.CoreV1().RESTClient())
	// What the informer must hold: the API's pods, as client-go decodes them, through FromPod.
	want := func() (map[string]*slim.Pod, error) {
		list, err := kube.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]*slim.Pod{}
		for i := range list.Items {
			out[list.Items[i].Name] = slim.FromPod(&list.Items[i])
		}
		return out, nil
	}

	// Pages: a list of 1 pod per page, continued, returns every pod.
	var paged []string
	opts := metav1.ListOptions{Limit: 1}
	for {
		obj, err := lw.ListWithContextFunc(ctx, opts)
		if err != nil {
			t.Fatal(err)
		}
		l := obj.(*slim.PodList)
		for _, p := range l.Items {
			if p.Namespace == ns {
				paged = append(paged, p.Name)
			}
		}
		if l.Continue == "" {
			break
		}
		opts.Continue = l.Continue
	}
	sort.Strings(paged)
	if fmt.Sprint(paged) != "[a b c]" {
		t.Errorf("paged list: %v, want [a b c]", paged)
	}

	informer := cache.NewSharedIndexInformer(lw, &slim.Pod{}, 0, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	go informer.RunWithContext(ctx)
	held := func() map[string]*slim.Pod {
		out := map[string]*slim.Pod{}
		for _, obj := range informer.GetStore().List() {
			if p := obj.(*slim.Pod); p.Namespace == ns {
				out[p.Name] = p
			}
		}
		return out
	}
	matches := func(what string) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, what, func() error {
			w, err := want()
			if err != nil {
				return err
			}
			if got := held(); !reflect.DeepEqual(got, w) {
				return fmt.Errorf("informer holds %v\nthe API has %v", fmtPods(got), fmtPods(w))
			}
			return nil
		})
	}
	matches("the listed pods")

	// Watch events: an update of labels and our annotation, a new pod, a delete.
	patch := fmt.Sprintf(`{"metadata":{"labels":{"role":"client"},"annotations":{%q:"{}"}}}`, annotations.PodNetworks)
	if _, err := kube.Client.CoreV1().Pods(ns).Patch(ctx, "a", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	create(pod("d", func(p *corev1.Pod) { p.Spec.Containers[0].Ports = nil }))
	if err := kube.Client.CoreV1().Pods(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	matches("the pods after an update, a create and a delete")
	if a := held()["a"]; a == nil || a.Labels["role"] != "client" || a.Networks != "{}" || len(a.NamedPorts) != 2 {
		t.Errorf("pod a after its update: %+v", a)
	}

	// The API server's refusals come through as they do through client-go's
	// own watch (an expired resource version, sent as an ERROR event, is
	// decoded by the same code: slim's TestWatchDecoder).
	bad := metav1.ListOptions{ResourceVersion: "not-a-version"}
	_, stdErr := kube.Client.CoreV1().Pods("").Watch(ctx, bad)
	w, err := lw.WatchFuncWithContext(ctx, bad)
	if err == nil {
		w.Stop()
	}
	code := func(err error) int32 {
		var s apierrors.APIStatus
		if errors.As(err, &s) {
			return s.Status().Code
		}
		return 0
	}
	if stdErr == nil || code(err) == 0 || code(err) != code(stdErr) || apierrors.ReasonForError(err) != apierrors.ReasonForError(stdErr) {
		t.Errorf("watch from an invalid resource version: %v, client-go's own watch: %v", err, stdErr)
	}
}

func fmtPods(m map[string]*slim.Pod) string {
	s := ""
	for name, p := range m {
		s += fmt.Sprintf("\n  %s: %+v %s phase=%s networks=%q annotated=%t ports=%+v", name, p.ObjectMeta, p.NodeName, p.Phase, p.Networks, p.Annotated, p.NamedPorts)
	}
	return s
}
