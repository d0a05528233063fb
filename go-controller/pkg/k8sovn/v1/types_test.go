package v1

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// fill sets every exported field reachable from v to a value that is not
// its zero value: two entries in every slice, one in every map, every
// pointer set. The same type always gets the same values.
func fill(v reflect.Value) {
	switch v.Kind() {
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 2, 2))
		for i := range v.Len() {
			fill(v.Index(i))
		}
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	}
}

// mutate changes every value reachable from v through its exported fields,
// pointers, slices and maps (a map's entries are replaced by changed ones).
// It returns how many values it changed.
func mutate(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			n += mutate(v.Elem())
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				n += mutate(v.Field(i))
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			n += mutate(v.Index(i))
		}
	case reflect.Map:
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			n += mutate(e)
			v.SetMapIndex(k, e)
		}
	case reflect.String:
		v.SetString(v.String() + "'")
		n++
	case reflect.Bool:
		v.SetBool(!v.Bool())
		n++
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(v.Int() + 1)
		n++
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(v.Uint() + 1)
		n++
	}
	return n
}

// deepCopier is a pointer to a kind or list of this package.
type deepCopier[T any] interface {
	*T
	runtime.Object
	DeepCopy() *T
}

// full is a T with every field set (see fill).
func full[T any]() *T {
	o := new(T)
	fill(reflect.ValueOf(o).Elem())
	return o
}

// checkDeepCopy checks T's deep copies: a deep copy of an object with every
// field set (every slice, map and pointer, metadata's too) equals it, and
// changing everything in the copy (at least minChanged values) leaves the
// original as it was: no slice, map or pointer is shared. The same of
// DeepCopyObject, which is of the same type; a copy of nil is nil.
func checkDeepCopy[T any, PT deepCopier[T]](t *testing.T, minChanged int) {
	t.Helper()
	orig, want := PT(full[T]()), PT(full[T]())
	c := PT(orig.DeepCopy())
	if !reflect.DeepEqual(c, orig) {
		t.Fatalf("%T: copy differs:\n%+v\n%+v", orig, c, orig)
	}
	if n := mutate(reflect.ValueOf(c)); n < minChanged {
		t.Fatalf("%T: only %d values changed", orig, n)
	}
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("%T: changing the copy changed the original:\n%+v\nwant\n%+v", orig, orig, want)
	}
	if reflect.DeepEqual(c, orig) {
		t.Fatalf("%T: the copy did not change", orig)
	}

	o := orig.DeepCopyObject()
	if _, ok := o.(PT); !ok || !reflect.DeepEqual(o, runtime.Object(orig)) {
		t.Fatalf("%T: DeepCopyObject: %T %+v", orig, o, o)
	}
	mutate(reflect.ValueOf(o))
	if !reflect.DeepEqual(orig, want) {
		t.Fatalf("%T: changing DeepCopyObject's copy changed the original", orig)
	}

	if PT(nil).DeepCopy() != nil || PT(nil).DeepCopyObject() != nil {
		t.Fatalf("%T: a copy of nil is not nil", orig)
	}
}

// EgressFirewall's and EgressFirewallList's deep copies (checkDeepCopy);
// empty slices and nil pointers stay what they were.
func TestDeepCopy(t *testing.T) {
	if ef := full[EgressFirewall](); ef.Spec.Egress[1].To.NodeSelector.MatchExpressions[1].Values[1] != "x" || ef.Status.Messages[1] != "x" ||
		ef.Spec.Egress[1].Ports[1].Port != 1 || ef.ObjectMeta.ManagedFields[1].FieldsV1.Raw[1] != 1 {
		t.Fatalf("not filled: %+v", ef)
	}
	checkDeepCopy[EgressFirewall](t, 50)
	checkDeepCopy[EgressFirewallList](t, 100)

	empty := &EgressFirewall{Spec: EgressFirewallSpec{Egress: []EgressFirewallRule{{Ports: []EgressFirewallPort{}}}}}
	if ec := empty.DeepCopy(); !reflect.DeepEqual(ec, empty) || ec.Spec.Egress[0].Ports == nil || ec.Status.Messages != nil || ec.Spec.Egress[0].To.NodeSelector != nil {
		t.Fatalf("copy of %+v: %+v", empty, ec)
	}
}

// upstreamExample is an EgressFirewall as upstream's documentation writes one.
const upstreamExample = `
kind: EgressFirewall
apiVersion: k8s.ovn.org/v1
metadata: {name: default, namespace: default}
spec:
  egress:
  - type: Allow
    to: {cidrSelector: 1.2.3.0/24}
  - type: Allow
    to: {dnsName: www.openvswitch.org}
  - type: Allow
    to: {cidrSelector: 4.5.6.0/24}
    ports: [{protocol: UDP, port: 55}]
  - type: Allow
    to: {nodeSelector: {matchLabels: {region: east}}}
  - type: Deny
    to: {cidrSelector: 0.0.0.0/0}
status:
  status: EgressFirewall Rules applied
  messages: [one, two]
`

// Every field of upstream's example has its place in the types (no field
// unknown), and the types write upstream's JSON back.
func TestUpstreamJSON(t *testing.T) {
	js, err := utilyaml.ToJSON([]byte(upstreamExample))
	if err != nil {
		t.Fatal(err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var ef EgressFirewall
	if err := dec.Decode(&ef); err != nil {
		t.Fatal(err)
	}
	want := EgressFirewall{
		TypeMeta:   metav1.TypeMeta{Kind: "EgressFirewall", APIVersion: "k8s.ovn.org/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: EgressFirewallName, Namespace: "default"},
		Spec: EgressFirewallSpec{Egress: []EgressFirewallRule{
			{Type: EgressFirewallRuleAllow, To: EgressFirewallDestination{CIDRSelector: "1.2.3.0/24"}},
			{Type: EgressFirewallRuleAllow, To: EgressFirewallDestination{DNSName: "www.openvswitch.org"}},
			{Type: EgressFirewallRuleAllow, To: EgressFirewallDestination{CIDRSelector: "4.5.6.0/24"}, Ports: []EgressFirewallPort{{Protocol: "UDP", Port: 55}}},
			{Type: EgressFirewallRuleAllow, To: EgressFirewallDestination{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "east"}}}},
			{Type: EgressFirewallRuleDeny, To: EgressFirewallDestination{CIDRSelector: "0.0.0.0/0"}},
		}},
		Status: EgressFirewallStatus{Status: EgressFirewallApplied, Messages: []string{"one", "two"}},
	}
	if !reflect.DeepEqual(ef, want) {
		t.Fatalf("decoded\n%+v\nwant\n%+v", ef, want)
	}
	out, err := json.Marshal(&ef)
	if err != nil {
		t.Fatal(err)
	}
	var got, orig any
	_ = json.Unmarshal(out, &got)
	_ = json.Unmarshal(js, &orig)
	// (creationTimestamp: null, were ObjectMeta to write it)
	delete(got.(map[string]any)["metadata"].(map[string]any), "creationTimestamp")
	if !reflect.DeepEqual(got, orig) {
		t.Fatalf("encoded\n%s\nwant\n%s", out, js)
	}
	// empty optional fields are left out, required ones are not
	b, _ := json.Marshal(EgressFirewall{Spec: EgressFirewallSpec{Egress: []EgressFirewallRule{{Type: "Deny", Ports: []EgressFirewallPort{{Protocol: "TCP"}}}}}})
	if want := `{"metadata":{},"spec":{"egress":[{"type":"Deny","ports":[{"protocol":"TCP"}],"to":{}}]},"status":{}}`; string(b) != want {
		t.Fatalf("got  %s\nwant %s", b, want)
	}
}
