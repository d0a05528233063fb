package main

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestSetWatchApply feeds setWatch the update2 forms ovsdb-server sends
// (RFC 7047 and ovsdb-server(7)): a modification carries the members that
// changed, each one in or out; one member alone is sent without "set";
// port groups hold UUIDs.
func TestSetWatchApply(t *testing.T) {
	w := newSetWatch("unix:/nonexistent")
	var seen []string
	changes := 0
	w.changed = func() { changes++ }
	w.onChange(func(r *setRow, deleted bool, _ time.Time) {
		seen = append(seen, r.table+"/"+r.name+map[bool]string{true: " deleted", false: ""}[deleted])
	})
	apply := func(update string, initial bool) error {
		var u tableUpdates2
		if err := json.Unmarshal([]byte(update), &u); err != nil {
			return err
		}
		return w.apply(u, initial)
	}
	step := func(initial bool, update string) {
		t.Helper()
		if err := apply(update, initial); err != nil {
			t.Fatalf("apply %s: %v", update, err)
		}
	}
	members := func(table, name string) []string {
		m := w.members(table, name)
		slices.Sort(m)
		return m
	}
	want := func(table, name string, items ...string) {
		t.Helper()
		if got := members(table, name); !slices.Equal(got, items) {
			t.Errorf("%s %s holds %v, want %v", table, name, got, items)
		}
	}

	step(true, `{"Address_Set":{"u1":{"initial":{"name":"a","external_ids":["map",[["k","v"]]],"addresses":["set",["10.0.0.1","10.0.0.2"]]}}},
		"Port_Group":{"u2":{"initial":{"name":"pg","external_ids":["map",[]],"ports":["uuid","p1"]}}}}`)
	want("Address_Set", "a", "10.0.0.1", "10.0.0.2")
	want("Port_Group", "pg", "p1")
	// A modification toggles: 10.0.0.2 leaves, 10.0.0.3 enters; a lone member without "set".
	step(false, `{"Address_Set":{"u1":{"modify":{"addresses":["set",["10.0.0.2","10.0.0.3"]]}}}}`)
	want("Address_Set", "a", "10.0.0.1", "10.0.0.3")
	step(false, `{"Address_Set":{"u1":{"modify":{"addresses":"10.0.0.1"}}},
		"Port_Group":{"u2":{"modify":{"ports":["set",[["uuid","p2"],["uuid","p3"]]]}}}}`)
	want("Address_Set", "a", "10.0.0.3")
	want("Port_Group", "pg", "p1", "p2", "p3")
	if changes != 3 {
		t.Errorf("%d member changes counted, want 3 (one per modified row)", changes)
	}
	// external_ids: an equal pair leaves, a new key enters, a changed value replaces.
	step(false, `{"Address_Set":{"u1":{"modify":{"external_ids":["map",[["k","v"],["n","1"]]]}}}}`)
	if ids := w.byName[rowKey{"Address_Set", "a"}].ids; len(ids) != 1 || ids["n"] != "1" {
		t.Errorf("external_ids %v, want only n=1", ids)
	}
	if changes != 3 {
		t.Errorf("an external_ids change counted as a member change (%d)", changes)
	}
	step(false, `{"Port_Group":{"u2":{"delete":null}}}`)
	if m := w.members("Port_Group", "pg"); m != nil || w.size("Port_Group", "pg") != 0 {
		t.Errorf("deleted port group still held: %v", m)
	}
	// A new session's initial rows replace what was held.
	step(true, `{"Address_Set":{"u9":{"initial":{"name":"b","external_ids":["map",[]],"addresses":["set",[]]}}}}`)
	if w.members("Address_Set", "a") != nil {
		t.Error("a row of the old session survived a new one's initial rows")
	}
	want("Address_Set", "b")
	// Every row change reaches the handlers (one update's tables come in map order).
	wantSeen := []string{"Address_Set/a", "Address_Set/a", "Address_Set/a", "Address_Set/a", "Address_Set/b", "Port_Group/pg", "Port_Group/pg", "Port_Group/pg deleted"}
	slices.Sort(seen)
	if !slices.Equal(seen, wantSeen) {
		t.Errorf("handlers saw %v, want %v", seen, wantSeen)
	}

	for _, bad := range []string{`{"Address_Set":{"u7":{"modify":{"addresses":"x"}}}}`, `{"Address_Set":{"u1":{"insert":{"addresses":["oops",[]]}}}}`, `[`} {
		if err := apply(bad, false); err == nil {
			t.Errorf("apply %s: no error", bad)
		}
	}
}

// TestSetWatchDecode reads the server's messages as the connection brings
// them: an update2 notification, an echo request, the monitor's reply, and
// the set encodings ovsSet reads by hand.
func TestSetWatchDecode(t *testing.T) {
	stream := `{"id":null,"method":"update2","params":["sets",{"Address_Set":{"u1":{"modify":{"addresses":["set",["10.0.0.1"]]}}}}]}
{"method":"echo","params":[],"id":"echo"}
{"id":"sets","result":{"Port_Group":{"u2":{"initial":{"name":"pg","external_ids":["map",[]],"ports":["set",[]]}}}},"error":null}`
	dec := json.NewDecoder(strings.NewReader(stream))
	var msgs []rpcMessage
	for dec.More() {
		var m rpcMessage
		if err := dec.Decode(&m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	if u := msgs[0].Params.updates["Address_Set"]["u1"].Modify; msgs[0].Method != "update2" || u == nil || !slices.Equal(*u.Addresses, []string{"10.0.0.1"}) {
		t.Errorf("update2 read as %+v", msgs[0])
	}
	if msgs[1].Method != "echo" || string(msgs[1].Params.raw) != "[]" || msgs[1].Params.updates != nil {
		t.Errorf("echo read as %+v (its params go back as they came)", msgs[1])
	}
	if r := msgs[2].Result["Port_Group"]["u2"].Initial; string(msgs[2].ID) != `"sets"` || r == nil || *r.Name != "pg" || r.Ports == nil || len(*r.Ports) != 0 {
		t.Errorf("monitor reply read as %+v", msgs[2])
	}

	for in, want := range map[string][]string{
		`"a"`:                                   {"a"},
		`["uuid","u"]`:                          {"u"},
		` [ "set" , [ "a" , "b\"c\/d" ] ] `:     {"a", `b"c/d`},
		`["set",[["uuid","u1"],["uuid","u2"]]]`: {"u1", "u2"},
		`["set",[]]`:                            nil,
	} {
		var s ovsSet
		if err := json.Unmarshal([]byte(in), &s); err != nil || !slices.Equal(s, want) {
			t.Errorf("%s read as %q (%v), want %q", in, s, err, want)
		}
	}
	for _, bad := range []string{`["map",[]]`, `["set",[1]]`, `["set",["a"],"x"]`, `["uuid"]`, `7`} {
		var s ovsSet
		if err := json.Unmarshal([]byte(bad), &s); err == nil {
			t.Errorf("%s read as %q, want an error", bad, s)
		}
	}
}
