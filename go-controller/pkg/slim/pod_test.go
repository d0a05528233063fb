package slim_test

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func fullPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "7",
			Labels:          map[string]string{"app": "web"},
			Annotations:     map[string]string{annotations.PodNetworks: `{"default":{}}`, "other": "x"},
			ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{{Name: "rs"}},
		},
		Spec: corev1.PodSpec{NodeName: "n1", Containers: []corev1.Container{
			{Name: "a", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 80}, {Name: "http", ContainerPort: 8080}}},
			{Name: "b", Ports: []corev1.ContainerPort{{Name: "dns", Protocol: corev1.ProtocolUDP, ContainerPort: 53}}},
		}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.5"},
	}
}

func TestFromPodKeepsWhatControllersRead(t *testing.T) {
	got := slim.FromPod(fullPod())
	want := &slim.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "uid-1", ResourceVersion: "7", Labels: map[string]string{"app": "web"}},
		NodeName:   "n1", Phase: corev1.PodRunning, Networks: `{"default":{}}`, Annotated: true,
		NamedPorts: []slim.NamedPort{{Name: "http", Port: 8080}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %+v\nwant %+v", got, want)
	}
	if n, ok := got.ContainerPort("http", corev1.ProtocolTCP); !ok || n != 8080 {
		t.Errorf("http/TCP: %d %v", n, ok)
	}
	if _, ok := got.ContainerPort("dns", corev1.ProtocolTCP); ok {
		t.Error("dns resolved for TCP; it is UDP only")
	}
	if !got.Networked() {
		t.Error("a running scheduled pod is networked")
	}
	for name, change := range map[string]func(*corev1.Pod){
		"unscheduled":  func(p *corev1.Pod) { p.Spec.NodeName = "" },
		"host network": func(p *corev1.Pod) { p.Spec.HostNetwork = true },
		"succeeded":    func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded },
		"failed":       func(p *corev1.Pod) { p.Status.Phase = corev1.PodFailed },
	} {
		p := fullPod()
		change(p)
		if slim.FromPod(p).Networked() {
			t.Errorf("%s: networked", name)
		}
	}
	// An empty annotation is there (and malformed), not absent.
	p := fullPod()
	p.Annotations[annotations.PodNetworks] = ""
	if s := slim.FromPod(p); !s.Annotated || s.Networks != "" {
		t.Errorf("empty annotation: %+v", s)
	}
	delete(p.Annotations, annotations.PodNetworks)
	if s := slim.FromPod(p); s.Annotated {
		t.Errorf("no annotation: %+v", s)
	}
}

func TestTransformIsIdempotentAndCopiesAreIndependent(t *testing.T) {
	once, err := slim.Transform(fullPod())
	if err != nil {
		t.Fatal(err)
	}
	twice, err := slim.Transform(once)
	if err != nil || twice != once {
		t.Fatalf("a Pod transformed again: %v %v", twice, err)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "ns/web", Obj: once}
	if got, _ := slim.Transform(tomb); !reflect.DeepEqual(got, tomb) {
		t.Fatalf("tombstone changed: %+v", got)
	}
	p := once.(*slim.Pod)
	c := p.DeepCopyObject().(*slim.Pod)
	c.Labels["app"] = "changed"
	c.NamedPorts[0].Port = 1
	if p.Labels["app"] != "web" || p.NamedPorts[0].Port != 8080 {
		t.Fatalf("the copy shares memory with the original: %+v", p)
	}
}

// An informer with the transform stores Pods, and the Lister reads them by
// key, by namespace and label, and by index.
func TestListerOverInformer(t *testing.T) {
	other := fullPod()
	other.Namespace, other.Name, other.UID, other.Labels = "ns2", "db", "uid-2", map[string]string{"app": "db"}
	kube := fake.NewClientset(fullPod(), other)
	f := informers.NewSharedInformerFactory(kube, 0)
	inf := f.Core().V1().Pods().Informer()
	if err := inf.SetTransform(slim.Transform); err != nil {
		t.Fatal(err)
	}
	if err := inf.AddIndexers(cache.Indexers{"node": func(obj any) ([]string, error) { return []string{obj.(*slim.Pod).NodeName}, nil }}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	l := slim.NewLister(inf)
	if p := l.Get("ns", "web"); p == nil || p.UID != "uid-1" || !p.Annotated {
		t.Fatalf("Get ns/web: %+v", p)
	}
	if p := l.Get("ns", "missing"); p != nil {
		t.Fatalf("Get ns/missing: %+v", p)
	}
	if got := l.List("", labels.Everything()); len(got) != 2 {
		t.Fatalf("List all: %d pods", len(got))
	}
	if got := l.List("ns2", labels.Everything()); len(got) != 1 || got[0].Name != "db" {
		t.Fatalf("List ns2: %+v", got)
	}
	if got := l.List("", labels.SelectorFromSet(labels.Set{"app": "db"})); len(got) != 1 || got[0].Name != "db" {
		t.Fatalf("List app=db: %+v", got)
	}
	if got := l.ByIndex("node", "n1"); len(got) != 2 {
		t.Fatalf("ByIndex node n1: %d pods", len(got))
	}
	// An update arrives through the transform as well.
	upd := fullPod()
	upd.Labels = map[string]string{"app": "web2"}
	if _, err := kube.CoreV1().Pods("ns").Update(ctx, upd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 10*time.Second, "the update in the informer", func() error {
		if p := l.Get("ns", "web"); p == nil || p.Labels["app"] != "web2" {
			return fmt.Errorf("last seen %+v", p)
		}
		return nil
	})
}

func TestAddressesOnlyForThePodTheyWereWrittenFor(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:0a:80:00:05")
	written := annotations.FormatPodNetworks(annotations.PodNetwork{PodUID: "uid-1", MAC: mac,
		IPs: []netip.Prefix{netip.MustParsePrefix("10.128.0.5/24"), netip.MustParsePrefix("fd01::5/64")}})
	for _, tt := range []struct {
		name       string
		annotation *string // nil: absent
		uid        string
		want       []netip.Addr
	}{
		{"written for the pod", &written, "uid-1", []netip.Addr{netip.MustParseAddr("10.128.0.5"), netip.MustParseAddr("fd01::5")}},
		{"copied from an earlier incarnation", &written, "uid-2", nil},
		{"malformed", ptr(`{"default":`), "uid-1", nil},
		{"empty", ptr(""), "uid-1", nil},
		{"absent", nil, "uid-1", nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := fullPod()
			p.UID = types.UID(tt.uid)
			delete(p.Annotations, annotations.PodNetworks)
			if tt.annotation != nil {
				p.Annotations[annotations.PodNetworks] = *tt.annotation
			}
			s := slim.FromPod(p)
			for i := 0; i < 2; i++ { // the second answer comes from the parsed copy
				if got := s.Addresses(); !slices.Equal(got, tt.want) {
					t.Fatalf("Addresses() #%d = %v, want %v", i+1, got, tt.want)
				}
			}
			c := s.DeepCopyObject().(*slim.Pod)
			if got := c.Addresses(); !slices.Equal(got, tt.want) {
				t.Errorf("a copy's Addresses() = %v, want %v", got, tt.want)
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// DropManagedFields empties managedFields and drops kubectl apply's copy of
// the object, keeping every other annotation; what is no object passes
// unchanged.
func TestDropManagedFields(t *testing.T) {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "a",
		Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}", "keep": "1"},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}},
	}}
	out, err := slim.DropManagedFields(ns)
	if err != nil || out != ns {
		t.Fatalf("DropManagedFields(ns) = %v, %v; want the same object", out, err)
	}
	if ns.ManagedFields != nil || !reflect.DeepEqual(ns.Annotations, map[string]string{"keep": "1"}) {
		t.Fatalf("after DropManagedFields: managedFields %v, annotations %v", ns.ManagedFields, ns.Annotations)
	}
	tomb := cache.DeletedFinalStateUnknown{Key: "a"}
	if out, err := slim.DropManagedFields(tomb); err != nil || out != tomb {
		t.Fatalf("DropManagedFields(tombstone) = %v, %v", out, err)
	}
}

// Addresses made known answer without parsing, for the pod's own UID only;
// a pod already parsed keeps what its annotation says.
func TestKnowAddresses(t *testing.T) {
	ip := netip.MustParseAddr("10.128.0.5")
	p := slim.FromPod(fullPod())
	p.Networks = "not parsed: known"
	p.KnowAddresses(string(p.UID), []netip.Addr{ip})
	if got := p.Addresses(); !slices.Equal(got, []netip.Addr{ip}) {
		t.Errorf("known addresses: %v", got)
	}
	other := slim.FromPod(fullPod())
	other.KnowAddresses("another-uid", []netip.Addr{ip})
	if got := other.Addresses(); got != nil {
		t.Errorf("addresses known for another UID answered: %v", got)
	}
	mac, _ := net.ParseMAC("0a:58:0a:80:00:06")
	parsed := slim.FromPod(fullPod())
	parsed.Networks = annotations.FormatPodNetworks(annotations.PodNetwork{PodUID: "uid-1", MAC: mac,
		IPs: []netip.Prefix{netip.MustParsePrefix("10.128.0.6/24")}})
	want := parsed.Addresses()
	parsed.KnowAddresses(string(parsed.UID), []netip.Addr{ip})
	if got := parsed.Addresses(); !slices.Equal(got, want) || len(want) != 1 {
		t.Errorf("a parsed pod's addresses %v became %v", want, got)
	}
}
