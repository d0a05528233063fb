package config

import (
	"net/netip"
	"strings"
	"testing"
)

func TestNodeAddrs(t *testing.T) {
	// Two IPv4 ranges (the flags give one per family; numbering goes on
	// across ranges all the same).
	cluster := []ClusterSubnet{{netip.MustParsePrefix("10.128.0.0/14"), 23}, {netip.MustParsePrefix("10.244.0.0/16"), 24},
		{netip.MustParsePrefix("fd00:10:244::/48"), 64}}
	for _, c := range []struct {
		hosts, want, wantErr string
	}{
		{hosts: "10.128.0.0/23", want: "100.88.0.2/16"},
		{hosts: "10.128.2.0/23 fd00:10:244:7::/64", want: "100.88.0.3/16 fd97::9/64"}, // each family its own number
		{hosts: "10.131.254.0/23", want: "100.88.2.1/16"},                             // the last of 512: number 511
		{hosts: "10.244.0.0/24", want: "100.88.2.2/16"},                               // the second range goes on from 512
		{hosts: "10.244.255.0/24", want: "100.88.3.1/16"},
		{hosts: "fd00:10:244:ffff::/64", want: "fd97::1:1/64"},
		{hosts: "10.200.0.0/24", wantErr: "in no cluster subnet (10.128.0.0/14/23, 10.244.0.0/16/24, fd00:10:244::/48/64)"},
		{hosts: "10.244.0.0/23", wantErr: "in no cluster subnet"}, // not of the range's host length
	} {
		var hosts []netip.Prefix
		for _, h := range strings.Fields(c.hosts) {
			hosts = append(hosts, netip.MustParsePrefix(h))
		}
		got, err := NodeAddrs(DefaultTransitSubnets, cluster, hosts)
		if c.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("%s: %v, %v; want error %q", c.hosts, got, err, c.wantErr)
			}
			continue
		}
		var s []string
		for _, p := range got {
			s = append(s, p.String())
		}
		if err != nil || strings.Join(s, " ") != c.want {
			t.Errorf("%s: %v, %v; want %s", c.hosts, s, err, c.want)
		}
	}
	one := func(s string) []netip.Prefix { return []netip.Prefix{netip.MustParsePrefix(s)} }
	// A transit range too small for the node's number; a family without one.
	small := one("100.88.0.0/30")
	if got, err := NodeAddrs(small, cluster, one("10.128.4.0/23")); err == nil || !strings.Contains(err.Error(), "give a larger one") {
		t.Errorf("a /30 for node number 2: %v, %v", got, err)
	}
	if got, err := NodeAddrs(small, cluster, one("10.128.2.0/23")); err != nil || got[0].String() != "100.88.0.3/30" {
		t.Errorf("a /30 for node number 1: %v, %v", got, err)
	}
	if got, err := NodeAddrs(small, cluster, one("fd00:10:244::/64")); err == nil || !strings.Contains(err.Error(), "no range of the family") {
		t.Errorf("no IPv6 transit range: %v, %v", got, err)
	}
}
