package services

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// Issue 31 item 7: external IPs, LoadBalancer ingress IPs and node ports are
// programmed only where the operator's policy allows them; the rest is left
// out and reported.
func TestExternalAddressPolicy(t *testing.T) {
	mp := netip.MustParsePrefix
	everywhere := AddressPolicy{
		Allowed:  []netip.Prefix{mp("0.0.0.0/0"), mp("::/0")},
		Reserved: testPolicy.Reserved,
		Nodes:    map[netip.Addr]string{netip.MustParseAddr("172.18.0.2"): "n1", netip.MustParseAddr("fd00:18::2"): "n1"},
	}
	be := "10.244.1.5:8080"
	tests := []struct {
		name        string
		svc         *corev1.Service
		policy      AddressPolicy
		gateways    []NodeGateway
		nodes       []NodeGateway
		wantVIPs    map[string]map[string]string
		wantRefused map[string]RefusalKind // refused value → kind
		wantReason  []string               // in the refusals' messages
	}{
		{
			name: "default policy: every external and ingress IP refused",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.ExternalIPs = []string{"192.0.2.10"}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}}
			}),
			wantVIPs:    map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": be}},
			wantRefused: map[string]RefusalKind{"192.0.2.10": RefusedExternalIP, "192.0.2.20": RefusedIngressIP},
			wantReason:  []string{"--external-ip-cidrs is empty"},
		},
		{
			name: "8.8.8.8:53 outside the allowed ranges does not capture DNS",
			svc: service(func(s *corev1.Service) {
				s.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolUDP, Port: 53}}
				s.Spec.ExternalIPs = []string{"8.8.8.8", "192.0.2.10"}
			}),
			policy:      testPolicy,
			wantVIPs:    map[string]map[string]string{"Service_ns/web_UDP_cluster": {"10.96.0.10:53": "", "192.0.2.10:53": ""}},
			wantRefused: map[string]RefusalKind{"8.8.8.8": RefusedExternalIP},
			wantReason:  []string{"external IP 8.8.8.8 is not programmed", "outside the allowed ranges 192.0.2.0/24,198.51.100.0/24"},
		},
		{
			name: "a node's address is refused even inside an allowed range",
			svc: service(func(s *corev1.Service) {
				s.Spec.ExternalIPs = []string{"172.18.0.2", "172.18.0.50"}
			}),
			policy: AddressPolicy{Allowed: []netip.Prefix{mp("172.18.0.0/16")},
				Nodes: map[netip.Addr]string{netip.MustParseAddr("172.18.0.2"): "n1"}},
			wantVIPs:    map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": be, "172.18.0.50:80": be}},
			wantRefused: map[string]RefusalKind{"172.18.0.2": RefusedExternalIP},
			wantReason:  []string{"node n1's address"},
		},
		{
			name: "the cluster's own ranges and non-unicast addresses are refused even when everything is allowed",
			svc: service(func(s *corev1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
				s.Spec.ExternalIPs = []string{"10.244.1.5", "100.64.0.3", "10.96.0.99", "10.96.0.10", "127.0.0.1", "169.254.169.5",
					"224.0.0.1", "0.0.0.0", "255.255.255.255", "::1", "fe80::1", "::ffff:192.0.2.10", "fd00:18::2", "203.0.113.5", "2001:db8::10"}
			}),
			policy: everywhere,
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": be, "[fd00:96::10]:80": "",
				"203.0.113.5:80": be, "[2001:db8::10]:80": ""}},
			wantRefused: map[string]RefusalKind{"10.244.1.5": RefusedExternalIP, "100.64.0.3": RefusedExternalIP, "10.96.0.99": RefusedExternalIP,
				"10.96.0.10": RefusedExternalIP, "127.0.0.1": RefusedExternalIP, "169.254.169.5": RefusedExternalIP, "224.0.0.1": RefusedExternalIP,
				"0.0.0.0": RefusedExternalIP, "255.255.255.255": RefusedExternalIP, "::1": RefusedExternalIP, "fe80::1": RefusedExternalIP,
				"::ffff:192.0.2.10": RefusedExternalIP, "fd00:18::2": RefusedExternalIP},
			wantReason: []string{"cluster subnet 10.244.0.0/16", "join subnet 100.64.0.0/16", "service CIDR 10.96.0.0/16", "not a unicast address", "IPv4-mapped", "node n1's address"},
		},
		{
			name: "ingress IPs: a node's refused, an allowed one kept; Local policy with NodePort",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.2"}, {IP: "198.51.100.7"}}
			}),
			policy:   AddressPolicy{Allowed: testPolicy.Allowed, Reserved: testPolicy.Reserved, Nodes: map[netip.Addr]string{netip.MustParseAddr("172.18.0.2"): "n1"}},
			gateways: []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			nodes:    []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster":        {"10.96.0.10:80": be},
				"Service_ns/web_TCP_node_switch":    {"172.18.0.2:30080": "", "198.51.100.7:80": be}, // pods get n1's endpoints on n1's node port
				"Service_ns/web_TCP_node_router_n1": {"172.18.0.2:30080": "", "198.51.100.7:80": ""}, // the endpoint has no node
			},
			wantRefused: map[string]RefusalKind{"172.18.0.2": RefusedIngressIP},
			wantReason:  []string{"load balancer ingress IP 172.18.0.2 is not programmed", "node n1's address"},
		},
		{
			name: "Local policy with every external address refused: NodePort only",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				s.Spec.ExternalIPs = []string{"8.8.8.8"}
			}),
			policy:   testPolicy,
			gateways: []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			nodes:    []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster":        {"10.96.0.10:80": be},
				"Service_ns/web_TCP_node_switch":    {"172.18.0.2:30080": ""},
				"Service_ns/web_TCP_node_router_n1": {"172.18.0.2:30080": ""},
			},
			wantRefused: map[string]RefusalKind{"8.8.8.8": RefusedExternalIP},
		},
		{
			name: "a node port outside the range is not programmed",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 22
			}),
			policy:      testPolicy,
			gateways:    []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			nodes:       []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs:    map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": be}},
			wantRefused: map[string]RefusalKind{"22": RefusedNodePort},
			wantReason:  []string{"node port 22 is outside the node port range 30000-32767", "--service-node-port-range"},
		},
		{
			name: "a configured node port range",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "http", Protocol: corev1.ProtocolUDP, Port: 80, NodePort: 20005})
			}),
			policy: AddressPolicy{NodePorts: config.PortRange{First: 20000, Last: 20010}},
			nodes:  []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster":     {"10.96.0.10:80": be},
				"Service_ns/web_UDP_cluster":     {"10.96.0.10:80": ""},
				"Service_ns/web_UDP_node_switch": {"172.18.0.2:20005": ""},
			},
			wantRefused: map[string]RefusalKind{"30080": RefusedNodePort},
			wantReason:  []string{"outside the node port range 20000-20010"},
		},
	}
	for _, tt := range tests {
		sl := slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})
		d := LoadBalancers(tt.svc, []*discovery.EndpointSlice{sl}, tt.gateways, tt.nodes, tt.policy)
		got := map[string]map[string]string{}
		for _, lb := range append(append(d.Cluster, d.Switch...), perNode(d)...) {
			got[lb.Name] = lb.Vips
		}
		if !reflect.DeepEqual(got, tt.wantVIPs) {
			t.Errorf("%s:\n got %v\nwant %v", tt.name, got, tt.wantVIPs)
		}
		refused := map[string]RefusalKind{}
		var msgs []string
		for _, r := range d.Refused {
			refused[r.Value] = r.Kind
			msgs = append(msgs, r.Message())
		}
		if !reflect.DeepEqual(refused, tt.wantRefused) {
			t.Errorf("%s: refused %v, want %v", tt.name, refused, tt.wantRefused)
		}
		all := strings.Join(msgs, "\n")
		for _, w := range tt.wantReason {
			if !strings.Contains(all, w) {
				t.Errorf("%s: refusals lack %q:\n%s", tt.name, w, all)
			}
		}
		if len(d.Problems) > 0 {
			t.Errorf("%s: problems %v", tt.name, d.Problems)
		}
	}
}

// Issue 31 item 4: a Service with more external frontends (external and
// ingress IPs times ports) than MaxExternalFrontends gets none of them, one
// refusal saying why, and keeps its cluster IP; the node's bridge forwards
// none of them either (see node's ServiceFlows).
func TestTooManyExternalFrontendsAreRefused(t *testing.T) {
	policy := AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("192.0.0.0/8")}}
	svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10"}}
	for i := 0; i < 10; i++ {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: fmt.Sprint(i), Protocol: corev1.ProtocolTCP, Port: int32(80 + i)})
	}
	for i := 0; i <= MaxExternalFrontends/10; i++ {
		svc.Spec.ExternalIPs = append(svc.Spec.ExternalIPs, fmt.Sprintf("192.0.%d.%d", i/250, 1+i%250))
	}
	all, external, _, refused := frontendIPs(svc, policy)
	if len(external) != 0 || len(all) != 1 || all[0] != netip.MustParseAddr("10.96.0.10") {
		t.Fatalf("frontends %v, external %v; want only the cluster IP", all, external)
	}
	if len(refused) != 1 || !strings.Contains(refused[0].Reason, "split the Service") {
		t.Fatalf("refusals %v, want one saying why", refused)
	}
	svc.Spec.ExternalIPs = svc.Spec.ExternalIPs[:MaxExternalFrontends/10]
	if _, external, _, refused := frontendIPs(svc, policy); len(external) != MaxExternalFrontends/10 || len(refused) != 0 {
		t.Fatalf("at the limit: %d external, refusals %v", len(external), refused)
	}
}
