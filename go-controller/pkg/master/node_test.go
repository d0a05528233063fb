package master

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// hostRoutes lists the cluster router's routes to node addresses, as "prefix via nexthop".
func (e *env) hostRoutes() []string {
	var routes []nbdb.LogicalRouterStaticRoute
	if err := e.nb.List(context.Background(), &routes); err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, r := range routes {
		if strings.HasPrefix(r.ExternalIDs[topology.RowIDKey], topology.HostRouteIDPrefix) {
			out = append(out, r.IPPrefix+" via "+r.Nexthop)
		}
	}
	slices.Sort(out)
	return out
}

func (e *env) setNodeIP(name, ip string) {
	e.t.Helper()
	n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}, {Type: corev1.NodeHostName, Address: name}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) waitHostRoutes(want ...string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, fmt.Sprintf("host routes %v", want), func() error {
		if got := e.hostRoutes(); !slices.Equal(got, want) {
			return fmt.Errorf("host routes are %v", got)
		}
		return nil
	})
}

// Pods reach a node's own addresses through its management port: the route
// follows the node's InternalIP and goes with the node.
func TestHostRoutesFollowNodeAddresses(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.setNodeIP("n1", "172.30.0.11")
	e.start()
	mgmt := topology.ManagementIP(e.nodeSubnets("n1")[0]).String()
	e.waitHostRoutes("172.30.0.11/32 via " + mgmt)

	e.setNodeIP("n1", "172.30.0.21")
	e.waitHostRoutes("172.30.0.21/32 via " + mgmt)

	e.replaceNB() // the NB lost everything
	e.waitHostRoutes("172.30.0.21/32 via " + mgmt)

	e.deleteNode("n1")
	e.waitHostRoutes()
}

// A NodePort answers on every node's address for pods: its switch load
// balancer, in the group every node switch carries, follows the nodes.
func TestNodePortsOnEveryNodeAddress(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.setNodeIP("n1", "172.30.0.11")
	e.start()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, ClusterIP: "10.96.0.20", ClusterIPs: []string{"10.96.0.20"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, NodePort: 30080}}}}
	if _, err := e.kube.CoreV1().Services("ns").Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.createSlice("ns", "web-x", "web", "10.244.0.5")
	e.waitVIPs("Service_ns/web_TCP_node_switch", map[string]string{"172.30.0.11:30080": "10.244.0.5:8080"})

	e.createNode("n2")
	e.setNodeIP("n2", "172.30.0.12")
	e.waitVIPs("Service_ns/web_TCP_node_switch", map[string]string{"172.30.0.11:30080": "10.244.0.5:8080", "172.30.0.12:30080": "10.244.0.5:8080"})
	harness.Eventually(t, 10*time.Second, "switch n2 carries the switch LB group", func() error {
		group := &nbdb.LoadBalancerGroup{Name: topology.ClusterSwitchLBGroup}
		if err := e.nb.Get(ctx, group); err != nil {
			return err
		}
		var sws []nbdb.LogicalSwitch
		_ = e.nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == "n2" }).List(ctx, &sws)
		if len(sws) != 1 {
			return fmt.Errorf("%d switches named n2", len(sws))
		}
		if sw := sws[0]; !slices.Contains(sw.LoadBalancerGroup, group.UUID) || len(group.LoadBalancer) != 1 {
			return fmt.Errorf("switch groups %v, group %s has %v", sw.LoadBalancerGroup, group.UUID, group.LoadBalancer)
		}
		return nil
	})

	e.deleteNode("n2")
	e.waitVIPs("Service_ns/web_TCP_node_switch", map[string]string{"172.30.0.11:30080": "10.244.0.5:8080"})

	e.replaceNB() // the NB lost everything
	e.waitVIPs("Service_ns/web_TCP_node_switch", map[string]string{"172.30.0.11:30080": "10.244.0.5:8080"})
}

// warningEvents lists the reasons and messages of Warning Events about an object.
func (e *env) warningEvents(kind, name, reason string) []string {
	evs, err := e.kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && ev.Reason == reason {
			out = append(out, ev.Message)
		}
	}
	return out
}

// Two Nodes reporting one InternalIP: the route to it goes to the older
// node (then the first by name) and stays there across restarts (an idle
// restart writes nothing), both Nodes get a Warning Event, and the other
// node takes the address when the first one goes.
func TestDuplicateNodeAddressPickedDeterministically(t *testing.T) {
	e := newEnv(t)
	e.createNode("n2")
	e.createNode("n1")
	e.setNodeIP("n1", "172.30.0.11")
	e.setNodeIP("n2", "172.30.0.11")
	e.start()
	mgmt1 := topology.ManagementIP(e.nodeSubnets("n1")[0]).String()
	mgmt2 := topology.ManagementIP(e.nodeSubnets("n2")[0]).String()
	e.waitHostRoutes("172.30.0.11/32 via " + mgmt1)
	for _, n := range []string{"n1", "n2"} {
		harness.Eventually(t, 10*time.Second, "a DuplicateNodeAddress Warning on "+n, func() error {
			if evs := e.warningEvents("Node", n, "DuplicateNodeAddress"); len(evs) != 1 {
				return fmt.Errorf("events %v, want one", evs)
			}
			return nil
		})
	}
	for i := 0; i < 3; i++ {
		if n := e.restartIdle(); n != 0 {
			t.Fatalf("idle restart %d sent %d transactions; want 0 (routes %v)", i, n, e.hostRoutes())
		}
	}
	e.waitHostRoutes("172.30.0.11/32 via " + mgmt1)

	e.deleteNode("n1")
	e.waitHostRoutes("172.30.0.11/32 via " + mgmt2)
}

// Issue 31 item 8: every node switch carries an ACL dropping what its pods
// send to the databases' endpoints, above every tier; an idle restart
// writes nothing, and a master told of no endpoints removes the guard.
func TestNodeSwitchesGuardTheDatabases(t *testing.T) {
	e := newEnv(t)
	e.cfg.GuardedDBs = []netip.AddrPort{netip.MustParseAddrPort("172.18.0.10:6641"), netip.MustParseAddrPort("172.18.0.10:6642")}
	e.createNode("n1")
	e.createNode("n2")
	e.start()
	guard := func(node string) string {
		var acls []nbdb.ACL
		_ = e.nb.WhereCache(func(a *nbdb.ACL) bool {
			return a.ExternalIDs[topology.RowIDKey] == topology.DBGuardACLID && a.ExternalIDs[topology.OwnerNameKey] == node
		}).List(context.Background(), &acls)
		var out []string
		for _, a := range acls {
			out = append(out, fmt.Sprintf("%s %d %s %s", a.Direction, a.Priority, a.Action, a.Match))
		}
		return strings.Join(out, "; ")
	}
	want := fmt.Sprintf("from-lport %d drop (ip4.dst == 172.18.0.10 && tcp.dst == 6641) || (ip4.dst == 172.18.0.10 && tcp.dst == 6642)", topology.ACLPriorityDBGuard)
	for _, n := range []string{"n1", "n2"} {
		harness.Eventually(t, 10*time.Second, "the database guard on "+n, func() error {
			if got := guard(n); got != want {
				return fmt.Errorf("guard %q", got)
			}
			return nil
		})
	}
	if n := e.restartIdle(); n != 0 {
		t.Fatalf("idle restart sent %d transactions; want 0", n)
	}
	e.stop()
	e.cfg.GuardedDBs = nil
	e.start()
	e.waitGone("the database guard", func() bool { return guard("n1") != "" || guard("n2") != "" })
}

// A node's sync costs the same among 100 nodes as among 1,000: it reads its
// own routes and policies through the owner index, not the cluster router's
// thousands (make bench-scale found the pass over them: O(nodes) per node).
func BenchmarkEnsureNodeAmong(b *testing.B) {
	for _, nodes := range []int{100, 1000} {
		b.Run(fmt.Sprintf("nodes=%d", nodes), func(b *testing.B) {
			ctx := context.Background()
			nb := ovndbtest.Connect(b, ovndbtest.NewServer(b))
			commit := func(ctx context.Context, ops []ovsdb.Operation) error {
				if len(ops) == 0 {
					return nil
				}
				res, err := nb.Transact(ctx, ops...)
				if err == nil {
					_, err = ovsdb.CheckOperationResults(res, ops)
				}
				return err
			}
			if err := EnsureCluster(ctx, nb, commit, []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}); err != nil {
				b.Fatal(err)
			}
			ensure := func(i int) error {
				subnet := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(128 + i/256), byte(i % 256), 0}), 24)
				host := netip.AddrFrom4([4]byte{172, 30, byte(i / 256), byte(i % 256)})
				return EnsureNode(ctx, nb, commit, fmt.Sprintf("n%d", i), []netip.Prefix{subnet}, nil, []netip.Addr{host}, false, nil, nil)
			}
			for i := 0; i < nodes; i++ {
				if err := ensure(i); err != nil {
					b.Fatal(err)
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ { // an idle re-sync of one node: its rows read, nothing written
				if err := ensure(i % nodes); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
