package master

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// annotateGateway writes what gateway-init and minion-init publish.
func (e *env) annotateGateway(node, ip, value string) {
	e.t.Helper()
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	if value == "" {
		value = annotations.FormatL3GatewayConfig(annotations.L3GatewayConfig{Mode: "shared", InterfaceID: topology.LocalnetPort("breth0", node),
			MAC: mac, IPs: []netip.Prefix{netip.MustParsePrefix(ip + "/24")}, NextHops: []netip.Addr{netip.MustParseAddr("172.18.0.1")}, NodePortEnable: true})
	}
	e.patchNode(node, map[string]any{annotations.NodeL3GatewayConfig: value, annotations.NodeChassisID: "chassis-" + node})
}

func (e *env) patchNode(node string, values map[string]any) {
	e.t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"annotations":%s}}`, mustJSON(values))
	if _, err := e.kube.CoreV1().Nodes().Patch(context.Background(), node, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func mustJSON(m map[string]any) string {
	var parts []string
	for k, v := range m {
		if v == nil {
			parts = append(parts, fmt.Sprintf("%q:null", k))
		} else {
			parts = append(parts, fmt.Sprintf("%q:%q", k, v))
		}
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// gatewayState summarises a node's gateway rows ("" when there are none).
func (e *env) gatewayState(node string) string {
	ctx := context.Background()
	var grs []nbdb.LogicalRouter
	_ = e.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == topology.GatewayRouter(node) }).List(ctx, &grs)
	if len(grs) != 1 {
		var ext []nbdb.LogicalSwitch
		_ = e.nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == topology.ExternalSwitch(node) }).List(ctx, &ext)
		if len(ext) > 0 {
			return "ext switch without router"
		}
		return ""
	}
	gr := grs[0]
	join := &nbdb.LogicalRouterPort{Name: topology.RouterToGatewayJoinPort(node)}
	_ = e.nb.Get(ctx, join)
	var nats []string
	for _, u := range gr.Nat {
		n := &nbdb.NAT{UUID: u}
		if e.nb.Get(ctx, n) == nil {
			nats = append(nats, n.LogicalIP+">"+n.ExternalIP)
		}
	}
	var routes []string
	for _, u := range gr.StaticRoutes {
		r := &nbdb.LogicalRouterStaticRoute{UUID: u}
		if e.nb.Get(ctx, r) == nil {
			routes = append(routes, r.IPPrefix+">"+r.Nexthop)
		}
	}
	return fmt.Sprintf("chassis=%s join=%v nat=%v routes=%v", gr.Options["chassis"], join.Networks, nats, routes)
}

func (e *env) waitGateway(node, want string) {
	e.t.Helper()
	harness.Eventually(e.t, 15*time.Second, "gateway of "+node+" = "+want, func() error {
		if got := e.gatewayState(node); !strings.HasPrefix(got, want) || (want == "" && got != "") {
			return fmt.Errorf("gateway is %q", got)
		}
		return nil
	})
}

// Item 2: the master owns a node's gateway rows: it builds them from the
// node's annotations, rebuilds them when the NB or the router is lost,
// follows changes (stale NAT and routes go), leaves them alone when the
// annotation is malformed, and removes them with the annotation or the node.
func TestGatewayRowsHaveOneOwner(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.annotateGateway("n1", "172.18.0.2", "")
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "np"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.30", ClusterIPs: []string{"10.96.0.30"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}}
	if _, err := e.kube.CoreV1().Services("ns").Create(context.Background(), svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createSlice("ns", "np-x", "np", "10.244.0.5")
	built := "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.2] routes=[10.244.0.0/16>100.64.0.1 0.0.0.0/0>172.18.0.1]"
	e.waitGateway("n1", built)
	harness.Eventually(t, 10*time.Second, "join address annotated", func() error {
		n, _ := e.kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if v := n.Annotations[annotations.NodeGatewayJoinIP]; v != `{"ipv4":"100.64.0.2/16"}` {
			return fmt.Errorf("annotation %q", v)
		}
		return nil
	})

	// Deleted by hand, or the NB replaced by an empty one: back within 15 s.
	txn := ovndb.NewTxn(e.nb)
	txn.Delete(ovndb.Lookup(txn, &nbdb.LogicalRouter{Name: "GR_n1"}))
	ops, _ := txn.Ops()
	if err := ovndb.Transact(context.Background(), e.nb, ops); err != nil {
		t.Fatal(err)
	}
	e.waitGateway("n1", built)
	e.replaceNB()
	e.waitGateway("n1", built)

	// An older version's localnet port (named like a pod's port) on ext_n1.
	harness.Eventually(t, 10*time.Second, "legacy localnet port added (the client reconnects after the NB switch)", func() error {
		txn := ovndb.NewTxn(e.nb)
		ext := ovndb.Require(txn, &nbdb.LogicalSwitch{Name: "ext_n1"})
		if txn.Err() != nil {
			return txn.Err()
		}
		legacy := &nbdb.LogicalSwitchPort{Name: "breth0_n1", Type: "localnet", ExternalIDs: topology.Owner{Type: topology.OwnerNode, Name: "n1"}.ExternalIDs()}
		txn.AddChildren(ext, &ext.Ports, txn.Ensure(legacy, nil, nil))
		ops, err := txn.Ops()
		if err != nil {
			return err
		}
		return ovndb.Transact(context.Background(), e.nb, ops)
	})
	// A new address: the NAT follows, the old one and the legacy port go.
	e.annotateGateway("n1", "172.18.0.9", "")
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.9]")
	harness.Eventually(t, 10*time.Second, "the legacy localnet port removed", func() error {
		var lsps []nbdb.LogicalSwitchPort
		_ = e.nb.WhereCache(func(p *nbdb.LogicalSwitchPort) bool { return p.Name == "breth0_n1" }).List(context.Background(), &lsps)
		if len(lsps) != 0 {
			return fmt.Errorf("breth0_n1 still there")
		}
		return nil
	})

	// A malformed or foreign annotation changes nothing.
	e.patchNode("n1", map[string]any{annotations.NodeL3GatewayConfig: `{"default":{"mode":"shared","interface-id":"ns_pod"}}`})
	e.patchNode("n1", map[string]any{annotations.NodeL3GatewayConfig: `not json`})
	e.createNode("n2") // a sync after the bad annotations
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.9]")

	// The annotation removed: the gateway goes; back again, it returns.
	e.patchNode("n1", map[string]any{annotations.NodeL3GatewayConfig: nil})
	e.waitGateway("n1", "")
	e.annotateGateway("n2", "172.18.0.3", "")
	e.waitGateway("n2", "chassis=chassis-n2 join=[100.64.0.")
	e.annotateGateway("n1", "172.18.0.2", "")
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.")
	// The rebuilt router gets the NodePort balancer back.
	e.waitVIPs("Service_ns/np_TCP_node_router_n1", map[string]string{"172.18.0.2:30080": "10.244.0.5:8080"})
	harness.Eventually(t, 10*time.Second, "GR_n1 carries its NodePort balancer", func() error {
		lb := &nbdb.LoadBalancer{}
		var lbs []nbdb.LoadBalancer
		_ = e.nb.WhereCache(func(l *nbdb.LoadBalancer) bool { return l.Name == "Service_ns/np_TCP_node_router_n1" }).List(context.Background(), &lbs)
		var grs []nbdb.LogicalRouter
		_ = e.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == "GR_n1" }).List(context.Background(), &grs)
		if len(lbs) == 1 {
			lb = &lbs[0]
		}
		if len(grs) != 1 || lb.UUID == "" || !slices.Contains(grs[0].LoadBalancer, lb.UUID) {
			return fmt.Errorf("GR_n1 %v, balancer %q", grs, lb.UUID)
		}
		return nil
	})
	if a, b := e.gatewayState("n1"), e.gatewayState("n2"); strings.Split(a, " ")[1] == strings.Split(b, " ")[1] {
		t.Errorf("two gateways share a join address: %s / %s", a, b)
	}

	// The node deleted: its gateway and its source route go.
	e.deleteNode("n1")
	e.waitGateway("n1", "")
	harness.Eventually(t, 10*time.Second, "n1's gateway source route removed", func() error {
		var routes []nbdb.LogicalRouterStaticRoute
		_ = e.nb.List(context.Background(), &routes)
		for _, r := range routes {
			if owner, _ := topology.OwnerOf(r.ExternalIDs); owner.Name == "n1" {
				return fmt.Errorf("route %s via %s remains", r.IPPrefix, r.Nexthop)
			}
		}
		return nil
	})
}

// Join addresses return to the pool: node churn far beyond the join
// subnet's size never exhausts it, and a restart keeps each node's address.
func TestGatewayJoinAddressesAreReused(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	m := newIPAM(nil, pp("100.64.0.0/29")) // .2 … .7
	for i := 0; i < 100; i++ {
		node := fmt.Sprintf("n%d", i)
		if _, err := m.gatewayJoinIPs(node, nil); err != nil {
			t.Fatalf("node %d: %v", i, err)
		}
		if i >= 4 {
			m.releaseGatewayJoinIPs(fmt.Sprintf("n%d", i-4))
		}
	}
	restarted := newIPAM(nil, pp("100.64.0.0/29"))
	if p, _ := restarted.gatewayJoinIPs("a", pp("100.64.0.5/29")); fmt.Sprint(p) != "[100.64.0.5/29]" {
		t.Errorf("restored address %s, want 100.64.0.5/29", p)
	}
	if p, _ := restarted.gatewayJoinIPs("b", pp("100.64.0.5/29")); fmt.Sprint(p) == "[100.64.0.5/29]" {
		t.Errorf("a taken address was handed out again")
	}
	if _, err := restarted.gatewayJoinIPs("c", pp("100.64.0.1/29")); err != nil {
		t.Errorf("the cluster router's address asked for: %v (want a fresh one)", err)
	}
	// Dual-stack: one address per family, restored per family; when one
	// family is exhausted nothing of the other is kept.
	dual := newIPAM(nil, pp("100.64.0.0/30", "fd98::/64")) // one IPv4 address: .2
	if p, err := dual.gatewayJoinIPs("a", pp("fd98::7/64")); err != nil || fmt.Sprint(p) != "[100.64.0.2/30 fd98::7/64]" {
		t.Errorf("dual-stack addresses %v, %v; want 100.64.0.2/30 and the restored fd98::7/64", p, err)
	}
	if p, err := dual.gatewayJoinIPs("b", nil); err == nil {
		t.Errorf("IPv4 exhausted, yet addresses %v", p)
	}
	dual.releaseGatewayJoinIPs("a")
	if p, err := dual.gatewayJoinIPs("b", pp("fd98::7/64")); err != nil || fmt.Sprint(p) != "[100.64.0.2/30 fd98::7/64]" {
		t.Errorf("after a's release: %v, %v", p, err)
	}
}

// A gateway transaction committed while its reply is lost (the connection
// drops) is not sent again from the stale cache: the retry finds the rows
// and there is exactly one of each.
func TestGatewayAfterLostReply(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.start()
	e.waitGateway("n1", "") // synced, no gateway
	lost := e.proxy.LoseNextReply()
	e.annotateGateway("n1", "172.18.0.2", "")
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.2]")
	harness.Eventually(t, 10*time.Second, "one row of each", func() error {
		ctx := context.Background()
		var grs []nbdb.LogicalRouter
		_ = e.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == "GR_n1" }).List(ctx, &grs)
		var exts []nbdb.LogicalSwitch
		_ = e.nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == "ext_n1" }).List(ctx, &exts)
		var nats []nbdb.NAT
		_ = e.nb.List(ctx, &nats)
		if len(grs) != 1 || len(exts) != 1 || len(nats) != 1 {
			return fmt.Errorf("%d routers, %d external switches, %d NAT rows", len(grs), len(exts), len(nats))
		}
		return nil
	})
}

// Killed after the gateway's rows were committed but before its join
// address was annotated: the restarted master reads the address from the
// join port, keeps it, and hands another node a different one.
func TestGatewayJoinAddressSurvivesRestartWithoutAnnotation(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.createNode("n2")
	e.start()
	e.annotateGateway("n1", "172.18.0.2", "")
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16]")
	e.stop()
	e.patchNode("n1", map[string]any{annotations.NodeGatewayJoinIP: nil})
	e.annotateGateway("n2", "172.18.0.3", "") // asks for a gateway while no master runs
	e.start()
	e.waitGateway("n2", "chassis=chassis-n2 join=[100.64.0.3/16]")
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16]")
	harness.Eventually(t, 10*time.Second, "n1's join address annotated again", func() error {
		n, _ := e.kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if v := n.Annotations[annotations.NodeGatewayJoinIP]; v != `{"ipv4":"100.64.0.2/16"}` {
			return fmt.Errorf("annotation %q", v)
		}
		return nil
	})
}

// Issue 31 item 6 (the master's side): a node reporting another node's
// chassis cannot move that node's gateway router onto it, nor get a
// gateway router pinned to it: the older node keeps the chassis, the other
// node's gateway is left as it was with a GatewayConfigInvalid Event, and it
// gets its gateway once it reports its own chassis again.
func TestChassisClaimedByTwoNodesStaysWithTheFirst(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.createNode("n2")
	e.start()
	e.annotateGateway("n1", "172.18.0.2", "")
	e.annotateGateway("n2", "172.18.0.3", "")
	e.waitGateway("n1", "chassis=chassis-n1 ")
	e.waitGateway("n2", "chassis=chassis-n2 ")

	e.patchNode("n2", map[string]any{annotations.NodeChassisID: "chassis-n1"})
	harness.Eventually(t, 10*time.Second, "a GatewayConfigInvalid Warning on n2", func() error {
		if evs := e.warningEvents("Node", "n2", "GatewayConfigInvalid"); len(evs) == 0 {
			return fmt.Errorf("no event")
		}
		return nil
	})
	e.waitGateway("n1", "chassis=chassis-n1 ")
	e.waitGateway("n2", "chassis=chassis-n2 ")

	e.patchNode("n2", map[string]any{annotations.NodeChassisID: "chassis-n2b"})
	e.waitGateway("n2", "chassis=chassis-n2b ")
	e.waitGateway("n1", "chassis=chassis-n1 ")
}

// On a dual-stack cluster a node's gateway has both families: join
// addresses (annotated as upstream does), its external addresses, SNAT,
// routes into the cluster and default routes; the cluster router's join
// port too. A restart keeps the join addresses.
func TestGatewayDualStack(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	e.createNode("n1")
	e.start()
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	e.annotateGateway("n1", "", annotations.FormatL3GatewayConfig(annotations.L3GatewayConfig{Mode: "shared", InterfaceID: topology.LocalnetPort("breth0", "n1"),
		MAC: mac, IPs: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/24"), netip.MustParsePrefix("fc00:f853:ccd:e793::2/64")},
		NextHops: []netip.Addr{netip.MustParseAddr("172.18.0.1"), netip.MustParseAddr("fc00:f853:ccd:e793::1")}, NodePortEnable: true}))
	built := "chassis=chassis-n1 join=[100.64.0.2/16 fd98::2/64] nat=[10.244.0.0/16>172.18.0.2 fd00:10:244::/48>fc00:f853:ccd:e793::2] " +
		"routes=[10.244.0.0/16>100.64.0.1 fd00:10:244::/48>fd98::1 0.0.0.0/0>172.18.0.1 ::/0>fc00:f853:ccd:e793::1]"
	e.waitGateway("n1", built)
	joinIPs := `{"ipv4":"100.64.0.2/16","ipv6":"fd98::2/64"}`
	harness.Eventually(t, 10*time.Second, "join addresses annotated", func() error {
		n, _ := e.kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
		if v := n.Annotations[annotations.NodeGatewayJoinIP]; v != joinIPs {
			return fmt.Errorf("annotation %q", v)
		}
		return nil
	})
	rtoj := &nbdb.LogicalRouterPort{Name: topology.RouterToJoin}
	if err := e.nb.Get(context.Background(), rtoj); err != nil || !slices.Equal(rtoj.Networks, []string{"100.64.0.1/16", "fd98::1/64"}) {
		t.Errorf("cluster router's join port %v (%v)", rtoj.Networks, err)
	}
	e.stop()
	e.start()
	e.waitGateway("n1", built)
}
