package policy

import (
	"context"
	"fmt"
	"slices"
	"sort"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// tenantSpec reads a namespace's tenant annotation; a missing namespace or
// an unknown value is isolated.
func (c *Controller) tenantSpec(ns string) TenantSpec {
	n, err := c.nsLister.Get(ns)
	if err != nil {
		return TenantSpec{}
	}
	v := n.Annotations[TenantAnnotation]
	s, ok := ParseTenant(v)
	if !ok {
		c.log.Info("ignoring the namespace's tenant annotation; the namespace stays isolated", "namespace", ns,
			"annotation", TenantAnnotation, "value", v, "want", `"isolate", "global" or "join:<namespace>"`)
	}
	return s
}

// tenantIndex is every namespace's tenant and every tenant's namespaces,
// resolved in one pass (ResolveTenants) and kept until a namespace comes,
// goes or changes its tenant annotation.
type tenantIndex struct {
	of      map[string]string
	members map[string][]string
}

func (c *Controller) tenants() *tenantIndex {
	c.tenantMu.Lock()
	defer c.tenantMu.Unlock()
	if c.tenantIdx != nil {
		return c.tenantIdx
	}
	nss, _ := c.nsLister.List(labels.Everything())
	names := make([]string, 0, len(nss))
	for _, ns := range nss {
		names = append(names, ns.Name)
	}
	idx := &tenantIndex{of: ResolveTenants(names, c.tenantSpec), members: map[string][]string{}}
	for _, ns := range names {
		t := idx.of[ns]
		idx.members[t] = append(idx.members[t], ns)
	}
	c.tenantIdx = idx
	return idx
}

// forgetTenants drops the tenant index; the next use rebuilds it.
func (c *Controller) forgetTenants() {
	c.tenantMu.Lock()
	c.tenantIdx = nil
	c.tenantMu.Unlock()
}

func (c *Controller) tenantOf(ns string) string {
	if t, ok := c.tenants().of[ns]; ok {
		return t
	}
	return ResolveTenant(ns, c.tenantSpec) // not in the lister (yet)
}

// enqueueTenants queues every tenant some namespace is in, the global
// tenant (whose address set exists whenever isolation is on) and every
// tenant with rows in the NB.
func (c *Controller) enqueueTenants() {
	c.queue.Add(tenantKey + GlobalTenant)
	for t := range c.tenants().members {
		c.queue.Add(tenantKey + t)
	}
	var sets []nbdb.AddressSet
	_ = c.nb.WhereCache(func(a *nbdb.AddressSet) bool {
		o, ok := topology.OwnerOf(a.ExternalIDs)
		return ok && o.Type == OwnerTenant
	}).List(context.Background(), &sets)
	for _, s := range sets {
		c.queue.Add(tenantKey + s.ExternalIDs[topology.OwnerNameKey])
	}
}

// syncTenant makes a tenant's address set hold its pods' addresses and, for
// an isolated tenant, its port group hold their ports with the isolation
// ACL; a tenant no namespace is in (or isolation off) loses its rows. The
// global tenant's address set is kept, empty or not, while isolation is on:
// every isolation ACL names it, and OVN ignores an ACL naming a missing set
// (which would let every tenant in).
func (c *Controller) syncTenant(ctx context.Context, tenant string) error {
	var members []string
	if c.opts.Isolation {
		members = c.tenants().members[tenant]
	}
	owner := topology.Owner{Type: OwnerTenant, Name: tenant}
	t := ovndb.NewTxn(c.nb)
	cachedPG := ovndb.Lookup(t, &nbdb.PortGroup{Name: TenantPortGroup(tenant)})
	pg, acls := TenantRows(tenant, c.opts.ClusterSubnets, c.opts.NodeSources)
	if len(members) == 0 || tenant == GlobalTenant {
		if cachedPG != nil && topology.OwnedBy(cachedPG.ExternalIDs, owner) {
			t.Delete(cachedPG)
		}
	}
	keepSet := len(members) > 0 || tenant == GlobalTenant && c.opts.Isolation
	for _, v6 := range []bool{false, true} {
		cachedSet := ovndb.Lookup(t, &nbdb.AddressSet{Name: topology.FamilySetName(TenantAddressSet(tenant), v6)})
		if !keepSet || !c.fams.Has(v6) {
			if cachedSet != nil && topology.OwnedBy(cachedSet.ExternalIDs, owner) {
				t.Delete(cachedSet)
			}
			continue
		}
		var addrs []string
		for _, ns := range members {
			for _, p := range c.podLister.List(ns, labels.Everything()) {
				addrs = append(addrs, podIPs(p, v6)...)
			}
		}
		sort.Strings(addrs)
		ensureAddressSet(t, cachedSet, TenantAddressSetRow(tenant, v6, slices.Compact(addrs)))
	}
	if keepSet && tenant != GlobalTenant {
		c.ensureGlobalSets(t) // named by the isolation ACL: created with it
		var ports []string
		for _, ns := range members {
			ports = append(ports, c.selectedPorts(t, ns, func(*slim.Pod) bool { return true })...)
		}
		c.ensurePortGroup(t, pg, acls, ports)
	}
	if err := c.commitTxn(ctx, t); err != nil {
		return fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return nil
}

// ensureGlobalSets creates the global tenant's address sets (one per
// family), empty, when they do not exist; the global tenant's own sync
// fills them.
func (c *Controller) ensureGlobalSets(t *ovndb.Txn) {
	for _, v6 := range []bool{false, true} {
		if c.fams.Has(v6) && ovndb.Lookup(t, &nbdb.AddressSet{Name: topology.FamilySetName(TenantAddressSet(GlobalTenant), v6)}) == nil {
			ensureAddressSet(t, nil, TenantAddressSetRow(GlobalTenant, v6, nil))
		}
	}
}
