package v1

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	clienttesting "k8s.io/client-go/testing"
)

// EgressIP's and EgressIPList's deep copies (checkDeepCopy); empty slices
// stay empty, nil ones nil.
func TestEgressIPDeepCopy(t *testing.T) {
	if eip := full[EgressIP](); eip.Spec.EgressIPs[1] != "x" || eip.Spec.NamespaceSelector.MatchExpressions[1].Values[1] != "x" ||
		eip.Spec.PodSelector.MatchLabels["x"] != "x" || eip.Status.Items[1].EgressIP != "x" || eip.ObjectMeta.ManagedFields[1].FieldsV1.Raw[1] != 1 {
		t.Fatalf("not filled: %+v", eip)
	}
	checkDeepCopy[EgressIP](t, 50)
	checkDeepCopy[EgressIPList](t, 100)

	empty := &EgressIP{Spec: EgressIPSpec{EgressIPs: []string{}}}
	if ec := empty.DeepCopy(); !reflect.DeepEqual(ec, empty) || ec.Spec.EgressIPs == nil || ec.Status.Items != nil || ec.Spec.PodSelector.MatchLabels != nil {
		t.Fatalf("copy of %+v: %+v", empty, ec)
	}
}

// upstreamEgressIP is an EgressIP as upstream's documentation writes one,
// with the status upstream's master writes.
const upstreamEgressIP = `
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: egressip-prod}
spec:
  egressIPs: [172.18.0.33, 172.18.0.44, "fc00:f853:ccd:e793::33"]
  namespaceSelector:
    matchLabels: {environment: prod}
    matchExpressions: [{key: tier, operator: NotIn, values: [test]}]
  podSelector: {matchLabels: {app: web}}
status:
  items:
  - {node: n1, egressIP: 172.18.0.33}
  - {node: n2, egressIP: "fc00:f853:ccd:e793::33"}
`

// Every field of upstream's example has its place in the types (no field
// unknown), and the types write upstream's JSON back.
func TestEgressIPUpstreamJSON(t *testing.T) {
	js, err := utilyaml.ToJSON([]byte(upstreamEgressIP))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var eip EgressIP
	if err := dec.Decode(&eip); err != nil {
		t.Fatal(err)
	}
	want := EgressIP{
		TypeMeta:   metav1.TypeMeta{Kind: "EgressIP", APIVersion: "k8s.ovn.org/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: "egressip-prod"},
		Spec: EgressIPSpec{
			EgressIPs: []string{"172.18.0.33", "172.18.0.44", "fc00:f853:ccd:e793::33"},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"environment": "prod"},
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"test"}}}},
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		},
		Status: EgressIPStatus{Items: []EgressIPStatusItem{{Node: "n1", EgressIP: "172.18.0.33"}, {Node: "n2", EgressIP: "fc00:f853:ccd:e793::33"}}},
	}
	if !reflect.DeepEqual(eip, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", eip, want)
	}
	out, err := json.Marshal(&eip)
	if err != nil {
		t.Fatal(err)
	}
	var got, orig any
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal(js, &orig)
	delete(got.(map[string]any)["metadata"].(map[string]any), "creationTimestamp")
	if !reflect.DeepEqual(got, orig) {
		t.Fatalf("encoded\n%s\nwant\n%s", out, js)
	}
	// As upstream's types: an empty pod selector is written as {} (which
	// selects every pod, as an absent one does), required fields always.
	b, _ := json.Marshal(EgressIP{})
	if want := `{"metadata":{},"spec":{"egressIPs":null,"namespaceSelector":{},"podSelector":{}},"status":{"items":null}}`; string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}

// eipObject is an EgressIP as the dynamic client has it.
func eipObject(t *testing.T, name string, ips ...string) *unstructured.Unstructured {
	t.Helper()
	eip := EgressIP{TypeMeta: metav1.TypeMeta{APIVersion: GroupVersion.String(), Kind: "EgressIP"}, ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: EgressIPSpec{EgressIPs: ips, NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&eip)
	if err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// malformedEIP is an EgressIP whose spec does not convert.
func malformedEIP(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "EgressIP",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"egressIPs": "not a list", "namespaceSelector": map[string]any{}},
	}}
}

// firstIP describes an EgressIP as "name/its first egress IP" and its
// status items' nodes ("name/ip@n1,n2").
func firstIP(obj any) string {
	eip, ok := obj.(*EgressIP)
	if !ok {
		return fmt.Sprintf("a %T", obj)
	}
	s := eip.Name + "/-"
	if len(eip.Spec.EgressIPs) > 0 {
		s = eip.Name + "/" + eip.Spec.EgressIPs[0]
	}
	for i, it := range eip.Status.Items {
		if i == 0 {
			s += "@"
		} else {
			s += ","
		}
		s += it.Node
	}
	return s
}

func eipRecorder(t *testing.T) *recorder {
	return &recorder{t: t, describe: firstIP, id: func(obj any) string {
		if eip, ok := obj.(*EgressIP); ok {
			return eip.Name
		}
		return fmt.Sprintf("of a %T", obj)
	}}
}

// The EgressIP informer lists typed EgressIPs (keyed by name: they are
// cluster-scoped), leaving out one that does not convert, then follows
// additions, updates (the master's status writes among them) and
// deletions; one changed into one that does not convert is gone from the
// store and comes back when it converts again.
func TestEgressIPInformer(t *testing.T) {
	dyn := newFake(eipObject(t, "a", "172.18.0.33"), malformedEIP("bad"))
	r := eipRecorder(t)
	inf := runInformer(t, dyn, NewEgressIPInformer, r)
	if len(inf.GetIndexer().GetIndexers()) != 0 {
		t.Fatalf("indexes %v on a cluster-scoped kind", inf.GetIndexer().GetIndexers())
	}
	r.wait("add a/172.18.0.33")
	storeHolds(t, inf, firstIP, "a/172.18.0.33")
	obj, ok, _ := inf.GetIndexer().GetByKey("a")
	if eip, _ := obj.(*EgressIP); !ok || eip == nil || eip.Kind != "EgressIP" || eip.Spec.NamespaceSelector.MatchLabels["env"] != "prod" {
		t.Fatalf("listed %+v", obj)
	}

	ri := dyn.Resource(EgressIPResource)
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	_, err := ri.Create(ctx, eipObject(t, "b", "fc00::33", "172.18.0.44"), metav1.CreateOptions{})
	must(err)
	_, err = ri.Update(ctx, eipObject(t, "a", "172.18.0.34"), metav1.UpdateOptions{})
	must(err)
	must(WriteEgressIPStatus(ctx, dyn, "a", EgressIPStatus{Items: []EgressIPStatusItem{{Node: "n1", EgressIP: "172.18.0.34"}}}))
	must(ri.Delete(ctx, "b", metav1.DeleteOptions{}))
	events := []string{"add a/172.18.0.33", "add b/fc00::33", "update a/172.18.0.33 -> a/172.18.0.34",
		"update a/172.18.0.34 -> a/172.18.0.34@n1", "delete b"}
	r.wait(events...)
	storeHolds(t, inf, firstIP, "a/172.18.0.34@n1")

	// malformed, then fixed
	_, err = ri.Update(ctx, malformedEIP("a"), metav1.UpdateOptions{})
	must(err)
	_, err = ri.Create(ctx, malformedEIP("c"), metav1.CreateOptions{})
	must(err)
	_, err = ri.Create(ctx, eipObject(t, "d", "172.18.0.55"), metav1.CreateOptions{})
	must(err)
	events = append(events, "delete a", "add d/172.18.0.55")
	r.wait(events...)
	storeHolds(t, inf, firstIP, "d/172.18.0.55")
	_, err = ri.Update(ctx, eipObject(t, "a", "172.18.0.35"), metav1.UpdateOptions{})
	must(err)
	r.wait(append(events, "add a/172.18.0.35")...)
	storeHolds(t, inf, firstIP, "a/172.18.0.35", "d/172.18.0.55")
}

// Conversion of EgressIP watch events, as of EgressFirewall's
// (TestTypedEvent): a bookmark keeps its resource version, objects of every
// malformed shape are left out or turned into deletions carrying their
// name, without a panic.
func TestEgressIPTypedEvent(t *testing.T) {
	log := testr.New(t)
	bm := &unstructured.Unstructured{Object: map[string]any{"kind": "EgressIP", "apiVersion": "k8s.ovn.org/v1",
		"metadata": map[string]any{"resourceVersion": "42"}}}
	e, keep := typedEvent[EgressIP](log, watch.Event{Type: watch.Bookmark, Object: bm})
	if eip, ok := e.Object.(*EgressIP); !keep || e.Type != watch.Bookmark || !ok || eip.ResourceVersion != "42" || eip.Kind != "EgressIP" ||
		eip.APIVersion != "k8s.ovn.org/v1" {
		t.Fatalf("bookmark: %v %+v", keep, e)
	}
	shapes := []map[string]any{
		{"spec": "x"},
		{"spec": map[string]any{"egressIPs": "x"}},
		{"spec": map[string]any{"egressIPs": []any{int64(1)}}},
		{"spec": map[string]any{"namespaceSelector": "x"}},
		{"spec": map[string]any{"podSelector": map[string]any{"matchLabels": "x"}}},
		{"spec": map[string]any{"podSelector": map[string]any{"matchExpressions": []any{"x"}}}},
		{"status": map[string]any{"items": "x"}},
		{"status": map[string]any{"items": []any{map[string]any{"node": int64(1)}}}},
	}
	for i, s := range shapes {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "k8s.ovn.org/v1", "kind": "EgressIP",
			"metadata": map[string]any{"name": "e", "resourceVersion": "7"}}}
		for k, v := range s {
			u.Object[k] = v
		}
		if _, keep := typedEvent[EgressIP](log, watch.Event{Type: watch.Added, Object: u}); keep {
			t.Errorf("shape %d: a malformed addition passed", i)
		}
		for _, typ := range []watch.EventType{watch.Modified, watch.Deleted} {
			e, keep := typedEvent[EgressIP](log, watch.Event{Type: typ, Object: u})
			eip, ok := e.Object.(*EgressIP)
			if !keep || e.Type != watch.Deleted || !ok || eip.Name != "e" || eip.Namespace != "" || eip.ResourceVersion != "7" {
				t.Errorf("shape %d, %s: %v %+v", i, typ, keep, e)
			}
		}
	}
	ul := &unstructured.UnstructuredList{Items: []unstructured.Unstructured{*malformedEIP("x"), *eipObject(t, "y", "10.0.0.1")}}
	ul.SetResourceVersion("12")
	l := typedList[EgressIP, EgressIPList](log, ul)
	if l.ResourceVersion != "12" || len(l.Items) != 1 || firstIP(&l.Items[0]) != "y/10.0.0.1" {
		t.Fatalf("list: %+v", l)
	}
}

// WriteEgressIPStatus sends one merge patch of the status subresource
// replacing the whole list of items (an empty list for none: the CRD
// requires items), and nothing else.
func TestWriteEgressIPStatus(t *testing.T) {
	orig := eipObject(t, "e", "172.18.0.33", "fc00::33")
	orig.Object["status"] = map[string]any{"items": []any{map[string]any{"node": "old", "egressIP": "172.18.0.33"}}}
	dyn := newFake(orig)
	ctx := context.Background()
	for _, tc := range []struct {
		status EgressIPStatus
		patch  string
	}{
		{EgressIPStatus{Items: []EgressIPStatusItem{{Node: "n1", EgressIP: "172.18.0.33"}, {Node: "n2", EgressIP: "fc00::33"}}},
			`{"status":{"items":[{"node":"n1","egressIP":"172.18.0.33"},{"node":"n2","egressIP":"fc00::33"}]}}`},
		{EgressIPStatus{Items: []EgressIPStatusItem{{Node: "n2", EgressIP: "fc00::33"}}},
			`{"status":{"items":[{"node":"n2","egressIP":"fc00::33"}]}}`},
		{EgressIPStatus{}, `{"status":{"items":[]}}`},
		{EgressIPStatus{Items: []EgressIPStatusItem{}}, `{"status":{"items":[]}}`},
	} {
		dyn.ClearActions()
		if err := WriteEgressIPStatus(ctx, dyn, "e", tc.status); err != nil {
			t.Fatal(err)
		}
		acts := dyn.Actions()
		if len(acts) != 1 {
			t.Fatalf("%d requests: %v", len(acts), acts)
		}
		p, ok := acts[0].(clienttesting.PatchAction)
		if !ok || p.GetVerb() != "patch" || p.GetSubresource() != "status" || p.GetPatchType() != types.MergePatchType ||
			p.GetNamespace() != "" || p.GetName() != "e" || p.GetResource() != EgressIPResource || string(p.GetPatch()) != tc.patch {
			t.Fatalf("request %#v, want a merge patch of e's status: %s", acts[0], tc.patch)
		}
		u, err := dyn.Resource(EgressIPResource).Get(ctx, "e", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var got EgressIP
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
			t.Fatal(err)
		}
		if len(got.Status.Items) != len(tc.status.Items) || (len(tc.status.Items) > 0 && !reflect.DeepEqual(got.Status, tc.status)) ||
			!equalSpec(got.Spec, orig) {
			b, _ := json.Marshal(u.Object)
			t.Fatalf("after writing %+v: %s", tc.status, b)
		}
	}
	if err := WriteEgressIPStatus(ctx, dyn, "none", EgressIPStatus{}); err == nil {
		t.Fatal("writing the status of an EgressIP that does not exist succeeded")
	}
}

// equalSpec says whether spec is u's.
func equalSpec(spec EgressIPSpec, u *unstructured.Unstructured) bool {
	var eip EgressIP
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &eip) == nil && reflect.DeepEqual(spec, eip.Spec)
}

func TestServesEgressIP(t *testing.T) {
	d := &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}}
	if ServesEgressIP(d) {
		t.Fatal("served with no API")
	}
	d.Resources = []*metav1.APIResourceList{{GroupVersion: "k8s.ovn.org/v1", APIResources: []metav1.APIResource{{Name: "egressfirewalls", Namespaced: true}}}}
	if ServesEgressIP(d) {
		t.Fatal("served with only egressfirewalls")
	}
	d.Resources = append(d.Resources, &metav1.APIResourceList{GroupVersion: "k8s.ovn.org/v2", APIResources: []metav1.APIResource{{Name: "egressips"}}})
	if ServesEgressIP(d) {
		t.Fatal("served with only k8s.ovn.org/v2's")
	}
	d.Resources[0].APIResources = append(d.Resources[0].APIResources, metav1.APIResource{Name: "egressips", Kind: "EgressIP"})
	if !ServesEgressIP(d) || !ServesEgressFirewall(d) {
		t.Fatal("not served")
	}
}
