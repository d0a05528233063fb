package services

import (
	"context"
	"errors"
	"testing"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

// The memo answers from the members it read from the server (the column is
// not monitored) until told to forget them (a resync), reads them again when
// a balancer is not among them, and forgets a group's UUID when the group
// goes.
func TestGroupMemoReadsMembersFromTheServer(t *testing.T) {
	ctx := context.Background()
	sock := ovndbtest.NewServer(t)
	observer := ovndbtest.ConnectObserver(t, sock)
	nb := ovndbtest.Connect(t, sock) // as the controller: members not monitored
	transact := func(ops []ovsdb.Operation, err error) {
		t.Helper()
		if err == nil {
			_, err = observer.Transact(ctx, ops...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	lb := &nbdb.LoadBalancer{UUID: "lb", Name: "a", Protocol: new(string)}
	*lb.Protocol = nbdb.LoadBalancerProtocolTCP
	lbOps, err := observer.Create(lb)
	if err != nil {
		t.Fatal(err)
	}
	g := &nbdb.LoadBalancerGroup{Name: "g", LoadBalancer: []string{"lb"}}
	gOps, err := observer.Create(g)
	transact(append(lbOps, gOps...), err)
	var lbs []nbdb.LoadBalancer
	waitFor(t, "the rows in the cache", func() bool {
		var gs []nbdb.LoadBalancerGroup
		return nb.List(ctx, &lbs) == nil && len(lbs) == 1 && nb.List(ctx, &gs) == nil && len(gs) == 1
	})
	cached := &nbdb.LoadBalancerGroup{Name: "g"}
	if err := nb.Get(ctx, cached); err != nil || len(cached.LoadBalancer) != 0 {
		t.Fatalf("the controller's cache holds the group's members (%v, %v): the column should not be monitored", cached.LoadBalancer, err)
	}
	var m groupMemo
	if !m.has(ctx, nb, "g", lbs[0].UUID) {
		t.Fatalf("group g: %s not found a member", lbs[0].UUID)
	}
	if _, ok := m.uuid(nb, "other"); ok {
		t.Fatal("a group that does not exist was found")
	}
	transact(observer.Where(cached).Mutate(cached, model.Mutation{Field: &cached.LoadBalancer, Mutator: ovsdb.MutateOperationDelete, Value: []string{lbs[0].UUID}}))
	waitFor(t, "the member gone", func() bool {
		o := &nbdb.LoadBalancerGroup{Name: "g"}
		return observer.Get(ctx, o) == nil && len(o.LoadBalancer) == 0
	})
	if !m.has(ctx, nb, "g", lbs[0].UUID) {
		t.Fatal("the memo read the members again though nothing asked it to")
	}
	m.forget() // what a resync does
	if m.has(ctx, nb, "g", lbs[0].UUID) {
		t.Fatal("after forget the memo still holds the removed member")
	}
	transact(observer.Where(cached).Mutate(cached, model.Mutation{Field: &cached.LoadBalancer, Mutator: ovsdb.MutateOperationInsert, Value: []string{lbs[0].UUID}}))
	if !m.has(ctx, nb, "g", lbs[0].UUID) {
		t.Fatal("a balancer inserted since the last read was not found: a miss should read the members again")
	}
	// A group that goes: its UUID is forgotten on the deletion's event, not
	// on an update's.
	transact(observer.Where(cached).Delete())
	waitFor(t, "the group gone from the cache", func() bool { return errors.Is(nb.Get(ctx, cached), libovsdbclient.ErrNotFound) })
	m.changed(rowUpdated)
	if uuid, ok := m.uuid(nb, "g"); !ok || uuid != cached.UUID {
		t.Fatalf("after an update: UUID %q, %v; want %s kept", uuid, ok, cached.UUID)
	}
	m.changed(rowDeleted)
	if uuid, ok := m.uuid(nb, "g"); ok {
		t.Fatalf("after the group's deletion its UUID %s is still known", uuid)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	eventually(t, what, func() error {
		if !cond() {
			return errors.New("not yet")
		}
		return nil
	})
}
