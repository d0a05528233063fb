package v1

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	"k8s.io/client-go/dynamic"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// object is an EgressFirewall as the dynamic client has it.
func object(t *testing.T, ns string, ef EgressFirewall) *unstructured.Unstructured {
	t.Helper()
	ef.APIVersion, ef.Kind = GroupVersion.String(), "EgressFirewall"
	ef.Namespace = ns
	if ef.Name == "" {
		ef.Name = EgressFirewallName
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&ef)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// malformed is an EgressFirewall whose spec does not convert.
func malformed(ns string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "EgressFirewall",
		"metadata": map[string]any{"name": EgressFirewallName, "namespace": ns},
		"spec":     map[string]any{"egress": "not a list"},
	}}
}

func rules(cidrs ...string) EgressFirewall {
	var ef EgressFirewall
	for _, c := range cidrs {
		ef.Spec.Egress = append(ef.Spec.Egress, EgressFirewallRule{Type: EgressFirewallRuleDeny, To: EgressFirewallDestination{CIDRSelector: c}})
	}
	return ef
}

func newFake(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{EgressFirewallResource: "EgressFirewallList", EgressIPResource: "EgressIPList"}, objs...)
}

// recorder keeps what a handler was told: "add " and "update " with what
// describe says of the objects ("update old -> new"), "delete " with what
// id says.
type recorder struct {
	t            *testing.T
	describe, id func(obj any) string
	mu           sync.Mutex
	events       []string
}

// efRecorder records EgressFirewalls: "add ns/cidr", "update ns/cidr ->
// ns/cidr", "delete ns".
func efRecorder(t *testing.T) *recorder {
	return &recorder{t: t, describe: firstCIDR, id: func(obj any) string {
		if ef, ok := obj.(*EgressFirewall); ok {
			return ef.Namespace
		}
		return fmt.Sprintf("of a %T", obj)
	}}
}

func firstCIDR(obj any) string {
	ef, ok := obj.(*EgressFirewall)
	if !ok {
		return fmt.Sprintf("a %T", obj)
	}
	if len(ef.Spec.Egress) == 0 {
		return ef.Namespace + "/-"
	}
	return ef.Namespace + "/" + ef.Spec.Egress[0].To.CIDRSelector
}

func (r *recorder) add(s string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, s)
}

func (r *recorder) handler() cache.ResourceEventHandlerFuncs {
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { r.add("add " + r.describe(obj)) },
		UpdateFunc: func(old, obj any) { r.add("update " + r.describe(old) + " -> " + r.describe(obj)) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			r.add("delete " + r.id(obj))
		},
	}
}

// wait waits until the handler has been told want, in order.
func (r *recorder) wait(want ...string) {
	r.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		r.mu.Lock()
		got := append([]string(nil), r.events...)
		r.mu.Unlock()
		if reflect.DeepEqual(got, want) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("events:\n%q\nwant\n%q", got, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// storeHolds checks the informer's store holds exactly objects described
// (by describe, which says "a T" of one of another type) as want.
func storeHolds(t *testing.T, inf cache.SharedIndexInformer, describe func(any) string, want ...string) {
	t.Helper()
	var got []string
	for _, o := range inf.GetStore().List() {
		got = append(got, describe(o))
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("store %q, want %q", got, want)
	}
}

// storeHas checks the informer's store holds exactly want (namespace →
// first CIDR), typed, and its namespace index.
func storeHas(t *testing.T, inf cache.SharedIndexInformer, want map[string]string) {
	t.Helper()
	var wantFull []string
	for ns, c := range want {
		wantFull = append(wantFull, ns+"/"+c)
	}
	storeHolds(t, inf, firstCIDR, wantFull...)
	for ns := range want {
		objs, err := inf.GetIndexer().ByIndex(cache.NamespaceIndex, ns)
		if err != nil || len(objs) != 1 || objs[0].(*EgressFirewall).Name != EgressFirewallName {
			t.Fatalf("namespace index of %s: %v %v", ns, objs, err)
		}
	}
}

// The informer lists typed EgressFirewalls, leaving out one that does not
// convert, then follows additions, updates and deletions; an object
// changed into one that does not convert is gone from the store (as a
// relist would leave it) and comes back when it converts again; a malformed
// addition or deletion changes nothing in the store. Nothing panics.
func TestInformer(t *testing.T) {
	dyn := newFake(object(t, "a", rules("10.0.0.0/8")), malformed("bad"))
	r := efRecorder(t)
	inf := runInformer(t, dyn, NewEgressFirewallInformer, r)
	r.wait("add a/10.0.0.0/8")
	storeHas(t, inf, map[string]string{"a": "10.0.0.0/8"})
	ef, _, _ := inf.GetIndexer().GetByKey("a/default")
	if ef.(*EgressFirewall).Spec.Egress[0].Type != EgressFirewallRuleDeny || ef.(*EgressFirewall).Kind != "EgressFirewall" {
		t.Fatalf("listed %+v", ef)
	}

	ri := dyn.Resource(EgressFirewallResource)
	ctxb := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := ri.Namespace("b").Create(ctxb, object(t, "b", rules("192.0.2.0/24", "198.51.100.0/24")), metav1.CreateOptions{})
	must(err)
	_, err = ri.Namespace("a").Update(ctxb, object(t, "a", rules("10.1.0.0/16")), metav1.UpdateOptions{})
	must(err)
	must(ri.Namespace("b").Delete(ctxb, EgressFirewallName, metav1.DeleteOptions{}))
	r.wait("add a/10.0.0.0/8", "add b/192.0.2.0/24", "update a/10.0.0.0/8 -> a/10.1.0.0/16", "delete b")
	storeHas(t, inf, map[string]string{"a": "10.1.0.0/16"})

	// malformed: an addition is left out, an update removes; a deletion is
	// passed on (the handler hears of c and bad, never added: client-go's
	// queue passes on a deletion of what its store lacks) and changes
	// nothing in the store
	_, err = ri.Namespace("c").Create(ctxb, malformed("c"), metav1.CreateOptions{})
	must(err)
	_, err = ri.Namespace("a").Update(ctxb, malformed("a"), metav1.UpdateOptions{})
	must(err)
	must(ri.Namespace("c").Delete(ctxb, EgressFirewallName, metav1.DeleteOptions{}))
	must(ri.Namespace("bad").Delete(ctxb, EgressFirewallName, metav1.DeleteOptions{}))
	_, err = ri.Namespace("d").Create(ctxb, object(t, "d", rules("203.0.113.0/24")), metav1.CreateOptions{})
	must(err)
	r.wait("add a/10.0.0.0/8", "add b/192.0.2.0/24", "update a/10.0.0.0/8 -> a/10.1.0.0/16", "delete b",
		"delete a", "delete c", "delete bad", "add d/203.0.113.0/24")
	storeHas(t, inf, map[string]string{"d": "203.0.113.0/24"})

	// fixed, it is back
	_, err = ri.Namespace("a").Update(ctxb, object(t, "a", rules("10.2.0.0/16")), metav1.UpdateOptions{})
	must(err)
	r.wait("add a/10.0.0.0/8", "add b/192.0.2.0/24", "update a/10.0.0.0/8 -> a/10.1.0.0/16", "delete b",
		"delete a", "delete c", "delete bad", "add d/203.0.113.0/24", "add a/10.2.0.0/16")
	storeHas(t, inf, map[string]string{"a": "10.2.0.0/16", "d": "203.0.113.0/24"})
}

// runInformer runs the informer newInformer makes of dyn, r's handler
// added, until the test ends; it returns once the informer has synced and
// watches.
func runInformer(t *testing.T, dyn *dynamicfake.FakeDynamicClient, newInformer func(dynamic.Interface, time.Duration) cache.SharedIndexInformer,
	r *recorder) cache.SharedIndexInformer {
	t.Helper()
	watching := make(chan struct{})
	var once sync.Once
	// The fake does not replay what happened between list and watch: the
	// test changes objects only once the informer watches.
	dyn.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := dyn.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(watching) })
		return true, w, err
	})
	inf := newInformer(dyn, 0)
	if _, err := inf.AddEventHandler(r.handler()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(klog.NewContext(context.Background(), testr.New(t)))
	t.Cleanup(cancel)
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	<-watching
	return inf
}

// Conversion of watch events: an error's Status passes as it is (the
// reflector reads it), a bookmark keeps its resource version and
// annotations, objects of every malformed shape are left out or turned
// into deletions, without a panic.
func TestTypedEvent(t *testing.T) {
	log := testr.New(t)
	status := &unstructured.Unstructured{Object: map[string]any{"kind": "Status", "apiVersion": "v1", "code": int64(410)}}
	if e, keep := typedEvent[EgressFirewall](log, watch.Event{Type: watch.Error, Object: status}); !keep || e.Object != status {
		t.Fatalf("error event: %v %v", e, keep)
	}
	bm := &unstructured.Unstructured{Object: map[string]any{"kind": "EgressFirewall", "apiVersion": "k8s.ovn.org/v1",
		"metadata": map[string]any{"resourceVersion": "42", "annotations": map[string]any{metav1.InitialEventsAnnotationKey: "true"}}}}
	e, keep := typedEvent[EgressFirewall](log, watch.Event{Type: watch.Bookmark, Object: bm})
	if ef, ok := e.Object.(*EgressFirewall); !keep || e.Type != watch.Bookmark || !ok || ef.ResourceVersion != "42" ||
		ef.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
		t.Fatalf("bookmark: %v %+v", keep, e)
	}
	shapes := []map[string]any{
		{"spec": "x"},
		{"spec": map[string]any{"egress": []any{"x"}}},
		{"spec": map[string]any{"egress": []any{map[string]any{"ports": []any{map[string]any{"port": "80"}}}}}},
		{"spec": map[string]any{"egress": []any{map[string]any{"ports": []any{map[string]any{"port": 1.5}}}}}},
		{"spec": map[string]any{"egress": []any{map[string]any{"to": []any{}}}}},
		{"spec": map[string]any{"egress": []any{map[string]any{"to": map[string]any{"nodeSelector": "x"}}}}},
		{"status": map[string]any{"messages": "x"}},
		{"status": []any{int64(1)}},
	}
	for i, s := range shapes {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressFirewall",
			"metadata": map[string]any{"name": "default", "namespace": "ns", "resourceVersion": "7"}}}
		for k, v := range s {
			u.Object[k] = v
		}
		if _, keep := typedEvent[EgressFirewall](log, watch.Event{Type: watch.Added, Object: u}); keep {
			t.Errorf("shape %d: a malformed addition passed", i)
		}
		for _, typ := range []watch.EventType{watch.Modified, watch.Deleted} {
			e, keep := typedEvent[EgressFirewall](log, watch.Event{Type: typ, Object: u})
			ef, ok := e.Object.(*EgressFirewall)
			if !keep || e.Type != watch.Deleted || !ok || ef.Namespace != "ns" || ef.Name != "default" || ef.ResourceVersion != "7" {
				t.Errorf("shape %d, %s: %v %+v", i, typ, keep, e)
			}
		}
	}
}

// WriteEgressFirewallStatus sends one merge patch of the status subresource
// setting the whole status and nothing else: fields left empty are null,
// removing what was there.
func TestWriteEgressFirewallStatus(t *testing.T) {
	orig := rules("10.0.0.0/8")
	orig.Status = EgressFirewallStatus{Status: EgressFirewallNotApplied, Messages: []string{"old"}}
	dyn := newFake(object(t, "a", orig))
	ctx := context.Background()
	for _, tc := range []struct {
		status EgressFirewallStatus
		patch  string
	}{
		{EgressFirewallStatus{Status: EgressFirewallNotApplied, Messages: []string{"one", "two"}},
			`{"status":{"status":"EgressFirewall Rules not correctly applied","messages":["one","two"]}}`},
		{EgressFirewallStatus{Status: EgressFirewallApplied},
			`{"status":{"status":"EgressFirewall Rules applied","messages":null}}`},
		{EgressFirewallStatus{Messages: []string{}},
			`{"status":{"status":null,"messages":null}}`},
	} {
		dyn.ClearActions()
		if err := WriteEgressFirewallStatus(ctx, dyn, "a", EgressFirewallName, tc.status); err != nil {
			t.Fatal(err)
		}
		acts := dyn.Actions()
		if len(acts) != 1 {
			t.Fatalf("%d requests: %v", len(acts), acts)
		}
		p, ok := acts[0].(clienttesting.PatchAction)
		if !ok || p.GetVerb() != "patch" || p.GetSubresource() != "status" || p.GetPatchType() != types.MergePatchType ||
			p.GetNamespace() != "a" || p.GetName() != EgressFirewallName || p.GetResource() != EgressFirewallResource || string(p.GetPatch()) != tc.patch {
			t.Fatalf("request %#v, want a merge patch of a/default's status: %s", acts[0], tc.patch)
		}
		u, err := dyn.Resource(EgressFirewallResource).Namespace("a").Get(ctx, EgressFirewallName, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got EgressFirewall
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
			t.Fatal(err)
		}
		want := tc.status
		if len(want.Messages) == 0 {
			want.Messages = nil
		}
		if !reflect.DeepEqual(got.Status, want) || !reflect.DeepEqual(got.Spec, orig.Spec) {
			b, _ := json.Marshal(u.Object)
			t.Fatalf("after writing %+v: %s", tc.status, b)
		}
	}
	if err := WriteEgressFirewallStatus(ctx, dyn, "none", EgressFirewallName, EgressFirewallStatus{Status: EgressFirewallApplied}); err == nil {
		t.Fatal("writing the status of an EgressFirewall that does not exist succeeded")
	}
}

func TestServesEgressFirewall(t *testing.T) {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	if ServesEgressFirewall(d) {
		t.Fatal("served with no API")
	}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "k8s.ovn.org/v1", APIResources: []metav1.APIResource{{Name: "egressips"}}}}
	if ServesEgressFirewall(d) {
		t.Fatal("served with only egressips")
	}
	d.Resources[0].APIResources = append(d.Resources[0].APIResources, metav1.APIResource{Name: "egressfirewalls", Namespaced: true, Kind: "EgressFirewall"})
	if !ServesEgressFirewall(d) {
		t.Fatal("not served")
	}
}

// A listed page keeps its resource version and continuation (the
// reflector pages with them) and the items that convert, typed.
func TestTypedList(t *testing.T) {
	ul := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*malformed("x"), *object(t, "y", rules("10.0.0.0/8"))}}
	ul.SetResourceVersion("12")
	ul.SetContinue("next")
	n := int64(3)
	ul.SetRemainingItemCount(&n)
	l := typedList[EgressFirewall, EgressFirewallList](testr.New(t), ul)
	if l.ResourceVersion != "12" || l.Continue != "next" || l.RemainingItemCount == nil || *l.RemainingItemCount != 3 ||
		len(l.Items) != 1 || firstCIDR(&l.Items[0]) != "y/10.0.0.0/8" {
		t.Fatalf("%+v", l)
	}
}
