package integration

import (
	"encoding/json"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/icnbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The libovsdb models are generated from the oldest supported stack's
// schemas (committed beside them), so that every column they can write
// exists in every supported stack: newer schemas only add. These tests run
// on each stack (`make test` runs the integration suite on all of them) and
// fail naming the table and column that a stack's server lacks or types
// differently, and when the committed schema is newer than the stack's.

func TestNBModelsFitTheStacksServer(t *testing.T) {
	ovn := harness.StartOVNCentral(t)
	out, err := harness.Run("ovsdb-client", "get-schema", ovn.NBAddress(), "OVN_Northbound")
	if err != nil {
		t.Fatal(err)
	}
	checkModels(t, "the NB server of stack "+harness.CurrentStack.Name, []byte(out), nbdb.FullDatabaseModel, nbdb.Schema())
}

func TestOVSModelsFitTheStacksSchema(t *testing.T) {
	data, err := os.ReadFile(harness.CurrentStack.Schema(t, harness.OVSSchema))
	if err != nil {
		t.Fatal(err)
	}
	checkModels(t, "the OVS schema of stack "+harness.CurrentStack.Name, data, vswitchd.FullDatabaseModel, vswitchd.Schema())
}

func TestICNBModelsFitTheStacksSchema(t *testing.T) {
	data, err := os.ReadFile(harness.CurrentStack.Schema(t, harness.ICNBSchema))
	if err != nil {
		t.Fatal(err)
	}
	checkModels(t, "the IC NB schema of stack "+harness.CurrentStack.Name, data, icnbdb.FullDatabaseModel, icnbdb.Schema())
}

func checkModels(t *testing.T, what string, schemaJSON []byte, models func() (model.ClientDBModel, error), committed ovsdb.DatabaseSchema) {
	t.Helper()
	var server ovsdb.DatabaseSchema
	if err := json.Unmarshal(schemaJSON, &server); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	if olderVersion(server.Version, committed.Version) {
		t.Errorf("%s has schema %s %s, older than the committed %s the models are generated from: "+
			"generate the models from the oldest supported stack's schema", what, server.Name, server.Version, committed.Version)
	}
	dbModel, err := models()
	if err != nil {
		t.Fatal(err)
	}
	// libovsdb maps every model field onto the server's schema and reports
	// each column missing there or of another type.
	if _, errs := model.NewDatabaseModel(server, dbModel); len(errs) > 0 {
		var msgs []string
		for _, e := range errs {
			msgs = append(msgs, e.Error())
		}
		t.Errorf("the models do not fit %s (%s %s):\n%s", what, server.Name, server.Version, strings.Join(msgs, "\n"))
	}
	// And the same column by column, so a difference the mapper tolerates
	// (a set's bounds, an enum) is named too.
	for table, ts := range committed.Tables {
		sts, ok := server.Tables[table]
		if !ok {
			t.Errorf("%s has no table %s", what, table)
			continue
		}
		for col, cs := range ts.Columns {
			scs, ok := sts.Columns[col]
			if !ok {
				t.Errorf("%s has no column %s.%s", what, table, col)
				continue
			}
			if got, want := columnType(scs), columnType(cs); got != want {
				t.Errorf("%s types %s.%s as %s, the models as %s", what, table, col, got, want)
			}
		}
	}
}

// columnType is what decides a column's Go type: map, set, optional or single value,
// and its key and value types; constraints (enums, bounds, a set's maximum)
// may change between schemas without breaking a client.
func columnType(c *ovsdb.ColumnSchema) string {
	s := "single"
	switch {
	case c.Type == ovsdb.TypeMap:
		s = "map"
	case c.Type == ovsdb.TypeSet && c.TypeObj.Max() == 1:
		s = "optional"
	case c.Type == ovsdb.TypeSet:
		s = "set"
	}
	if c.TypeObj != nil {
		if c.TypeObj.Key != nil {
			s += " key " + string(c.TypeObj.Key.Type)
		}
		if c.TypeObj.Value != nil {
			s += " value " + string(c.TypeObj.Value.Type)
		}
	}
	return s
}

// olderVersion reports whether schema version a ("7.0.0") is older than b.
func olderVersion(a, b string) bool {
	pa, pb := strings.Split(a, "."), strings.Split(b, ".")
	for i := 0; i < len(pa) && i < len(pb); i++ {
		x, _ := strconv.Atoi(pa[i])
		y, _ := strconv.Atoi(pb[i])
		if x != y {
			return x < y
		}
	}
	return len(pa) < len(pb)
}
