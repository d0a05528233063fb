package ovndb

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// seedRows are switches of ports, as a cluster's NB holds them.
func seedRows(switches, ports int) Snapshot {
	s := Snapshot{nbdb.LogicalSwitchTable: {}, nbdb.LogicalSwitchPortTable: {}}
	for i := 0; i < switches; i++ {
		ls := &nbdb.LogicalSwitch{UUID: uuid.NewString(), Name: fmt.Sprintf("n%d", i)}
		for j := 0; j < ports; j++ {
			lsp := &nbdb.LogicalSwitchPort{UUID: uuid.NewString(), Name: fmt.Sprintf("ns_p%d-%d", i, j), Addresses: []string{"0a:58:0a:f4:00:05 10.244.0.5"}}
			s[nbdb.LogicalSwitchPortTable][lsp.UUID] = lsp
			ls.Ports = append(ls.Ports, lsp.UUID)
		}
		s[nbdb.LogicalSwitchTable][ls.UUID] = ls
	}
	return s
}

func serveSeeded(t testing.TB, seed Snapshot) (*InMemory, string) {
	t.Helper()
	clientModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "nb.sock")
	db, err := ServeInMemory(nbdb.Schema(), clientModel, sock, seed)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return db, sock
}

// A seeded in-memory database holds the rows with their UUIDs, for its own
// reader and for a client; it keeps their references (a switch deleted
// takes its ports with it, as in OVSDB).
func TestServeInMemorySeeded(t *testing.T) {
	seed := seedRows(3, 4)
	db, sock := serveSeeded(t, seed)
	got, err := db.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	if d := Compare(got, seed); len(d) != 0 || got.Rows() != seed.Rows() {
		t.Fatalf("the database holds %d rows, the seed %d; differences: %v", got.Rows(), seed.Rows(), d)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ConnectNBFull(ctx, []string{"unix:" + sock}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if d := Compare(TakeSnapshot(c), seed); len(d) != 0 {
		t.Fatalf("a client sees differences: %v", d)
	}
	var ls *nbdb.LogicalSwitch
	for _, row := range seed[nbdb.LogicalSwitchTable] {
		if row.(*nbdb.LogicalSwitch).Name == "n0" {
			ls = row.(*nbdb.LogicalSwitch)
		}
	}
	ops, err := c.Where(ls).Delete()
	if err != nil {
		t.Fatal(err)
	}
	if err := Transact(ctx, c, ops); err != nil {
		t.Fatal(err)
	}
	got, _ = db.Snapshot()
	if n := len(got[nbdb.LogicalSwitchPortTable]); n != 8 {
		t.Errorf("%d ports after their switch n0 was deleted, want 8 (n0's 4 collected)", n)
	}
	for _, id := range ls.Ports {
		if _, ok := got[nbdb.LogicalSwitchPortTable][id]; ok {
			t.Errorf("port %s of the deleted switch is still there", id)
		}
	}
}

// The copy `ovnkube diff` makes of a 10,000-port NB.
func BenchmarkServeInMemory10k(b *testing.B) {
	seed := seedRows(100, 100)
	for i := 0; i < b.N; i++ {
		serveSeeded(b, seed)
	}
}
