package ovndb

import (
	"reflect"
	"testing"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

func ptr[T any](v T) *T { return &v }

func TestChangedFields(t *testing.T) {
	base := func() *nbdb.LogicalSwitchPort {
		return &nbdb.LogicalSwitchPort{
			Name:        "ns_p",
			Addresses:   []string{"0a:58:0a:f4:01:05 10.244.1.5", "x"},
			Options:     map[string]string{"requested-chassis": "n1"},
			ExternalIDs: map[string]string{"a": "b"},
		}
	}
	tests := []struct {
		name   string
		mutate func(cached, want *nbdb.LogicalSwitchPort)
		want   int
	}{
		{"identical", func(c, w *nbdb.LogicalSwitchPort) {}, 0},
		{"set order ignored", func(c, w *nbdb.LogicalSwitchPort) { w.Addresses = []string{"x", "0a:58:0a:f4:01:05 10.244.1.5"} }, 0},
		{"nil and empty set equal", func(c, w *nbdb.LogicalSwitchPort) { c.PortSecurity = nil; w.PortSecurity = []string{} }, 0},
		{"nil and empty map equal", func(c, w *nbdb.LogicalSwitchPort) { c.ExternalIDs = nil; w.ExternalIDs = map[string]string{} }, 0},
		{"set member changed", func(c, w *nbdb.LogicalSwitchPort) { w.Addresses = []string{"y", "x"} }, 1},
		{"map value changed", func(c, w *nbdb.LogicalSwitchPort) { w.Options = map[string]string{"requested-chassis": "n2"} }, 1},
		{"map key added", func(c, w *nbdb.LogicalSwitchPort) { w.Options["iface-id-ver"] = "u" }, 1},
		{"optional set vs unset", func(c, w *nbdb.LogicalSwitchPort) { w.Enabled = ptr(true) }, 1},
		{"optional equal", func(c, w *nbdb.LogicalSwitchPort) { c.Enabled = ptr(true); w.Enabled = ptr(true) }, 0},
		{"unmanaged column ignored", func(c, w *nbdb.LogicalSwitchPort) { c.Up = ptr(true) }, 0},
		{"two columns", func(c, w *nbdb.LogicalSwitchPort) { w.Type = "router"; w.ExternalIDs = nil }, 2},
	}
	for _, tt := range tests {
		cached, want := base(), base()
		tt.mutate(cached, want)
		fields := []any{&want.Addresses, &want.PortSecurity, &want.Options, &want.ExternalIDs, &want.Enabled, &want.Type}
		got, err := changedFields(cached, want, fields)
		if err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(got) != tt.want {
			t.Errorf("%s: %d changed fields, want %d", tt.name, len(got), tt.want)
		}
	}
}

func TestChangedFieldsRejectsForeignPointer(t *testing.T) {
	a, b := &nbdb.LogicalSwitchPort{}, &nbdb.LogicalSwitchPort{}
	if _, err := changedFields(a, b, []any{&a.Name}); err == nil {
		t.Fatal("a pointer into another struct was accepted")
	}
}

func TestMissing(t *testing.T) {
	if got := missing([]string{"a", "b"}, []string{"b", "c", "d"}); len(got) != 2 || got[0] != "c" || got[1] != "d" {
		t.Fatalf("missing = %v", got)
	}
	if got := missing(nil, nil); got != nil {
		t.Fatalf("missing(nil, nil) = %v", got)
	}
}

func BenchmarkChangedFieldsUnchangedPort(b *testing.B) {
	mk := func() *nbdb.LogicalSwitchPort {
		return &nbdb.LogicalSwitchPort{Name: "ns_p", Addresses: []string{"0a:58:0a:f4:01:05 10.244.1.5"}, PortSecurity: []string{"0a:58:0a:f4:01:05 10.244.1.5"},
			Options: map[string]string{"requested-chassis": "n1", "iface-id-ver": "uid"}, ExternalIDs: map[string]string{"a": "b", "c": "d", "e": "f"}}
	}
	cached, want := mk(), mk()
	fields := []any{&want.Type, &want.Addresses, &want.PortSecurity, &want.Options, &want.ExternalIDs}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if c, _ := changedFields(cached, want, fields); len(c) != 0 {
			b.Fatal("changed")
		}
	}
}

// The generated CloneModel must copy deeply: libovsdb's cache hands out
// clones, and a shared map would let a caller corrupt the cache.
func TestGeneratedCloneIsDeep(t *testing.T) {
	up := true
	a := &nbdb.LogicalSwitchPort{UUID: "u", Name: "p", Addresses: []string{"x"}, Options: map[string]string{"k": "v"}, Up: &up}
	b := model.Clone(a).(*nbdb.LogicalSwitchPort)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("clone differs: %+v %+v", a, b)
	}
	b.Addresses[0], b.Options["k"], *b.Up = "y", "w", false
	if a.Addresses[0] != "x" || a.Options["k"] != "v" || !*a.Up {
		t.Fatalf("clone shares memory with the original: %+v", a)
	}
}

func BenchmarkCloneSwitchWith100Ports(b *testing.B) {
	ls := &nbdb.LogicalSwitch{UUID: "u", Name: "n1", OtherConfig: map[string]string{"subnet": "10.244.1.0/24"}}
	for i := 0; i < 100; i++ {
		ls.Ports = append(ls.Ports, "6f1c1a52-0000-4000-8000-0000000000aa")
	}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = model.Clone(ls)
	}
}
