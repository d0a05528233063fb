package ovndb_test

import (
	"context"
	"fmt"
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
		if err != nil || p.ExternalIDs["k"] != "v" {
			return fmt.Errorf("cached port %+v, %v", p, err)
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
