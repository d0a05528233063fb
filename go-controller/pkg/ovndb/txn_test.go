package ovndb_test

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func acl(id string, priority int) *nbdb.ACL {
	return &nbdb.ACL{Action: nbdb.ACLActionAllow, Direction: nbdb.ACLDirectionToLport, Match: "ip4", Priority: priority,
		ExternalIDs: map[string]string{"id": id}}
}

func commit(t *testing.T, c client.Client, txn *ovndb.Txn) {
	t.Helper()
	ops, err := txn.Ops()
	if err != nil {
		t.Fatal(err)
	}
	if len(ops) == 0 {
		return
	}
	if _, err := c.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
}

// priorities are the group's ACLs as id=priority, sorted, from the cache.
func priorities(c client.Client) ([]string, error) {
	pg := &nbdb.PortGroup{Name: "pg"}
	if err := c.Get(context.Background(), pg); err != nil {
		return nil, err
	}
	var out []string
	for _, u := range pg.ACLs {
		a := &nbdb.ACL{UUID: u}
		if err := c.Get(context.Background(), a); err != nil {
			return nil, fmt.Errorf("ACL %s: %w", u, err)
		}
		out = append(out, fmt.Sprintf("%s=%d", a.ExternalIDs["id"], a.Priority))
	}
	slices.Sort(out)
	return out, nil
}

// One transaction that ensures some of a group's children (EnsureChild) and
// removes the others (ChildrenWhere) reads each child once and still sees
// each one as the cache holds it: an unchanged child writes nothing, a
// changed one is updated, a new one created, an extra one removed.
func TestEnsureChildrenInOneTxn(t *testing.T) {
	c := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	txn := ovndb.NewTxn(c)
	pg := &nbdb.PortGroup{Name: "pg"}
	for _, a := range []*nbdb.ACL{acl("1", 1000), acl("2", 1001), acl("3", 1002)} {
		pg.ACLs = append(pg.ACLs, txn.Create(a))
	}
	txn.Ensure(pg, nil, nil)
	commit(t, c, txn)
	waitACLs(t, c, "three ACLs in the cache", "1=1000", "2=1001", "3=1002")

	txn = ovndb.NewTxn(c)
	cached := ovndb.Lookup(txn, &nbdb.PortGroup{Name: "pg"})
	same := acl("1", 1000)
	txn.EnsureChild(cached, &cached.ACLs, "id", same, []any{&same.Priority})
	if ops, err := txn.Ops(); err != nil || len(ops) != 0 {
		t.Fatalf("an unchanged child wrote %d operations (err %v)", len(ops), err)
	}
	want := acl("2", 2001)
	txn.EnsureChild(cached, &cached.ACLs, "id", want, []any{&want.Priority})
	txn.EnsureChild(cached, &cached.ACLs, "id", acl("4", 1004), nil)
	txn.RemoveChildren(cached, &cached.ACLs, txn.ChildrenWhere(cached.ACLs, func(ids map[string]string) bool {
		return ids["id"] == "3"
	}, &nbdb.ACL{})...)
	commit(t, c, txn)
	waitACLs(t, c, "ACL 2 updated, 4 created, 3 removed", "1=1000", "2=2001", "4=1004")
}

// waitACLs waits until the group's ACLs in the cache are want (id=priority).
func waitACLs(t *testing.T, c client.Client, what string, want ...string) {
	t.Helper()
	harness.Eventually(t, 5*time.Second, what, func() error {
		got, err := priorities(c)
		if err == nil && !slices.Equal(got, want) {
			err = fmt.Errorf("%v", got)
		}
		return err
	})
}
