package policy

import "net/netip"

// subtractPrefixes is cidr less every prefix of except, as the fewest
// prefixes covering exactly the rest (sorted by address). An ipBlock's
// except list becomes such a positive set: OVN expands a "!=" set into
// flows for every combination of the bits it leaves open, which made one
// policy cost ovn-controller thousands of flows. Each exception splits at
// most (its length - cidr's length) prefixes, so the result stays small.
func subtractPrefixes(cidr netip.Prefix, except []netip.Prefix) []netip.Prefix {
	out := []netip.Prefix{cidr.Masked()}
	for _, e := range except {
		e = e.Masked()
		var next []netip.Prefix
		for _, p := range out {
			next = append(next, subtractOne(p, e)...)
		}
		out = next
	}
	return out
}

// subtractOne is p less e.
func subtractOne(p, e netip.Prefix) []netip.Prefix {
	switch {
	case !p.Overlaps(e):
		return []netip.Prefix{p}
	case e.Bits() <= p.Bits(): // e covers p
		return nil
	}
	// p strictly contains e: keep the half without e, split the other.
	lo, hi := halves(p)
	if lo.Contains(e.Addr()) {
		return append(subtractOne(lo, e), hi)
	}
	return append([]netip.Prefix{lo}, subtractOne(hi, e)...)
}

// halves splits a prefix into its two prefixes one bit longer.
func halves(p netip.Prefix) (netip.Prefix, netip.Prefix) {
	bits := p.Bits() + 1
	lo := netip.PrefixFrom(p.Addr(), bits)
	b := lo.Addr().AsSlice()
	i := p.Bits() // the bit that differs
	b[i/8] |= 0x80 >> (i % 8)
	hiAddr, _ := netip.AddrFromSlice(b)
	return lo, netip.PrefixFrom(hiAddr, bits)
}
