package ovndb

import (
	"testing"

	"github.com/ovn-org/libovsdb/ovsdb"
)

// The tier column follows each ACL write's external_ids; other tables,
// and ACL writes that leave external_ids alone, are untouched.
func TestSetACLTiers(t *testing.T) {
	ids := func(m map[string]string) ovsdb.OvsMap {
		g := map[any]any{}
		for k, v := range m {
			g[k] = v
		}
		return ovsdb.OvsMap{GoMap: g}
	}
	ops := []ovsdb.Operation{
		{Op: ovsdb.OperationInsert, Table: "ACL", Row: ovsdb.Row{"external_ids": ids(map[string]string{ACLTierKey: "1"})}},
		{Op: ovsdb.OperationUpdate, Table: "ACL", Row: ovsdb.Row{"external_ids": ids(map[string]string{"other": "x"})}},
		{Op: ovsdb.OperationUpdate, Table: "ACL", Row: ovsdb.Row{"match": "1"}},
		{Op: ovsdb.OperationInsert, Table: "Port_Group", Row: ovsdb.Row{"external_ids": ids(map[string]string{ACLTierKey: "1"})}},
	}
	shared := ops[0].Row
	setACLTiers(ops)
	for i, want := range []any{1, 0, nil, nil} {
		if got := ops[i].Row["tier"]; got != want {
			t.Errorf("op %d: tier %v, want %v", i, got, want)
		}
	}
	if _, ok := shared["tier"]; ok {
		t.Error("the caller's row was changed in place")
	}
}
