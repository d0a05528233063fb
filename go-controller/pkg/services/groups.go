package services

import (
	"context"
	"sync"

	libovsdbclient "github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// groupMemo holds the load balancer groups' UUIDs, read from the NB cache
// again after a group came or went (or a new cache), and what their members
// were when last read from the server: the members column is not monitored
// (ovndb.NBUnmonitored), as every Service's insert made every client copy
// the whole group. A service's sync inserts the balancers it writes without
// asking; it asks only about an unchanged one, and a balancer not among the
// members read last makes the memo read them again (one read covers every
// balancer inserted since), so an idle resync writes nothing and a repair
// costs one read.
type groupMemo struct {
	mu      sync.Mutex
	shape   uint64 // bumped when a group comes or goes
	read    uint64 // shape when uuids was read
	epoch   ovndb.Epoch
	uuids   map[string]string          // name → UUID; nil until read
	members map[string]map[string]bool // UUID → members when last read
}

// changed says that a group row came, changed or went.
func (g *groupMemo) changed(ev rowEvent) {
	if ev == rowUpdated {
		return // not its members (unmonitored), nor its UUID
	}
	g.mu.Lock()
	g.shape++
	g.mu.Unlock()
}

// forget drops the members read: the next question reads them again (a
// resync's, so that a balancer removed behind our back is put back).
func (g *groupMemo) forget() {
	g.mu.Lock()
	g.members = nil
	g.mu.Unlock()
}

// uuid returns the named group's UUID, false when there is none.
func (g *groupMemo) uuid(nb libovsdbclient.Client, name string) (string, bool) {
	epoch := ovndb.CurrentEpoch(nb)
	g.mu.Lock()
	if g.uuids != nil && g.read == g.shape && g.epoch == epoch {
		uuid, ok := g.uuids[name]
		g.mu.Unlock()
		return uuid, ok
	}
	shape := g.shape
	g.mu.Unlock()
	var rows []nbdb.LoadBalancerGroup
	_ = nb.List(context.Background(), &rows)
	uuids := make(map[string]string, len(rows))
	for _, r := range rows {
		uuids[r.Name] = r.UUID
	}
	g.mu.Lock()
	if g.shape == shape {
		g.uuids, g.read = uuids, shape
		if g.epoch != epoch {
			g.epoch, g.members = epoch, nil
		}
	}
	g.mu.Unlock()
	uuid, ok := uuids[name]
	return uuid, ok
}

// has says whether lb (a UUID) is a member of the named group, reading the
// members from the server when it is not among those read last. False on
// any error: the caller inserts it, which changes nothing if it is there.
func (g *groupMemo) has(ctx context.Context, nb libovsdbclient.Client, name, lb string) bool {
	uuid, ok := g.uuid(nb, name)
	if !ok {
		return false
	}
	g.mu.Lock()
	known := g.members[uuid][lb]
	g.mu.Unlock()
	if known {
		return true
	}
	row := &nbdb.LoadBalancerGroup{Name: name}
	if found, err := ovndb.FetchByName(ctx, nb, row, &row.LoadBalancer); err != nil || !found || row.UUID != uuid {
		return false
	}
	members := make(map[string]bool, len(row.LoadBalancer))
	for _, m := range row.LoadBalancer {
		members[m] = true
	}
	g.mu.Lock()
	if g.members == nil {
		g.members = map[string]map[string]bool{}
	}
	g.members[uuid] = members
	g.mu.Unlock()
	return members[lb]
}
