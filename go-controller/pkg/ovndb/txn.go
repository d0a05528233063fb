package ovndb

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync/atomic"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

var namedUUIDCounter atomic.Uint64

// newNamedUUID is unique across every transaction of the process, so that
// operations built by different workers can share one batched transaction.
func newNamedUUID() string {
	return "row" + strconv.FormatUint(namedUUIDCounter.Add(1), 10)
}

// Txn builds the operations that bring some rows from what the client cache
// holds to what is desired. Rows that already match produce no operation, so
// a sync of an unchanged object writes nothing. The first error sticks.
type Txn struct {
	c   client.Client
	ops []ovsdb.Operation
	err error
	// Merged counts duplicate rows of ours found and merged (see Lookup).
	Merged  int
	deleted map[string]bool
	// children indexes, per parent set field seen by EnsureChild, its cached
	// rows by external_ids[idKey] (built once per field and transaction).
	children map[childKey]childIndex
	// read holds the copies of child rows read by UUID (childIndex,
	// EnsureChild, ChildrenWhere), so that a sync ensuring a group's ACLs
	// and removing the extra ones copies each row once, not three times.
	// The copies are only compared, never handed out.
	read map[string]model.Model
	// writes are the changes of unmonitored set columns' members, recorded
	// in their ledger by Committed (members.go).
	writes map[memberKey]*memberWrite
}

type childKey struct {
	field uintptr // address of the parent's set field
	idKey string
}

type childIndex struct {
	parent model.Model // held so that the field's address is not reused
	byID   map[string]string
}

// NewTxn starts an empty set of operations against c's cache.
func NewTxn(c client.Client) *Txn { return &Txn{c: c} }

// Ops returns the operations built so far, or the first error met.
func (t *Txn) Ops() ([]ovsdb.Operation, error) {
	if t.err != nil {
		return t.ops, t.err
	}
	return withACLTiers(t.c, t.ops), nil
}

// Err is the first error met.
func (t *Txn) Err() error { return t.err }

// Len is the number of operations built so far: an Ensure that leaves it
// unchanged found its row as desired.
func (t *Txn) Len() int { return len(t.ops) }

func (t *Txn) fail(err error) {
	if t.err == nil && err != nil {
		t.err = err
	}
}

// tableCache is the client cache of want's table, or nil after failing the
// transaction (disconnected, or a table the client does not monitor).
func (t *Txn) tableCache(want model.Model) (string, *cache.RowCache) {
	tc := t.c.Cache()
	if tc == nil {
		t.fail(ErrNotConnected)
		return "", nil
	}
	table := tc.DatabaseModel().FindTable(reflect.TypeOf(want))
	rc := tc.Table(table)
	if rc == nil {
		t.fail(fmt.Errorf("table %s is not in the client cache", table))
	}
	return table, rc
}

// Lookup finds the cached row matching want's name (or UUID) and returns a
// copy, or nil when there is none. Two rows sharing a name is an error: this
// controller never creates that, so someone else did and a human must choose.
func (t *Txn) Lookup(want model.Model) model.Model {
	if t.err != nil {
		return nil
	}
	table, rc := t.tableCache(want)
	if rc == nil {
		return nil
	}
	rows, err := rc.RowsByModels([]model.Model{want})
	if err != nil {
		t.fail(fmt.Errorf("looking up %s %s: %w", table, rowName(want), err))
		return nil
	}
	// The cache answers from the first index that matches; when no row has the
	// name, a later index (owner name) may match other rows: keep the named.
	if name := rowName(want); name != "" && name != getUUID(want) {
		for uuid, r := range rows {
			if rowName(r) != name {
				delete(rows, uuid)
			}
		}
	}
	if len(rows) > 1 {
		return t.mergeDuplicates(table, want, rows)
	}
	for _, r := range rows {
		return r // RowsByModels hands out copies already
	}
	return nil
}

// mergeDuplicates handles several rows of one name. If all are ovn-k8s's and
// belong to one owner (an insert that ran twice), the one with the most
// ports is kept and the others are deleted in this transaction; the owner's
// sync puts back whatever hung off them. Anyone else's row among them is an
// error for a human.
func (t *Txn) mergeDuplicates(table string, want model.Model, rows map[string]model.Model) model.Model {
	var keep model.Model
	var owner topology.Owner
	for _, r := range rows {
		o, ok := topology.OwnerOf(ExternalIDs(r))
		if !ok || keep != nil && o != owner {
			t.fail(fmt.Errorf("%d %s rows are named %q and not all were created by ovn-k8s for one object; delete the ones that are not ovn-k8s's", len(rows), table, rowName(want)))
			return nil
		}
		owner = o
		if keep == nil || betterKeeper(r, keep) {
			keep = r
		}
	}
	for uuid, r := range rows {
		if uuid != getUUID(keep) {
			t.Delete(r)
		}
	}
	t.Merged++
	return keep
}

// betterKeeper prefers the row with more ports (as far as the cache knows
// them: a switch's are not monitored), then the smaller UUID, so every writer
// picks the same one.
func betterKeeper(a, b model.Model) bool {
	na, nb := portCount(a), portCount(b)
	if na != nb {
		return na > nb
	}
	return getUUID(a) < getUUID(b)
}

func portCount(m model.Model) int {
	if f := reflect.ValueOf(m).Elem().FieldByName("Ports"); f.IsValid() && f.Kind() == reflect.Slice {
		return f.Len()
	}
	return 0
}

// Ensure makes the row want (found by its name) exist with the listed columns
// (pointers to fields of want) as desired, and returns the UUID to reference
// it by in this transaction: the real one, or a named UUID for a new row.
// children, if given, are UUIDs that childField (a pointer to a set field of
// want) must contain; extra members are left alone.
func (t *Txn) Ensure(want model.Model, fields []any, childField any, children ...string) string {
	cached := t.Lookup(want)
	if t.err != nil {
		return ""
	}
	if cached == nil {
		uuid := newNamedUUID()
		setUUID(want, uuid)
		if childField != nil {
			reflect.ValueOf(childField).Elem().Set(reflect.ValueOf(children))
		}
		t.failOnDuplicate(want)
		ops, err := t.c.Create(want)
		t.fail(err)
		t.ops = append(t.ops, ops...)
		return uuid
	}
	if err := checkOwner(cached, want); err != nil {
		t.fail(err)
		return ""
	}
	uuid := getUUID(cached)
	if !t.updateChanged(cached, want, uuid, fields) {
		return ""
	}
	if childField != nil {
		i, err := fieldIndex(want, childField)
		if err != nil {
			t.fail(err)
			return ""
		}
		t.AddChildren(cached, reflect.ValueOf(cached).Elem().Field(i).Addr().Interface(), children...)
	}
	return uuid
}

// failOnDuplicate guards the insert of a named row whose table has no
// schema index on its name (Logical_Switch, Logical_Router, Load_Balancer):
// the transaction fails if a row with that name exists by the time it runs,
// so an insert re-sent after a lost reply, or raced by another writer, cannot
// create a second row of the same name.
func (t *Txn) failOnDuplicate(want model.Model) {
	f := reflect.ValueOf(want).Elem().FieldByName("Name")
	if !f.IsValid() || f.Kind() != reflect.String || f.String() == "" {
		return
	}
	tc := t.c.Cache()
	if tc == nil {
		t.fail(ErrNotConnected)
		return
	}
	dbm := tc.DatabaseModel()
	ts := dbm.Schema.Table(dbm.FindTable(reflect.TypeOf(want)))
	if ts == nil {
		return
	}
	for _, idx := range ts.Indexes {
		if len(idx) == 1 && idx[0] == "name" {
			return // the server refuses a duplicate by itself
		}
	}
	probe := model.Clone(want)
	t.FailIfExists(probe, reflect.ValueOf(probe).Elem().FieldByName("Name").Addr().Interface())
}

// FailIfExists guards the transaction: it fails if, when it runs, a row
// exists whose column (field, a pointer into probe) equals probe's value.
// Built as OVSDB's `wait` until != [that row] with a zero timeout.
func (t *Txn) FailIfExists(probe model.Model, field any) {
	if t.err != nil {
		return
	}
	value := reflect.ValueOf(field).Elem().Interface()
	timeout := 0
	ops, err := t.c.WhereAny(probe, model.Condition{Field: field, Function: ovsdb.ConditionEqual, Value: value}).
		Wait(ovsdb.WaitConditionNotEqual, &timeout, probe, field)
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

// updateChanged gives want the cached row's UUID and adds an update of the
// listed fields that differ from the cached row; false on error.
func (t *Txn) updateChanged(cached, want model.Model, uuid string, fields []any) bool {
	setUUID(want, uuid)
	changed, err := changedFields(cached, want, fields)
	if err != nil {
		t.fail(err)
		return false
	}
	if len(changed) > 0 {
		ops, err := t.c.Where(want).Update(want, changed...)
		t.fail(err)
		t.ops = append(t.ops, ops...)
	}
	return t.err == nil
}

// UpdateChanged writes the listed fields of want that differ from cached
// (a copy of a cached row) into that row.
func (t *Txn) UpdateChanged(cached, want model.Model, fields []any) {
	if t.err == nil {
		t.updateChanged(cached, want, getUUID(cached), fields)
	}
}

// AddChildren inserts UUIDs into a set column (childField points into parent,
// a cached row) unless they are there already. For a column the client does
// not monitor (NBUnmonitored), only rows created in this transaction are
// inserted: the children are rows of a non-root table (ports), and such a row
// exists only while a parent holds it, so an existing one is held already.
func (t *Txn) AddChildren(parent model.Model, childField any, children ...string) {
	if t.unmonitored(parent, childField) {
		var created []string
		for _, c := range children {
			if ovsdb.IsNamedUUID(c) {
				created = append(created, c)
			}
		}
		t.mutateSet(parent, childField, ovsdb.MutateOperationInsert, created)
		return
	}
	have := reflect.ValueOf(childField).Elem().Interface().([]string)
	t.mutateSet(parent, childField, ovsdb.MutateOperationInsert, missing(have, children))
}

// InsertMembers inserts UUIDs into a set column (childField points into
// parent, a cached row) without looking: for a column the client does not
// monitor, where the caller knows them missing or inserting them again
// changes nothing.
func (t *Txn) InsertMembers(parent model.Model, childField any, uuids ...string) {
	t.mutateSet(parent, childField, ovsdb.MutateOperationInsert, uuids)
}

// RemoveChildren deletes UUIDs from a set column of a cached row; rows only
// referenced from there (ports) are then garbage-collected by the server.
// For a column the client does not monitor, they are detached from whichever
// row of parent's table holds them (Detach).
func (t *Txn) RemoveChildren(parent model.Model, childField any, children ...string) {
	if t.unmonitored(parent, childField) {
		t.Detach(parent, childField, children...)
		return
	}
	have := reflect.ValueOf(childField).Elem().Interface().([]string)
	absent := missing(have, children)
	present := slices.DeleteFunc(slices.Clone(children), func(c string) bool { return slices.Contains(absent, c) })
	t.mutateSet(parent, childField, ovsdb.MutateOperationDelete, present)
}

// Detach deletes each UUID from the set column (field, a pointer into
// probe) of every row of probe's table that holds it, whatever the cache
// says: one mutation per UUID, conditioned on the column including it. A UUID
// no row holds makes the transaction fail with ErrRowGone (the cache was
// behind: the caller's retry finds the child gone).
func (t *Txn) Detach(probe model.Model, field any, children ...string) {
	if t.err != nil {
		return
	}
	i, err := fieldIndex(probe, field)
	if err != nil {
		t.fail(err)
		return
	}
	for _, c := range children {
		target := reflect.New(reflect.TypeOf(probe).Elem()).Interface().(model.Model)
		fv := reflect.ValueOf(target).Elem().Field(i)
		fv.Set(reflect.ValueOf([]string{c}))
		set := fv.Addr().Interface()
		ops, err := t.c.WhereAll(target, model.Condition{Field: set, Function: ovsdb.ConditionIncludes, Value: []string{c}}).
			Mutate(target, model.Mutation{Field: set, Mutator: ovsdb.MutateOperationDelete, Value: []string{c}})
		t.fail(err)
		t.ops = append(t.ops, ops...)
	}
}

// unmonitored says whether field (a pointer into row) is a column of
// NBUnmonitored, whose cached value is always empty.
func (t *Txn) unmonitored(row model.Model, field any) bool {
	table, rc := t.tableCache(row)
	if rc == nil || len(NBUnmonitored[table]) == 0 {
		return false
	}
	i, err := fieldIndex(row, field)
	if err != nil {
		return false
	}
	return slices.Contains(NBUnmonitored[table], reflect.TypeOf(row).Elem().Field(i).Tag.Get("ovsdb"))
}

// Delete removes a cached root row (a switch or router), once per transaction.
func (t *Txn) Delete(row model.Model) {
	if t.err != nil || t.deleted[getUUID(row)] {
		return
	}
	if t.deleted == nil {
		t.deleted = map[string]bool{}
	}
	t.deleted[getUUID(row)] = true
	ops, err := t.c.Where(row).Delete()
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

func (t *Txn) mutateSet(parent model.Model, field any, mutator ovsdb.Mutator, uuids []string) {
	if t.err != nil || len(uuids) == 0 {
		return
	}
	// Mutate needs the field of the model it is given to hold the mutation's
	// value; the rest of a row holding hundreds of ports need not be copied,
	// only its UUID (the mutation's condition).
	i, err := fieldIndex(parent, field)
	if err != nil {
		t.fail(err)
		return
	}
	target, set := uuidRowWith(parent, i, uuids)
	ops, err := t.c.Where(target).Mutate(target, model.Mutation{Field: set, Mutator: mutator, Value: uuids})
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

// uuidRowWith is a new row of row's table holding only row's UUID and, in
// its field i (a set column), values; set points to that field.
func uuidRowWith(row model.Model, i int, values []string) (target model.Model, set any) {
	target = reflect.New(reflect.TypeOf(row).Elem()).Interface().(model.Model)
	setUUID(target, getUUID(row))
	fv := reflect.ValueOf(target).Elem().Field(i)
	fv.Set(reflect.ValueOf(values))
	return target, fv.Addr().Interface()
}

func checkOwner(cached, want model.Model) error {
	if !reflect.ValueOf(want).Elem().FieldByName("ExternalIDs").IsValid() {
		return nil // tables without external_ids (Load_Balancer_Group) are owned by name
	}
	have, ok := topology.OwnerOf(ExternalIDs(cached))
	wantOwner, _ := topology.OwnerOf(ExternalIDs(want))
	if !ok {
		return fmt.Errorf("%s %q exists but was not created by ovn-k8s (no %s=%s external_id); remove or rename it",
			reflect.TypeOf(cached).Elem().Name(), rowName(cached), topology.OwnerControllerKey, topology.ControllerName)
	}
	if have != wantOwner {
		return fmt.Errorf("%s %q belongs to %s, not %s; two objects map to one row name",
			reflect.TypeOf(cached).Elem().Name(), rowName(cached), have, wantOwner)
	}
	return nil
}

// missing is what of want is not in have (a set when both are large).
func missing(have, want []string) []string {
	var out []string
	if len(have)*len(want) < 4096 {
		for _, w := range want {
			if !slices.Contains(have, w) {
				out = append(out, w)
			}
		}
		return out
	}
	in := make(map[string]bool, len(have))
	for _, h := range have {
		in[h] = true
	}
	for _, w := range want {
		if !in[w] {
			out = append(out, w)
		}
	}
	return out
}

func getUUID(m model.Model) string {
	return reflect.ValueOf(m).Elem().FieldByName("UUID").String()
}

func setUUID(m model.Model, uuid string) {
	reflect.ValueOf(m).Elem().FieldByName("UUID").SetString(uuid)
}

func rowName(m model.Model) string {
	if f := reflect.ValueOf(m).Elem().FieldByName("Name"); f.IsValid() && f.Kind() == reflect.String {
		return f.String()
	}
	return getUUID(m)
}

// ExternalIDs is a row's external_ids (nil for a table without them).
func ExternalIDs(m model.Model) map[string]string {
	if f := reflect.ValueOf(m).Elem().FieldByName("ExternalIDs"); f.IsValid() {
		ids, _ := f.Interface().(map[string]string)
		return ids
	}
	return nil
}

// EnsureChild makes a nameless row (a NAT or a static route) exist among the
// rows that childField (a set field of the cached parent) references; the row
// is identified by its external_ids[idKey]. Returns its UUID.
func (t *Txn) EnsureChild(parent model.Model, childField any, idKey string, want model.Model, fields []any) string {
	if t.err != nil {
		return ""
	}
	_, rc := t.tableCache(want)
	if rc == nil {
		return ""
	}
	if uuid, ok := t.childIndex(parent, childField, idKey, rc)[ExternalIDs(want)[idKey]]; ok {
		if row := t.row(rc, uuid); row != nil {
			if !t.updateChanged(row, want, uuid, fields) {
				return ""
			}
			return uuid
		}
	}
	uuid := t.Create(want)
	t.AddChildren(parent, childField, uuid)
	return uuid
}

// KnownChildren gives EnsureChild the children of parent (in childField)
// it may find by idKey: rows the caller found without reading every child,
// such as a node's own routes through the owner index (OwnedChildren). A
// child not among them is not found by id: EnsureChild creates its row.
func (t *Txn) KnownChildren(parent model.Model, childField any, idKey string, rows []model.Model) {
	byID := make(map[string]string, len(rows))
	for _, row := range rows {
		if id, ok := ExternalIDs(row)[idKey]; ok && byID[id] == "" {
			byID[id] = getUUID(row)
		}
	}
	if t.children == nil {
		t.children = map[childKey]childIndex{}
	}
	t.children[childKey{field: reflect.ValueOf(childField).Pointer(), idKey: idKey}] = childIndex{parent: parent, byID: byID}
}

// childIndex maps the ids of the rows childField (a set field of parent)
// references to their UUIDs: one pass over the field per transaction, so
// that ensuring each of a router's thousands of NATs does not scan them all.
func (t *Txn) childIndex(parent model.Model, childField any, idKey string, rc *cache.RowCache) map[string]string {
	k := childKey{field: reflect.ValueOf(childField).Pointer(), idKey: idKey}
	if ix, ok := t.children[k]; ok {
		return ix.byID
	}
	uuids := reflect.ValueOf(childField).Elem().Interface().([]string)
	byID := make(map[string]string, len(uuids))
	for _, uuid := range uuids {
		if row := t.row(rc, uuid); row != nil {
			if id, ok := ExternalIDs(row)[idKey]; ok && byID[id] == "" {
				byID[id] = uuid
			}
		}
	}
	if t.children == nil {
		t.children = map[childKey]childIndex{}
	}
	t.children[k] = childIndex{parent: parent, byID: byID}
	return byID
}

// row is the cached row with this UUID (a copy: rc.Row hands out copies),
// read once per transaction.
func (t *Txn) row(rc *cache.RowCache, uuid string) model.Model {
	if r, ok := t.read[uuid]; ok {
		return r
	}
	r := rc.Row(uuid)
	if r == nil {
		return nil // not remembered: a row created meanwhile is found later
	}
	if t.read == nil {
		t.read = map[string]model.Model{}
	}
	t.read[uuid] = r
	return r
}

// Create inserts a new nameless row (an ACL) and returns the named UUID to
// reference it by in this transaction.
func (t *Txn) Create(row model.Model) string {
	if t.err != nil {
		return ""
	}
	uuid := newNamedUUID()
	setUUID(row, uuid)
	ops, err := t.c.Create(row)
	t.fail(err)
	t.ops = append(t.ops, ops...)
	return uuid
}

// SetMembers makes a set column of a cached row (field points into it) hold
// exactly want, by inserting what is missing and deleting what is extra: a
// change of a few members of a large set sends only those members. For a
// column the client does not monitor (Address_Set.addresses), the members it
// has are those ovndb keeps (members.go), and the transaction must end with
// Committed.
func (t *Txn) SetMembers(row model.Model, field any, want []string) {
	if t.unmonitored(row, field) {
		t.setLedgerMembers(row, field, want)
		return
	}
	have := reflect.ValueOf(field).Elem().Interface().([]string)
	haveSet := make(map[string]bool, len(have))
	for _, h := range have {
		haveSet[h] = true
	}
	wantSet := make(map[string]bool, len(want))
	var add, del []string
	for _, w := range want {
		wantSet[w] = true
		if !haveSet[w] {
			add = append(add, w)
		}
	}
	for _, h := range have {
		if !wantSet[h] {
			del = append(del, h)
		}
	}
	t.mutateSet(row, field, ovsdb.MutateOperationDelete, del)
	t.mutateSet(row, field, ovsdb.MutateOperationInsert, add)
}

// ChildrenWhere returns the UUIDs among uuids (rows of probe's table, such
// as a parent's NAT, route or ACL set) whose cached external_ids pick accepts.
func (t *Txn) ChildrenWhere(uuids []string, pick func(ids map[string]string) bool, probe model.Model) []string {
	_, rc := t.tableCache(probe)
	if rc == nil {
		return nil
	}
	var out []string
	for _, uuid := range uuids {
		if row := t.row(rc, uuid); row != nil && pick(ExternalIDs(row)) {
			out = append(out, uuid)
		}
	}
	return out
}

// UUIDsWhere returns the UUIDs of the rows whose external_ids pick
// accepts: ChildrenWhere for rows already read (OwnedChildren).
func UUIDsWhere(rows []model.Model, pick func(ids map[string]string) bool) []string {
	var out []string
	for _, row := range rows {
		if pick(ExternalIDs(row)) {
			out = append(out, getUUID(row))
		}
	}
	return out
}

// Wait adds a guard: the transaction fails unless the cached row's listed
// fields are still what the cache holds (optimistic concurrency).
func (t *Txn) Wait(cached model.Model, fields ...any) {
	if t.err != nil {
		return
	}
	timeout := 0
	ops, err := t.c.Where(cached).Wait(ovsdb.WaitConditionEqual, &timeout, cached, fields...)
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

// Update writes the listed fields of a cached row unconditionally.
func (t *Txn) Update(row model.Model, fields ...any) {
	if t.err != nil {
		return
	}
	ops, err := t.c.Where(row).Update(row, fields...)
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

// Lookup is Txn.Lookup typed: the cached row named like want, or nil.
func Lookup[T model.Model](t *Txn, want T) T {
	r, _ := t.Lookup(want).(T)
	return r
}

// Require is Lookup for a row that must exist already (a parent created by
// someone else first): its absence fails the transaction, naming the row.
func Require[T model.Model](t *Txn, want T) T {
	r := Lookup(t, want)
	if t.err == nil && reflect.ValueOf(r).IsNil() {
		t.fail(fmt.Errorf("%s %q does not exist yet", reflect.TypeOf(want).Elem().Name(), rowName(want)))
	}
	return r
}
