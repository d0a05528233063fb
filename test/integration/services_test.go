package integration

import (
	"errors"
	"fmt"
	"net/netip"
	"os/exec"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func ptr[T any](v T) *T { return &v }

func (c *cluster) createService(ns, name string, mutate ...func(*corev1.Service)) *corev1.Service {
	c.t.Helper()
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": name},
			Ports:    []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(8080)}},
		},
	}
	for _, f := range mutate {
		f(svc)
	}
	out, err := c.kube.Client.CoreV1().Services(ns).Create(c.ctx(), svc, metav1.CreateOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// applySlice creates or replaces an EndpointSlice (no controller-manager runs).
func (c *cluster) applySlice(ns, svc, name string, ports []discovery.EndpointPort, eps ...discovery.Endpoint) {
	c.t.Helper()
	addrType := discovery.AddressTypeIPv4
	if len(eps) > 0 && len(eps[0].Addresses) > 0 && strings.Contains(eps[0].Addresses[0], ":") {
		addrType = discovery.AddressTypeIPv6
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: addrType,
		Ports:       ports,
		Endpoints:   eps,
	}
	cl := c.kube.Client.DiscoveryV1().EndpointSlices(ns)
	if old, err := cl.Get(c.ctx(), name, metav1.GetOptions{}); err == nil {
		slice.ResourceVersion = old.ResourceVersion
		if _, err := cl.Update(c.ctx(), slice, metav1.UpdateOptions{}); err != nil {
			c.t.Fatal(err)
		}
		return
	}
	if _, err := cl.Create(c.ctx(), slice, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func endpoint(ip string, ready bool) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: ptr(ready)}}
}

// backends is a VIP's backend list as ovn-k8s writes it: sorted by address
// (which node got the lower subnet, and so which pod the lower address, is
// up to the order the nodes were synced in).
func backends(addrPorts ...string) string {
	sorted := make([]netip.AddrPort, len(addrPorts))
	for i, a := range addrPorts {
		sorted[i] = netip.MustParseAddrPort(a)
	}
	slices.SortFunc(sorted, func(a, b netip.AddrPort) int { return a.Compare(b) })
	out := make([]string, len(sorted))
	for i, a := range sorted {
		out[i] = a.String()
	}
	return strings.Join(out, ",")
}

func port(name string, proto corev1.Protocol, n int32) discovery.EndpointPort {
	return discovery.EndpointPort{Name: ptr(name), Protocol: ptr(proto), Port: ptr(n)}
}

func (c *cluster) lb(name string) *nbdb.LoadBalancer {
	var found []nbdb.LoadBalancer
	_ = c.nb.WhereCache(func(lb *nbdb.LoadBalancer) bool { return lb.Name == name }).List(c.ctx(), &found)
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}

// waitLB waits until the load balancer exists with the given vips and passes check.
func (c *cluster) waitLB(name string, vips map[string]string, check func(*nbdb.LoadBalancer) error) *nbdb.LoadBalancer {
	c.t.Helper()
	var lb *nbdb.LoadBalancer
	harness.Eventually(c.t, 30*time.Second, "load balancer "+name, func() error {
		if lb = c.lb(name); lb == nil {
			return fmt.Errorf("no load balancer %s", name)
		}
		if !reflect.DeepEqual(lb.Vips, vips) {
			return fmt.Errorf("vips %v, want %v", lb.Vips, vips)
		}
		if check != nil {
			return check(lb)
		}
		return nil
	})
	return lb
}

func (c *cluster) waitNoLB(name string) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, "load balancer "+name+" removed", func() error {
		if c.lb(name) != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

func (c *cluster) group() *nbdb.LoadBalancerGroup { return c.groupNamed("clusterLBGroup") }

func (c *cluster) groupNamed(name string) *nbdb.LoadBalancerGroup {
	g := &nbdb.LoadBalancerGroup{Name: name}
	if err := c.nb.Get(c.ctx(), g); err != nil {
		return nil
	}
	return g
}

// allowTestNet lets a master program the external IPs these tests use
// (192.0.2.0/24, TEST-NET-1): by default it programs none.
var allowTestNet = []string{"--external-ip-cidrs", "192.0.2.0/24"}

func TestServicesBecomeLoadBalancers(t *testing.T) {
	c := newCluster(t)
	c.startMaster(allowTestNet...)
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.kube.EnsureNamespace(t, "ns")
	c.createPod("ns", "srv1", "n1")
	c.createPod("ns", "srv2", "n2")
	ip1, ip2 := c.podNetwork("ns", "srv1").IPs[0].Addr().String(), c.podNetwork("ns", "srv2").IPs[0].Addr().String()

	svc := c.createService("ns", "web", func(s *corev1.Service) {
		s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns")})
	})
	vip := svc.Spec.ClusterIP
	c.applySlice("ns", "web", "web-a", []discovery.EndpointPort{port("http", "TCP", 8080), port("dns", "UDP", 5353)}, endpoint(ip1, true))
	c.applySlice("ns", "web", "web-b", []discovery.EndpointPort{port("http", "TCP", 9090), port("dns", "UDP", 5353)}, endpoint(ip2, true))
	tcp := c.waitLB("Service_ns/web_TCP_cluster", map[string]string{vip + ":80": backends(ip1+":8080", ip2+":9090")}, func(lb *nbdb.LoadBalancer) error {
		if lb.Protocol == nil || *lb.Protocol != "tcp" || lb.Options["reject"] != "true" {
			return fmt.Errorf("protocol %v options %v", lb.Protocol, lb.Options)
		}
		if lb.ExternalIDs["k8s.ovn.org/owner-type"] != "Service" || lb.ExternalIDs["k8s.ovn.org/name"] != "ns/web" {
			return fmt.Errorf("external_ids %v", lb.ExternalIDs)
		}
		return nil
	})
	c.waitLB("Service_ns/web_UDP_cluster", map[string]string{vip + ":53": backends(ip1+":5353", ip2+":5353")}, nil)

	// Attached through the cluster group, which every node switch carries
	// (with the switch group, which holds NodePorts for pods).
	g, sg := c.group(), c.groupNamed("clusterSwitchLBGroup")
	if g == nil || !contains(g.LoadBalancer, tcp.UUID) || sg == nil {
		t.Fatalf("LB not in clusterLBGroup: %+v (switch group %+v)", g, sg)
	}
	for _, n := range []string{"n1", "n2"} {
		if ls := c.switchNamed(n); ls == nil || !sameSet(ls.LoadBalancerGroup, []string{g.UUID, sg.UUID}) || len(ls.LoadBalancer) != 0 {
			t.Errorf("switch %s load_balancer_group %v load_balancer %v", n, ls.LoadBalancerGroup, ls.LoadBalancer)
		}
	}

	// Endpoint changes follow; none ready → serving+terminating fallback; none → reject.
	c.applySlice("ns", "web", "web-b", []discovery.EndpointPort{port("http", "TCP", 9090), port("dns", "UDP", 5353)}, endpoint(ip2, false))
	c.waitLB("Service_ns/web_TCP_cluster", map[string]string{vip + ":80": ip1 + ":8080"}, nil)
	c.applySlice("ns", "web", "web-a", []discovery.EndpointPort{port("http", "TCP", 8080), port("dns", "UDP", 5353)},
		discovery.Endpoint{Addresses: []string{ip1}, Conditions: discovery.EndpointConditions{Ready: ptr(false), Serving: ptr(true), Terminating: ptr(true)}})
	c.waitLB("Service_ns/web_TCP_cluster", map[string]string{vip + ":80": ip1 + ":8080"}, nil)
	if err := c.kube.Client.DiscoveryV1().EndpointSlices("ns").Delete(c.ctx(), "web-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitLB("Service_ns/web_TCP_cluster", map[string]string{vip + ":80": ""}, nil)

	// ClientIP affinity, ExternalIPs.
	aff := c.createService("ns", "sticky", func(s *corev1.Service) {
		s.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
		s.Spec.SessionAffinityConfig = &corev1.SessionAffinityConfig{ClientIP: &corev1.ClientIPConfig{TimeoutSeconds: ptr(int32(300))}}
		s.Spec.ExternalIPs = []string{"192.0.2.50"}
	})
	c.applySlice("ns", "sticky", "sticky-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint(ip1, true))
	c.waitLB("Service_ns/sticky_TCP_cluster", map[string]string{aff.Spec.ClusterIP + ":80": ip1 + ":8080", "192.0.2.50:80": ip1 + ":8080"}, func(lb *nbdb.LoadBalancer) error {
		if lb.Options["affinity_timeout"] != "300" {
			return fmt.Errorf("options %v", lb.Options)
		}
		return nil
	})

	// Headless: no load balancer. Selectorless with a manual slice: one.
	c.createService("ns", "headless", func(s *corev1.Service) { s.Spec.ClusterIP = "None" })
	c.applySlice("ns", "headless", "headless-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint(ip1, true))
	manual := c.createService("ns", "manual", func(s *corev1.Service) { s.Spec.Selector = nil })
	c.applySlice("ns", "manual", "manual-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint("10.244.99.9", true))
	c.waitLB("Service_ns/manual_TCP_cluster", map[string]string{manual.Spec.ClusterIP + ":80": "10.244.99.9:8080"}, nil)
	if c.lb("Service_ns/headless_TCP_cluster") != nil {
		t.Error("headless service got a load balancer")
	}

	// A second slice adds its endpoints to the same VIP. (The API server
	// validates slice addresses; bad ones are covered by the table tests.)
	c.applySlice("ns", "manual", "manual-bad", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint("10.244.99.10", true))
	c.waitLB("Service_ns/manual_TCP_cluster", map[string]string{manual.Spec.ClusterIP + ":80": "10.244.99.9:8080,10.244.99.10:8080"}, nil)

	// Protocol removed → its LB goes; service deleted → all go.
	web, _ := c.kube.Client.CoreV1().Services("ns").Get(c.ctx(), "web", metav1.GetOptions{})
	web.Spec.Ports = web.Spec.Ports[:1]
	if _, err := c.kube.Client.CoreV1().Services("ns").Update(c.ctx(), web, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitNoLB("Service_ns/web_UDP_cluster")
	if err := c.kube.Client.CoreV1().Services("ns").Delete(c.ctx(), "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitNoLB("Service_ns/web_TCP_cluster")

	// Restart: a service deleted while the master is down loses its LB; an
	// idle restart writes nothing.
	c.master.Stop()
	if err := c.kube.Client.CoreV1().Services("ns").Delete(c.ctx(), "sticky", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.startMaster(allowTestNet...)
	c.waitSynced()
	c.waitNoLB("Service_ns/sticky_TCP_cluster")
	c.waitLB("Service_ns/manual_TCP_cluster", map[string]string{manual.Spec.ClusterIP + ":80": "10.244.99.9:8080,10.244.99.10:8080"}, nil)
	if n := c.changesDuring(func() { c.master.Stop(); c.startMaster(allowTestNet...); c.waitSynced() }); n != 0 {
		t.Errorf("idle restart changed %d rows", n)
	}
}

func TestNodePortOnGatewayRouters(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	node, _ := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.18.0.2"}}
	if _, err := c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.kube.EnsureNamespace(t, "ns")
	svc := c.createService("ns", "np", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeNodePort })
	np := svc.Spec.Ports[0].NodePort
	c.applySlice("ns", "np", "np-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint("10.244.0.5", true))
	c.waitLB("Service_ns/np_TCP_cluster", map[string]string{svc.Spec.ClusterIP + ":80": "10.244.0.5:8080"}, nil)
	time.Sleep(500 * time.Millisecond)
	if c.lb("Service_ns/np_TCP_node_router_n1") != nil {
		t.Fatal("NodePort LB without a gateway router")
	}
	// The node's gateway router appears (as the master builds it for a node
	// whose gateway-init asked for one).
	// A router named like a gateway but not ours is never used.
	if _, err := c.ovn.NBCtl("lr-add", "GR_n1"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(500 * time.Millisecond)
	if c.lb("Service_ns/np_TCP_node_router_n1") != nil {
		t.Fatal("NodePort LB on a GR_n1 that ovn-k8s does not own")
	}
	if _, err := c.ovn.NBCtl("set", "logical_router", "GR_n1", "external_ids:k8s.ovn.org/owner-controller=ovn-k8s",
		"external_ids:k8s.ovn.org/owner-type=Node", "external_ids:k8s.ovn.org/name=n1"); err != nil {
		t.Fatal(err)
	}
	nlb := c.waitLB("Service_ns/np_TCP_node_router_n1", map[string]string{fmt.Sprintf("172.18.0.2:%d", np): "10.244.0.5:8080"}, nil)
	harness.Eventually(t, 10*time.Second, "GR_n1 carries the group and its NodePort LB", func() error {
		gr := c.routerNamed("GR_n1")
		if g := c.group(); gr == nil || g == nil || !contains(gr.LoadBalancerGroup, g.UUID) || !contains(gr.LoadBalancer, nlb.UUID) {
			return fmt.Errorf("GR_n1 = %+v", gr)
		}
		return nil
	})
	// The gateway goes away: so does its NodePort LB.
	if _, err := c.ovn.NBCtl("lr-del", "GR_n1"); err != nil {
		t.Fatal(err)
	}
	c.waitNoLB("Service_ns/np_TCP_node_router_n1")
}

// TestOVNTraceThroughClusterIP follows a packet from a pod's port to a
// ClusterIP through the logical flows northd generated in the real SB.
func TestOVNTraceThroughClusterIP(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.kube.EnsureNamespace(t, "ns")
	c.createPod("ns", "client", "n1")
	c.createPod("ns", "server", "n2")
	client, server := c.podNetwork("ns", "client"), c.podNetwork("ns", "server")
	c.waitPort("n1", "ns_client", nil)
	c.waitPort("n2", "ns_server", nil)
	svc := c.createService("ns", "web")
	empty := c.createService("ns", "empty")
	srvIP := server.IPs[0].Addr().String()
	c.applySlice("ns", "web", "web-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint(srvIP, true))
	c.waitLB("Service_ns/web_TCP_cluster", map[string]string{svc.Spec.ClusterIP + ":80": srvIP + ":8080"}, nil)
	c.waitLB("Service_ns/empty_TCP_cluster", map[string]string{empty.Spec.ClusterIP + ":80": ""}, nil)
	gwMAC := c.lrp("rtos-n1").MAC

	trace := func(dst string, extra ...string) string {
		flow := fmt.Sprintf(`inport == "ns_client" && eth.src == %s && eth.dst == %s && ip4.src == %s && ip4.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == 80`,
			client.MAC, gwMAC, client.IPs[0].Addr(), dst)
		var out string
		harness.Eventually(t, 20*time.Second, "ovn-trace to "+dst, func() error {
			args := append([]string{"ovn-trace", "--db=unix:" + c.ovn.SBSock}, extra...)
			var err error
			out, err = harness.Run(append(args, "n1", flow)...)
			if err != nil {
				return err
			}
			if !strings.Contains(out, "ct_lb") && !strings.Contains(out, "reject") {
				return fmt.Errorf("no load balancing in trace yet:\n%s", out)
			}
			return nil
		})
		return out
	}
	out := trace(svc.Spec.ClusterIP, "--ct=new", "--lb-dst="+srvIP+":8080")
	// The packet is DNATed to the endpoint (the router resolves the endpoint's
	// address, not the VIP) and delivered to the server pod's port on n2.
	for _, want := range []string{"ct_lb_mark", "reg0 == " + srvIP, `outport = "ns_server"`, `output to "ns_server"`} {
		if !strings.Contains(out, want) {
			t.Errorf("trace to the ClusterIP lacks %q:\n%s", want, out)
		}
	}
	flows, err := c.ovn.SBCtl("lflow-list", "n1")
	if err != nil {
		t.Fatal(err)
	}
	if want := "ct_lb_mark(backends=" + srvIP + ":8080)"; !strings.Contains(flows, want) {
		t.Errorf("n1 logical flows lack %q", want)
	}
	out = trace(empty.Spec.ClusterIP, "--ct=new")
	if !strings.Contains(out, "reject") || !strings.Contains(out, "tcp_reset") || strings.Contains(out, `output to "ns_server"`) {
		t.Errorf("trace to a ClusterIP without endpoints is not rejected with a TCP reset:\n%s", out)
	}
}

// Issue 31 item 7: external IPs and LoadBalancer ingress IPs are trusted
// only inside --external-ip-cidrs (none by default) and never when they are
// a node's address or in the cluster's own ranges; each refused address is
// left out of the load balancers and named in a Warning Event on the
// Service.
func TestExternalAddressesOnlyWhereAllowed(t *testing.T) {
	c := newCluster(t)
	c.startMaster() // no --external-ip-cidrs: every external address refused
	c.createNode("n1", nil)
	c.setNodeAddresses("n1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.18.0.2"})
	c.kube.EnsureNamespace(t, "ns")
	// A node's SSH, kubelet and API server ports; everyone's DNS.
	grab := c.createService("ns", "grab", func(s *corev1.Service) {
		s.Spec.Ports = []corev1.ServicePort{
			{Name: "ssh", Protocol: corev1.ProtocolTCP, Port: 22, TargetPort: intstr.FromInt(8080)},
			{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt(5353)},
		}
		s.Spec.ExternalIPs = []string{"172.18.0.2", "8.8.8.8", "172.18.0.60", "192.0.2.60"}
	})
	c.applySlice("ns", "grab", "grab-a", []discovery.EndpointPort{port("ssh", "TCP", 8080), port("dns", "UDP", 5353)}, endpoint("10.244.0.5", true))
	lbSvc := c.createService("ns", "lb", func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeLoadBalancer })
	lbSvc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "172.18.0.2"}, {IP: "192.0.2.61"}}
	if _, err := c.kube.Client.CoreV1().Services("ns").UpdateStatus(c.ctx(), lbSvc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.applySlice("ns", "lb", "lb-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint("10.244.0.5", true))
	c.waitLB("Service_ns/grab_TCP_cluster", map[string]string{grab.Spec.ClusterIP + ":22": "10.244.0.5:8080"}, nil)
	c.waitLB("Service_ns/grab_UDP_cluster", map[string]string{grab.Spec.ClusterIP + ":53": "10.244.0.5:5353"}, nil)
	c.waitLB("Service_ns/lb_TCP_cluster", map[string]string{lbSvc.Spec.ClusterIP + ":80": "10.244.0.5:8080"}, nil)
	c.waitRefusalEvents("grab", "ExternalIPRefused", "external IP 172.18.0.2 is not programmed: it is node n1's address",
		"external IP 8.8.8.8 is not programmed: no external IPs are allowed", "external IP 192.0.2.60 is not programmed")
	c.waitRefusalEvents("lb", "LoadBalancerIPRefused", "load balancer ingress IP 172.18.0.2 is not programmed", "load balancer ingress IP 192.0.2.61 is not programmed")

	// Allowed ranges: what is inside is programmed, a node's address never.
	c.master.Stop()
	c.startMaster("--external-ip-cidrs", "192.0.2.0/24,172.18.0.0/16,2001:db8::/32")
	c.waitLB("Service_ns/grab_TCP_cluster", map[string]string{grab.Spec.ClusterIP + ":22": "10.244.0.5:8080",
		"172.18.0.60:22": "10.244.0.5:8080", "192.0.2.60:22": "10.244.0.5:8080"}, nil)
	c.waitLB("Service_ns/grab_UDP_cluster", map[string]string{grab.Spec.ClusterIP + ":53": "10.244.0.5:5353",
		"172.18.0.60:53": "10.244.0.5:5353", "192.0.2.60:53": "10.244.0.5:5353"}, nil)
	c.waitLB("Service_ns/lb_TCP_cluster", map[string]string{lbSvc.Spec.ClusterIP + ":80": "10.244.0.5:8080", "192.0.2.61:80": "10.244.0.5:8080"}, nil)
	c.waitRefusalEvents("grab", "ExternalIPRefused", "external IP 8.8.8.8 is not programmed: it is outside the allowed ranges 192.0.2.0/24,172.18.0.0/16,2001:db8::/32")

	// A node taking an allowed address takes it back from the service.
	c.setNodeAddresses("n1", corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "172.18.0.2"},
		corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "192.0.2.60"})
	c.waitLB("Service_ns/grab_TCP_cluster", map[string]string{grab.Spec.ClusterIP + ":22": "10.244.0.5:8080", "172.18.0.60:22": "10.244.0.5:8080"}, nil)
	c.waitRefusalEvents("grab", "ExternalIPRefused", "external IP 192.0.2.60 is not programmed: it is node n1's address")
}

// setNodeAddresses sets a node's status addresses (again after a conflict
// with the master's annotation patches).
func (c *cluster) setNodeAddresses(name string, addrs ...corev1.NodeAddress) {
	c.t.Helper()
	harness.Eventually(c.t, 10*time.Second, "node "+name+" addresses set", func() error {
		node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		node.Status.Addresses = addrs
		_, err = c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{})
		return err
	})
}

// waitRefusalEvents waits for Warning Events with reason on the service,
// one containing each of msgs.
func (c *cluster) waitRefusalEvents(svc, reason string, msgs ...string) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, "Events "+reason+" on service "+svc, func() error {
		evs, err := c.kube.Client.CoreV1().Events("ns").List(c.ctx(), metav1.ListOptions{})
		if err != nil {
			return err
		}
		var got []string
		for _, ev := range evs.Items {
			if ev.InvolvedObject.Kind == "Service" && ev.InvolvedObject.Name == svc && ev.Reason == reason && ev.Type == corev1.EventTypeWarning {
				got = append(got, ev.Message)
			}
		}
		all := strings.Join(got, "\n")
		for _, m := range msgs {
			if !strings.Contains(all, m) {
				return fmt.Errorf("no Event saying %q; have:\n%s", m, all)
			}
		}
		return nil
	})
}

func TestServiceAddressFlagsExitTwoNamingTheFlag(t *testing.T) {
	bin := harness.Binary(t, "ovnkube")
	for _, tt := range []struct{ args []string }{
		{[]string{"--external-ip-cidrs", "192.0.2.0/33"}},
		{[]string{"--external-ip-cidrs", "192.0.2.1/24"}},
		{[]string{"--service-node-port-range", "32767-30000"}},
		{[]string{"--service-node-port-range", "0-100"}},
	} {
		args := append([]string{"master", "--nb-address", "unix:/x"}, tt.args...)
		out, err := exec.Command(bin, args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(string(out), tt.args[0]) {
			t.Errorf("ovnkube %v: exit %v, want status 2 naming %s; output:\n%s", args, err, tt.args[0], out)
		}
	}
}
