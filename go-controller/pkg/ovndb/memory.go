package ovndb

import (
	"fmt"
	"time"

	"github.com/go-logr/stdr"
	"github.com/ovn-org/libovsdb/database/inmemory"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/ovn-org/libovsdb/server"
)

// ServeInMemory serves libovsdb's in-memory database of schema, its rows
// held as clientModel's, on the unix socket sock, and returns once it
// answers; stop ends it. Columns of schema that clientModel lacks are
// accepted and dropped.
func ServeInMemory(schema ovsdb.DatabaseSchema, clientModel model.ClientDBModel, sock string) (stop func(), err error) {
	dbModel, errs := model.NewDatabaseModel(schema, clientModel)
	if len(errs) > 0 {
		return nil, fmt.Errorf("in-memory %s database: %v", schema.Name, errs)
	}
	// libovsdb's server turns the process-wide stdr verbosity to 5 (every
	// row it caches).
	defer stdr.SetVerbosity(0)
	s, err := server.NewOvsdbServer(inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: clientModel}), dbModel)
	if err != nil {
		return nil, err
	}
	go func() { _ = s.Serve("unix", sock) }()
	for deadline := time.Now().Add(5 * time.Second); !s.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("in-memory %s database did not start on %s", schema.Name, sock)
		}
	}
	return s.Close, nil
}
