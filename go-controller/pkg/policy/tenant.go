package policy

import (
	"net/netip"
	"sort"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Namespace isolation (OpenShift SDN's multitenant mode, on OVN's tools).
// Each namespace is a tenant of its own unless its annotation says
// otherwise; pods reach only pods of their tenant and of global
// namespaces, and global namespaces reach everyone. Services are isolated
// the same way, since the receiving pod's ACLs see the client's address
// after load balancing. NetworkPolicy applies within what isolation allows.

// TenantAnnotation places a namespace in a tenant:
//
//	"isolate"       its own tenant (the default)
//	"global"        reaches and is reached by every pod
//	"join:<other>"  the tenant of namespace <other> (followed transitively;
//	                namespaces joined in a circle share the tenant of the
//	                first of them by name)
//
// The seed (OpenShift SDN) took the same three words as a one-off request
// (`oc adm pod-network join-projects|isolate-projects|make-projects-global`);
// here the annotation states the membership and is followed for as long
// as it is there.
const TenantAnnotation = "k8s.ovn.org/tenant"

// GlobalTenant is the tenant of global namespaces; "*" is in no
// Kubernetes name, so a namespace called "global" stays a tenant of its own.
const GlobalTenant = "*"

// OwnerTenant is the owner type of a tenant's rows.
const OwnerTenant = "Tenant"

// TenantSpec is a namespace's tenant annotation, decoded: Global, or Join
// naming another namespace, or neither (isolated).
type TenantSpec struct {
	Global bool
	Join   string
}

// ParseTenant decodes the annotation; ok is false for a value it does not
// know (which then counts as "isolate", the safe reading).
func ParseTenant(v string) (TenantSpec, bool) {
	switch {
	case v == "" || v == "isolate":
		return TenantSpec{}, true
	case v == "global":
		return TenantSpec{Global: true}, true
	case strings.HasPrefix(v, "join:") && len(v) > len("join:"):
		return TenantSpec{Join: strings.TrimPrefix(v, "join:")}, true
	}
	return TenantSpec{}, false
}

// ResolveTenant names the tenant of a namespace, given every namespace's
// spec: GlobalTenant, or the namespace whose tenant it shares.
func ResolveTenant(ns string, spec func(string) TenantSpec) string {
	return ResolveTenants([]string{ns}, spec)[ns]
}

// ResolveTenants names the tenant of each namespace (and of every namespace
// their joins pass through), following each join once: a chain of n joined
// namespaces costs O(n) in all, not O(n) per namespace.
func ResolveTenants(names []string, spec func(string) TenantSpec) map[string]string {
	memo := map[string]string{}
	for _, ns := range names {
		resolveInto(memo, ns, spec)
	}
	return memo
}

// resolveInto follows ns's joins until a namespace already resolved, a
// global or isolated one, or a circle (whose members share the tenant of
// the first of them by name), and records the answer for the whole path.
func resolveInto(memo map[string]string, ns string, spec func(string) TenantSpec) {
	onPath := map[string]int{}
	var path []string
	tenant := ""
	for cur := ns; tenant == ""; {
		if t, ok := memo[cur]; ok {
			tenant = t
			break
		}
		if i, ok := onPath[cur]; ok {
			circle := append([]string(nil), path[i:]...)
			sort.Strings(circle)
			tenant = circle[0]
			break
		}
		onPath[cur] = len(path)
		path = append(path, cur)
		switch s := spec(cur); {
		case s.Global:
			tenant = GlobalTenant
		case s.Join == "":
			tenant = cur
		default:
			cur = s.Join
		}
	}
	for _, p := range path {
		memo[p] = tenant
	}
}

// TenantPortGroup holds the ports of a tenant's pods.
func TenantPortGroup(tenant string) string { return "mt." + identifier(tenant) }

// TenantAddressSet holds the addresses of a tenant's pods (its IPv4 row;
// see topology.FamilySetName); the global tenant's is named apart from any
// namespace's.
func TenantAddressSet(tenant string) string {
	if tenant == GlobalTenant {
		return "mt_global"
	}
	return "mt." + identifier(tenant)
}

// TenantRows are an isolated tenant's port group (without ports) and the
// ACL dropping what comes from other tenants' pods, in every family of the
// cluster subnets; the address sets are TenantAddressSet's, owned with
// them. nodeSources (masked constants, topology.ManagementAddresses) are
// the nodes' management ports, which reach every tenant, as nodes did in
// OpenShift SDN's multitenant mode: a node reaches pods on other nodes, and
// the services it calls, through its own.
func TenantRows(tenant string, clusterSubnets []netip.Prefix, nodeSources []string) (*nbdb.PortGroup, []*nbdb.ACL) {
	owner := topology.Owner{Type: OwnerTenant, Name: tenant}
	pg := &nbdb.PortGroup{Name: TenantPortGroup(tenant), ExternalIDs: owner.ExternalIDs()}
	if tenant == GlobalTenant || len(clusterSubnets) == 0 {
		return pg, nil
	}
	var clauses []string
	for _, v6 := range []bool{false, true} {
		var cidrs []string
		for _, s := range clusterSubnets {
			if s.Addr().Is6() == v6 {
				cidrs = append(cidrs, s.Masked().String())
			}
		}
		if len(cidrs) == 0 {
			continue
		}
		src := ipField(v6, "src")
		allowed := []string{"$" + topology.FamilySetName(TenantAddressSet(tenant), v6), "$" + topology.FamilySetName(TenantAddressSet(GlobalTenant), v6)}
		for _, n := range nodeSources {
			if strings.Contains(n, ":") == v6 {
				allowed = append(allowed, n)
			}
		}
		clauses = append(clauses, and(src+" == "+setOf(cidrs), src+" != {"+strings.Join(allowed, ", ")+"}"))
	}
	match := and("outport == @"+pg.Name, or(clauses...))
	return pg, []*nbdb.ACL{NewACL(Ingress, PriorityIsolation, match, nbdb.ACLActionDrop, owner, "isolation", "", "")}
}

// TenantAddressSetRow is a tenant's address set row of one family with
// these addresses of that family.
func TenantAddressSetRow(tenant string, v6 bool, addrs []string) *nbdb.AddressSet {
	ids := topology.Owner{Type: OwnerTenant, Name: tenant}.ExternalIDs()
	ids[FamilyKey] = familyName(v6)
	return &nbdb.AddressSet{Name: topology.FamilySetName(TenantAddressSet(tenant), v6), Addresses: addrs, ExternalIDs: ids}
}
