package topology

import (
	"net/netip"
	"strings"
	"testing"
)

func TestFamiliesOf(t *testing.T) {
	p := netip.MustParsePrefix
	for _, tt := range []struct {
		in   []netip.Prefix
		want Families
	}{
		{nil, IPv4Only},
		{[]netip.Prefix{p("10.244.0.0/16")}, Families{V4: true}},
		{[]netip.Prefix{p("fd00:10:244::/48")}, Families{V6: true}},
		{[]netip.Prefix{p("fd00:10:244::/48"), p("10.244.0.0/16")}, Families{V4: true, V6: true}},
	} {
		if got := FamiliesOf(tt.in); got != tt.want {
			t.Errorf("FamiliesOf(%v) = %+v, want %+v", tt.in, got, tt.want)
		}
	}
	if FamilySetName("peers.x", false) != "peers.x" || FamilySetName("peers.x", true) != "peers.x_v6" {
		t.Error("family set names")
	}
}

// The masked constant matches the .2 of every host subnet of the cluster
// subnet and nothing else in it.
func TestManagementAddresses(t *testing.T) {
	for _, tt := range []struct {
		cluster string
		hostLen int
		want    string
	}{
		{"10.244.0.0/16", 24, "10.244.0.2/255.255.0.255"},
		{"10.128.0.0/14", 23, "10.128.0.2/255.252.1.255"},
		{"fd00:10:244::/48", 64, "fd00:10:244::2/ffff:ffff:ffff:0:ffff:ffff:ffff:ffff"},
	} {
		got := ManagementAddresses(netip.MustParsePrefix(tt.cluster), tt.hostLen)
		if got != tt.want {
			t.Errorf("%s/%d: %s, want %s", tt.cluster, tt.hostLen, got, tt.want)
			continue
		}
		value, mask, _ := strings.Cut(got, "/")
		v, m := netip.MustParseAddr(value).AsSlice(), netip.MustParseAddr(mask).AsSlice()
		matches := func(a netip.Addr) bool {
			b := a.AsSlice()
			for i := range b {
				if b[i]&m[i] != v[i] {
					return false
				}
			}
			return true
		}
		cluster := netip.MustParsePrefix(tt.cluster)
		second := netip.PrefixFrom(cluster.Addr(), tt.hostLen)
		// The next host subnet: the last subnet-number bit set.
		nb := second.Addr().AsSlice()
		nb[(tt.hostLen-1)/8] |= 0x80 >> ((tt.hostLen - 1) % 8)
		next, _ := netip.AddrFromSlice(nb)
		for a, want := range map[netip.Addr]bool{
			ManagementIP(second): true, ManagementIP(netip.PrefixFrom(next, tt.hostLen)): true,
			GatewayIP(second): false, ManagementIP(second).Next(): false,
		} {
			if matches(a) != want {
				t.Errorf("%s: %s matched %v, want %v", got, a, !want, want)
			}
		}
	}
}
