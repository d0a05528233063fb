package ovndb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// ovn-northd sets up on every new port. That column is not monitored: a
// change to it alone sends the controllers nothing, and a cached port never
// holds it, while every other column still arrives.
func TestPortUpIsNotMonitored(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	writer, watcher := ovndbtest.Connect(t, sock), ovndbtest.Connect(t, sock)
	var updates atomic.Int64
	watcher.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		UpdateFunc: func(table string, _, _ model.Model) {
			if table == nbdb.LogicalSwitchPortTable {
				updates.Add(1)
			}
		},
	})
	ctx := context.Background()
	sw := &nbdb.LogicalSwitch{UUID: "sw", Name: "node1"}
	lsp := &nbdb.LogicalSwitchPort{UUID: "p", Name: "ns_pod", Addresses: []string{"0a:58:0a:f4:00:05 10.244.0.5"}}
	sw.Ports = []string{lsp.UUID}
	transact(t, writer)(writer.Create(lsp, sw))
	cached := func() (*nbdb.LogicalSwitchPort, error) {
		p := &nbdb.LogicalSwitchPort{Name: "ns_pod"}
		return p, watcher.Get(ctx, p)
	}
	harness.Eventually(t, 5*time.Second, "port in the watcher's cache", func() error { _, err := cached(); return err })

	// What northd does, then a change of ours behind it on the same connection.
	up := &nbdb.LogicalSwitchPort{Name: "ns_pod", Up: ptr(true)}
	transact(t, writer)(writer.Where(up).Update(up, &up.Up))
	ext := &nbdb.LogicalSwitchPort{Name: "ns_pod", ExternalIDs: map[string]string{"k": "v"}}
	transact(t, writer)(writer.Where(ext).Update(ext, &ext.ExternalIDs))
	harness.Eventually(t, 5*time.Second, "external_ids change in the watcher's cache", func() error {
		p, err := cached()
		if err != nil || p.ExternalIDs["k"] != "v" || updates.Load() == 0 { // the cache is filled before its handlers run
			return fmt.Errorf("cached port %+v, %v, %d updates seen", p, err, updates.Load())
		}
		return nil
	})
	if p, _ := cached(); p.Up != nil || updates.Load() != 1 {
		t.Fatalf("cached up %v after %d port updates; want it unset after 1 (external_ids only)", p.Up, updates.Load())
	}
	var all []nbdb.LogicalSwitchPort
	if err := writer.List(ctx, &all); err != nil || len(all) != 1 {
		t.Fatalf("writer's ports %v, %v", all, err)
	}
}

// transact commits operations as they come from a libovsdb builder.
func transact(t *testing.T, c client.Client) func([]ovsdb.Operation, error) {
	return func(ops []ovsdb.Operation, err error) {
		t.Helper()
		if err == nil {
			err = ovndb.Transact(context.Background(), c, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A switch's ports are not monitored, so a Txn must not trust the cached set:
// it adds new ports, leaves existing ones alone (an unchanged sync writes
// nothing), detaches ports from whichever switch holds them, and FetchByName
// reads them from the server. (libovsdb's in-memory server sends unmonitored
// columns with inserted rows, not with changes: a Txn that trusted the cache
// would re-add b below; a real ovsdb-server sends neither.)
func TestSwitchPortsAreNotMonitored(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	c, observer := ovndbtest.Connect(t, sock), ovndbtest.ConnectObserver(t, sock)
	ctx := context.Background()
	owner := topology.Owner{Type: topology.OwnerNode, Name: "node1"}
	port := func(name string) *nbdb.LogicalSwitchPort {
		return &nbdb.LogicalSwitchPort{Name: name, ExternalIDs: owner.ExternalIDs()}
	}
	// sync ensures node1's switch holding the named ports and commits.
	sync := func(names ...string) int {
		t.Helper()
		txn := ovndb.NewTxn(c)
		var uuids []string
		for _, n := range names {
			p := port(n)
			uuids = append(uuids, txn.Ensure(p, []any{&p.ExternalIDs}, nil))
		}
		sw := &nbdb.LogicalSwitch{Name: "node1", ExternalIDs: owner.ExternalIDs()}
		txn.Ensure(sw, []any{&sw.ExternalIDs}, &sw.Ports, uuids...)
		ops, err := txn.Ops()
		if err == nil {
			err = ovndb.Transact(ctx, c, ops)
		}
		if err != nil {
			t.Fatal(err)
		}
		return len(ops)
	}
	held := func(cl client.Client) []string {
		var sws []nbdb.LogicalSwitch
		_ = cl.WhereCache(func(ls *nbdb.LogicalSwitch) bool { return ls.Name == "node1" }).List(ctx, &sws)
		var names []string
		for _, sw := range sws {
			for _, u := range sw.Ports {
				p := &nbdb.LogicalSwitchPort{UUID: u}
				_ = cl.Get(ctx, p)
				names = append(names, p.Name)
			}
		}
		slices.Sort(names)
		return names
	}
	waitHeld := func(want ...string) {
		t.Helper()
		harness.Eventually(t, 5*time.Second, fmt.Sprintf("switch holding %v", want), func() error {
			if got := held(observer); !slices.Equal(got, want) {
				return fmt.Errorf("it holds %v", got)
			}
			return nil
		})
	}
	sync("a")
	waitHeld("a")
	sync("a", "b")
	waitHeld("a", "b")
	harness.Eventually(t, 5*time.Second, "both ports in the controller's cache", func() error {
		return errors.Join(c.Get(ctx, port("a")), c.Get(ctx, port("b")))
	})
	if n := sync("a", "b"); n != 0 {
		t.Fatalf("an unchanged sync sent %d operations", n)
	}

	fetched := &nbdb.LogicalSwitch{Name: "node1"}
	if found, err := ovndb.FetchByName(ctx, c, fetched, &fetched.Ports); err != nil || !found || len(fetched.Ports) != 2 || fetched.UUID == "" {
		t.Fatalf("FetchByName: %+v, found %v, %v", fetched, found, err)
	}
	if found, err := ovndb.FetchByName(ctx, c, &nbdb.LogicalSwitch{Name: "node2"}); err != nil || found {
		t.Fatalf("FetchByName of a missing switch: found %v, %v", found, err)
	}

	a := port("a")
	if err := c.Get(ctx, a); err != nil {
		t.Fatal(err)
	}
	detach := func() error {
		txn := ovndb.NewTxn(c)
		sw := &nbdb.LogicalSwitch{}
		txn.Detach(sw, &sw.Ports, a.UUID)
		ops, err := txn.Ops()
		if err == nil {
			err = ovndb.Transact(ctx, c, ops)
		}
		return err
	}
	if err := detach(); err != nil {
		t.Fatal(err)
	}
	waitHeld("b")
	harness.Eventually(t, 5*time.Second, "the detached port garbage-collected", func() error {
		if observer.Get(ctx, port("a")) == nil {
			return fmt.Errorf("port a still exists")
		}
		return nil
	})
	if err := detach(); !errors.Is(err, ovndb.ErrRowGone) {
		t.Fatalf("detaching a port no switch holds: %v, want ErrRowGone", err)
	}
}
