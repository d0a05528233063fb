package policy

import (
	"fmt"
	"math/rand"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

func TestSubtractPrefixes(t *testing.T) {
	for _, tc := range []struct {
		cidr   string
		except []string
		want   []string
	}{
		{"10.0.0.0/8", nil, []string{"10.0.0.0/8"}},
		{"10.0.0.0/8", []string{"10.0.0.0/8"}, nil},
		{"10.0.0.0/8", []string{"0.0.0.0/0"}, nil},
		{"10.0.0.0/8", []string{"192.168.0.0/16"}, []string{"10.0.0.0/8"}},
		{"10.0.0.0/24", []string{"10.0.0.0/25"}, []string{"10.0.0.128/25"}},
		{"10.0.0.0/24", []string{"10.0.0.128/26"}, []string{"10.0.0.0/25", "10.0.0.192/26"}},
		{"172.18.0.0/16", []string{"172.18.1.0/24", "172.18.2.0/24"},
			[]string{"172.18.0.0/24", "172.18.3.0/24", "172.18.4.0/22", "172.18.8.0/21", "172.18.16.0/20", "172.18.32.0/19", "172.18.64.0/18", "172.18.128.0/17"}},
		{"fd00::/64", []string{"fd00::/65"}, []string{"fd00::8000:0:0:0/65"}},
	} {
		got := subtractPrefixes(netip.MustParsePrefix(tc.cidr), prefixes(tc.except...))
		slices.SortFunc(got, func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
		if !slices.Equal(got, prefixes(tc.want...)) {
			t.Errorf("%s except %v = %v, want %v", tc.cidr, tc.except, got, tc.want)
		}
	}
}

// The positive set holds exactly the addresses of the CIDR outside every
// exception (checked on random addresses against the definition).
func TestSubtractPrefixesMatchesDefinition(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	cidr := netip.MustParsePrefix("10.16.0.0/12")
	except := prefixes("10.17.0.0/16", "10.20.128.0/17", "10.31.255.255/32", "10.18.3.0/24", "9.0.0.0/8")
	got := subtractPrefixes(cidr, except)
	for i := 0; i < 20000; i++ {
		a := netip.AddrFrom4([4]byte{10, byte(16 + r.Intn(16)), byte(r.Intn(256)), byte(r.Intn(256))})
		if i%1000 == 0 {
			a = netip.MustParseAddr("10.31.255.255")
		}
		want := !slices.ContainsFunc(except, func(e netip.Prefix) bool { return e.Contains(a) })
		in := slices.ContainsFunc(got, func(p netip.Prefix) bool { return p.Contains(a) })
		if in != want {
			t.Fatalf("%s: in the positive set %v, want %v (set %v)", a, in, want, got)
		}
	}
}

// A policy over a limit is refused whole before its rows are built, and so
// is one whose rules become too many ACLs; an ipBlock with too many
// exceptions is a problem of its own (its peer allows nothing).
func TestPolicyLimits(t *testing.T) {
	many := func(n int) []networkingv1.NetworkPolicyPeer {
		var out []networkingv1.NetworkPolicyPeer
		for i := 0; i < n; i++ {
			out = append(out, networkingv1.NetworkPolicyPeer{PodSelector: sel("app", fmt.Sprint(i))})
		}
		return out
	}
	ok := Policy(np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: many(MaxPeersPerPolicy)}}}), noResolve, Logging{}, topology.IPv4Only)
	if ok.Refused != "" || len(ok.PeerSets) != MaxPeersPerPolicy {
		t.Fatalf("a policy at the limit: refused %q, %d sets", ok.Refused, len(ok.PeerSets))
	}
	over := Policy(np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: many(MaxPeersPerPolicy + 1)}}}), noResolve, Logging{}, topology.IPv4Only)
	if over.Refused == "" || len(over.ACLs) != 0 || len(over.PeerSets) != 0 || !over.Ingress {
		t.Fatalf("a policy over the limit: refused %q, %d ACLs, %d sets, ingress %v", over.Refused, len(over.ACLs), len(over.PeerSets), over.Ingress)
	}
	// Named ports resolving to many numbers: one ACL per number.
	numbers := func(PeerSet, string, corev1.Protocol) []int32 {
		var out []int32
		for i := int32(1); i <= MaxACLsPerPolicy+1; i++ {
			out = append(out, i)
		}
		return out
	}
	named := Policy(np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"))}}}}), numbers, Logging{}, topology.IPv4Only)
	if named.Refused == "" || len(named.ACLs) != 0 {
		t.Fatalf("a policy of %d ACLs: refused %q, %d ACLs", MaxACLsPerPolicy+1, named.Refused, len(named.ACLs))
	}
	var except []string
	for i := 0; i <= MaxExceptsPerIPBlock; i++ {
		except = append(except, fmt.Sprintf("10.0.%d.0/24", i))
	}
	blk := Policy(np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: except}}}}}}), noResolve, Logging{}, topology.IPv4Only)
	if len(blk.ACLs) != 0 || len(blk.Problems) != 1 {
		t.Fatalf("an ipBlock with %d exceptions: %d ACLs, problems %v", len(except), len(blk.ACLs), blk.Problems)
	}
}
