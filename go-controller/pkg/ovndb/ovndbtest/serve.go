package ovndbtest

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-org/libovsdb/database/inmemory"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/ovn-org/libovsdb/server"
)

// Serve starts libovsdb's in-memory server for one database on a unix
// socket named file in a temporary directory, and returns the socket's path
// once it answers; it stops with the test.
func Serve(t testing.TB, schema ovsdb.DatabaseSchema, clientModel model.ClientDBModel, file string) string {
	t.Helper()
	dbModel, errs := model.NewDatabaseModel(schema, clientModel)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	// libovsdb's server turns the process-wide stdr verbosity to 5 (every
	// row it caches); tests read state, not that.
	defer stdr.SetVerbosity(0)
	s, err := server.NewOvsdbServer(inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: clientModel}), dbModel)
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), file)
	go func() { _ = s.Serve("unix", sock) }()
	t.Cleanup(s.Close)
	for deadline := time.Now().Add(5 * time.Second); !s.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("in-memory %s database did not start", schema.Name)
		}
	}
	return sock
}
