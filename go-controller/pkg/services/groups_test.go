package services

import (
	"context"
	"errors"
	"testing"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

// The memo answers from what it read until told a group changed, then reads
// the groups again: no copy of a group per question, and no answer from
// before the last change it was told of.
func TestGroupMemoReadsAgainAfterAChange(t *testing.T) {
	ctx := context.Background()
	sock := ovndbtest.NewServer(t)
	nb := ovndbtest.Connect(t, sock)
	transact := func(ops []ovsdb.Operation, err error) {
		t.Helper()
		if err == nil {
			_, err = nb.Transact(ctx, ops...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	lb := &nbdb.LoadBalancer{UUID: "lb", Name: "a", Protocol: new(string)}
	*lb.Protocol = nbdb.LoadBalancerProtocolTCP
	lbOps, err := nb.Create(lb)
	if err != nil {
		t.Fatal(err)
	}
	g := &nbdb.LoadBalancerGroup{Name: "g", LoadBalancer: []string{"lb"}}
	gOps, err := nb.Create(g)
	transact(append(lbOps, gOps...), err)
	var lbs []nbdb.LoadBalancer
	waitFor(t, "the rows in the cache", func() bool { return nb.List(ctx, &lbs) == nil && len(lbs) == 1 })
	var m groupMemo
	e, ok := m.get(nb, "g")
	if !ok || !e.members[lbs[0].UUID] {
		t.Fatalf("group g: %+v, %v; want %s a member", e, ok, lbs[0].UUID)
	}
	if _, ok := m.get(nb, "other"); ok {
		t.Fatal("a group that does not exist was found")
	}
	cached := &nbdb.LoadBalancerGroup{Name: "g"}
	if err := nb.Get(ctx, cached); err != nil {
		t.Fatal(err)
	}
	transact(nb.Where(cached).Mutate(cached, model.Mutation{Field: &cached.LoadBalancer, Mutator: ovsdb.MutateOperationDelete, Value: []string{lbs[0].UUID}}))
	waitFor(t, "the member gone from the cache", func() bool {
		return nb.Get(ctx, cached) == nil && len(cached.LoadBalancer) == 0
	})
	m.changed() // what the controller's NB event handler does
	if e, _ := m.get(nb, "g"); e.members[lbs[0].UUID] {
		t.Fatalf("after the change the memo still holds %v", e.members)
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
