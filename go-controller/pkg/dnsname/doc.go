// Package dnsname follows what DNS names resolve to, so that a controller can
// keep OVN address sets in line with them (EgressFirewall dnsName rules and
// network-policy-api domainNames peers).
//
// The caller hands the whole set of names to follow to Resolver.Set; Run
// refreshes them in the background and calls onChange(name) whenever
// Resolver.Addrs(name) changes. The caller then reads Addrs and rewrites the
// address sets of the rules that use the name.
//
// # Names
//
// Names are normalized (Normalize): lowercase, without the trailing dot.
// Set, Addrs and onChange all use that form. Wildcards ("*.example.com") are
// not valid names here: the caller reports them as unsupported.
//
// # Queries
//
// Each followed name is queried for A and AAAA, fully qualified (the name
// plus "."; no search domains), over UDP with an EDNS0 buffer of 1232 bytes;
// a truncated answer is asked again over TCP, and the truncated answer is used
// when TCP fails. The servers of Options.Servers are tried in order: a server
// that times out, cannot be reached, answers garbage or answers with any
// rcode other than NOERROR or NXDOMAIN (SERVFAIL, REFUSED, ...) is skipped for
// the next one. Answers are followed through CNAME chains inside the answer
// section: an A or AAAA record counts only when its owner is the name or a
// CNAME target reached from it; anything else in the answer is ignored.
// IPv4-mapped IPv6 addresses are taken as IPv4. At most 8 names are being
// queried at a time, and Set never waits for the network.
//
// # Lifetimes
//
// Each address is kept until its own expiry: the last time it was seen plus
// max(its TTL, Options.MinTTL), where the TTL of an address reached through
// CNAMEs is the smallest TTL along its chain. Addrs(name) is the union of the
// unexpired addresses, sorted (IPv4 first), so a round-robin name whose answer
// rotates keeps the recent addresses that pods may still be using.
// NXDOMAIN and NODATA are successful answers: they add nothing, and the
// addresses seen before leave by their own TTLs.
//
// # Refreshes
//
// A name is queried again when its earliest address expires, clamped to
// [MinTTL, MaxTTL] after the answer. A name without addresses (NXDOMAIN or
// NODATA) is queried again after 6*MinTTL, capped by MaxTTL (30s by default).
//
// # Failures
//
// A failed resolution (every server failed, for A or for AAAA) changes
// nothing: the name keeps all its addresses, even past their expiry, so that
// neither allow nor deny rules silently change during a DNS outage. It is
// retried after min(1s, MinTTL), then after twice as long each time, up to
// the refresh interval of a name without addresses (6*MinTTL capped by
// MaxTTL, but at least the first step). The failure is logged as an error
// once per name and outage, and the recovery as info.
//
// # Changes
//
// onChange(name) is called from Run's goroutine, one call at a time, never
// while the Resolver holds its lock (so it may call Addrs or Set), and only
// when the sorted address list changed, including when the name first
// resolves (even to nothing). It should be quick, typically a workqueue Add.
// Addrs returns nil for a name that is not followed or has not resolved yet,
// and a non-nil (maybe empty) slice once it has. A name keeps at most 256
// addresses (the lowest ones); exceeding that is logged once per name.
package dnsname
