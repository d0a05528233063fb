// Package ovndbtest runs libovsdb's in-memory Northbound server for unit
// tests, behind a proxy that injects the faults a real network has: a
// connection dropped, a reply lost after the server committed, the database
// replaced by an empty one.
package ovndbtest

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// NewServer starts an empty in-memory NB on a unix socket and returns its path.
func NewServer(t testing.TB) string {
	t.Helper()
	clientModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	return Serve(t, nbdb.Schema(), clientModel, "nb.sock")
}

// Connect connects an NB client to a unix socket as the controllers do
// (ovndb.ConnectNB: some columns are not monitored).
func Connect(t testing.TB, sock string) client.Client {
	t.Helper()
	return connect(t, sock, func(ctx context.Context, eps []string, log logr.Logger) (client.Client, error) {
		return ovndb.ConnectNB(ctx, eps, log)
	})
}

// ConnectObserver connects a client that monitors every column, those the
// controllers leave out included: for tests checking what the database holds.
func ConnectObserver(t testing.TB, sock string) client.Client {
	t.Helper()
	return connect(t, sock, func(ctx context.Context, eps []string, log logr.Logger) (client.Client, error) {
		return ovndb.ConnectNBFull(ctx, eps, log)
	})
}

func connect(t testing.TB, sock string, dial func(context.Context, []string, logr.Logger) (client.Client, error)) client.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := dial(ctx, []string{"unix:" + sock}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// Proxy sits between clients and a server socket.
type Proxy struct {
	Sock string

	mu        sync.Mutex
	backend   string
	conns     []net.Conn
	loseNext  bool // drop the reply to the next transact and the connection
	lost      chan struct{}
	hold      *hold             // hold the next writing transact (and the transactions after it on its connection)
	frozen    map[net.Conn]bool // client sides left open but dead (Freeze)
	transacts atomic.Int64
}

// Transactions is how many transact requests clients sent through the proxy.
func (p *Proxy) Transactions() int64 { return p.transacts.Load() }

// hold is one armed HoldNextTransact.
type hold struct{ held, release chan struct{} }

// NewProxy forwards a new unix socket to backend.
func NewProxy(t testing.TB, backend string) *Proxy {
	t.Helper()
	p := &Proxy{Sock: filepath.Join(t.TempDir(), "proxy.sock"), backend: backend}
	l, err := net.Listen("unix", p.Sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close(); p.Drop() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go p.serve(c)
		}
	}()
	return p
}

// LoseNextReply makes the server commit the next transaction while its
// reply is lost with the connection; the returned channel closes then.
func (p *Proxy) LoseNextReply() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.loseNext = true
	p.lost = make(chan struct{})
	return p.lost
}

// HoldNextTransact delays the next transaction that writes (has an
// operation other than select) on its way to the server, as a network
// partition would: it and every transaction after it on its connection wait
// until release is called (the server's messages still flow, and the
// client's replies to them).
// held is closed once a transaction is being held.
func (p *Proxy) HoldNextTransact() (held <-chan struct{}, release func()) {
	h := &hold{held: make(chan struct{}), release: make(chan struct{})}
	p.mu.Lock()
	p.hold = h
	p.mu.Unlock()
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }
}

// forwardUp copies client → server in order, noting (lose) the id of a
// transact whose reply is to be lost. While a transaction is held, every
// transaction after it waits too; other messages (the client's replies to
// the server's update calls, echoes) pass, since libovsdb's server waits
// for those replies before it answers anyone.
func (p *Proxy) forwardUp(down, up net.Conn, lose func(id string)) {
	var wmu sync.Mutex
	write := func(msg []byte) error {
		wmu.Lock()
		defer wmu.Unlock()
		_, err := up.Write(msg)
		return err
	}
	type queued struct {
		msg  json.RawMessage
		hold *hold
	}
	txq := make(chan queued, 1024)
	defer close(txq)
	var holding atomic.Bool
	go func() {
		for q := range txq {
			if q.hold != nil {
				holding.Store(true)
				close(q.hold.held)
				<-q.hold.release
				holding.Store(false)
			}
			if write(q.msg) != nil {
				p.closeDown(down)
			}
		}
	}()
	dec := json.NewDecoder(bufio.NewReader(down))
	for {
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil {
			up.Close()
			return
		}
		var head struct {
			Method string          `json:"method"`
			ID     json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(msg, &head)
		switch {
		case head.Method == "transact":
			p.transacts.Add(1)
			txq <- queued{msg: msg, hold: p.takeHold(msg, head.ID, lose)}
		case holding.Load():
			if write(msg) != nil {
				p.closeDown(down)
				return
			}
		default:
			txq <- queued{msg: msg}
		}
	}
}

// takeHold arms a lost reply for this transact if one was asked for, and
// returns the hold it takes if it writes and a hold is armed.
func (p *Proxy) takeHold(msg json.RawMessage, id json.RawMessage, lose func(string)) *hold {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.loseNext {
		p.loseNext = false
		lose(string(id))
	}
	h := p.hold
	if h == nil || !writes(msg) {
		return nil
	}
	p.hold = nil
	return h
}

// writes says whether a transact message has an operation other than select.
func writes(msg json.RawMessage) bool {
	var m struct {
		Params []json.RawMessage `json:"params"`
	}
	_ = json.Unmarshal(msg, &m)
	for i, p := range m.Params {
		var op struct {
			Op string `json:"op"`
		}
		if i > 0 && json.Unmarshal(p, &op) == nil && op.Op != "select" {
			return true
		}
	}
	return false
}

// SwitchTo sends new connections to another server and drops the current
// ones: the database the clients see is replaced.
func (p *Proxy) SwitchTo(backend string) {
	p.mu.Lock()
	p.backend = backend
	p.mu.Unlock()
	p.Drop()
}

// Drop closes every proxied connection (the clients reconnect).
func (p *Proxy) Drop() {
	p.mu.Lock()
	conns := p.conns
	p.conns = nil
	p.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Freeze makes every proxied connection half-open, as a crashed host or a
// partition leaves it: the server's side is closed (the server forgets the
// client), while the client's stays open and nothing more reaches it, nor
// anything it sends the server. Only a client that probes its server finds
// out. New connections are served normally.
func (p *Proxy) Freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.frozen == nil {
		p.frozen = map[net.Conn]bool{}
	}
	for i := 0; i+1 < len(p.conns); i += 2 { // down, up pairs (serve)
		p.frozen[p.conns[i]] = true
		p.conns[i+1].Close()
	}
}

// closeDown closes a client's side of a connection unless it is frozen.
func (p *Proxy) closeDown(down net.Conn) {
	p.mu.Lock()
	frozen := p.frozen[down]
	p.mu.Unlock()
	if !frozen {
		down.Close()
	}
}

func (p *Proxy) serve(down net.Conn) {
	p.mu.Lock()
	backend := p.backend
	p.mu.Unlock()
	up, err := net.Dial("unix", backend)
	if err != nil {
		down.Close()
		return
	}
	p.mu.Lock()
	p.conns = append(p.conns, down, up)
	p.mu.Unlock()
	var mu sync.Mutex
	dropID := ""
	go p.forwardUp(down, up, func(id string) {
		mu.Lock()
		dropID = id
		mu.Unlock()
	})
	dec := json.NewDecoder(bufio.NewReader(up)) // server → client
	for {
		var msg json.RawMessage
		if err := dec.Decode(&msg); err != nil {
			p.closeDown(down)
			return
		}
		var head struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(msg, &head)
		mu.Lock()
		lose := dropID != "" && string(head.ID) == dropID
		mu.Unlock()
		if lose {
			down.Close()
			up.Close()
			p.mu.Lock()
			close(p.lost)
			p.mu.Unlock()
			return
		}
		if _, err := down.Write(msg); err != nil {
			up.Close()
			return
		}
	}
}

// DanglingReferences lists, for every ACL in the client's cache, the
// address sets and port groups its match names that do not exist (OVN
// would ignore the ACL). Empty means the invariant holds.
func DanglingReferences(c client.Client) []string {
	// A cache being refilled (the database replaced) is not listed: List
	// waits for it to be consistent, bounded here.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var acls []nbdb.ACL
	var sets []nbdb.AddressSet
	var pgs []nbdb.PortGroup
	for _, rows := range []any{&acls, &sets, &pgs} {
		if err := c.List(ctx, rows); err != nil {
			return []string{"cannot list the NB's rows: " + err.Error()}
		}
	}
	haveSet, havePG := map[string]bool{}, map[string]bool{}
	for _, s := range sets {
		haveSet[s.Name] = true
	}
	for _, g := range pgs {
		havePG[g.Name] = true
	}
	var out []string
	for _, a := range acls {
		setNames, pgNames := topology.MatchReferences(a.Match)
		for _, n := range setNames {
			if !haveSet[n] && !havePG[topology.PortGroupOfAddressSet(n)] {
				out = append(out, fmt.Sprintf("ACL %q names address set %s, which does not exist", a.Match, n))
			}
		}
		for _, n := range pgNames {
			if !havePG[n] {
				out = append(out, fmt.Sprintf("ACL %q names port group %s, which does not exist", a.Match, n))
			}
		}
	}
	return out
}
