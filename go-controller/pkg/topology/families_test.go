package topology

import (
	"net/netip"
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
