package ovndb

import (
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/go-logr/stdr"
	"github.com/google/uuid"
	"github.com/ovn-org/libovsdb/database"
	"github.com/ovn-org/libovsdb/database/inmemory"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	"github.com/ovn-org/libovsdb/server"
)

// InMemory is libovsdb's in-memory database of one schema, served on a
// unix socket; this process reads and seeds it directly, without JSON-RPC.
type InMemory struct {
	db     database.Database
	model  model.DatabaseModel
	server *server.OvsdbServer
}

// ServeInMemory serves libovsdb's in-memory database of schema, its rows
// held as clientModel's, on the unix socket sock, holding seed's rows
// (UUIDs kept; nil for none) before its first client, and returns once it
// answers. Columns of schema that clientModel lacks are accepted and
// dropped.
func ServeInMemory(schema ovsdb.DatabaseSchema, clientModel model.ClientDBModel, sock string, seed Snapshot) (*InMemory, error) {
	dbModel, errs := model.NewDatabaseModel(schema, clientModel)
	if len(errs) > 0 {
		return nil, fmt.Errorf("in-memory %s database: %v", schema.Name, errs)
	}
	db := inmemory.NewDatabase(map[string]model.ClientDBModel{schema.Name: clientModel})
	s, err := server.NewOvsdbServer(db, dbModel)
	// libovsdb's server turns the process-wide stdr verbosity to 5: every
	// row it caches would be logged.
	stdr.SetVerbosity(0)
	if err != nil {
		return nil, err
	}
	m := &InMemory{db: db, model: dbModel, server: s}
	if err := m.load(seed); err != nil {
		return nil, err
	}
	go func() { _ = s.Serve("unix", sock) }()
	for deadline := time.Now().Add(5 * time.Second); !s.Ready(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			s.Close()
			return nil, fmt.Errorf("in-memory %s database did not start on %s", schema.Name, sock)
		}
	}
	return m, nil
}

// Close stops serving.
func (m *InMemory) Close() { m.server.Close() }

// Snapshot copies every row the database holds now.
func (m *InMemory) Snapshot() (Snapshot, error) {
	s := Snapshot{}
	for table := range m.model.Types() {
		rows, err := m.db.List(m.model.Schema.Name, table)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", table, err)
		}
		if len(rows) > 0 {
			s[table] = rows
		}
	}
	return s, nil
}

// load inserts rows, each with its UUID, in one transaction of the
// database itself (the server's own path, without a client).
func (m *InMemory) load(rows Snapshot) error {
	var ops []ovsdb.Operation
	for _, table := range slices.Sorted(maps.Keys(rows)) {
		for _, id := range slices.Sorted(maps.Keys(rows[table])) {
			info, err := m.model.NewModelInfo(rows[table][id])
			if err != nil {
				return fmt.Errorf("copying %s %s: %w", table, id, err)
			}
			row, err := m.model.Mapper.NewRow(info)
			if err != nil {
				return fmt.Errorf("copying %s %s: %w", table, id, err)
			}
			delete(row, "_uuid") // given by the operation
			ops = append(ops, ovsdb.Operation{Op: ovsdb.OperationInsert, Table: table, Row: row, UUID: id})
		}
	}
	if len(ops) == 0 {
		return nil
	}
	name := m.model.Schema.Name
	results, update := m.db.NewTransaction(name).Transact(ops...)
	for i, r := range results {
		if r != nil && r.Error != "" {
			what := "the transaction"
			if i < len(ops) {
				what = ops[i].Table + " " + ops[i].UUID
			}
			return fmt.Errorf("copying %d rows: %s: %s (%s)", len(ops), what, r.Error, r.Details)
		}
	}
	return m.db.Commit(name, uuid.New(), update)
}
