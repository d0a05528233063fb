package ovndb

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// The members of a set column the client does not monitor (NBUnmonitored:
// Address_Set.addresses) are kept here, per row, as this process last read
// them from the server or committed them: SetMembers sends a change of a few
// members of a large set as those members, and no client decodes a whole set
// on every change of it, its own writes' echoes included (make bench: the
// first admin policies inserting 32,000 addresses waited for their echoes).
//
// What is kept is right only while this process is the sole writer of the
// column. So:
//   - a row this process inserted starts from the members it was inserted
//     with, found by its name (Committed, Inserted); the first change carries
//     a wait for them, so it commits only if the row still holds them;
//   - else an entry is read from the server when missing: the whole table at
//     once the first time after a start, a reconnect or ForgetMembers, one
//     row after that;
//   - a transaction's writes are recorded only when it committed and no other
//     recorded write or read of the row happened since it read the entry
//     (generations); otherwise, or when it failed (a lost reply leaves its
//     outcome unknown), the entry is forgotten and read again;
//   - a read racing with such a forgetting is dropped, not kept;
//   - a reconnect (a new cache epoch) forgets everything, and the master's
//     periodic resync does too (ForgetMembers): a change someone else made
//     to a set is repaired then, as before.

// ErrMembersRaced means a set's members were changed by another transaction
// of this process while this one computed its change from them (or were
// being read meanwhile): the ledger forgot them and the caller's retry reads
// them from the server.
var ErrMembersRaced = errors.New("a set's members changed while this change was computed from them (two syncs at once); retry")

// keptColumns are the unmonitored set columns whose members ovndb keeps, by
// table.
var keptColumns = map[string]string{nbdb.AddressSetTable: "addresses"}

// memberReadTimeout bounds a read of members from the server.
const memberReadTimeout = 30 * time.Second

type memberKey struct{ table, uuid string }

type memberEntry struct {
	gen     uint64
	members map[string]struct{} // never changed once made: readers share it
	// verify: the members are those this process inserted the row with,
	// found by the row's name: the first change sends them as a wait, so
	// that it commits only if the row holds them.
	verify bool
}

// memberWrite is a transaction's change of one row's members, recorded
// when it commits if the entry is still at gen.
type memberWrite struct {
	gen  uint64
	want map[string]struct{}
}

// memberReader reads the members of one column of one row (uuid) or of every
// row (uuid empty) of a table from the server, by row UUID.
type memberReader func(table, column, uuid string) (map[string]map[string]struct{}, error)

type memberLedger struct {
	mu      sync.Mutex
	epoch   Epoch
	entries map[memberKey]*memberEntry
	loaded  map[string]bool // tables read whole since the last forgetting
	// inserted are the members rows were inserted with, by table and name
	// (an insert's reply does not name the row), until a change needs them.
	inserted map[memberKey]map[string]struct{}
	next     uint64 // generations and ticks
	// reading counts reads in flight; touched holds, while there are any, the
	// tick at which each row's entry was last forgotten for a failed or
	// raced write: a read that began before cannot tell whether it saw the
	// write, so its result for that row is dropped.
	reading int
	touched map[memberKey]uint64
	loadMu  sync.Mutex // one whole-table read at a time
}

var ledgers sync.Map // client.Client -> *memberLedger

func ledgerOf(c client.Client) *memberLedger {
	if l, ok := ledgers.Load(c); ok {
		return l.(*memberLedger)
	}
	l, _ := ledgers.LoadOrStore(c, newMemberLedger())
	return l.(*memberLedger)
}

func newMemberLedger() *memberLedger {
	return &memberLedger{entries: map[memberKey]*memberEntry{}, loaded: map[string]bool{}, touched: map[memberKey]uint64{},
		inserted: map[memberKey]map[string]struct{}{}}
}

// ForgetMembers drops every set's members kept for c: the next change of each
// reads them from the server again (the master's periodic resync, which
// repairs what someone else changed).
func ForgetMembers(c client.Client) {
	l := ledgerOf(c)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.forgetAll()
}

func (l *memberLedger) forgetAll() {
	l.entries = map[memberKey]*memberEntry{}
	l.loaded = map[string]bool{}
	l.inserted = map[memberKey]map[string]struct{}{}
}

// syncEpoch forgets everything when the cache was refilled (a reconnect: the
// database may have been replaced meanwhile). Called with mu held.
func (l *memberLedger) syncEpoch(now Epoch) {
	if now != l.epoch {
		l.forgetAll()
		l.epoch = now
	}
}

// members returns the entry of key (a row named name) and its generation,
// from what the row was inserted with, or else read from the server (the
// table whole, or the row) when there is none.
func (l *memberLedger) members(now Epoch, key memberKey, name, column string, read memberReader) (*memberEntry, error) {
	l.mu.Lock()
	l.syncEpoch(now)
	e, loaded := l.entries[key], l.loaded[key.table]
	byName := memberKey{key.table, name}
	if ins, ok := l.inserted[byName]; ok {
		delete(l.inserted, byName)
		if e == nil {
			l.next++
			e = &memberEntry{gen: l.next, members: ins, verify: true}
			l.entries[key] = e
		}
	}
	l.mu.Unlock()
	if e != nil {
		return e, nil
	}
	if !loaded {
		if err := l.load(now, key.table, column, read); err != nil {
			return nil, err
		}
		l.mu.Lock()
		e = l.entries[key]
		l.mu.Unlock()
		if e != nil {
			return e, nil
		}
	}
	if err := l.read(now, key.table, column, key.uuid, read); err != nil {
		return nil, err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if e = l.entries[key]; e == nil {
		return nil, ErrMembersRaced // forgotten again while read
	}
	return e, nil
}

// insertedRows notes the members of the rows ops inserted into a kept
// column's table, once they committed.
func (l *memberLedger) insertedRows(now Epoch, ops []ovsdb.Operation) {
	inserted := map[memberKey]map[string]struct{}{}
	for _, op := range ops {
		column, kept := keptColumns[op.Table]
		name, named := op.Row["name"].(string)
		if op.Op == ovsdb.OperationInsert && kept && named {
			inserted[memberKey{op.Table, name}] = stringSet(op.Row[column])
		}
	}
	if len(inserted) == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncEpoch(now)
	maps.Copy(l.inserted, inserted)
}

// stringSet reads a set column of strings as OVSDB sends it (a set, a lone
// atom, or nothing for the empty set).
func stringSet(v any) map[string]struct{} {
	out := map[string]struct{}{}
	switch v := v.(type) {
	case ovsdb.OvsSet:
		for _, m := range v.GoSet {
			if m, ok := m.(string); ok {
				out[m] = struct{}{}
			}
		}
	case string:
		out[v] = struct{}{}
	}
	return out
}

// Inserted tells ovndb that ops, committed, inserted rows: the first change
// of their members is computed from what they were inserted with, not read
// from the server (for inserts committed outside a Txn's Committed).
func Inserted(c client.Client, ops []ovsdb.Operation) {
	ledgerOf(c).insertedRows(CurrentEpoch(c), ops)
}

// load reads a table's column whole, once per forgetting.
func (l *memberLedger) load(now Epoch, table, column string, read memberReader) error {
	l.loadMu.Lock()
	defer l.loadMu.Unlock()
	l.mu.Lock()
	done := l.loaded[table]
	l.mu.Unlock()
	if done {
		return nil
	}
	if err := l.read(now, table, column, "", read); err != nil {
		return err
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.epoch == now {
		l.loaded[table] = true
	}
	return nil
}

// read reads from the server and keeps what it read of each row that has no
// entry and was not forgotten for a write meanwhile. A row not on the server
// is ErrRowGone when it was the one asked for.
func (l *memberLedger) read(now Epoch, table, column, uuid string, read memberReader) error {
	l.mu.Lock()
	l.next++
	start := l.next
	l.reading++
	l.mu.Unlock()
	scope := "row"
	if uuid == "" {
		scope = "table"
	}
	metrics.NBSetMemberReads.WithLabelValues(scope).Inc()
	rows, err := read(table, column, uuid)
	l.mu.Lock()
	defer l.mu.Unlock()
	l.reading--
	defer func() {
		if l.reading == 0 {
			clear(l.touched)
		}
	}()
	if err != nil {
		return err
	}
	if l.epoch != now {
		return ErrStaleCache
	}
	if uuid != "" {
		if _, ok := rows[uuid]; !ok {
			return fmt.Errorf("%w (%s %s)", ErrRowGone, table, uuid)
		}
	}
	for id, members := range rows {
		key := memberKey{table, id}
		if l.entries[key] != nil || l.touched[key] > start {
			continue
		}
		l.next++
		l.entries[key] = &memberEntry{gen: l.next, members: members}
	}
	return nil
}

// settle records a transaction's writes once it ended (err its outcome).
func (l *memberLedger) settle(now Epoch, writes map[memberKey]*memberWrite, err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.syncEpoch(now)
	raced := false
	for key, w := range writes {
		l.next++
		if e := l.entries[key]; err == nil && e != nil && e.gen == w.gen {
			l.entries[key] = &memberEntry{gen: l.next, members: w.want}
			continue
		}
		delete(l.entries, key)
		if l.reading > 0 {
			l.touched[key] = l.next
		}
		raced = raced || err == nil
	}
	switch {
	case err != nil:
		return err
	case raced:
		return ErrMembersRaced
	}
	return nil
}

// setLedgerMembers is SetMembers for a column the client does not monitor:
// the members it has are the ledger's, and the change is recorded when the
// transaction's outcome is given to Committed.
func (t *Txn) setLedgerMembers(row model.Model, field any, want []string) {
	table, _ := t.tableCache(row)
	i, err := fieldIndex(row, field)
	if err != nil || t.err != nil {
		t.fail(err)
		return
	}
	column := reflect.TypeOf(row).Elem().Field(i).Tag.Get("ovsdb")
	if keptColumns[table] != column {
		t.fail(fmt.Errorf("SetMembers on %s.%s, a column the client does not monitor and ovndb does not keep", table, column))
		return
	}
	key := memberKey{table, getUUID(row)}
	var have map[string]struct{}
	var gen uint64
	verify := false
	if w := t.writes[key]; w != nil { // changed twice in one transaction
		have, gen = w.want, w.gen
	} else {
		e, err := ledgerOf(t.c).members(CurrentEpoch(t.c), key, rowName(row), column, t.readMembers)
		if err != nil {
			t.fail(fmt.Errorf("reading the members of %s %s: %w", table, rowName(row), err))
			return
		}
		have, gen, verify = e.members, e.gen, e.verify
	}
	wantSet := make(map[string]struct{}, len(want))
	var add, del []string
	for _, m := range want {
		if _, dup := wantSet[m]; dup {
			continue
		}
		wantSet[m] = struct{}{}
		if _, ok := have[m]; !ok {
			add = append(add, m)
		}
	}
	for m := range have {
		if _, ok := wantSet[m]; !ok {
			del = append(del, m)
		}
	}
	if len(add) == 0 && len(del) == 0 {
		return
	}
	if verify {
		t.waitMembers(row, i, have)
	}
	slices.Sort(del) // a map's order: sent sorted, so the same change is the same operation
	t.mutateSet(row, field, ovsdb.MutateOperationDelete, del)
	t.mutateSet(row, field, ovsdb.MutateOperationInsert, add)
	if t.writes == nil {
		t.writes = map[memberKey]*memberWrite{}
	}
	t.writes[key] = &memberWrite{gen: gen, want: wantSet}
}

// Committed gives the outcome of committing the transaction's operations
// (err, nil when committed) to the ledger of unmonitored set members, and
// returns err, or ErrMembersRaced when another transaction changed one of the
// same sets meanwhile (the caller retries). Every transaction whose
// SetMembers changed such a column (Address_Set.addresses) must end with it.
func (t *Txn) Committed(err error) error {
	l := ledgerOf(t.c)
	if err == nil {
		l.insertedRows(CurrentEpoch(t.c), t.ops)
	}
	if len(t.writes) == 0 {
		return err
	}
	return l.settle(CurrentEpoch(t.c), t.writes, err)
}

// waitMembers makes the transaction commit only if the row's column (field
// i) holds exactly members: the members of a row found by name.
func (t *Txn) waitMembers(row model.Model, i int, members map[string]struct{}) {
	list := slices.Sorted(maps.Keys(members)) // ovsdb-server compares sets as sets; libovsdb's test server, as lists
	target, set := uuidRowWith(row, i, list)
	zero := 0
	ops, err := t.c.Where(target).Wait(ovsdb.WaitConditionEqual, &zero, target, set)
	t.fail(err)
	t.ops = append(t.ops, ops...)
}

// readMembers reads column of the row uuid (or of every row) of table from
// the server.
func (t *Txn) readMembers(table, column, uuid string) (map[string]map[string]struct{}, error) {
	if t.c.Cache() == nil || t.c.CurrentEndpoint() == "" {
		return nil, ErrNotConnected
	}
	op := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: table, Columns: []string{"_uuid", column}}
	if uuid != "" {
		op.Where = []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: uuid})}
	}
	ctx, cancel := context.WithTimeout(context.Background(), memberReadTimeout)
	defer cancel()
	results, err := t.c.Transact(ctx, op)
	if err == nil {
		err = checkResults(results, []ovsdb.Operation{op})
	}
	if err != nil {
		return nil, err
	}
	out := make(map[string]map[string]struct{}, len(results[0].Rows))
	for _, row := range results[0].Rows {
		id, ok := row["_uuid"].(ovsdb.UUID)
		if !ok {
			return nil, fmt.Errorf("reading %s: the server sent no _uuid", table)
		}
		out[id.GoUUID] = stringSet(row[column])
	}
	return out, nil
}
