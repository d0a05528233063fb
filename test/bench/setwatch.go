package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// setColumns are the large set columns the benchmark times changes of:
// address sets' addresses and port groups' ports. Its libovsdb client does
// not monitor them (benchUnmonitored): that client copies a row and diffs
// the whole set on every update (libovsdb's cache), so a move of 100
// addresses in a set of 2,000 cost the benchmark the 2,000, and its NB
// monitor took 25-31 % of a core over the admin policy moves, on the two
// cores the master and the NB need. setWatch follows them instead, on a
// connection of its own, at the cost of the members that change.
var setColumns = map[string]string{nbdb.AddressSetTable: "addresses", nbdb.PortGroupTable: "ports"}

// benchUnmonitored is what the benchmark's libovsdb client leaves out: the
// master's own (ovndb.NBUnmonitored) and setColumns.
func benchUnmonitored() ovndb.Unmonitored {
	skip := ovndb.Unmonitored{}
	for t, cols := range ovndb.NBUnmonitored {
		skip[t] = append(skip[t], cols...)
	}
	for t, col := range setColumns {
		skip[t] = append(skip[t], col)
	}
	return skip
}

// setRow is an address set or port group as setWatch holds it: its
// members (addresses, or port UUIDs) as a set.
type setRow struct {
	table, name string
	ids         map[string]string
	members     map[string]struct{}
}

// has is whether the row holds every one of items (in) or none of them.
func (r *setRow) has(items []string, in bool) bool {
	for _, it := range items {
		if _, ok := r.members[it]; ok != in {
			return false
		}
	}
	return true
}

// setWatch follows setColumns' rows over OVSDB monitor_cond (update2, whose
// modifications carry only the members that changed), reconnecting after a
// lost connection (a restarted NB) and starting afresh from the server's
// rows, as the libovsdb client does. Handlers run, in order, for every row
// inserted, modified or deleted, with the watch's lock held: they must not
// call back into it.
type setWatch struct {
	endpoint string
	mu       sync.Mutex
	rows     map[string]*setRow // UUID → row
	byName   map[rowKey]*setRow
	handlers []func(r *setRow, deleted bool, now time.Time)
	changed  func() // a member changed (the row changes count)
}

func newSetWatch(endpoint string) *setWatch {
	return &setWatch{endpoint: endpoint, rows: map[string]*setRow{}, byName: map[rowKey]*setRow{}}
}

// onChange adds a handler; call before start.
func (w *setWatch) onChange(h func(r *setRow, deleted bool, now time.Time)) {
	w.handlers = append(w.handlers, h)
}

// start connects and returns once the server's rows are held (or fails
// after timeout); the watch then runs until ctx ends.
func (w *setWatch) start(ctx context.Context, timeout time.Duration) error {
	synced := make(chan struct{})
	var once sync.Once
	var last error
	var lastMu sync.Mutex
	go func() {
		for ctx.Err() == nil {
			held := false
			err := w.session(ctx, func() { held = true; once.Do(func() { close(synced) }) })
			if held && ctx.Err() == nil && !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
				// A restarted or stopped NB ends a session quietly (EOF); anything
				// else (a message it could not read) is said.
				say("  (the set watch's NB session ended: %v; reconnecting)", err)
			}
			lastMu.Lock()
			last = err
			lastMu.Unlock()
			select { // the NB restarting: try again shortly
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	select {
	case <-synced:
		return nil
	case <-time.After(timeout):
		lastMu.Lock()
		defer lastMu.Unlock()
		return fmt.Errorf("set monitor of %s not synced after %v: %v", w.endpoint, timeout, last)
	}
}

// rpcMessage is what the server sends on the set watch's connection: the
// monitor's reply (Result), update2 notifications and echo requests
// (Params). Each is decoded in one pass of the decoder, the set columns'
// members by hand (ovsSet), so that a set of 2,000 addresses inserted is
// read about three times, not a dozen (nested json.RawMessage).
type rpcMessage struct {
	ID     json.RawMessage `json:"id"`
	Method string          `json:"method"`
	Params rpcParams       `json:"params"`
	Result tableUpdates2   `json:"result"`
	Error  json.RawMessage `json:"error"`
}

// rpcParams are a notification's or request's parameters: an update2's
// table updates (after its monitor's id), or else kept raw (echo's, sent
// back), so that an update's members are not copied only to be dropped.
type rpcParams struct {
	raw     json.RawMessage
	updates tableUpdates2
}

func (p *rpcParams) UnmarshalJSON(data []byte) error {
	// update2: ["<monitor id>", {table updates}]; the id is our "sets".
	rest := bytes.TrimSpace(data)
	if len(rest) >= 2 && rest[0] == '[' && rest[len(rest)-1] == ']' {
		rest = bytes.TrimSpace(rest[1 : len(rest)-1])
	}
	if !bytes.HasPrefix(rest, []byte(`"sets"`)) {
		p.raw = append(json.RawMessage(nil), data...) // not ours to read: kept to send back
		return nil
	}
	rest = bytes.TrimSpace(rest[len(`"sets"`):])
	if len(rest) == 0 || rest[0] != ',' {
		return fmt.Errorf("update2 params %.60s", data)
	}
	return json.Unmarshal(rest[1:], &p.updates)
}

// tableUpdates2 is table → row UUID → change (RFC 7047's update2 form).
type tableUpdates2 map[string]map[string]rowUpdate2

type rowUpdate2 struct {
	Initial *rowColumns     `json:"initial"`
	Insert  *rowColumns     `json:"insert"`
	Modify  *rowColumns     `json:"modify"`
	Delete  json.RawMessage `json:"delete"` // present (null) for a deleted row
}

type rowColumns struct {
	Name      *string `json:"name"`
	IDs       *ovsMap `json:"external_ids"`
	Addresses *ovsSet `json:"addresses"`
	Ports     *ovsSet `json:"ports"`
}

// session monitors over one connection until it fails.
func (w *setWatch) session(ctx context.Context, synced func()) error {
	network, addr, _ := strings.Cut(w.endpoint, ":")
	conn, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer conn.Close()
	tables := map[string][]map[string][]string{}
	for t, col := range setColumns {
		tables[t] = []map[string][]string{{"columns": {"name", "external_ids", col}}}
	}
	req, _ := json.Marshal(map[string]any{"id": "sets", "method": "monitor_cond", "params": []any{"OVN_Northbound", "sets", tables}})
	if _, err := conn.Write(req); err != nil {
		return err
	}
	dec := json.NewDecoder(bufio.NewReaderSize(conn, 1<<16))
	for {
		var m rpcMessage
		if err := dec.Decode(&m); err != nil {
			return err
		}
		switch {
		case m.Method == "echo":
			reply, _ := json.Marshal(map[string]any{"id": m.ID, "result": m.Params.raw, "error": nil})
			if _, err := conn.Write(reply); err != nil {
				return err
			}
		case m.Method == "update2":
			if err := w.apply(m.Params.updates, false); err != nil {
				return err
			}
		case string(m.ID) == `"sets"`:
			if len(m.Error) > 0 && string(m.Error) != "null" {
				return fmt.Errorf("monitor_cond refused: %s", m.Error)
			}
			if err := w.apply(m.Result, true); err != nil {
				return err
			}
			synced()
		}
	}
}

// apply takes one table-updates2 object; initial replaces every row held
// (a new session) without delete events, as a libovsdb reconnect does.
func (w *setWatch) apply(updates tableUpdates2, initial bool) error {
	now := time.Now()
	w.mu.Lock()
	defer w.mu.Unlock()
	if initial {
		w.rows, w.byName = map[string]*setRow{}, map[rowKey]*setRow{}
	}
	for table, rows := range updates {
		for uuid, change := range rows {
			if err := w.applyRow(table, uuid, change, now); err != nil {
				return fmt.Errorf("%s %s: %w", table, uuid, err)
			}
		}
	}
	return nil
}

func (w *setWatch) applyRow(table, uuid string, change rowUpdate2, now time.Time) error {
	r := w.rows[uuid]
	if change.Delete != nil {
		if r != nil {
			delete(w.rows, uuid)
			delete(w.byName, rowKey{table, r.name})
			r.members = nil
			w.fire(r, true, now)
		}
		return nil
	}
	cols, modify := change.Modify, change.Modify != nil
	if !modify {
		cols = cmp.Or(change.Insert, change.Initial)
	}
	if cols == nil {
		return errors.New("a change of no known kind")
	}
	if r == nil {
		if modify {
			return errors.New("modify of a row not held")
		}
		r = &setRow{table: table, ids: map[string]string{}, members: map[string]struct{}{}}
		w.rows[uuid] = r
	}
	if cols.Name != nil {
		delete(w.byName, rowKey{table, r.name})
		r.name = *cols.Name
		w.byName[rowKey{table, r.name}] = r
	}
	if cols.IDs != nil {
		if !modify {
			r.ids = map[string]string{}
		}
		for _, p := range *cols.IDs { // a modification's pairs: added, changed, or removed when equal
			if old, ok := r.ids[p[0]]; modify && ok && old == p[1] {
				delete(r.ids, p[0])
			} else {
				r.ids[p[0]] = p[1]
			}
		}
	}
	if items := cmp.Or(cols.Addresses, cols.Ports); items != nil {
		if !modify {
			r.members = make(map[string]struct{}, len(*items))
		}
		for _, it := range *items { // a modification's members: the symmetric difference
			if _, ok := r.members[it]; modify && ok {
				delete(r.members, it)
			} else {
				r.members[it] = struct{}{}
			}
		}
		if modify && w.changed != nil {
			w.changed() // inserts and deletes the libovsdb client counts
		}
	}
	w.fire(r, false, now)
	return nil
}

func (w *setWatch) fire(r *setRow, deleted bool, now time.Time) {
	for _, h := range w.handlers {
		h(r, deleted, now)
	}
}

// size is how many members the named row holds (0 when there is none).
func (w *setWatch) size(table, name string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	if r := w.byName[rowKey{table, name}]; r != nil {
		return len(r.members)
	}
	return 0
}

// members are the named row's members (nil when there is none).
func (w *setWatch) members(table, name string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.byName[rowKey{table, name}]
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.members))
	for m := range r.members {
		out = append(out, m)
	}
	return out
}

// ovsSet is an OVSDB set of strings or UUIDs: one atom alone, or
// ["set", [atoms]], a UUID being ["uuid", "…"]; read by hand in one pass.
type ovsSet []string

func (s *ovsSet) UnmarshalJSON(data []byte) error {
	p := &setParser{data: data}
	out, err := p.set()
	if err == nil && p.skipSpace() < len(data) {
		err = errors.New("trailing data")
	}
	if err != nil {
		return fmt.Errorf("set %.60s: %w", data, err)
	}
	*s = out
	return nil
}

// ovsMap is an OVSDB map of strings: ["map", [[key, value], …]].
type ovsMap [][2]string

func (m *ovsMap) UnmarshalJSON(data []byte) error {
	var pair [2]json.RawMessage
	if err := json.Unmarshal(data, &pair); err != nil {
		return fmt.Errorf("map %.60s: %w", data, err)
	}
	var tag string
	if err := json.Unmarshal(pair[0], &tag); err != nil || tag != "map" {
		return fmt.Errorf("map %.60s: not a map", data)
	}
	var pairs [][2]string
	if err := json.Unmarshal(pair[1], &pairs); err != nil {
		return fmt.Errorf("map %.60s: %w", data, err)
	}
	*m = pairs
	return nil
}

// setParser reads an OVSDB set (already valid JSON: the decoder checked it).
type setParser struct {
	data []byte
	i    int
}

func (p *setParser) skipSpace() int {
	for p.i < len(p.data) && (p.data[p.i] == ' ' || p.data[p.i] == '\t' || p.data[p.i] == '\n' || p.data[p.i] == '\r') {
		p.i++
	}
	return p.i
}

func (p *setParser) expect(c byte) error {
	if p.skipSpace() >= len(p.data) || p.data[p.i] != c {
		return fmt.Errorf("%q expected at byte %d", c, p.i)
	}
	p.i++
	return nil
}

func (p *setParser) str() (string, error) {
	if err := p.expect('"'); err != nil {
		return "", err
	}
	start, escaped := p.i, false
	for ; p.i < len(p.data) && p.data[p.i] != '"'; p.i++ {
		if p.data[p.i] == '\\' {
			escaped = true
			p.i++
		}
	}
	if p.i >= len(p.data) {
		return "", errors.New("unterminated string")
	}
	p.i++
	if !escaped {
		return string(p.data[start : p.i-1]), nil
	}
	var s string
	err := json.Unmarshal(p.data[start-1:p.i], &s)
	return s, err
}

// atom is a string, or a UUID ["uuid", "…"] (its tag already read when tagged).
func (p *setParser) atom() (string, error) {
	if p.skipSpace() < len(p.data) && p.data[p.i] == '"' {
		return p.str()
	}
	if err := p.expect('['); err != nil {
		return "", err
	}
	if tag, err := p.str(); err != nil || tag != "uuid" {
		return "", fmt.Errorf("a string or a UUID expected (tag %q, %v)", tag, err)
	}
	return p.tail()
}

// tail reads the rest of a tagged UUID after its tag: , "…" ].
func (p *setParser) tail() (string, error) {
	if err := p.expect(','); err != nil {
		return "", err
	}
	s, err := p.str()
	if err == nil {
		err = p.expect(']')
	}
	return s, err
}

func (p *setParser) set() ([]string, error) {
	if p.skipSpace() < len(p.data) && p.data[p.i] == '"' {
		s, err := p.str()
		return []string{s}, err
	}
	if err := p.expect('['); err != nil {
		return nil, err
	}
	tag, err := p.str()
	if err != nil {
		return nil, err
	}
	switch tag {
	case "uuid":
		s, err := p.tail()
		return []string{s}, err
	case "set":
	default:
		return nil, fmt.Errorf("not a set of strings or UUIDs (%q)", tag)
	}
	if err := p.expect(','); err != nil {
		return nil, err
	}
	if err := p.expect('['); err != nil {
		return nil, err
	}
	var out []string
	for {
		if p.skipSpace() < len(p.data) && p.data[p.i] == ']' {
			p.i++
			break
		}
		if len(out) > 0 {
			if err := p.expect(','); err != nil {
				return nil, err
			}
		}
		a, err := p.atom()
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, p.expect(']')
}
