package policy

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestParseTenant(t *testing.T) {
	for v, want := range map[string]TenantSpec{"": {}, "isolate": {}, "global": {Global: true}, "join:db": {Join: "db"}} {
		if got, ok := ParseTenant(v); !ok || got != want {
			t.Errorf("%q: %+v %v, want %+v", v, got, ok, want)
		}
	}
	for _, bad := range []string{"join:", "Global", "join", "merge:db"} {
		if got, ok := ParseTenant(bad); ok || got != (TenantSpec{}) {
			t.Errorf("%q: %+v %v, want isolated and not ok", bad, got, ok)
		}
	}
}

func TestResolveTenant(t *testing.T) {
	specs := map[string]TenantSpec{
		"a": {}, "b": {Join: "a"}, "c": {Join: "b"}, // chain → a
		"g": {Global: true}, "h": {Join: "g"}, // joined to a global namespace → global
		"x": {Join: "y"}, "y": {Join: "z"}, "z": {Join: "x"}, // circle → x
		"m":      {Join: "missing"}, // a namespace not there (yet) names the tenant
		"global": {},                // a namespace of that name is not the global tenant
	}
	spec := func(ns string) TenantSpec { return specs[ns] }
	for ns, want := range map[string]string{"a": "a", "b": "a", "c": "a", "g": GlobalTenant, "h": GlobalTenant,
		"x": "x", "y": "x", "z": "x", "m": "missing", "free": "free", "global": "global"} {
		if got := ResolveTenant(ns, spec); got != want {
			t.Errorf("%s: tenant %q, want %q", ns, got, want)
		}
	}
}

func TestTenantRows(t *testing.T) {
	nodes := []string{"10.244.0.2/255.255.0.255", "fd00:10:244::2/ffff:ffff:ffff:0:ffff:ffff:ffff:ffff"}
	pg, acls := TenantRows("web-ns", []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, nodes[:1])
	if pg.Name != "mt.web_ns" || len(acls) != 1 {
		t.Fatalf("port group %q, %d ACLs", pg.Name, len(acls))
	}
	a := acls[0]
	want := "outport == @mt.web_ns && ip4.src == 10.244.0.0/16 && ip4.src != {$mt.web_ns, $mt_global, 10.244.0.2/255.255.0.255}"
	if a.Match != want || a.Action != "drop" || a.Priority != PriorityIsolation || a.Direction != "to-lport" {
		t.Errorf("ACL %+v\nwant match %q, drop at %d to-lport", a, want, PriorityIsolation)
	}
	if _, acls := TenantRows(GlobalTenant, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")}, nodes); len(acls) != 0 {
		t.Errorf("global tenant gets ACLs %v", acls)
	}
	// Each family of the cluster is isolated by that family's sets.
	for _, tt := range []struct {
		subnets []string
		want    string
	}{
		{[]string{"fd00:10:244::/48"}, "outport == @mt.web_ns && ip6.src == fd00:10:244::/48 && ip6.src != {$mt.web_ns_v6, $mt_global_v6, " + nodes[1] + "}"},
		{[]string{"10.244.0.0/16", "fd00:10:244::/48"}, "outport == @mt.web_ns && ((ip4.src == 10.244.0.0/16 && ip4.src != {$mt.web_ns, $mt_global, " + nodes[0] + "}) || " +
			"(ip6.src == fd00:10:244::/48 && ip6.src != {$mt.web_ns_v6, $mt_global_v6, " + nodes[1] + "}))"},
	} {
		var subnets []netip.Prefix
		for _, s := range tt.subnets {
			subnets = append(subnets, netip.MustParsePrefix(s))
		}
		if _, acls := TenantRows("web-ns", subnets, nodes); len(acls) != 1 || acls[0].Match != tt.want {
			t.Errorf("subnets %v: ACLs %v\nwant match %q", tt.subnets, acls, tt.want)
		}
	}
}

// A chain of n joined namespaces is resolved with n spec look-ups in all
// (it took n per namespace, n² in all: 1.3–3 s per tenant sync for 3,000).
func TestResolveTenantsFollowsEachJoinOnce(t *testing.T) {
	const n = 3000
	var names []string
	for i := 0; i < n; i++ {
		names = append(names, fmt.Sprintf("ns%04d", i))
	}
	lookups := 0
	spec := func(ns string) TenantSpec {
		lookups++
		var i int
		if _, err := fmt.Sscanf(ns, "ns%04d", &i); err != nil || i == 0 {
			return TenantSpec{}
		}
		return TenantSpec{Join: fmt.Sprintf("ns%04d", i-1)}
	}
	got := ResolveTenants(names, spec)
	for _, ns := range names {
		if got[ns] != "ns0000" {
			t.Fatalf("%s: tenant %q, want ns0000", ns, got[ns])
		}
	}
	if lookups != n {
		t.Fatalf("%d spec look-ups for a chain of %d", lookups, n)
	}
}
