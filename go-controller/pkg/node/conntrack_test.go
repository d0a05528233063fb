package node

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

// ctSvc is a NodePort service ns/name with one port of proto (53 → 5353,
// NodePort 30053) and its slice of endpoints on nodes.
func ctSvc(name, clusterIP string, proto corev1.Protocol, eps map[string]string) (*corev1.Service, *discovery.EndpointSlice) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "dns", Protocol: proto, Port: 53, NodePort: 30053}}}}
	addrType := discovery.AddressTypeIPv4
	if netip.MustParseAddr(clusterIP).Is6() {
		addrType = discovery.AddressTypeIPv6
	}
	sl := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name + "-1", Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: addrType, Ports: []discovery.EndpointPort{{Name: ptr("dns"), Protocol: &proto, Port: ptr(int32(5353))}}}
	for ip, node := range eps {
		sl.Endpoints = append(sl.Endpoints, hcEndpoint(ip, node, true))
	}
	return svc, sl
}

func ptr[T any](v T) *T { return &v }

// flow is a conntrack entry in zone: from the client to dst, answered from replyFrom.
func flow(zone uint16, proto uint8, dst, replyFrom string) *netlink.ConntrackFlow {
	d, r := netip.MustParseAddrPort(dst), netip.MustParseAddrPort(replyFrom)
	client := net.ParseIP("10.244.1.9")
	if d.Addr().Is6() {
		client = net.ParseIP("fd00:10:244:1::9")
	}
	return &netlink.ConntrackFlow{Zone: zone,
		Forward: netlink.IPTuple{Protocol: proto, SrcIP: client, SrcPort: 40000, DstIP: d.Addr().AsSlice(), DstPort: d.Port()},
		Reverse: netlink.IPTuple{Protocol: proto, SrcIP: r.Addr().AsSlice(), SrcPort: r.Port(), DstIP: client, DstPort: 40000}}
}

var ctNode = services.NodeGateway{Node: "n1",
	IPs:  []netip.Addr{netip.MustParseAddr("172.18.0.3")},
	Own:  []netip.Addr{netip.MustParseAddr("172.18.0.3")},
	Mgmt: []netip.Addr{netip.MustParseAddr("10.244.1.2")}}

// The plan calls stale exactly the UDP and SCTP entries to a service's
// frontend that are answered from what is no longer its backend (an old
// pod, an old target port, a service with none left), in OVN's zones; and
// in the host's zone the entries to a node address at a NodePort that the
// host's chain does not send to the ClusterIP they went to. Entries it
// does not NAT, TCP, and addresses that are not a frontend are never stale.
func TestConntrackPlan(t *testing.T) {
	udp, udpSlice := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.5": "n1", "10.244.2.5": "n2"})
	tcp, tcpSlice := ctSvc("web", "10.96.0.20", corev1.ProtocolTCP, map[string]string{"10.244.1.6": "n1"})
	tcp.Spec.Ports[0].NodePort = 30080
	sctp, sctpSlice := ctSvc("sig", "10.96.0.30", corev1.ProtocolSCTP, map[string]string{"10.244.1.7": "n1"})
	sctp.Spec.Ports[0].NodePort = 30132
	empty, emptySlice := ctSvc("none", "10.96.0.40", corev1.ProtocolUDP, nil)
	empty.Spec.Ports[0].NodePort = 30040
	host, hostSlice := ctSvc("host", "10.96.0.50", corev1.ProtocolUDP, map[string]string{"172.18.0.3": "n1"})
	host.Spec.Ports[0].NodePort = 30050
	v6, v6Slice := ctSvc("six", "fd00:10:96::10", corev1.ProtocolUDP, map[string]string{"fd00:10:244:1::5": "n1"})
	v6.Spec.Ports[0].NodePort = 30060
	plan := NewConntrackPlan([]*corev1.Service{udp, tcp, sctp, empty, host, v6}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{udpSlice, tcpSlice, sctpSlice, emptySlice, hostSlice, v6Slice}))

	for _, c := range []struct {
		name  string
		flow  *netlink.ConntrackFlow
		stale bool
	}{
		{"to a backend", flow(5, 17, "10.96.0.10:53", "10.244.1.5:5353"), false},
		{"to a backend on another node", flow(5, 17, "10.96.0.10:53", "10.244.2.5:5353"), false},
		{"to a pod that is gone", flow(5, 17, "10.96.0.10:53", "10.244.1.99:5353"), true},
		{"to the old target port", flow(5, 17, "10.96.0.10:53", "10.244.1.5:53"), true},
		{"not NATed", flow(5, 17, "10.96.0.10:53", "10.96.0.10:53"), false},
		{"TCP to a pod that is gone", flow(5, 6, "10.96.0.20:53", "10.244.1.99:5353"), false},
		{"SCTP to a pod that is gone", flow(5, 132, "10.96.0.30:53", "10.244.1.99:5353"), true},
		{"SCTP to its backend", flow(5, 132, "10.96.0.30:53", "10.244.1.7:5353"), false},
		{"a service with no endpoints left", flow(5, 17, "10.96.0.40:53", "10.244.1.5:5353"), true},
		{"not a frontend", flow(5, 17, "10.96.0.99:53", "10.244.1.99:5353"), false},
		{"NodePort at the gateway router", flow(7, 17, "172.18.0.3:30053", "10.244.2.5:5353"), false},
		{"NodePort at the gateway router, gone", flow(7, 17, "172.18.0.3:30053", "10.244.2.99:5353"), true},
		{"host-network endpoint at the management address", flow(5, 17, "10.96.0.50:53", "10.244.1.2:5353"), false},
		{"IPv6 to its backend", flow(5, 17, "[fd00:10:96::10]:53", "[fd00:10:244:1::5]:5353"), false},
		{"IPv6 to a pod that is gone", flow(5, 17, "[fd00:10:96::10]:53", "[fd00:10:244:1::99]:5353"), true},
		{"host to its NodePort, sent to the ClusterIP", flow(0, 17, "172.18.0.3:30053", "10.96.0.10:53"), false},
		{"host to its NodePort before the rule", flow(0, 17, "172.18.0.3:30053", "172.18.0.3:30053"), true},
		{"host to its NodePort, sent to an old ClusterIP", flow(0, 17, "172.18.0.3:30053", "10.96.0.77:53"), true},
		{"host to a ClusterIP (OVN balances it)", flow(0, 17, "10.96.0.10:53", "10.96.0.10:53"), false},
		{"host to a port that is no NodePort", flow(0, 17, "172.18.0.3:30999", "172.18.0.3:30999"), false},
		{"host to a TCP NodePort before the rule", flow(0, 6, "172.18.0.3:30080", "172.18.0.3:30080"), false},
	} {
		if got := plan.MatchConntrackFlow(c.flow); got != c.stale {
			t.Errorf("%s (%s): stale %v, want %v", c.name, c.flow, got, c.stale)
		}
	}
}

// Two plans from the same input are equal; a changed endpoint makes them differ.
func TestConntrackPlanEqual(t *testing.T) {
	svc, sl := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.5": "n1"})
	a := NewConntrackPlan([]*corev1.Service{svc}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{sl}))
	b := NewConntrackPlan([]*corev1.Service{svc}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{sl}))
	if !a.Equal(b) {
		t.Fatal("plans of the same services differ")
	}
	_, sl2 := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.6": "n1"})
	c := NewConntrackPlan([]*corev1.Service{svc}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{sl2}))
	if a.Equal(c) {
		t.Error("a new endpoint left the plan equal")
	}
	if ovn, host := a.Frontends(); ovn == 0 || host != 1 {
		t.Errorf("frontends: %d in OVN, %d on the host", ovn, host)
	}
}

// fakeTable records the sweeps and deletes what the filter matches.
type fakeTable struct {
	flows []*netlink.ConntrackFlow
	calls int
	err   error
}

func (f *fakeTable) ConntrackDeleteFilters(_ netlink.ConntrackTableType, fam netlink.InetFamily, filters ...netlink.CustomConntrackFilter) (uint, error) {
	f.calls++
	var keep []*netlink.ConntrackFlow
	var n uint
	for _, fl := range f.flows {
		if (fl.Forward.DstIP.To4() != nil) != (fam == netlink.FAMILY_V4) || !filters[0].MatchConntrackFlow(fl) {
			keep = append(keep, fl)
			continue
		}
		n++
	}
	f.flows = keep
	return n, f.err
}

// SweepConntrack deletes the stale entries of both families and keeps the rest.
func TestSweepConntrack(t *testing.T) {
	svc, sl := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.5": "n1"})
	v6, v6sl := ctSvc("six", "fd00:10:96::10", corev1.ProtocolUDP, map[string]string{"fd00:10:244:1::5": "n1"})
	v6.Spec.Ports[0].NodePort = 30060
	plan := NewConntrackPlan([]*corev1.Service{svc, v6}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{sl, v6sl}))
	good := flow(5, 17, "10.96.0.10:53", "10.244.1.5:5353")
	table := &fakeTable{flows: []*netlink.ConntrackFlow{good,
		flow(5, 17, "10.96.0.10:53", "10.244.1.99:5353"),
		flow(5, 17, "[fd00:10:96::10]:53", "[fd00:10:244:1::99]:5353")}}
	n, err := SweepConntrack(table, plan)
	if err != nil || n != 2 || len(table.flows) != 1 || table.flows[0] != good {
		t.Errorf("swept %d (%v), left %v; want 2 swept and the live entry left", n, err, table.flows)
	}
	table.err = errors.New("ENOBUFS")
	if _, err := SweepConntrack(table, plan); err == nil {
		t.Error("an error of the table was not returned")
	}
}

// runConntrack sweeps at start and after a kick that changes the plan, and
// not after a kick that leaves it as it was.
func TestRunConntrackSweepsOnChange(t *testing.T) {
	svc, sl := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.5": "n1"})
	_, sl2 := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.1.6": "n1"})
	var mu sync.Mutex
	current, plans := sl, 0
	plan := func() (ConntrackPlan, error) {
		mu.Lock()
		defer mu.Unlock()
		plans++
		return NewConntrackPlan([]*corev1.Service{svc}, ctNode, services.AddressPolicy{}, NewPeers("", nil, []*discovery.EndpointSlice{current})), nil
	}
	table := &lockedTable{}
	kick := make(chan struct{}, 1)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go runConntrack(ctx, table, plan, kick, testr.New(t))
	read := func() (int, int) {
		mu.Lock()
		defer mu.Unlock()
		table.mu.Lock()
		defer table.mu.Unlock()
		return plans, table.calls
	}
	waitFor := func(what string, ok func(plans, calls int) bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			p, c := read()
			if ok(p, c) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: %d plans computed, %d table calls", what, p, c)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	waitFor("first sweep", func(_, c int) bool { return c == 2 })
	kick <- struct{}{}
	waitFor("kick with the same plan", func(p, _ int) bool { return p == 2 })
	mu.Lock()
	current = sl2
	mu.Unlock()
	kick <- struct{}{}
	waitFor("kick with a new endpoint", func(p, _ int) bool { return p == 3 })
	waitFor("sweep of the new plan", func(_, c int) bool { return c >= 4 })
	if _, c := read(); c != 4 {
		t.Errorf("%d table calls, want 4 (two sweeps of two families): the unchanged plan was swept", c)
	}
}

type lockedTable struct {
	mu    sync.Mutex
	calls int
}

func (l *lockedTable) ConntrackDeleteFilters(netlink.ConntrackTableType, netlink.InetFamily, ...netlink.CustomConntrackFilter) (uint, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls++
	return 0, nil
}

// externalTrafficPolicy Local: the node's own NodePort goes to the nodes
// that have endpoints (in turn), keeping the node's address as the source
// (Kubernetes' "NodePort and HealthCheckNodePort correctly when
// ExternalTrafficPolicy changes"); to the ClusterIP when the node has an
// endpoint of its own, when nobody has one, and for the Cluster policy.
// The conntrack plan keeps the host's entries sent to those nodes.
func TestHostNodePortShortCircuitsLocalServices(t *testing.T) {
	gw := func(name string, ips ...string) services.NodeGateway {
		n := services.NodeGateway{Node: name}
		for _, s := range ips {
			n.IPs = append(n.IPs, netip.MustParseAddr(s))
		}
		n.Own = n.IPs
		return n
	}
	nodes := []services.NodeGateway{gw("n3", "172.18.0.4"), gw("n1", "172.18.0.2"), gw("n2", "172.18.0.3")}
	svc, sl := ctSvc("dns", "10.96.0.10", corev1.ProtocolUDP, map[string]string{"10.244.2.5": "n2", "10.244.3.5": "n3", "10.244.3.6": "n3"})
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	rules := func(svc *corev1.Service, sl *discovery.EndpointSlice, self string) []string {
		return HostNodePortRules([]*corev1.Service{svc}, services.AddressPolicy{}, NewPeers(self, nodes, []*discovery.EndpointSlice{sl}), false)
	}
	const match = "-A OVN-KUBE-NODEPORT -p udp -m addrtype --dst-type LOCAL -m udp --dport 30053 "
	toClusterIP := []string{match + "-j DNAT --to-destination 10.96.0.10:53"}
	for _, c := range []struct {
		name string
		got  []string
		want []string
	}{
		{"endpoints elsewhere only", rules(svc, sl, "n1"), []string{
			match + "-m statistic --mode nth --every 2 --packet 0 -j DNAT --to-destination 172.18.0.3:30053",
			match + "-j DNAT --to-destination 172.18.0.4:30053"}},
		{"an endpoint of its own", rules(svc, sl, "n2"), toClusterIP},
		{"no endpoints anywhere", rules(svc, &discovery.EndpointSlice{}, "n1"), toClusterIP},
		{"no peers known", HostNodePortRules([]*corev1.Service{svc}, services.AddressPolicy{}, Peers{}, false), toClusterIP},
	} {
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s:\n%s\nwant\n%s", c.name, strings.Join(c.got, "\n"), strings.Join(c.want, "\n"))
		}
	}
	cluster := svc.DeepCopy()
	cluster.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster
	if got := rules(cluster, sl, "n1"); !slices.Equal(got, toClusterIP) {
		t.Errorf("Cluster policy: %q", got)
	}

	self := gw("n1", "172.18.0.2")
	plan := NewConntrackPlan([]*corev1.Service{svc}, self, services.AddressPolicy{}, NewPeers("n1", nodes, []*discovery.EndpointSlice{sl}))
	for _, c := range []struct {
		name  string
		flow  *netlink.ConntrackFlow
		stale bool
	}{
		{"sent to a node with endpoints", flow(0, 17, "172.18.0.2:30053", "172.18.0.3:30053"), false},
		{"sent to the other node with endpoints", flow(0, 17, "172.18.0.2:30053", "172.18.0.4:30053"), false},
		{"sent to the ClusterIP before", flow(0, 17, "172.18.0.2:30053", "10.96.0.10:53"), true},
	} {
		if got := plan.MatchConntrackFlow(c.flow); got != c.stale {
			t.Errorf("%s: stale %v, want %v", c.name, got, c.stale)
		}
	}
}
