package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"

	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// commitBuilt commits the operations build makes. When it creates address
// sets (which policies share) and no other sync is creating any of them,
// the sets and the rest commit in one transaction, under the locks of the
// sets' names: a new policy costs one round trip (make bench: the first
// admin policies of a burst). Otherwise each set is created on its own
// first (createSets), waiting only for the sync creating that same set,
// and the rest is then built again (the sets now exist) and committed. No
// lock is held while waiting for another, and no ACL ever names a set not
// yet there.
func (c *Controller) commitBuilt(ctx context.Context, build func(*ovndb.Txn)) error {
	t := ovndb.NewTxn(c.nb)
	build(t)
	inserts := setInserts(t)
	if len(inserts) == 0 {
		return c.commitTxn(ctx, t)
	}
	if unlock := c.setLocks.tryLockAll(slices.Collect(maps.Keys(inserts))); unlock != nil {
		if !c.anySetExists(inserts) {
			defer unlock()
			return c.commitTxn(ctx, t)
		}
		unlock()
	}
	if err := c.createSets(ctx, inserts); err != nil {
		return err
	}
	t = ovndb.NewTxn(c.nb)
	build(t)
	return c.commitTxn(ctx, t)
}

// anySetExists tells whether the cache holds one of the address sets
// named.
func (c *Controller) anySetExists(names map[string]ovsdb.Operation) bool {
	t := ovndb.NewTxn(c.nb)
	for name := range names {
		if ovndb.Lookup(t, &nbdb.AddressSet{Name: name}) != nil {
			return true
		}
	}
	return false
}

// createSets commits address set inserts, each under the lock of its name
// and only when no other sync has created that set meanwhile (its own key
// keeps it up to date). Set rows reference no other row, so each insert
// stands alone: they are sent at once (the committer carries them in one
// transaction), and a sync waiting for a set another sync is creating
// waits for that set alone, not for every set the other creates (the
// first admin policies of a burst, sharing most of their sets, waited for
// one another in a chain: 40-230 ms, make bench).
func (c *Controller) createSets(ctx context.Context, inserts map[string]ovsdb.Operation) error {
	errs := make(chan error, len(inserts))
	for name, op := range inserts {
		go func() { errs <- c.createSet(ctx, name, op) }()
	}
	var err error
	for range inserts {
		err = errors.Join(err, <-errs)
	}
	return err
}

func (c *Controller) createSet(ctx context.Context, name string, insert ovsdb.Operation) error {
	defer c.setLocks.lock(name)()
	if ovndb.Lookup(ovndb.NewTxn(c.nb), &nbdb.AddressSet{Name: name}) != nil {
		return nil
	}
	ops := []ovsdb.Operation{insert}
	if err := c.commit(ctx, ops); err != nil {
		return err
	}
	ovndb.Inserted(c.nb, ops) // its first change is computed from these members
	return nil
}

// setInserts are the address set inserts of a transaction, by set name.
func setInserts(t *ovndb.Txn) map[string]ovsdb.Operation {
	ops, _ := t.Ops()
	out := map[string]ovsdb.Operation{}
	for _, op := range ops {
		if op.Op == ovsdb.OperationInsert && op.Table == nbdb.AddressSetTable {
			if n, ok := op.Row["name"].(string); ok {
				out[n] = op
			}
		}
	}
	return out
}

// commitTxn commits t's operations and tells t how it ended (Committed:
// the address sets' members it changed are kept by ovndb).
func (c *Controller) commitTxn(ctx context.Context, t *ovndb.Txn) error {
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return t.Committed(c.commit(ctx, ops))
}

// ensurePeerSet creates a peer address set's rows (one per family) that do
// not exist yet, with their members; an existing one recording this
// selector is kept up to date by its own key, and one recording another is
// rewritten here, never reused.
func (c *Controller) ensurePeerSet(t *ovndb.Txn, s PeerSet, members memberMemo) {
	c.ensureNewSet(t, s.Name(), s.Key(), func(v6 bool) *nbdb.AddressSet {
		return s.AddressSet(v6, members.get(topology.FamilySetName(s.Name(), v6), func() []string { return c.members(s, v6) }))
	})
}

// setRow is an address set's desired row of one family.
type setRow func(v6 bool) *nbdb.AddressSet

// ensureNewSet creates a shared address set's rows (one per family of the
// cluster) that do not exist yet or record another selector than key; one
// recording key is kept up to date by the set's own queue key.
func (c *Controller) ensureNewSet(t *ovndb.Txn, name, key string, row setRow) {
	for _, v6 := range []bool{false, true} {
		if !c.fams.Has(v6) {
			continue
		}
		cached := ovndb.Lookup(t, &nbdb.AddressSet{Name: topology.FamilySetName(name, v6)})
		if cached != nil && cached.ExternalIDs[PeersKey] == key {
			continue
		}
		ensureAddressSet(t, cached, row(v6))
	}
}

// syncSet makes a shared address set's rows those row gives, one per
// family of the cluster, or deletes the rows owner owns when row is nil
// (no policy names the set). A set not yet there is created as a policy's
// sync creates it (commitBuilt: under its name's lock), so that the two,
// racing, do not both insert it and one fail on its name.
func (c *Controller) syncSet(ctx context.Context, name string, owner topology.Owner, row setRow) error {
	if row == nil {
		if acl := c.aclNaming(name); acl != "" {
			return fmt.Errorf("address set %s: no policy names it, but ACL %s still does; it is deleted once that ACL's policy is synced", name, acl)
		}
	}
	var rows [2]*nbdb.AddressSet // computed once, though built up to three times
	build := func(t *ovndb.Txn) {
		for i, v6 := range []bool{false, true} {
			cached := ovndb.Lookup(t, &nbdb.AddressSet{Name: topology.FamilySetName(name, v6)})
			switch {
			case row != nil && c.fams.Has(v6):
				if rows[i] == nil {
					rows[i] = row(v6)
				}
				want := *rows[i] // Ensure may fill in the row it is given
				ensureAddressSet(t, cached, &want)
			case cached != nil && topology.OwnedBy(cached.ExternalIDs, owner):
				t.Delete(cached)
			}
		}
	}
	if err := c.commitBuilt(ctx, build); err != nil {
		return fmt.Errorf("address set %s: %w", name, err)
	}
	return nil
}

// aclNaming names an ACL of ours whose match still names the address set
// (either family's row), "" when none does. A set no policy names any more
// waits for it: after a restart the sets' queue may reach a set before the
// rows queue rewrites the ACLs of a policy changed while the master was
// down, and an ACL never names a set that does not exist (northd would drop
// it: a Deny not enforced).
func (c *Controller) aclNaming(name string) string {
	var acls []nbdb.ACL
	_ = c.nb.WhereCache(func(a *nbdb.ACL) bool {
		_, ours := ownerKey(a.ExternalIDs)
		return ours && (namesSet(a.Match, name) || namesSet(a.Match, topology.FamilySetName(name, true)))
	}).List(context.Background(), &acls)
	if len(acls) == 0 {
		return ""
	}
	o, _ := topology.OwnerOf(acls[0].ExternalIDs)
	return fmt.Sprintf("%s of %s %s", acls[0].ExternalIDs[ACLIDKey], o.Type, o.Name)
}

// namesSet says whether an OVN match refers to the address set ($name, not
// a longer name it begins).
func namesSet(match, name string) bool {
	sets, _ := topology.MatchReferences(match)
	return slices.Contains(sets, name)
}

// memberMemo keeps the members computed for new address sets during one
// sync, whose transaction may be built twice (commitBuilt).
type memberMemo map[string][]string

func (m memberMemo) get(name string, compute func() []string) []string {
	if v, ok := m[name]; ok {
		return v
	}
	v := compute()
	m[name] = v
	return v
}

// syncPeers makes one peer address set's rows hold the addresses of
// exactly the pods it selects, one row per family of the cluster, or
// deletes them when no policy names the set.
func (c *Controller) syncPeers(ctx context.Context, name string) error {
	c.mu.RLock()
	e := c.sets[name]
	c.mu.RUnlock()
	var row setRow
	if e != nil {
		row = func(v6 bool) *nbdb.AddressSet { return e.set.AddressSet(v6, c.members(e.set, v6)) }
	}
	return c.syncSet(ctx, name, topology.Owner{Type: OwnerPeers, Name: name}, row)
}

// ensureAddressSet makes an address set exist with exactly want's
// addresses (cached is its row in the cache, or nil), sending only the
// addresses that changed.
func ensureAddressSet(t *ovndb.Txn, cached, want *nbdb.AddressSet) {
	if cached == nil {
		t.Ensure(want, []any{&want.ExternalIDs}, nil)
		return
	}
	addrs := want.Addresses
	t.Ensure(want, []any{&want.ExternalIDs}, nil)
	t.SetMembers(cached, &cached.Addresses, addrs)
}

// members are the addresses of one family of the networked pods a set
// selects, each namespace's from the memo when its pods did not change.
func (c *Controller) members(s PeerSet, v6 bool) []string {
	var out []string
	q, epoch := membersQuestion(s, v6), ovndb.CurrentEpoch(c.nb)
	for _, ns := range c.namespacesOf(s) {
		out = append(out, c.memo.get(ns, q, epoch, func() []string {
			var addrs []string
			for _, p := range c.podsInNamespace(s, ns) {
				addrs = append(addrs, podIPs(p, v6)...)
			}
			return addrs
		})...)
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// namespacesOf lists the namespaces a set spans: through the label index
// when its selector requires a label's value (a team's namespaces among
// thousands), else by matching every namespace.
func (c *Controller) namespacesOf(s PeerSet) []string {
	if s.Namespace != "" {
		return []string{s.Namespace}
	}
	var out []string
	if key, ok := indexedLabel(s.Namespaces); ok && c.nsIndexer != nil {
		objs, _ := c.nsIndexer.ByIndex(nsLabelIndex, key)
		for _, o := range objs {
			if ns, ok := o.(*corev1.Namespace); ok && s.Namespaces.Matches(labels.Set(ns.Labels)) {
				out = append(out, ns.Name)
			}
		}
		return out
	}
	nss, _ := c.nsLister.List(s.Namespaces)
	out = make([]string, 0, len(nss))
	for _, ns := range nss {
		out = append(out, ns.Name)
	}
	return out
}

// nsLabelIndex indexes namespaces by each of their labels, as key=value.
const nsLabelIndex = "label"

func indexNamespaceLabels(obj any) ([]string, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return nil, nil
	}
	out := make([]string, 0, len(ns.Labels))
	for k, v := range ns.Labels {
		out = append(out, k+"="+v)
	}
	return out, nil
}

// indexedLabel is a key=value every namespace the selector matches has: of
// its first requirement of one value (=, == or in with one value).
func indexedLabel(sel labels.Selector) (string, bool) {
	reqs, _ := sel.Requirements()
	for _, r := range reqs {
		switch r.Operator() {
		case selection.Equals, selection.DoubleEquals, selection.In:
			if vals := r.Values(); vals.Len() == 1 {
				return r.Key() + "=" + vals.List()[0], true
			}
		}
	}
	return "", false
}

// podsIn lists the pods a set selects (networked or not).
func (c *Controller) podsIn(s PeerSet) []*slim.Pod {
	var out []*slim.Pod
	for _, ns := range c.namespacesOf(s) {
		out = append(out, c.podsInNamespace(s, ns)...)
	}
	return out
}

// podsInNamespace lists the pods a set selects in one namespace.
func (c *Controller) podsInNamespace(s PeerSet, ns string) []*slim.Pod {
	var out []*slim.Pod
	for _, p := range c.podLister.List(ns, s.Pods) {
		if s.Port == nil {
			out = append(out, p)
		} else if n, ok := p.ContainerPort(s.Port.Name, s.Port.Protocol); ok && n == s.Port.Number {
			out = append(out, p)
		}
	}
	return out
}

// resolve answers the distinct numbers a named port has among a set's pods.
func (c *Controller) resolve(s PeerSet, name string, proto corev1.Protocol) []int32 {
	seen := map[int32]bool{}
	var out []int32
	for _, p := range c.podsIn(s) {
		if n, ok := p.ContainerPort(name, proto); ok && !seen[n] && len(podAddrs(p)) > 0 {
			seen[n] = true
			out = append(out, n)
		}
	}
	return out
}

// podAddrs are the addresses (of both families) the master gave a pod that
// is networked now; finished pods' addresses go back to the pool, so they
// never count.
// PodAddresses are a networked pod's addresses from the master's
// annotation (nil without one written for this pod).
func PodAddresses(p *slim.Pod) []netip.Addr { return podAddrs(p) }

func podAddrs(p *slim.Pod) []netip.Addr {
	if !p.Networked() {
		return nil
	}
	return p.Addresses() // parsed once per pod version
}

// podIPs are a pod's addresses of one family (see podAddrs).
func podIPs(p *slim.Pod, v6 bool) []string {
	var out []string
	for _, a := range podAddrs(p) {
		if a.Is6() == v6 {
			out = append(out, a.String())
		}
	}
	return out
}
