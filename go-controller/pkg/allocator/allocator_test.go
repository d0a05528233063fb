package allocator

import (
	"errors"
	"net/netip"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

func mustClusterSubnets(t testing.TB, s ...string) []config.ClusterSubnet {
	t.Helper()
	cs, err := config.ParseClusterSubnets(s)
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

func TestSubnetAllocatorSequenceAndExhaustion(t *testing.T) {
	a := NewSubnetAllocator(mustClusterSubnets(t, "10.244.0.0/22/24"))
	want := []string{"10.244.0.0/24", "10.244.1.0/24", "10.244.2.0/24", "10.244.3.0/24"}
	for _, w := range want {
		got, err := a.Allocate()
		if err != nil || len(got) != 1 || got[0].String() != w {
			t.Fatalf("Allocate() = %v, %v; want %s", got, err, w)
		}
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want ErrExhausted, got %v", err)
	}
	a.Release([]netip.Prefix{netip.MustParsePrefix("10.244.2.0/24")})
	got, err := a.Allocate()
	if err != nil || got[0].String() != "10.244.2.0/24" {
		t.Fatalf("after release got %v %v", got, err)
	}
}

func TestSubnetAllocatorReserve(t *testing.T) {
	a := NewSubnetAllocator(mustClusterSubnets(t, "10.244.0.0/16/24"))
	tests := []struct {
		subnet  string
		wantErr bool
	}{
		{"10.244.5.0/24", false},
		{"10.244.5.0/24", true}, // taken
		{"10.245.0.0/24", true}, // outside
		{"10.244.6.0/23", true}, // wrong length
		{"10.244.7.0/24", false},
	}
	for _, tt := range tests {
		err := a.Reserve([]netip.Prefix{netip.MustParsePrefix(tt.subnet)})
		if (err != nil) != tt.wantErr {
			t.Errorf("Reserve(%s) = %v, wantErr %v", tt.subnet, err, tt.wantErr)
		}
	}
	// Next-fit: allocation continues where the cursor is, never returns reserved ones.
	seen := map[string]bool{}
	for i := 0; i < 254; i++ {
		got, err := a.Allocate()
		if err != nil {
			t.Fatalf("allocation %d: %v", i, err)
		}
		s := got[0].String()
		if s == "10.244.5.0/24" || s == "10.244.7.0/24" || seen[s] {
			t.Fatalf("allocated %s twice", s)
		}
		seen[s] = true
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want exhaustion after 256, got %v", err)
	}
}

func TestSubnetAllocatorDualStack(t *testing.T) {
	a := NewSubnetAllocator(mustClusterSubnets(t, "10.244.0.0/23/24", "fd00:10:244::/63/64"))
	got, err := a.Allocate()
	if err != nil || len(got) != 2 || got[0].String() != "10.244.0.0/24" || got[1].String() != "fd00:10:244::/64" {
		t.Fatalf("Allocate() = %v, %v", got, err)
	}
	got, _ = a.Allocate()
	if got[1].String() != "fd00:10:244:1::/64" {
		t.Fatalf("second IPv6 subnet = %v", got)
	}
	// Both families exhausted: nothing is leaked on failure.
	if _, err := a.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Fatal("want exhaustion")
	}
	if err := a.Reserve([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/24"), netip.MustParsePrefix("fd00:10:244::/64")}); err == nil {
		t.Fatal("reserved taken pair")
	}
}

// A second range of a family (which the flags refuse today, as
// Kubernetes' do) is used once the first is full.
func TestSubnetAllocatorSecondRange(t *testing.T) {
	a := NewSubnetAllocator([]config.ClusterSubnet{
		{CIDR: netip.MustParsePrefix("10.244.0.0/24"), HostSubnetLength: 24},
		{CIDR: netip.MustParsePrefix("10.245.0.0/24"), HostSubnetLength: 24}})
	first, _ := a.Allocate()
	second, err := a.Allocate()
	if err != nil || first[0].String() != "10.244.0.0/24" || second[0].String() != "10.245.0.0/24" {
		t.Fatalf("got %v, %v, %v", first, second, err)
	}
}

func TestIPAllocator(t *testing.T) {
	a := NewIPAllocator(netip.MustParsePrefix("10.244.1.0/29"))
	// .0 network, .1 gateway, .2 management, .7 broadcast: .3–.6 usable.
	for _, want := range []string{"10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"} {
		got, err := a.Allocate()
		if err != nil || got.String() != want {
			t.Fatalf("Allocate() = %v, %v; want %s", got, err, want)
		}
	}
	if _, err := a.Allocate(); !errors.Is(err, ErrExhausted) {
		t.Fatalf("want exhaustion, got %v", err)
	}
	a.Release(netip.MustParseAddr("10.244.1.4"))
	if got, _ := a.Allocate(); got.String() != "10.244.1.4" {
		t.Fatalf("reallocated %v", got)
	}
}

func TestIPAllocatorReserve(t *testing.T) {
	a := NewIPAllocator(netip.MustParsePrefix("10.244.1.0/24"))
	tests := []struct {
		ip      string
		wantErr bool
	}{
		{"10.244.1.0", true}, {"10.244.1.1", true}, {"10.244.1.2", true}, {"10.244.1.255", true},
		{"10.244.2.5", true}, {"10.244.1.9", false}, {"10.244.1.9", true}, {"fd00::1", true},
	}
	for _, tt := range tests {
		if err := a.Reserve(netip.MustParseAddr(tt.ip)); (err != nil) != tt.wantErr {
			t.Errorf("Reserve(%s) = %v, wantErr %v", tt.ip, err, tt.wantErr)
		}
	}
	// next-fit: a released address is not handed out again before the others.
	first, _ := a.Allocate()
	a.Release(first)
	second, _ := a.Allocate()
	if first == second {
		t.Fatalf("released %s was reused at once", first)
	}
}

func TestIPAllocatorIPv6(t *testing.T) {
	a := NewIPAllocator(netip.MustParsePrefix("fd00:10:244:1::/64"))
	got, err := a.Allocate()
	if err != nil || got.String() != "fd00:10:244:1::3" {
		t.Fatalf("Allocate() = %v, %v", got, err)
	}
	if err := a.Reserve(netip.MustParseAddr("fd00:10:244:1::ffff:ffff")); err == nil {
		t.Fatal("reserved an address beyond the managed window")
	}
}

func BenchmarkIPAllocateRelease(b *testing.B) {
	a := NewIPAllocator(netip.MustParsePrefix("10.244.0.0/16"))
	for i := 0; i < b.N; i++ {
		ip, err := a.Allocate()
		if err != nil {
			b.Fatal(err)
		}
		a.Release(ip)
	}
}

func BenchmarkSubnetAllocate(b *testing.B) {
	cs := mustClusterSubnets(b, "10.0.0.0/8/24")
	a := NewSubnetAllocator(cs)
	for i := 0; i < b.N; i++ {
		s, err := a.Allocate()
		if err != nil {
			b.Fatal(err)
		}
		a.Release(s)
	}
}

// HostSubnets: a node keeps what it claimed or was given (claiming it again
// is a no-op, other subnets are refused), a subnet another node holds is
// refused, and a released node's subnets go to the next.
func TestHostSubnets(t *testing.T) {
	h := NewHostSubnets([]config.ClusterSubnet{{CIDR: netip.MustParsePrefix("10.244.0.0/23"), HostSubnetLength: 24}})
	a := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")}
	if err := h.Claim("n1", a); err != nil {
		t.Fatal(err)
	}
	if err := h.Claim("n1", a); err != nil {
		t.Errorf("claiming what it holds again: %v", err)
	}
	if err := h.Claim("n1", []netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")}); err == nil {
		t.Error("n1 moved to other subnets")
	}
	if err := h.Claim("n2", a); err == nil {
		t.Error("n2 claimed n1's subnet")
	}
	got, err := h.Allocate("n2")
	if err != nil || got[0] != netip.MustParsePrefix("10.244.0.0/24") {
		t.Fatalf("n2 allocated %v, %v", got, err)
	}
	if again, _ := h.Allocate("n2"); again[0] != got[0] {
		t.Errorf("n2 allocated again: %v, want what it holds", again)
	}
	if _, err := h.Allocate("n3"); err == nil {
		t.Error("n3 got a subnet of a full range")
	}
	if !h.Release("n1") || h.Release("n1") || h.Held("n1") != nil {
		t.Error("n1 released: want true once, then false and nothing held")
	}
	if got, err := h.Allocate("n3"); err != nil || got[0] != a[0] {
		t.Errorf("n3 after n1 released: %v, %v; want %v", got, err, a)
	}
}
