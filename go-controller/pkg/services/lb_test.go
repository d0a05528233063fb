package services

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func ptr[T any](v T) *T { return &v }

func service(mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{
			Type:       corev1.ServiceTypeClusterIP,
			ClusterIP:  "10.96.0.10",
			ClusterIPs: []string{"10.96.0.10"},
			Ports:      []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromString("web")}},
		},
	}
	for _, f := range mutate {
		f(s)
	}
	return s
}

type ep struct {
	ip                          string
	ready, serving, terminating *bool
}

func slice(name string, family discovery.AddressType, port int32, portName string, proto corev1.Protocol, eps ...ep) *discovery.EndpointSlice {
	s := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: family,
		Ports:       []discovery.EndpointPort{{Name: ptr(portName), Port: ptr(port), Protocol: ptr(proto)}},
	}
	for _, e := range eps {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{e.ip},
			Conditions: discovery.EndpointConditions{Ready: e.ready, Serving: e.serving, Terminating: e.terminating}})
	}
	return s
}

var (
	yes = ptr(true)
	no  = ptr(false)
)

// testPolicy allows the documentation ranges the tests' external and
// ingress IPs come from, and reserves the default cluster ranges.
var testPolicy = AddressPolicy{
	Allowed: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("198.51.100.0/24")},
	Reserved: []ReservedRange{
		{netip.MustParsePrefix("10.244.0.0/16"), "cluster subnet"},
		{netip.MustParsePrefix("100.64.0.0/16"), "join subnet"},
		{netip.MustParsePrefix("10.96.0.0/16"), "service CIDR"},
	},
}

func TestLoadBalancers(t *testing.T) {
	tests := []struct {
		name      string
		svc       *corev1.Service
		slices    []*discovery.EndpointSlice
		gateways  []NodeGateway
		nodes     []NodeGateway
		wantVIPs  map[string]map[string]string // LB name → vips
		wantOpts  map[string]string            // options of the first cluster LB
		wantProbs []string
	}{
		{
			name:   "ready endpoints from two slices, named port resolved per slice",
			svc:    service(),
			slices: []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}), slice("b", discovery.AddressTypeIPv4, 9090, "http", "TCP", ep{ip: "10.244.2.6", ready: yes}, ep{ip: "10.244.2.7", ready: no})},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080,10.244.2.6:9090"},
			},
			wantOpts: map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": topology.HairpinSNATIP},
		},
		{
			name:     "no endpoints: VIP kept, rejecting",
			svc:      service(),
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": ""}},
			wantOpts: map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": topology.HairpinSNATIP},
		},
		{
			name:     "none ready: serving and terminating used",
			svc:      service(),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5", ready: no, serving: yes, terminating: yes}, ep{ip: "10.244.1.6", ready: no, serving: no, terminating: yes})},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080"}},
		},
		{
			name:     "terminating ignored while something is ready",
			svc:      service(),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5", ready: no, serving: yes, terminating: yes}, ep{ip: "10.244.1.6", ready: yes})},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.6:8080"}},
		},
		{
			name: "UDP and TCP, external and ingress IPs, ClientIP affinity",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeLoadBalancer
				s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53})
				s.Spec.ExternalIPs = []string{"192.0.2.10"}
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}, {Hostname: "lb.example"}}
				s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
				s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(600))}}
			}),
			slices: []*discovery.EndpointSlice{
				slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}),
				slice("b", discovery.AddressTypeIPv4, 5353, "dns", "UDP", ep{ip: "10.244.1.5"}),
			},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080", "192.0.2.10:80": "10.244.1.5:8080", "198.51.100.7:80": "10.244.1.5:8080"},
				"Service_ns/web_UDP_cluster": {"10.96.0.10:53": "10.244.1.5:5353", "192.0.2.10:53": "10.244.1.5:5353", "198.51.100.7:53": "10.244.1.5:5353"},
			},
			wantOpts: map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": topology.HairpinSNATIP, "affinity_timeout": "600"},
		},
		{
			name: "an ingress IP left on a ClusterIP service opens nothing",
			svc: service(func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
			}),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080"}},
		},
		{
			name: "dual-stack VIPs get their own family's endpoints",
			svc: service(func(s *corev1.Service) {
				s.Spec.ClusterIPs = []string{"10.96.0.10", "fd00:96::10"}
			}),
			slices: []*discovery.EndpointSlice{
				slice("v4", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}),
				slice("v6", discovery.AddressTypeIPv6, 8080, "http", "TCP", ep{ip: "fd00:244:1::5"}),
				slice("fqdn", discovery.AddressTypeFQDN, 8080, "http", "TCP", ep{ip: "example.com"}),
			},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080", "[fd00:96::10]:80": "[fd00:244:1::5]:8080"}},
			wantOpts: map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": topology.HairpinSNATIP + " " + topology.HairpinSNATIPv6},
		},
		{
			name: "IPv6-only: the IPv6 hairpin source",
			svc: service(func(s *corev1.Service) {
				s.Spec.ClusterIP, s.Spec.ClusterIPs = "fd00:96::10", []string{"fd00:96::10"}
			}),
			slices:   []*discovery.EndpointSlice{slice("v6", discovery.AddressTypeIPv6, 8080, "http", "TCP", ep{ip: "fd00:244:1::5"})},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"[fd00:96::10]:80": "[fd00:244:1::5]:8080"}},
			wantOpts: map[string]string{"reject": "true", "event": "false", "hairpin_snat_ip": topology.HairpinSNATIPv6},
		},
		{
			name: "NodePort on gateway routers",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
			}),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})},
			gateways: []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster":        {"10.96.0.10:80": "10.244.1.5:8080"},
				"Service_ns/web_TCP_node_router_n1": {"172.18.0.2:30080": "10.244.1.5:8080"},
			},
		},
		{
			name: "NodePort on every node address for pods, through the switches",
			svc: service(func(s *corev1.Service) {
				s.Spec.Type = corev1.ServiceTypeNodePort
				s.Spec.Ports[0].NodePort = 30080
			}),
			slices: []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})},
			nodes:  []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}, {Node: "n2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}}},
			wantVIPs: map[string]map[string]string{
				"Service_ns/web_TCP_cluster":     {"10.96.0.10:80": "10.244.1.5:8080"},
				"Service_ns/web_TCP_node_switch": {"172.18.0.2:30080": "10.244.1.5:8080", "172.18.0.3:30080": "10.244.1.5:8080"},
			},
		},
		{
			name:     "ClusterIP service: no NodePort balancer",
			svc:      service(),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})},
			nodes:    []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}},
			wantVIPs: map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080"}},
		},
		{
			name:     "headless: nothing",
			svc:      service(func(s *corev1.Service) { s.Spec.ClusterIP = "None"; s.Spec.ClusterIPs = []string{"None"} }),
			slices:   []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})},
			wantVIPs: map[string]map[string]string{},
		},
		{
			name:     "ExternalName: nothing",
			svc:      service(func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeExternalName; s.Spec.ClusterIP = "" }),
			wantVIPs: map[string]map[string]string{},
		},
		{
			name: "bad input is named and skipped, the rest programmed",
			svc: service(func(s *corev1.Service) {
				s.Spec.Ports = append(s.Spec.Ports,
					corev1.ServicePort{Name: "weird", Protocol: "ICMP", Port: 1},
					corev1.ServicePort{Name: "big", Protocol: corev1.ProtocolTCP, Port: 70000})
				s.Spec.ExternalIPs = []string{"not-an-ip"}
			}),
			slices: []*discovery.EndpointSlice{
				slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}, ep{ip: "10.244.1.999"}),
				slice("b", discovery.AddressTypeIPv4, 0, "http", "TCP", ep{ip: "10.244.1.6"}),
			},
			wantVIPs:  map[string]map[string]string{"Service_ns/web_TCP_cluster": {"10.96.0.10:80": "10.244.1.5:8080"}},
			wantProbs: []string{`protocol "ICMP"`, "port 70000 out of range", `external IP "not-an-ip"`, `"10.244.1.999", not an IP`, "EndpointSlice b has port http without a valid number"},
		},
	}
	for _, tt := range tests {
		d := LoadBalancers(tt.svc, tt.slices, tt.gateways, tt.nodes, testPolicy)
		got := map[string]map[string]string{}
		for _, lb := range d.Cluster {
			got[lb.Name] = lb.Vips
			if lb.ExternalIDs["k8s.ovn.org/owner-type"] != "Service" || lb.ExternalIDs["k8s.ovn.org/name"] != "ns/web" {
				t.Errorf("%s: %s external_ids %v", tt.name, lb.Name, lb.ExternalIDs)
			}
		}
		for _, lb := range d.PerNode {
			got[lb.Name] = lb.Vips
		}
		for _, lb := range d.Switch {
			got[lb.Name] = lb.Vips
		}
		if !reflect.DeepEqual(got, tt.wantVIPs) {
			t.Errorf("%s:\n got %v\nwant %v", tt.name, got, tt.wantVIPs)
		}
		if tt.wantOpts != nil && (len(d.Cluster) == 0 || !reflect.DeepEqual(d.Cluster[0].Options, tt.wantOpts)) {
			t.Errorf("%s: options %v, want %v", tt.name, d.Cluster, tt.wantOpts)
		}
		all := strings.Join(d.Problems, "\n")
		for _, p := range tt.wantProbs {
			if !strings.Contains(all, p) {
				t.Errorf("%s: problems lack %q:\n%s", tt.name, p, all)
			}
		}
		if len(tt.wantProbs) == 0 && len(d.Problems) > 0 {
			t.Errorf("%s: unexpected problems %v", tt.name, d.Problems)
		}
	}
}

func TestLoadBalancerProtocolField(t *testing.T) {
	d := LoadBalancers(service(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = corev1.ProtocolSCTP }), nil, nil, nil, testPolicy)
	if len(d.Cluster) != 1 || d.Cluster[0].Name != "Service_ns/web_SCTP_cluster" || *d.Cluster[0].Protocol != "sctp" {
		t.Fatalf("%+v", d.Cluster)
	}
}

func BenchmarkLoadBalancers(b *testing.B) {
	svc := service()
	var eps []ep
	for i := 0; i < 10; i++ {
		eps = append(eps, ep{ip: fmt.Sprintf("10.244.1.%d", i+1)})
	}
	slices := []*discovery.EndpointSlice{slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", eps...)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		_ = LoadBalancers(svc, slices, nil, nil, testPolicy)
	}
}

// Item 3: externalTrafficPolicy Local: each gateway router balances its
// NodePort and the external addresses over its own node's endpoints without
// SNAT (the client's address reaches the pod); pods still reach the
// external addresses through their switch with every endpoint.
func TestExternalTrafficPolicyLocal(t *testing.T) {
	svc := service(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeLoadBalancer
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalIPs = []string{"192.0.2.10"}
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.20"}}
	})
	sl := slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}, ep{ip: "10.244.2.5"})
	sl.Endpoints[0].NodeName, sl.Endpoints[1].NodeName = ptr("n1"), ptr("n2")
	gws := []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.2")}}, {Node: "n2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}}, {Node: "n3", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.4")}}}
	d := LoadBalancers(svc, []*discovery.EndpointSlice{sl}, gws, gws[:1], testPolicy)
	all := "10.244.1.5:8080,10.244.2.5:8080"
	want := map[string]map[string]string{
		"Service_ns/web_TCP_cluster":        {"10.96.0.10:80": all},
		"Service_ns/web_TCP_node_switch":    {"172.18.0.2:30080": "10.244.1.5:8080", "192.0.2.10:80": all, "192.0.2.20:80": all},
		"Service_ns/web_TCP_node_router_n1": {"172.18.0.2:30080": "10.244.1.5:8080", "192.0.2.10:80": "10.244.1.5:8080", "192.0.2.20:80": "10.244.1.5:8080"},
		"Service_ns/web_TCP_node_router_n2": {"172.18.0.3:30080": "10.244.2.5:8080", "192.0.2.10:80": "10.244.2.5:8080", "192.0.2.20:80": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_router_n3": {"172.18.0.4:30080": "", "192.0.2.10:80": "", "192.0.2.20:80": ""},
	}
	got := map[string]map[string]string{}
	for _, lb := range append(append(d.Cluster, d.Switch...), perNode(d)...) {
		got[lb.Name] = lb.Vips
		if strings.Contains(lb.Name, "node_router") && lb.Options["skip_snat"] != "true" {
			t.Errorf("%s lacks skip_snat: %v", lb.Name, lb.Options)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("load balancers:\n got %v\nwant %v", got, want)
	}
}

func perNode(d Desired) []*nbdb.LoadBalancer {
	var out []*nbdb.LoadBalancer
	for _, lb := range d.PerNode {
		out = append(out, lb)
	}
	return out
}

func onNode(s *discovery.EndpointSlice, nodes ...string) *discovery.EndpointSlice {
	for i := range s.Endpoints {
		s.Endpoints[i].NodeName = ptr(nodes[i])
	}
	return s
}

func lbVIPs(lbs ...[]*nbdb.LoadBalancer) map[string]map[string]string {
	got := map[string]map[string]string{}
	for _, l := range lbs {
		for _, lb := range l {
			got[lb.Name] = lb.Vips
		}
	}
	return got
}

func values(m map[string]*nbdb.LoadBalancer) []*nbdb.LoadBalancer {
	var out []*nbdb.LoadBalancer
	for _, lb := range m {
		out = append(out, lb)
	}
	return out
}

var twoNodes = []NodeGateway{{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}}, {Node: "n2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.4")}}}

// internalTrafficPolicy Local: the ClusterIP is balanced on each node's
// switch over that node's endpoints (ready, else its serving and
// terminating ones, whatever other nodes have); none on a node rejects;
// external IPs and NodePorts keep the external policy (Cluster here).
func TestInternalTrafficPolicyLocal(t *testing.T) {
	svc := service(func(s *corev1.Service) {
		s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal)
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalIPs = []string{"192.0.2.10"}
	})
	sl := onNode(slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP",
		ep{ip: "10.244.1.5", ready: no, serving: yes, terminating: yes}, ep{ip: "10.244.2.5"}, ep{ip: "10.244.2.6", ready: no, serving: yes, terminating: yes}),
		"n1", "n2", "n2")
	three := append(twoNodes[:2:2], NodeGateway{Node: "n3"})
	d := LoadBalancers(svc, []*discovery.EndpointSlice{sl}, nil, three, testPolicy)
	want := map[string]map[string]string{
		"Service_ns/web_TCP_cluster":        {"192.0.2.10:80": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_switch":    {"172.18.0.3:30080": "10.244.2.5:8080", "172.18.0.4:30080": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_switch_n1": {"10.96.0.10:80": "10.244.1.5:8080"}, // n1's terminating one: n1 has nothing ready
		"Service_ns/web_TCP_node_switch_n2": {"10.96.0.10:80": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_switch_n3": {"10.96.0.10:80": ""},
	}
	if got := lbVIPs(d.Cluster, d.Switch, values(d.PerNodeSwitch)); !reflect.DeepEqual(got, want) {
		t.Errorf("load balancers:\n got %v\nwant %v", got, want)
	}
	for k, lb := range d.PerNodeSwitch {
		if lb.Options["reject"] != "true" || !strings.HasPrefix(k, strings.TrimPrefix(lb.Name, "Service_ns/web_TCP_node_switch_")) {
			t.Errorf("%s (key %s): options %v", lb.Name, k, lb.Options)
		}
	}
}

// externalTrafficPolicy Local falls back per node: a node whose only
// endpoint is terminating keeps serving its node port with it while another
// node has a ready one; pods reaching a node's node port get that node's
// endpoints, as outside clients do.
func TestExternalTrafficPolicyLocalFallsBackPerNode(t *testing.T) {
	svc := service(func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.Ports[0].NodePort = 30080
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	})
	sl := onNode(slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP",
		ep{ip: "10.244.1.5", ready: no, serving: yes, terminating: yes}, ep{ip: "10.244.2.5"}), "n1", "n2")
	d := LoadBalancers(svc, []*discovery.EndpointSlice{sl}, twoNodes, twoNodes, testPolicy)
	want := map[string]map[string]string{
		"Service_ns/web_TCP_cluster":        {"10.96.0.10:80": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_switch":    {"172.18.0.3:30080": "10.244.1.5:8080", "172.18.0.4:30080": "10.244.2.5:8080"},
		"Service_ns/web_TCP_node_router_n1": {"172.18.0.3:30080": "10.244.1.5:8080"},
		"Service_ns/web_TCP_node_router_n2": {"172.18.0.4:30080": "10.244.2.5:8080"},
	}
	if got := lbVIPs(d.Cluster, d.Switch, values(d.PerNode)); !reflect.DeepEqual(got, want) {
		t.Errorf("load balancers:\n got %v\nwant %v", got, want)
	}
}

// A Service labelled for another proxy, or labelled headless, is not ours:
// no load balancer at all, whatever its spec asks for.
func TestServicesLeftToOthersWantNothing(t *testing.T) {
	sl := slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"})
	for _, label := range []string{ServiceProxyNameLabel, corev1.IsHeadlessService} {
		svc := service(func(s *corev1.Service) {
			s.Labels = map[string]string{label: ""}
			s.Spec.Type = corev1.ServiceTypeNodePort
			s.Spec.Ports[0].NodePort = 30080
		})
		d := LoadBalancers(svc, []*discovery.EndpointSlice{sl}, twoNodes, twoNodes, testPolicy)
		if n := len(d.Cluster) + len(d.Switch) + len(d.PerNode) + len(d.PerNodeSwitch); n != 0 || Handled(svc) {
			t.Errorf("label %s: %d load balancers, Handled %v", label, n, Handled(svc))
		}
	}
}

// UDP and SCTP load balancers ask ovn-controller to flush the conntrack
// entries of a backend that leaves (a client sending without pause would
// keep reaching a dead pod); TCP ones do not (terminating pods drain).
func TestConntrackFlushOnlyForDatagramProtocols(t *testing.T) {
	for proto, want := range map[corev1.Protocol]string{corev1.ProtocolTCP: "", corev1.ProtocolUDP: "true", corev1.ProtocolSCTP: "true"} {
		d := LoadBalancers(service(func(s *corev1.Service) { s.Spec.Ports[0].Protocol = proto }), nil, nil, nil, testPolicy)
		if len(d.Cluster) != 1 || d.Cluster[0].Options["ct_flush"] != want {
			t.Errorf("%s: %v, want ct_flush %q", proto, d.Cluster, want)
		}
	}
}

// A service with a host-network endpoint is balanced per node switch: each
// node reaches its own host-network endpoint at its management address (a
// hairpin OVN answers from the hairpin address; its own address would come
// back to it as a martian), every other endpoint as it is.
func TestHostNetworkEndpointsReachedAtTheManagementAddressFromTheirNode(t *testing.T) {
	nodes := []NodeGateway{
		{Node: "n1", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.3")}, Own: []netip.Addr{netip.MustParseAddr("172.18.0.3")}, Mgmt: []netip.Addr{netip.MustParseAddr("10.244.1.2")}},
		{Node: "n2", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.4")}, Own: []netip.Addr{netip.MustParseAddr("172.18.0.4")}, Mgmt: []netip.Addr{netip.MustParseAddr("10.244.2.2")}},
		{Node: "n3", IPs: []netip.Addr{netip.MustParseAddr("172.18.0.5")}, Own: []netip.Addr{netip.MustParseAddr("172.18.0.5")}, Mgmt: []netip.Addr{netip.MustParseAddr("10.244.3.2")}},
	}
	sl := onNode(slice("a", discovery.AddressTypeIPv4, 10180, "http", "TCP", ep{ip: "172.18.0.3"}, ep{ip: "172.18.0.4"}, ep{ip: "10.244.3.7"}), "n1", "n2", "n3")
	d := LoadBalancers(service(), []*discovery.EndpointSlice{sl}, nil, nodes, testPolicy)
	want := map[string]map[string]string{
		"Service_ns/web_TCP_node_switch_n1": {"10.96.0.10:80": "10.244.1.2:10180,10.244.3.7:10180,172.18.0.4:10180"},
		"Service_ns/web_TCP_node_switch_n2": {"10.96.0.10:80": "10.244.2.2:10180,10.244.3.7:10180,172.18.0.3:10180"},
		"Service_ns/web_TCP_node_switch_n3": {"10.96.0.10:80": "10.244.3.7:10180,172.18.0.3:10180,172.18.0.4:10180"},
	}
	if got := lbVIPs(d.Cluster, d.Switch, values(d.PerNodeSwitch)); !reflect.DeepEqual(got, want) || !d.HostBacked {
		t.Errorf("load balancers (host-backed %v):\n got %v\nwant %v", d.HostBacked, got, want)
	}
	// With internalTrafficPolicy Local as well: each node's own, rewritten.
	d = LoadBalancers(service(func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) }),
		[]*discovery.EndpointSlice{sl}, nil, nodes, testPolicy)
	want = map[string]map[string]string{
		"Service_ns/web_TCP_node_switch_n1": {"10.96.0.10:80": "10.244.1.2:10180"},
		"Service_ns/web_TCP_node_switch_n2": {"10.96.0.10:80": "10.244.2.2:10180"},
		"Service_ns/web_TCP_node_switch_n3": {"10.96.0.10:80": "10.244.3.7:10180"},
	}
	if got := lbVIPs(d.Cluster, d.Switch, values(d.PerNodeSwitch)); !reflect.DeepEqual(got, want) {
		t.Errorf("with internalTrafficPolicy Local:\n got %v\nwant %v", got, want)
	}
	// Pod endpoints only: one cluster-wide balancer, as before.
	d = LoadBalancers(service(), []*discovery.EndpointSlice{slice("b", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.3.7"})}, nil, nodes, testPolicy)
	if len(d.PerNodeSwitch) != 0 || d.HostBacked || len(d.Cluster) != 1 {
		t.Errorf("pod endpoints: %d per-node balancers, host-backed %v, %d cluster ones", len(d.PerNodeSwitch), d.HostBacked, len(d.Cluster))
	}
}
