package topology

import "net/netip"

// Families are the IP families a cluster runs: IPv4, IPv6 or both
// (dual-stack), as its cluster subnets say.
type Families struct{ V4, V6 bool }

// IPv4Only is the family of a cluster with IPv4 subnets only.
var IPv4Only = Families{V4: true}

// FamiliesOf are the families of these ranges; none is IPv4 only (the
// cluster subnet's default is IPv4).
func FamiliesOf(ranges []netip.Prefix) Families {
	var f Families
	for _, r := range ranges {
		f.V4, f.V6 = f.V4 || r.Addr().Is4(), f.V6 || r.Addr().Is6()
	}
	if !f.V4 && !f.V6 {
		return IPv4Only
	}
	return f
}

// HairpinSNATIPv6 is HairpinSNATIP's IPv6 twin (upstream's address too).
const HairpinSNATIPv6 = "fd69::5"

// V6SetSuffix ends the name of an address set's IPv6 twin: an OVN address
// set holds one family (a match compares it with ip4 or ip6 fields), so
// every set of pod addresses is a pair of rows on a dual-stack cluster. The
// IPv4 row keeps the name the set always had.
const V6SetSuffix = "_v6"

// FamilySetName is the row name of set's addresses of one family.
func FamilySetName(set string, v6 bool) string {
	if v6 {
		return set + V6SetSuffix
	}
	return set
}

// Has says whether f has a family (v6: IPv6, else IPv4).
func (f Families) Has(v6 bool) bool {
	if v6 {
		return f.V6
	}
	return f.V4
}

// IPLayer is the OVN match layer of an address family: "ip6" for IPv6,
// else "ip4" (as in "ip4.src").
func IPLayer(v6 bool) string {
	if v6 {
		return "ip6"
	}
	return "ip4"
}
