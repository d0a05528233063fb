package policy

import (
	"context"
	"net/netip"
	"slices"
	"sort"

	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Rules naming DNS names (an EgressFirewall's dnsName, a
// ClusterNetworkPolicy's or AdminNetworkPolicy's domainNames) match the
// addresses the name resolves to, as the master's resolver sees them
// (dnsname.Resolver): an address set per name (dns.<SHA-256 of it>),
// shared by every rule naming it and kept current as answers change.
// Addresses inside the cluster's pod subnets are left out: a name never
// turns a rule about leaving the cluster into one about pods.

// OwnerDomainPeers is the owner type of a DNS name's address sets.
const OwnerDomainPeers = "DomainName"

// DomainResolver follows DNS names (dnsname.Resolver): Set names every name
// to follow, Addrs a name's current addresses.
type DomainResolver interface {
	Set(names []string)
	Addrs(name string) []netip.Addr
}

// DomainSet is the addresses one DNS name (normalized: lower case, no
// trailing dot) resolves to.
type DomainSet struct {
	Domain string
}

// Key is the canonical text of the set.
func (s DomainSet) Key() string { return "domain=" + s.Domain }

// Name is the address set's name (see PeerSet.Name).
func (s DomainSet) Name() string { return "dns." + peerSetHash(s.Key()) }

// DomainSetRow is a DNS name's address set row of one family with these
// addresses.
func DomainSetRow(s DomainSet, v6 bool, addrs []string) *nbdb.AddressSet {
	ids := topology.Owner{Type: OwnerDomainPeers, Name: s.Name()}.ExternalIDs()
	ids[PeersKey] = s.Key()
	ids[FamilyKey] = familyName(v6)
	return &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), v6), Addresses: addrs, ExternalIDs: ids}
}

// DomainChanged queues the address set of a DNS name whose addresses
// changed (the resolver's callback).
func (c *Controller) DomainChanged(domain string) {
	c.queue.Add(domainsKey + DomainSet{Domain: domain}.Name())
}

// followDomains tells the resolver every name some policy names (c.mu held).
func (c *Controller) followDomains() {
	if c.opts.DNS == nil {
		return
	}
	names := make([]string, 0, len(c.domainSets))
	for _, e := range c.domainSets {
		names = append(names, e.set.Domain)
	}
	sort.Strings(names)
	c.opts.DNS.Set(names)
}

// syncDomainSet makes a DNS name's address set rows hold what it resolves
// to, or deletes them when no policy names it.
func (c *Controller) syncDomainSet(ctx context.Context, name string) error {
	c.mu.RLock()
	e := c.domainSets[name]
	c.mu.RUnlock()
	var row setRow
	if e != nil {
		if c.opts.DNS != nil && c.opts.DNS.Addrs(e.set.Domain) == nil && c.domainSetExists(e.set) {
			return nil // not resolved yet (a restart): keep what the set holds until the first answer
		}
		row = func(v6 bool) *nbdb.AddressSet { return DomainSetRow(e.set, v6, c.domainMembers(e.set, v6)) }
	}
	return c.syncSet(ctx, name, topology.Owner{Type: OwnerDomainPeers, Name: name}, row)
}

// domainSetExists says whether a DNS name's address set rows are in the NB
// (one per family of the cluster), recording this name.
func (c *Controller) domainSetExists(s DomainSet) bool {
	for _, v6 := range []bool{false, true} {
		as := &nbdb.AddressSet{Name: topology.FamilySetName(s.Name(), v6)}
		if c.fams.Has(v6) && (c.nb.Get(context.Background(), as) != nil || as.ExternalIDs[PeersKey] != s.Key()) {
			return false
		}
	}
	return true
}

// domainMembers are the addresses of one family a name resolves to,
// outside the cluster's pod subnets.
func (c *Controller) domainMembers(s DomainSet, v6 bool) []string {
	if c.opts.DNS == nil {
		return nil
	}
	var out []string
	for _, a := range c.opts.DNS.Addrs(s.Domain) {
		a = a.Unmap()
		if a.Is6() != v6 || slices.ContainsFunc(c.opts.ClusterSubnets, func(p netip.Prefix) bool { return p.Contains(a) }) {
			continue
		}
		out = append(out, a.String())
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// DomainNames are the DNS names (normalized, wildcards included) an admin
// policy object names: a ClusterNetworkPolicy, AdminNetworkPolicy,
// BaselineAdminNetworkPolicy or EgressFirewall (nil for anything else).
// Zone mode's cluster manager follows them (clustermanager.DNSNames).
func DomainNames(obj any) []string {
	var p *AdminPolicy
	switch o := obj.(type) {
	case *cnpv1alpha2.ClusterNetworkPolicy:
		p = FromCNP(o)
	case *anpv1alpha1.AdminNetworkPolicy:
		p = FromANP(o)
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		p = FromBANP(o)
	case *k8sovnv1.EgressFirewall:
		p = FromEF(o, nil)
	default:
		return nil
	}
	var out []string
	for _, rules := range [][]AdminRule{p.Ingress, p.Egress} {
		for _, r := range rules {
			for _, d := range r.Domains {
				out = append(out, d.Domain)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}
