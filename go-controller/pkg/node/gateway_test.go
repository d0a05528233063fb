package node

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

func testBridge(patch int) BridgeFlows {
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	return BridgeFlows{NICPort: 1, PatchPort: patch, MAC: mac, IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")},
		Services: []ServiceFlow{
			{Protocol: corev1.ProtocolTCP, Port: 30080},
			{Protocol: corev1.ProtocolUDP, Port: 30053},
			{Protocol: corev1.ProtocolTCP, IP: netip.MustParseAddr("192.0.2.10"), Port: 80},
		}}
}

// Item 1: the shared MAC is never learned, the patch port may only send
// with it, ARP for the shared address reaches the host alone, new
// connections to service addresses go to the router, replies to its
// connections come back to it, and the rest goes to the host.
func TestBridgeFlowsShareTheNIC(t *testing.T) {
	flows := testBridge(2).Flows()
	text := strings.Join(flows, "\n")
	for _, want := range []string{
		"table=0,priority=110,in_port=1,tcp,nw_dst=172.18.0.2,tp_dst=30080,actions=output:2",
		"table=0,priority=110,in_port=1,udp,nw_dst=172.18.0.2,tp_dst=30053,actions=output:2",
		"table=0,priority=110,in_port=1,tcp,nw_dst=192.0.2.10,tp_dst=80,actions=output:2",
		"table=0,priority=20,in_port=1,arp,arp_op=1,arp_tpa=172.18.0.2,actions=LOCAL",
		"table=0,priority=10,in_port=1,arp,actions=LOCAL,output:2",
		"table=0,priority=100,in_port=2,dl_src=0a:58:ac:12:00:02,ip,actions=ct(commit,zone=64000,exec(load:1->NXM_NX_CT_MARK[])),output:1",
		"table=0,priority=9,in_port=2,actions=drop",
		"table=0,priority=100,in_port=LOCAL,ip,actions=ct(commit,zone=64000,exec(load:2->NXM_NX_CT_MARK[])),output:1",
		"table=0,priority=50,in_port=1,ip,actions=ct(zone=64000,table=1)",
		"table=1,priority=100,ct_state=+est+trk,ct_mark=1,ip,actions=output:2",
		"table=1,priority=0,actions=LOCAL",
		"table=0,priority=500,in_port=1,udp,nw_dst=172.18.0.2,tp_dst=6081,actions=LOCAL",
	} {
		if !slices.Contains(flows, want) {
			t.Errorf("missing %s in\n%s", want, text)
		}
	}
	if strings.Contains(text, "NORMAL") || strings.Contains(text, "FLOOD") {
		t.Errorf("flows learn or flood the shared MAC:\n%s", text)
	}
	if !slices.IsSorted(flows) || !slices.Equal(flows, testBridge(2).Flows()) {
		t.Errorf("flows are not a stable, sorted set")
	}
}

// Before ovn-controller made the patch port the host keeps the NIC to itself.
func TestBridgeFlowsWithoutPatchPortAreHostOnly(t *testing.T) {
	text := strings.Join(testBridge(0).Flows(), "\n")
	for _, bad := range []string{"output:0", "in_port=0", "priority=110"} {
		if strings.Contains(text, bad) {
			t.Errorf("flows mention %q without a patch port:\n%s", bad, text)
		}
	}
	if !strings.Contains(text, "table=0,priority=0,in_port=1,actions=LOCAL") || !strings.Contains(text, "table=0,priority=10,in_port=LOCAL,actions=output:1") {
		t.Errorf("host path missing:\n%s", text)
	}
}

func TestServiceFlowsAndHostNodePortRules(t *testing.T) {
	svcs := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "np"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.5",
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}, ExternalIPs: []string{"192.0.2.10", "bad"}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.6",
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolUDP, Port: 53, NodePort: 30053}}},
			Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "cip"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.7",
			Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30099}}}},
	}
	allowed := services.AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}
	got := ServiceFlows(svcs, allowed)
	want := []ServiceFlow{
		{Protocol: corev1.ProtocolTCP, Port: 30080},
		{Protocol: corev1.ProtocolTCP, IP: netip.MustParseAddr("192.0.2.10"), Port: 80},
		{Protocol: corev1.ProtocolUDP, Port: 30053},
		{Protocol: corev1.ProtocolUDP, IP: netip.MustParseAddr("192.0.2.20"), Port: 53},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ServiceFlows = %v, want %v", got, want)
	}
	rules := HostNodePortRules(svcs, allowed, Peers{}, false)
	wantRules := []string{
		"-A OVN-KUBE-NODEPORT -p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DNAT --to-destination 10.96.0.5:80",
		"-A OVN-KUBE-NODEPORT -p udp -m addrtype --dst-type LOCAL -m udp --dport 30053 -j DNAT --to-destination 10.96.0.6:53",
	}
	if !slices.Equal(rules, wantRules) {
		t.Errorf("HostNodePortRules =\n%s\nwant\n%s", strings.Join(rules, "\n"), strings.Join(wantRules, "\n"))
	}
}

// Issue 31 item 7 on the node: the bridge never sends the node's own
// address, an address outside the allowed ranges or a node port outside
// the node port range to the gateway router, so no Service takes a port the
// host listens on (ssh on 22, the kubelet on 10250) from outside.
func TestServiceFlowsNeverTakeTheHostsPorts(t *testing.T) {
	policy := services.AddressPolicy{
		Allowed: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16")},
		Nodes:   map[netip.Addr]string{netip.MustParseAddr("172.18.0.2"): "n1"},
	}
	svcs := []*corev1.Service{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "steal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.5",
			Ports:       []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 22, NodePort: 22}, {Protocol: corev1.ProtocolTCP, Port: 10250, NodePort: 30250}},
			ExternalIPs: []string{"172.18.0.2", "8.8.8.8", "172.18.0.50"}}},
	}
	got := ServiceFlows(svcs, policy)
	want := []ServiceFlow{
		{Protocol: corev1.ProtocolTCP, IP: netip.MustParseAddr("172.18.0.50"), Port: 22},
		{Protocol: corev1.ProtocolTCP, Port: 30250},
		{Protocol: corev1.ProtocolTCP, IP: netip.MustParseAddr("172.18.0.50"), Port: 10250},
	}
	if !slices.Equal(got, want) {
		t.Errorf("ServiceFlows = %v, want %v", got, want)
	}
	for _, r := range HostNodePortRules(svcs, policy, Peers{}, false) {
		if strings.Contains(r, "--dport 22 ") {
			t.Errorf("host rule for node port 22: %s", r)
		}
	}
}

func TestBridgeMappings(t *testing.T) {
	if got := mergeBridgeMappings("other:br1", "physnet", "breth0"); got != "other:br1,physnet:breth0" {
		t.Errorf("merge = %q", got)
	}
	if got := removeBridgeMapping("other:br1,physnet:breth0", "physnet", "breth0"); got != "other:br1" {
		t.Errorf("remove = %q", got)
	}
	if got := removeBridgeMapping("physnet:brX", "physnet", "breth0"); got != "physnet:brX" {
		t.Errorf("remove of another bridge's mapping = %q", got)
	}
}

// A Service with more external frontends than a Service may have puts none
// of them on the bridge (issue 31 item 4: 2,000 IPs times 50 ports made
// 100,016 flows on every node).
func TestServiceFlowsBoundPerService(t *testing.T) {
	policy := services.AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("192.0.0.0/8")}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "wide"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.5"}}
	for i := 0; i < 50; i++ {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Protocol: corev1.ProtocolTCP, Port: int32(1000 + i)})
	}
	for i := 0; i < 2000; i++ {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, netip.AddrFrom4([4]byte{192, 0, byte(i / 250), byte(1 + i%250)}).String())
	}
	if got := ServiceFlows([]*corev1.Service{svc}, policy); len(got) != 0 {
		t.Fatalf("%d flows for one Service", len(got))
	}
}

// What OVN sends to the management address goes to the node's address
// (host-network servers bound to it alone); IPv4 only, like the chain.
func TestHostEndpointRules(t *testing.T) {
	got := HostEndpointRules(netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("172.18.0.3"))
	want := []string{"-A OVN-KUBE-HOST-ENDPOINT -d 10.244.1.2/32 -i ovn-k8s-mp0 -j DNAT --to-destination 172.18.0.3"}
	if !slices.Equal(got, want) {
		t.Errorf("rules %q, want %q", got, want)
	}
	if r := HostEndpointRules(netip.Addr{}, netip.MustParseAddr("172.18.0.3")); r != nil {
		t.Errorf("without a management address: %q", r)
	}
	got = MgmtSNATRules(netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("172.18.0.3"))
	want = []string{"-A OVN-KUBE-MGMT-SNAT -s 172.18.0.3/32 -o ovn-k8s-mp0 -j SNAT --to-source 10.244.1.2"}
	if !slices.Equal(got, want) {
		t.Errorf("SNAT rules %q, want %q", got, want)
	}
}

// A dual-stack node publishes both addresses and next hops, and its bridge
// flows answer ARP for the IPv4 address and neighbour solicitations for
// the IPv6 one, tracking both families.
func TestGatewayDualStackAnnotationAndFlows(t *testing.T) {
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	cfg := GatewayConfig{NodeName: "n1", Bridge: "breth0",
		PhysicalIPs: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/24"), netip.MustParsePrefix("fc00::2/64")},
		DefaultGWs:  []netip.Addr{netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("fc00::1")}}
	gw, err := annotations.ParseL3GatewayConfig(gatewayAnnotation(cfg, mac))
	if err != nil || fmt.Sprint(gw.IPs, gw.NextHops) != "[172.18.0.2/24 fc00::2/64] [172.18.0.1 fc00::1]" {
		t.Errorf("annotation %+v, %v", gw, err)
	}
	// The host's chains in both families, each with its own addresses.
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "np"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		ClusterIP: "10.96.0.5", ClusterIPs: []string{"10.96.0.5", "fd00:10:96::5"}, Ports: []corev1.ServicePort{{Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}}
	var got []string
	for _, c := range cfg.hostChains([]*corev1.Service{svc}, Peers{}, []netip.Addr{netip.MustParseAddr("10.244.1.2"), netip.MustParseAddr("fd00:10:244:1::2")}) {
		got = append(got, fmt.Sprintf("v6=%v %s", c.h.v6, strings.Join(c.rules, "; ")))
	}
	want := []string{
		"v6=false -A OVN-KUBE-NODEPORT -p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DNAT --to-destination 10.96.0.5:80",
		"v6=false -A OVN-KUBE-HOST-ENDPOINT -d 10.244.1.2/32 -i ovn-k8s-mp0 -j DNAT --to-destination 172.18.0.2",
		"v6=false -A OVN-KUBE-MGMT-SNAT -s 172.18.0.2/32 -o ovn-k8s-mp0 -j SNAT --to-source 10.244.1.2",
		"v6=true -A OVN-KUBE-NODEPORT -p tcp -m addrtype --dst-type LOCAL -m tcp --dport 30080 -j DNAT --to-destination [fd00:10:96::5]:80",
		"v6=true -A OVN-KUBE-HOST-ENDPOINT -d fd00:10:244:1::2/128 -i ovn-k8s-mp0 -j DNAT --to-destination fc00::2",
		"v6=true -A OVN-KUBE-MGMT-SNAT -s fc00::2/128 -o ovn-k8s-mp0 -j SNAT --to-source fd00:10:244:1::2",
	}
	if !slices.Equal(got, want) {
		t.Errorf("host chains\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	flows := strings.Join(BridgeFlows{NICPort: 1, PatchPort: 2, MAC: mac, IPs: cfg.addrs()}.Flows(), "\n")
	for _, want := range []string{"arp,arp_op=1,arp_tpa=172.18.0.2,actions=LOCAL", "icmp6,icmp_type=135,nd_target=fc00::2,actions=LOCAL",
		"in_port=1,ipv6,actions=ct(zone=64000,table=1)", "in_port=1,ip,actions=ct(zone=64000,table=1)"} {
		if !strings.Contains(flows, want) {
			t.Errorf("flows lack %q:\n%s", want, flows)
		}
	}
}
