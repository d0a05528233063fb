package policy

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestNodeAddressesKeepsWhatOnlyTheNodeCanHold(t *testing.T) {
	internal := []netip.Prefix{netip.MustParsePrefix("10.128.0.0/14"), netip.MustParsePrefix("100.64.0.0/16"),
		netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd01::/48")}
	node := func(addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	in := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a} }
	ex := func(a string) corev1.NodeAddress { return corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: a} }
	holders := map[string]string{"172.30.0.11": "n1"} // n1 is older and reports it too
	holder := func(ip netip.Addr) string {
		if h, ok := holders[ip.String()]; ok {
			return h
		}
		return "n2"
	}
	for _, tt := range []struct {
		name   string
		node   *corev1.Node
		v6     bool
		holder func(netip.Addr) string
		want   []string
	}{
		{"internal and external, each once", node(in("172.30.0.12"), ex("203.0.113.12"), ex(" 203.0.113.12 ")), false, holder, []string{"172.30.0.12", "203.0.113.12"}},
		{"other address types and families left out", node(in("172.30.0.12"), in("fd00::12"), corev1.NodeAddress{Type: corev1.NodeHostName, Address: "10.0.0.1"}), false, holder, []string{"172.30.0.12"}},
		{"IPv6 only for v6", node(in("172.30.0.12"), in("fd00::12")), true, holder, []string{"fd00::12"}},
		{"a pod, a join and a service address are never a node's", node(in("172.30.0.12"), ex("10.128.1.5"), ex("100.64.0.2"), ex("10.96.0.10"), ex("fd01::5")), false, holder, []string{"172.30.0.12"}},
		{"internal ranges of IPv6 too", node(in("fd00::12"), ex("fd01::5")), true, holder, []string{"fd00::12"}},
		{"an older node's address stays its own", node(in("172.30.0.12"), ex("172.30.0.11")), false, holder, []string{"172.30.0.12"}},
		{"no holder known: all outside the ranges", node(in("172.30.0.11")), false, nil, []string{"172.30.0.11"}},
		{"malformed, zoned and IPv4-mapped addresses ignored", node(in("not-an-ip"), in("fe80::1%eth0"), in("::ffff:172.30.0.13"), in("172.30.0.12")), false, holder, []string{"172.30.0.12"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := NodeAddresses(tt.node, tt.v6, internal, tt.holder)
			if !slices.Equal(got, tt.want) {
				t.Errorf("NodeAddresses = %v, want %v", got, tt.want)
			}
		})
	}
}
