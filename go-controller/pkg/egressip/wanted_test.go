package egressip

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// The deletion of a NAT the controller moved to another node (its own
// write) requeues nothing; the deletion of one it still wants (someone
// removed it) requeues its EgressIP, as does a deleted address set.
func TestOwnDeletionsAreNoNews(t *testing.T) {
	c := &Controller{wanted: map[string]map[string]bool{}}
	c.queue = controller.NewQueue("t", time.Second, func(context.Context, string) error { return nil }, logr.Discard())
	c.started.Store(true)
	plan := func(node string) Plan {
		return Plan{Name: "e", Assignments: []Assignment{{IP: netip.MustParseAddr("172.18.0.100"), Node: node}},
			Pods:     []Pod{{Namespace: "prod", Name: "a", IPs: addrs("10.244.1.5")}},
			NextHops: map[string][]netip.Addr{node: addrs("100.64.0.3")}}
	}
	fams := topology.Families{V4: true}
	before, after := Compute(plan("n1"), fams), Compute(plan("n2"), fams)
	c.setWanted("e", after)
	c.nbRowDeleted(before.SNATs["n1"][0])
	if !c.queue.Idle() {
		t.Fatal("the deletion of the NAT moved away from n1 requeued the EgressIP")
	}
	c.nbRowDeleted(after.SNATs["n2"][0])
	if c.queue.Idle() {
		t.Fatal("the deletion of a wanted NAT did not requeue the EgressIP")
	}
	c.queue = controller.NewQueue("t", time.Second, func(context.Context, string) error { return nil }, logr.Discard())
	c.nbRowDeleted(after.Sets[0])
	if c.queue.Idle() {
		t.Fatal("the deletion of the EgressIP's address set did not requeue it")
	}
	if before.SNATs["n1"][0].ExternalIDs[NodeKey] != "n1" {
		t.Errorf("NAT external_ids %v name no node", before.SNATs["n1"][0].ExternalIDs)
	}
}
