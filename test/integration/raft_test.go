package integration

import (
	"fmt"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// A 3-server RAFT NB whose leader is killed twice while pods are created and
// deleted: the master follows the leadership (it is given every server) and
// in the end the NB holds exactly one row of everything the pods want.
func TestClusteredNBLeaderKilledMidChurn(t *testing.T) {
	ovn := harness.StartOVNCentralRaft(t, 3)
	c := &cluster{t: t, ovn: ovn, kube: harness.StartKubeAPI(t), logDir: t.TempDir()}
	c.nb = harness.WatchNB(t, c.ovn, nbdb.LogicalSwitchPortTable)
	t.Cleanup(func() {
		if t.Failed() && c.master != nil {
			t.Logf("master log tail:\n%s", c.master.Tail(40))
		}
	})
	raft := ovn.Raft()
	nodes := []string{"n1", "n2"}
	for _, n := range nodes {
		c.createNode(n, nil)
	}
	c.startMaster()
	c.nodeSubnet("n1")
	ch := startChurn(c, nodes)
	for kill := 1; kill <= 2; kill++ {
		time.Sleep(2 * time.Second) // churn against this leader first
		leader, err := raft.Leader()
		if err != nil {
			t.Fatal(err)
		}
		killedAt := time.Now()
		raft.Kill(leader)
		var next int
		harness.Eventually(t, 30*time.Second, "a new NB leader", func() error {
			next, err = raft.Leader()
			return err
		})
		pod := ch.podCreatedAfter(t, killedAt)
		c.podNetwork("default", pod)
		harness.Eventually(t, 30*time.Second, "port of "+pod, func() error {
			if c.lsp(topology.PodPort("default", pod)) == nil {
				return fmt.Errorf("none")
			}
			return nil
		})
		t.Logf("kill %d: NB server %d (leader) killed; server %d leads; pod %s has its port %s after the kill",
			kill, leader, next, pod, time.Since(killedAt).Round(100*time.Millisecond))
		raft.Start(leader) // back as a follower
	}
	pods := ch.finishConverged(t, nodes)
	t.Logf("%d pods in place after 2 NB leader kills", len(pods))
}
