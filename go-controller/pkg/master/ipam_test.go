package master

import (
	"net/netip"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

func newTestIPAM(t *testing.T, cidr string) *ipam {
	t.Helper()
	cs, err := config.ParseClusterSubnets([]string{cidr})
	if err != nil {
		t.Fatal(err)
	}
	return newIPAM(cs, []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")})
}

func TestIPAMNodeSubnets(t *testing.T) {
	m := newTestIPAM(t, "10.244.0.0/23/24")
	if err := m.claimNodeSubnets("a", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}); err != nil {
		t.Fatal(err)
	}
	if err := m.claimNodeSubnets("a", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}); err != nil {
		t.Fatalf("claiming the same subnet again: %v", err)
	}
	if err := m.claimNodeSubnets("b", []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}); err == nil {
		t.Fatal("two nodes hold one subnet")
	}
	got, err := m.allocateNodeSubnets("b")
	if err != nil || got[0].String() != "10.244.0.0/24" {
		t.Fatalf("b got %v, %v", got, err)
	}
	if _, err := m.allocateNodeSubnets("c"); err == nil {
		t.Fatal("allocated from an exhausted cluster subnet")
	}
	m.releaseNode("a")
	if got, err := m.allocateNodeSubnets("c"); err != nil || got[0].String() != "10.244.1.0/24" {
		t.Fatalf("c got %v, %v", got, err)
	}
}

func TestIPAMPods(t *testing.T) {
	m := newTestIPAM(t, "10.244.0.0/16/24")
	if _, err := m.allocatePod("ns/p", "u1", "n1"); err == nil {
		t.Fatal("allocated on a node without subnet")
	}
	subnets, _ := m.allocateNodeSubnets("n1")
	ip1, err := m.allocatePod("ns/p", "u1", "n1")
	if err != nil || !subnets[0].Contains(ip1[0]) || ip1[0].String() != "10.244.0.3" {
		t.Fatalf("allocatePod = %v, %v", ip1, err)
	}
	again, _ := m.allocatePod("ns/p", "u1", "n1")
	if again[0] != ip1[0] {
		t.Fatal("same pod incarnation got a second address")
	}
	// A second pod cannot claim an address in use.
	if err := m.claimPod("ns/q", "u2", "n1", ip1); err == nil {
		t.Fatal("two pods hold one address")
	}
	// A new incarnation of the pod (new UID) gives back the old address.
	ip2, _ := m.allocatePod("ns/p", "u9", "n1")
	if ip2[0] == ip1[0] {
		t.Fatal("new incarnation reused the address at once")
	}
	if err := m.claimPod("ns/q", "u2", "n1", ip1); err != nil {
		t.Fatalf("released address not claimable: %v", err)
	}
	m.releasePod("ns/q")
	m.releasePod("ns/q") // twice is fine
	m.releaseNode("n1")
	if _, ok := m.pod("ns/p"); ok {
		t.Fatal("pods of a released node kept their addresses")
	}
}

func TestAddrsInSubnets(t *testing.T) {
	subnets := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:1::/64")}
	tests := []struct {
		name    string
		ips     []string
		wantErr bool
	}{
		{"dual-stack any order", []string{"fd00:1::5/64", "10.244.1.5/24"}, false},
		{"wrong length", []string{"10.244.1.5/16", "fd00:1::5/64"}, true},
		{"other subnet", []string{"10.244.2.5/24", "fd00:1::5/64"}, true},
		{"too few", []string{"10.244.1.5/24"}, true},
	}
	for _, tt := range tests {
		var ips []netip.Prefix
		for _, s := range tt.ips {
			ips = append(ips, netip.MustParsePrefix(s))
		}
		got, err := addrsInSubnets(ips, subnets)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: %v, %v", tt.name, got, err)
		}
		if err == nil && (got[0].String() != "10.244.1.5" || got[1].String() != "fd00:1::5") {
			t.Errorf("%s: order %v", tt.name, got)
		}
	}
}
