package ovndb_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// setChange builds a transaction making set name hold want, from c's cache
// and ovndb's members, and returns it with its operations.
func setChange(t *testing.T, c client.Client, name string, want ...string) (*ovndb.Txn, []ovsdb.Operation) {
	t.Helper()
	txn, ops, err := buildSetChange(c, name, want...)
	if err != nil {
		t.Fatal(err)
	}
	return txn, ops
}

func buildSetChange(c client.Client, name string, want ...string) (*ovndb.Txn, []ovsdb.Operation, error) {
	txn := ovndb.NewTxn(c)
	cached := ovndb.Lookup(txn, &nbdb.AddressSet{Name: name})
	if cached == nil {
		return nil, nil, fmt.Errorf("address set %s not in the cache", name)
	}
	txn.SetMembers(cached, &cached.Addresses, want)
	ops, err := txn.Ops()
	return txn, ops, err
}

// applySet commits a change of set name to want and reports how it ended
// and the mutations it sent.
func applySet(t *testing.T, c client.Client, name string, want ...string) (sent []string, err error) {
	t.Helper()
	txn, ops, err := buildSetChange(c, name, want...)
	if err != nil {
		return nil, err
	}
	for _, op := range ops {
		for _, m := range op.Mutations {
			set, _ := m.Value.(ovsdb.OvsSet)
			sent = append(sent, fmt.Sprintf("%s %v", m.Mutator, set.GoSet))
		}
	}
	return sent, txn.Committed(ovndb.Transact(context.Background(), c, ops))
}

// members reads set name's members from the server (an observer's cache).
func membersOf(obs client.Client, name string) ([]string, error) {
	s := &nbdb.AddressSet{Name: name}
	if err := obs.Get(context.Background(), s); err != nil {
		return nil, err
	}
	return slices.Sorted(slices.Values(s.Addresses)), nil
}

func waitMembers(t *testing.T, obs client.Client, name string, want ...string) {
	t.Helper()
	slices.Sort(want)
	want = slices.Compact(want)
	harness.Eventually(t, 5*time.Second, "set "+name+" holding "+fmt.Sprint(want), func() error {
		have, err := membersOf(obs, name)
		if err != nil || !slices.Equal(have, want) {
			return fmt.Errorf("holds %v (%v)", have, err)
		}
		return nil
	})
}

// createSet inserts set name with members from obs, as another writer (or a
// master before a restart) would, and waits for c to see the row.
func createSet(t *testing.T, obs, c client.Client, name string, members ...string) {
	t.Helper()
	ops, err := obs.Create(&nbdb.AddressSet{Name: name, Addresses: members, ExternalIDs: map[string]string{"k8s.ovn.org/owner-controller": "ovn-k8s"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(context.Background(), obs, ops); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Second, "set "+name+" in the cache", func() error {
		if ovndb.Lookup(ovndb.NewTxn(c), &nbdb.AddressSet{Name: name}) == nil {
			return errors.New("not yet")
		}
		return nil
	})
}

// TestSetMembersFromTheKeptMembers: the client does not monitor an address
// set's members; a change sends only the members that changed, computed
// from those read from the server once and then those committed.
func TestSetMembersFromTheKeptMembers(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	c, obs := ovndbtest.Connect(t, sock), ovndbtest.ConnectObserver(t, sock)
	createSet(t, obs, c, "s", "10.0.0.1", "10.0.0.2", "10.0.0.3")
	if s := ovndb.Lookup(ovndb.NewTxn(c), &nbdb.AddressSet{Name: "s"}); len(s.Addresses) != 0 {
		t.Fatalf("the controller's cache holds the members %v: the column is monitored", s.Addresses)
	}
	steps := []struct {
		want []string
		sent []string
	}{
		{[]string{"10.0.0.2", "10.0.0.3", "10.0.0.4"}, []string{"delete [10.0.0.1]", "insert [10.0.0.4]"}},
		{[]string{"10.0.0.3", "10.0.0.4", "10.0.0.5"}, []string{"delete [10.0.0.2]", "insert [10.0.0.5]"}},
		{[]string{"10.0.0.5", "10.0.0.4", "10.0.0.3", "10.0.0.3"}, nil}, // unchanged: nothing sent
		{nil, []string{"delete [10.0.0.3 10.0.0.4 10.0.0.5]"}},
	}
	for i, s := range steps {
		sent, err := applySet(t, c, "s", s.want...)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if !slices.Equal(sent, s.sent) {
			t.Errorf("step %d sent %q, want %q", i, sent, s.sent)
		}
		waitMembers(t, obs, "s", s.want...)
	}
}

// TestSetMembersRaced: two changes computed from the same members, both
// committed: the second learns it raced (ErrMembersRaced), the members are
// read again, and its retry leaves exactly what it wants (the first's
// insert, which it did not know of, removed).
func TestSetMembersRaced(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	c, obs := ovndbtest.Connect(t, sock), ovndbtest.ConnectObserver(t, sock)
	createSet(t, obs, c, "s", "10.0.0.1")
	first, firstOps := setChange(t, c, "s", "10.0.0.1", "10.0.0.2")
	second, secondOps := setChange(t, c, "s", "10.0.0.1", "10.0.0.3")
	if err := first.Committed(ovndb.Transact(context.Background(), c, firstOps)); err != nil {
		t.Fatal(err)
	}
	if err := second.Committed(ovndb.Transact(context.Background(), c, secondOps)); !errors.Is(err, ovndb.ErrMembersRaced) {
		t.Fatalf("the second change ended with %v, want ErrMembersRaced", err)
	}
	waitMembers(t, obs, "s", "10.0.0.1", "10.0.0.2", "10.0.0.3") // what the two did
	if _, err := applySet(t, c, "s", "10.0.0.1", "10.0.0.3"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "s", "10.0.0.1", "10.0.0.3")
}

// TestSetMembersAfterFaults: what ovndb keeps is read from the server again
// after a failed commit, a lost reply, an NB wiped and refilled with the
// same names, and a change made by someone else once ForgetMembers (the
// master's periodic resync) is called.
func TestSetMembersAfterFaults(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	proxy := ovndbtest.NewProxy(t, sock)
	c, obs := ovndbtest.Connect(t, proxy.Sock), ovndbtest.ConnectObserver(t, sock)
	ctx := context.Background()
	createSet(t, obs, c, "s", "10.0.0.1")
	if _, err := applySet(t, c, "s", "10.0.0.2"); err != nil {
		t.Fatal(err)
	}

	// A commit that fails (here: one op of the transaction errs) applies
	// nothing; what is kept is read again.
	txn, ops := setChange(t, c, "s", "10.0.0.3")
	bad := ovsdb.Operation{Op: ovsdb.OperationInsert, Table: nbdb.AddressSetTable, Row: ovsdb.Row{"name": "s"}} // the name is taken
	if err := txn.Committed(ovndb.Transact(ctx, c, append(ops, bad))); err == nil {
		t.Fatal("a transaction inserting a taken name committed")
	}
	if _, err := applySet(t, c, "s", "10.0.0.4"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "s", "10.0.0.4")

	// A lost reply: the change was committed, the client does not know it.
	lost := proxy.LoseNextReply()
	txn, ops = setChange(t, c, "s", "10.0.0.5")
	if err := txn.Committed(ovndb.Transact(ctx, c, ops)); err == nil {
		t.Fatal("a commit whose reply was lost reported success")
	}
	<-lost
	waitMembers(t, obs, "s", "10.0.0.5")
	harness.Eventually(t, 10*time.Second, "a change after the reconnect", func() error {
		_, err := applySet(t, c, "s", "10.0.0.6")
		return err
	})
	waitMembers(t, obs, "s", "10.0.0.6")

	// The NB wiped and the set made again by name, with other members.
	del, err := obs.Where(&nbdb.AddressSet{Name: "s"}).Delete()
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(ctx, obs, del); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Second, "the set gone from the cache", func() error {
		if ovndb.Lookup(ovndb.NewTxn(c), &nbdb.AddressSet{Name: "s"}) != nil {
			return errors.New("still there")
		}
		return nil
	})
	createSet(t, obs, c, "s", "10.0.0.6", "10.0.0.7")
	if _, err := applySet(t, c, "s", "10.0.0.6"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "s", "10.0.0.6")

	// Someone else adds a member: unseen until ForgetMembers, repaired after.
	mutate(t, obs, "s", "10.0.0.66")
	if sent, err := applySet(t, c, "s", "10.0.0.6"); err != nil || len(sent) != 0 {
		t.Fatalf("with the members kept, a change to what was committed sent %v (%v)", sent, err)
	}
	ovndb.ForgetMembers(c)
	if _, err := applySet(t, c, "s", "10.0.0.6"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "s", "10.0.0.6")
}

// mutate inserts a member into set name, as another writer.
func mutate(t *testing.T, obs client.Client, name, member string) {
	t.Helper()
	s := &nbdb.AddressSet{Name: name}
	ops, err := obs.Where(s).Mutate(s, model.Mutation{Field: &s.Addresses, Mutator: ovsdb.MutateOperationInsert, Value: []string{member}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(context.Background(), obs, ops); err != nil {
		t.Fatal(err)
	}
}

// TestSetMembersReadAtStartIsOneRead: the members of every set are read in
// one request the first time any is needed (a restart), not one per set.
func TestSetMembersReadAtStartIsOneRead(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	obs := ovndbtest.ConnectObserver(t, sock)
	proxy := ovndbtest.NewProxy(t, sock)
	c := ovndbtest.Connect(t, proxy.Sock)
	for i := range 20 {
		createSet(t, obs, c, fmt.Sprintf("s%d", i), fmt.Sprintf("10.0.0.%d", i))
	}
	committer := ovndb.NewCommitter(c, logr.Discard())
	before := proxy.Transactions()
	for i := range 20 {
		txn, ops := setChange(t, c, fmt.Sprintf("s%d", i), fmt.Sprintf("10.0.0.%d", i)) // as it is
		if len(ops) != 0 {
			t.Fatalf("set s%d unchanged, yet %d operations built", i, len(ops))
		}
		if err := txn.Committed(committer.Commit(context.Background(), ops)); err != nil {
			t.Fatal(err)
		}
	}
	if n := proxy.Transactions() - before; n != 1 {
		t.Errorf("%d requests to read 20 sets' members, want 1", n)
	}
}

// TestSetMembersOfARowItInserted: the first change of a set this client
// inserted is computed from the members it was inserted with (nothing is
// read from the server) and commits only if the set still holds them: when
// someone else changed it meanwhile, the change fails, and its retry reads
// the members.
func TestSetMembersOfARowItInserted(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	proxy := ovndbtest.NewProxy(t, sock)
	c, obs := ovndbtest.Connect(t, proxy.Sock), ovndbtest.ConnectObserver(t, sock)
	insert := func(name string, members ...string) {
		t.Helper()
		txn := ovndb.NewTxn(c)
		txn.Ensure(&nbdb.AddressSet{Name: name, Addresses: members, ExternalIDs: map[string]string{"k8s.ovn.org/owner-controller": "ovn-k8s"}}, nil, nil)
		ops, err := txn.Ops()
		if err == nil {
			err = txn.Committed(ovndb.Transact(context.Background(), c, ops))
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	insert("s", "10.0.0.1", "10.0.0.2")
	before := proxy.Transactions()
	txn, ops := setChange(t, c, "s", "10.0.0.2", "10.0.0.3")
	if n := proxy.Transactions() - before; n != 0 {
		t.Errorf("%d requests to read the members of a set just inserted, want none", n)
	}
	if len(ops) != 3 || ops[0].Op != ovsdb.OperationWait {
		t.Fatalf("the first change of an inserted set is %d operations, first %q: want a wait for its members, then the change", len(ops), ops[0].Op)
	}
	if err := txn.Committed(ovndb.Transact(context.Background(), c, ops)); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "s", "10.0.0.2", "10.0.0.3")
	if _, ops := setChange(t, c, "s", "10.0.0.3"); len(ops) != 1 {
		t.Errorf("a later change is %d operations, want the one mutation", len(ops))
	}

	// Someone else adds a member before the first change: it fails, its
	// retry removes the member.
	insert("u", "10.0.1.1")
	mutate(t, obs, "u", "10.0.1.66")
	if _, err := applySet(t, c, "u", "10.0.1.1", "10.0.1.2"); err == nil {
		t.Fatal("a change from the inserted members committed though the set holds others")
	}
	if _, err := applySet(t, c, "u", "10.0.1.1", "10.0.1.2"); err != nil {
		t.Fatal(err)
	}
	waitMembers(t, obs, "u", "10.0.1.1", "10.0.1.2")
}
