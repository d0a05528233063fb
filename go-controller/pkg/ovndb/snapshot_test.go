package ovndb

import (
	"fmt"
	"testing"

	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const (
	u1 = "00000000-0000-0000-0000-000000000001"
	u2 = "00000000-0000-0000-0000-000000000002"
	u3 = "00000000-0000-0000-0000-000000000003"
	u4 = "00000000-0000-0000-0000-000000000004"
	u5 = "00000000-0000-0000-0000-000000000005"
)

func snap(rows ...model.Model) Snapshot {
	s := Snapshot{}
	for _, r := range rows {
		var table string
		switch r.(type) {
		case *nbdb.LogicalSwitch:
			table = nbdb.LogicalSwitchTable
		case *nbdb.LogicalSwitchPort:
			table = nbdb.LogicalSwitchPortTable
		case *nbdb.ACL:
			table = nbdb.ACLTable
		}
		if s[table] == nil {
			s[table] = map[string]model.Model{}
		}
		s[table][getUUID(r)] = r
	}
	return s
}

// Rows are matched by UUID, then by name or external_ids: a port made again
// with a new UUID is the same port, and its switch's reference to it is
// unchanged; only what differs is reported, sets as added and removed.
func TestCompare(t *testing.T) {
	have := snap(
		&nbdb.LogicalSwitch{UUID: u1, Name: "n1", Ports: []string{u2, u3}, OtherConfig: map[string]string{"subnet": "10.244.0.0/24"}},
		&nbdb.LogicalSwitchPort{UUID: u2, Name: "ns_a", Addresses: []string{"0a:58:0a:f4:00:05 10.244.0.5"}},
		&nbdb.LogicalSwitchPort{UUID: u3, Name: "ns_old"},
		&nbdb.ACL{UUID: u4, Action: "drop", ExternalIDs: map[string]string{"owner": "p1"}},
	)
	want := snap(
		&nbdb.LogicalSwitch{UUID: u1, Name: "n1", Ports: []string{u5}, OtherConfig: map[string]string{"subnet": "10.244.0.0/24"}},
		&nbdb.LogicalSwitchPort{UUID: u5, Name: "ns_a", Addresses: []string{"0a:58:0a:f4:00:05 10.244.0.5"}},
		&nbdb.ACL{UUID: u4, Action: "allow-related", ExternalIDs: map[string]string{"owner": "p1"}},
		&nbdb.ACL{UUID: u2 + "x", Action: "drop", ExternalIDs: map[string]string{"owner": "p2"}},
	)
	var got []string
	for _, d := range Compare(have, want) {
		got = append(got, fmt.Sprintf("%s %s %s %+v", d.Kind, d.Table, d.Row, d.Columns))
	}
	wantRows := []string{
		"differs ACL {owner=p1} [{Column:action Have:drop Want:allow-related Added:[] Removed:[]}]",
		"missing ACL {owner=p2} []",
		"differs Logical_Switch n1 [{Column:ports Have:[Logical_Switch_Port ns_a, Logical_Switch_Port ns_old] Want:[Logical_Switch_Port ns_a] Added:[] Removed:[Logical_Switch_Port ns_old]}]",
		"stale Logical_Switch_Port ns_old []",
	}
	if fmt.Sprint(got) != fmt.Sprint(wantRows) {
		t.Errorf("Compare:\n%q\nwant\n%q", got, wantRows)
	}
	if d := Compare(have, have); len(d) != 0 {
		t.Errorf("a snapshot differs from itself: %+v", d)
	}
}

// A row named as ours and owned by nobody is reported; one owned, or named
// otherwise, is not.
func TestUnowned(t *testing.T) {
	owned := topology.Owner{Type: topology.OwnerNode, Name: "n1"}.ExternalIDs()
	s := snap(
		&nbdb.LogicalSwitch{UUID: u1, Name: "ext_n1", ExternalIDs: owned},
		&nbdb.LogicalSwitch{UUID: u2, Name: "ext_intruder"},
		&nbdb.LogicalSwitch{UUID: u3, Name: "foreign-switch"},
		&nbdb.LogicalSwitchPort{UUID: u4, Name: "k8s-n9"},
	)
	var got []string
	for _, d := range s.Unowned() {
		got = append(got, d.Kind+" "+d.Table+" "+d.Row)
	}
	if want := "[unowned Logical_Switch ext_intruder unowned Logical_Switch_Port k8s-n9]"; fmt.Sprint(got) != want {
		t.Errorf("Unowned = %v, want %s", got, want)
	}
}
