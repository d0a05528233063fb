package policy

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	ovsdbcache "github.com/ovn-org/libovsdb/cache"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// membersKey prefixes the queue key of a port group's members alone
// (members/ followed by the key of the group's full sync: policy/,
// namespace/ or admin/). A pod change can move the pod into or out of a
// group but changes none of its ACLs, so it queues this key: the sync
// reads the selector the last full sync registered, lists the pods it
// selects and sets the group's ports, without building the policy's rows
// again (that was a fifth of the master's allocations while a cluster
// grew, make bench-scale). When there is no registered selector or no
// group of ours yet, it queues the full key instead.
const membersKey = "members/"

// groupLocks serialize the syncs writing one port group: its full sync
// and its members sync are two queue keys, which may run at once, and a
// set of ports computed before the other's commit would undo it (each
// sends the difference from the cache it read). A full key's syncs take
// its stripe for their build and commit; nothing else is taken under it
// but the address sets' locks (commitBuilt), never the other way round.
type groupLocks [64]sync.Mutex

// lock takes the stripe of a full key and returns its unlock.
func (l *groupLocks) lock(key string) func() {
	h := uint32(2166136261) // FNV-1a
	for i := 0; i < len(key); i++ {
		h = (h ^ uint32(key[i])) * 16777619
	}
	m := &l[h%uint32(len(l))]
	m.Lock()
	return m.Unlock
}

// commitGroup is commitBuilt under the lock of the port group of a full key.
func (c *Controller) commitGroup(ctx context.Context, full string, build func(*ovndb.Txn)) error {
	defer c.groups.lock(full)()
	return c.commitBuilt(ctx, build)
}

// syncMembers sets the ports of the group(s) of a full key to the pods its
// registered selector picks now, or queues the full key when that cannot
// be done alone.
func (c *Controller) syncMembers(ctx context.Context, full string) error {
	defer c.groups.lock(full)()
	t := ovndb.NewTxn(c.nb)
	var ok bool
	switch {
	case strings.HasPrefix(full, policyKey):
		ok = c.policyMembers(t, strings.TrimPrefix(full, policyKey))
	case strings.HasPrefix(full, namespaceKey):
		ok = c.namespaceMembers(t, strings.TrimPrefix(full, namespaceKey))
	case strings.HasPrefix(full, adminKey):
		ok = c.adminMembers(t, strings.TrimPrefix(full, adminKey))
	}
	if err := t.Err(); err != nil {
		return fmt.Errorf("members of %s: %w", full, err)
	}
	if !ok {
		c.queue.Add(full)
		return nil
	}
	if err := c.commitTxn(ctx, t); err != nil {
		return fmt.Errorf("members of %s: %w", full, err)
	}
	return nil
}

// setPorts sets the ports of our port group name to ports(), false (and
// nothing done) when there is no such group of owner's.
func setPorts(t *ovndb.Txn, name string, owner topology.Owner, ports func() []string) bool {
	pg := ovndb.Lookup(t, &nbdb.PortGroup{Name: name})
	if pg == nil || !topology.OwnedBy(pg.ExternalIDs, owner) {
		return false
	}
	t.SetMembers(pg, &pg.Ports, ports())
	return true
}

// policyMembers sets a NetworkPolicy's group's ports (see syncMembers).
func (c *Controller) policyMembers(t *ovndb.Txn, key string) bool {
	c.mu.RLock()
	p := c.policies[key]
	c.mu.RUnlock()
	if p == nil {
		return false
	}
	ns, name, _ := strings.Cut(key, "/")
	return setPorts(t, PolicyPortGroup(ns, name), topology.Owner{Type: OwnerPolicy, Name: key}, func() []string {
		return c.selectedPorts(t, ns, func(pod *slim.Pod) bool { return p.pods.Matches(labels.Set(pod.Labels)) })
	})
}

// adminMembers sets an admin policy's group's ports (see syncMembers).
func (c *Controller) adminMembers(t *ovndb.Txn, key string) bool {
	c.mu.RLock()
	a := c.admins[key]
	c.mu.RUnlock()
	if a == nil {
		return false
	}
	kind, name, _ := strings.Cut(key, "/")
	return setPorts(t, AdminPortGroup(kind, name), topology.Owner{Type: kind, Name: name}, func() []string {
		return c.subjectPorts(t, a.subject)
	})
}

// namespaceMembers sets the ports of a namespace's default-deny groups (see
// syncMembers); a group to be created or deleted is the full sync's.
func (c *Controller) namespaceMembers(t *ovndb.Txn, ns string) bool {
	owner := topology.Owner{Type: OwnerNamespace, Name: ns}
	for d, sels := range c.isolating(ns) {
		name := DefaultDenyPortGroup(ns, d)
		if len(sels) == 0 {
			if pg := ovndb.Lookup(t, &nbdb.PortGroup{Name: name}); pg != nil && topology.OwnedBy(pg.ExternalIDs, owner) {
				return false
			}
			continue
		}
		if !setPorts(t, name, owner, func() []string { return c.selectedPorts(t, ns, matchesAny(sels)) }) {
			return false
		}
	}
	return true
}

// isolating are the pod selectors of a namespace's policies isolating each
// direction.
func (c *Controller) isolating(ns string) map[Direction][]labels.Selector {
	nps, _ := c.npLister.NetworkPolicies(ns).List(labels.Everything())
	out := map[Direction][]labels.Selector{Ingress: nil, Egress: nil}
	for _, np := range nps {
		sel, ingress, egress, _ := Isolates(np) // a malformed selector: Policy's status says so
		if ingress {
			out[Ingress] = append(out[Ingress], sel)
		}
		if egress {
			out[Egress] = append(out[Egress], sel)
		}
	}
	return out
}

func matchesAny(sels []labels.Selector) func(*slim.Pod) bool {
	return func(p *slim.Pod) bool {
		return slices.ContainsFunc(sels, func(s labels.Selector) bool { return s.Matches(labels.Set(p.Labels)) })
	}
}

// syncNamespace makes the namespace's default-deny port groups hold the pods
// some policy selects for each direction (deleting a group no policy needs).
func (c *Controller) syncNamespace(ctx context.Context, ns string) error {
	defer c.groups.lock(namespaceKey + ns)()
	t := ovndb.NewTxn(c.nb)
	log := c.logging(ns)
	for d, sels := range c.isolating(ns) {
		if len(sels) == 0 {
			if pg := ovndb.Lookup(t, &nbdb.PortGroup{Name: DefaultDenyPortGroup(ns, d)}); pg != nil &&
				topology.OwnedBy(pg.ExternalIDs, topology.Owner{Type: OwnerNamespace, Name: ns}) {
				t.Delete(pg)
			}
			continue
		}
		pg, acls := DefaultDeny(ns, d, log, c.fams)
		c.ensurePortGroup(t, pg, acls, c.selectedPorts(t, ns, matchesAny(sels)))
	}
	if err := c.commitTxn(ctx, t); err != nil {
		return fmt.Errorf("namespace %s: %w", ns, err)
	}
	return nil
}

// selectedPorts are the UUIDs of the ports of the namespace's pods that
// match, among those whose port exists.
func (c *Controller) selectedPorts(t *ovndb.Txn, ns string, match func(*slim.Pod) bool) []string {
	var out []string
	// The client's cache is nil once it is closed (the master stopping
	// while a worker syncs): then the lookup below fails the transaction.
	var lsps *ovsdbcache.RowCache
	if tc := c.nb.Cache(); tc != nil {
		lsps = tc.Table(nbdb.LogicalSwitchPortTable)
	}
	for _, p := range c.podLister.List(ns, labels.Everything()) {
		// The port's existence (its add event queues what selects the pod)
		// says the pod is networked; its annotation need not be parsed.
		if !match(p) || !p.Networked() {
			continue
		}
		key := p.Namespace + "/" + p.Name
		if uuid, ok := c.podPorts.load(key); ok && lsps != nil && lsps.HasRow(uuid) {
			out = append(out, uuid)
			continue
		}
		lsp := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: topology.PodPort(p.Namespace, p.Name)})
		if lsp != nil && topology.OwnedBy(lsp.ExternalIDs, topology.Owner{Type: topology.OwnerPod, Name: key}) {
			c.podPorts.store(key, lsp.UUID)
			out = append(out, lsp.UUID)
		}
	}
	return out
}

// ensurePortGroup makes a port group exist with exactly these ports and
// ACLs of ours (ACLs found by their id; stale ones removed, which deletes them).
func (c *Controller) ensurePortGroup(t *ovndb.Txn, want *nbdb.PortGroup, acls []*nbdb.ACL, ports []string) {
	// The transaction writes UUIDs into the rows it is given: it gets
	// copies, so that the desired rows can be built into another one.
	want = want.DeepCopy()
	acls = slices.Clone(acls)
	for i, a := range acls {
		acls[i] = a.DeepCopy()
	}
	cached := ovndb.Lookup(t, &nbdb.PortGroup{Name: want.Name})
	if t.Err() != nil {
		return
	}
	if cached == nil {
		for _, a := range acls {
			want.ACLs = append(want.ACLs, t.Create(a))
		}
		want.Ports = ports
		t.Ensure(want, []any{&want.ExternalIDs}, nil)
		return
	}
	if t.Ensure(want, []any{&want.ExternalIDs}, nil); t.Err() != nil {
		return
	}
	ids := map[string]bool{}
	for _, a := range acls {
		ids[a.ExternalIDs[ACLIDKey]] = true
		t.EnsureChild(cached, &cached.ACLs, ACLIDKey, a, topology.ACLColumns(a))
	}
	t.RemoveChildren(cached, &cached.ACLs, t.ChildrenWhere(cached.ACLs, func(m map[string]string) bool {
		return !ids[m[ACLIDKey]]
	}, &nbdb.ACL{})...)
	t.SetMembers(cached, &cached.Ports, ports)
}
