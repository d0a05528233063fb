package services

import (
	"context"
	"sync"

	libovsdbclient "github.com/ovn-org/libovsdb/client"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// groupMemo holds the load balancer groups' UUIDs and members, read from the
// NB cache again only after an event on a group row (or a new cache): every
// service's sync asks whether its balancers are members, and copying a
// group of thousands of balancers out of the cache for each of them made a
// full resync cost services² (make bench-scale).
type groupMemo struct {
	mu     sync.Mutex
	gen    uint64 // bumped by every event on the group table
	read   uint64 // gen when groups was read
	epoch  ovndb.Epoch
	groups map[string]groupEntry // by name; nil until read
}

type groupEntry struct {
	uuid    string
	members map[string]bool // shared: read only
}

// changed says that a group row changed: the next question reads them again.
func (g *groupMemo) changed() {
	g.mu.Lock()
	g.gen++
	g.mu.Unlock()
}

// get returns the named group, false when there is none. An event that
// arrives while the groups are read leaves them to be read again.
func (g *groupMemo) get(nb libovsdbclient.Client, name string) (groupEntry, bool) {
	epoch := ovndb.CurrentEpoch(nb)
	g.mu.Lock()
	if g.groups != nil && g.read == g.gen && g.epoch == epoch {
		e, ok := g.groups[name]
		g.mu.Unlock()
		return e, ok
	}
	gen := g.gen
	g.mu.Unlock()
	var rows []nbdb.LoadBalancerGroup
	_ = nb.List(context.Background(), &rows)
	groups := make(map[string]groupEntry, len(rows))
	for _, r := range rows {
		members := make(map[string]bool, len(r.LoadBalancer))
		for _, lb := range r.LoadBalancer {
			members[lb] = true
		}
		groups[r.Name] = groupEntry{uuid: r.UUID, members: members}
	}
	g.mu.Lock()
	if g.gen == gen {
		g.groups, g.read, g.epoch = groups, gen, epoch
	}
	g.mu.Unlock()
	e, ok := groups[name]
	return e, ok
}
