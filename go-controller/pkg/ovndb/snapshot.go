package ovndb

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Snapshot is every row a client's cache holds: table → UUID → row.
type Snapshot map[string]map[string]model.Model

// TakeSnapshot copies the rows of c's cache (a client monitoring every
// column: ConnectNBFull).
func TakeSnapshot(c client.Client) Snapshot {
	s := Snapshot{}
	tc := c.Cache()
	if tc == nil { // closed
		return s
	}
	for _, table := range tc.Tables() {
		rows := tc.Table(table).Rows()
		if len(rows) > 0 {
			s[table] = rows
		}
	}
	return s
}

// Rows is how many rows s holds.
func (s Snapshot) Rows() int {
	n := 0
	for _, rows := range s {
		n += len(rows)
	}
	return n
}

// RowDiff is a row that differs between two snapshots: only in the one
// wanted (missing), only in the one there (stale), or in both with columns
// that differ.
type RowDiff struct {
	Kind    string       `json:"kind"` // missing, stale, differs or unowned
	Table   string       `json:"table"`
	Row     string       `json:"row"` // its name, else its external_ids, else its UUID
	Columns []ColumnDiff `json:"columns,omitempty"`
}

// ColumnDiff is one column of a row that differs: its value in the database
// and the value wanted; for a set or a map, also the elements (key=value
// pairs) wanted and not there (Added) and there and not wanted (Removed).
// References to other rows read as "Table row".
type ColumnDiff struct {
	Column  string   `json:"column"`
	Have    string   `json:"have"`
	Want    string   `json:"want"`
	Added   []string `json:"added,omitempty"`
	Removed []string `json:"removed,omitempty"`
}

// Row kinds of a RowDiff.
const (
	RowMissing = "missing"
	RowStale   = "stale"
	RowDiffers = "differs"
	RowUnowned = "unowned" // named as ours, owned by nobody (Snapshot.Unowned)
)

// Unowned are the rows of s that carry a name of ours (topology.OurName)
// and no owner: not the master's to change, yet in its way.
func (s Snapshot) Unowned() []RowDiff {
	var out []RowDiff
	for _, table := range slices.Sorted(maps.Keys(s)) {
		for _, uuid := range slices.Sorted(maps.Keys(s[table])) {
			row := s[table][uuid]
			name := rowName(row)
			if _, owned := topology.OwnerOf(ExternalIDs(row)); owned || name == uuid || !topology.OurName(name) {
				continue
			}
			out = append(out, RowDiff{Kind: RowUnowned, Table: table, Row: name})
		}
	}
	return out
}

// Compare lists how have differs from want, by table and row. Rows are
// matched by UUID, then by name or external_ids (a row deleted and made
// again has a new UUID but is the same row); references to rows are
// compared by what they reference, not by UUID.
func Compare(have, want Snapshot) []RowDiff {
	names := map[string]string{}
	for _, s := range []Snapshot{have, want} {
		for table, rows := range s {
			for uuid, row := range rows {
				names[uuid] = table + " " + identity(row)
			}
		}
	}
	tables := map[string]bool{}
	for t := range have {
		tables[t] = true
	}
	for t := range want {
		tables[t] = true
	}
	var out []RowDiff
	for _, table := range slices.Sorted(maps.Keys(tables)) {
		out = append(out, compareTable(table, have[table], want[table], names)...)
	}
	return out
}

func compareTable(table string, have, want map[string]model.Model, names map[string]string) []RowDiff {
	// Rows not matched by UUID, by identity.
	unmatched := map[string][]string{}
	for uuid, row := range want {
		if _, ok := have[uuid]; !ok {
			id := identity(row)
			unmatched[id] = append(unmatched[id], uuid)
		}
	}
	var out []RowDiff
	for _, uuid := range slices.Sorted(maps.Keys(have)) {
		h := have[uuid]
		w, ok := want[uuid]
		if !ok {
			id := identity(h)
			if len(unmatched[id]) == 0 {
				out = append(out, RowDiff{Kind: RowStale, Table: table, Row: id})
				continue
			}
			w = want[unmatched[id][0]]
			unmatched[id] = unmatched[id][1:]
		}
		if cols := columnDiffs(h, w, names); len(cols) > 0 {
			out = append(out, RowDiff{Kind: RowDiffers, Table: table, Row: identity(w), Columns: cols})
		}
	}
	for _, id := range slices.Sorted(maps.Keys(unmatched)) {
		for range unmatched[id] {
			out = append(out, RowDiff{Kind: RowMissing, Table: table, Row: id})
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Row < out[j].Row })
	return out
}

// identity names a row: its name, else its external_ids, else its UUID.
func identity(row model.Model) string {
	if n := rowName(row); n != getUUID(row) && n != "" {
		return n
	}
	if ids := ExternalIDs(row); len(ids) > 0 {
		return renderValue(reflect.ValueOf(ids), nil)
	}
	return getUUID(row)
}

// columnDiffs are the columns of two rows of one table that differ.
func columnDiffs(have, want model.Model, names map[string]string) []ColumnDiff {
	hv, wv := reflect.ValueOf(have).Elem(), reflect.ValueOf(want).Elem()
	var out []ColumnDiff
	for i := 0; i < hv.NumField(); i++ {
		col := hv.Type().Field(i).Tag.Get("ovsdb")
		if col == "" || col == "_uuid" {
			continue
		}
		h, w := renderValue(hv.Field(i), names), renderValue(wv.Field(i), names)
		if h == w {
			continue
		}
		d := ColumnDiff{Column: col, Have: h, Want: w}
		if he, we := elements(hv.Field(i), names), elements(wv.Field(i), names); he != nil || we != nil {
			d.Added, d.Removed = setMinus(we, he), setMinus(he, we)
		}
		out = append(out, d)
	}
	return out
}

// renderValue writes a column's value in a canonical form: sets and maps
// sorted, an absent optional value as [], a reference as its row's name.
func renderValue(v reflect.Value, names map[string]string) string {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return "[]"
		}
		return renderValue(v.Elem(), names)
	case reflect.String:
		if n, ok := names[v.String()]; ok {
			return n
		}
		return v.String()
	case reflect.Slice, reflect.Array:
		return "[" + strings.Join(elements(v, names), ", ") + "]"
	case reflect.Map:
		return "{" + strings.Join(elements(v, names), ", ") + "}"
	default:
		return fmt.Sprint(v.Interface())
	}
}

// elements are a set's members or a map's key=value pairs, rendered and
// sorted; nil for any other column.
func elements(v reflect.Value, names map[string]string) []string {
	var parts []string
	switch v.Kind() {
	case reflect.Slice, reflect.Array:
		parts = make([]string, v.Len())
		for i := range parts {
			parts[i] = renderValue(v.Index(i), names)
		}
	case reflect.Map:
		parts = make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			parts = append(parts, renderValue(k, names)+"="+renderValue(v.MapIndex(k), names))
		}
	default:
		return nil
	}
	sort.Strings(parts)
	return parts
}

// setMinus are the elements of a not in b (both sorted).
func setMinus(a, b []string) []string {
	in := make(map[string]bool, len(b))
	for _, x := range b {
		in[x] = true
	}
	var out []string
	for _, x := range a {
		if !in[x] {
			out = append(out, x)
		}
	}
	return out
}
