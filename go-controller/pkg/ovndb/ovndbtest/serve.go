package ovndbtest

import (
	"path/filepath"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// Serve starts libovsdb's in-memory server for one database on a unix
// socket named file in a temporary directory, and returns the socket's path
// once it answers; it stops with the test.
func Serve(t testing.TB, schema ovsdb.DatabaseSchema, clientModel model.ClientDBModel, file string) string {
	t.Helper()
	sock := filepath.Join(t.TempDir(), file)
	db, err := ovndb.ServeInMemory(schema, clientModel, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return sock
}
