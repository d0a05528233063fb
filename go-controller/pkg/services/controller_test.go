package services

import (
	"context"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// ctrlEnv is a services controller over the fake clientset and libovsdb's
// in-memory NB.
type ctrlEnv struct {
	t    *testing.T
	kube *fake.Clientset
	nb   libovsdbclient.Client // the test's own view
	c    *Controller
}

// newCtrlEnv starts a controller made by newCtrl
// once the load balancer groups the master creates exist.
func newCtrlEnv(t *testing.T, newCtrl func(informers.SharedInformerFactory, libovsdbclient.Client, CommitFunc, *fake.Clientset) *Controller) *ctrlEnv {
	t.Helper()
	sock := ovndbtest.NewServer(t)
	e := &ctrlEnv{t: t, kube: fake.NewSimpleClientset(), nb: ovndbtest.ConnectObserver(t, sock)}
	ctx, cancel := context.WithCancel(context.Background())
	for _, g := range []string{topology.ClusterLBGroup, topology.ClusterSwitchLBGroup} {
		ops, err := e.nb.Create(&nbdb.LoadBalancerGroup{Name: g})
		if err == nil {
			_, err = e.nb.Transact(ctx, ops...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	nb := ovndbtest.Connect(t, sock)
	committer := ovndb.NewCommitter(nb, testr.New(t))
	factory := informers.NewSharedInformerFactory(e.kube, 0)
	e.c = newCtrl(factory, nb, committer.Commit, e.kube)
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
	done := make(chan struct{}, 2)
	go func() { committer.Run(ctx); done <- struct{}{} }()
	go func() { e.c.Run(ctx, 2); done <- struct{}{} }()
	t.Cleanup(func() { cancel(); <-done; <-done; factory.Shutdown() })
	return e
}

func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (e *ctrlEnv) waitVIPs(name string, want map[string]string) {
	e.t.Helper()
	eventually(e.t, "load balancer "+name, func() error {
		lb := e.lb(name)
		if lb == nil {
			return fmt.Errorf("no load balancer")
		}
		if !reflect.DeepEqual(lb.Vips, want) {
			return fmt.Errorf("vips %v, want %v", lb.Vips, want)
		}
		return nil
	})
}

func (e *ctrlEnv) lb(name string) *nbdb.LoadBalancer {
	var found []nbdb.LoadBalancer
	_ = e.nb.WhereCache(func(lb *nbdb.LoadBalancer) bool { return lb.Name == name }).List(context.Background(), &found)
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}

func (e *ctrlEnv) create(objs ...any) {
	e.t.Helper()
	ctx := context.Background()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			_, err = e.kube.CoreV1().Nodes().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = e.kube.CoreV1().Services(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *discovery.EndpointSlice:
			_, err = e.kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			e.t.Fatal(err)
		}
	}
}

func nodeWithIP(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// A controller as `ovnkube master` builds it without --external-ip-cidrs
// programs no external IP: not a node's address (which would take over the
// node's ports from outside), not 8.8.8.8:53 (which would capture every
// pod's DNS), not even a harmless documentation address.
func TestControllerRefusesExternalIPsByDefault(t *testing.T) {
	e := newCtrlEnv(t, func(f informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, kube *fake.Clientset) *Controller {
		return New(f, nb, commit, testr.New(t), time.Second, Options{})
	})
	e.create(nodeWithIP("n1", "172.18.0.2"),
		service(func(s *corev1.Service) {
			s.Spec.Ports = []corev1.ServicePort{{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}
			s.Spec.ExternalIPs = []string{"172.18.0.2", "8.8.8.8", "192.0.2.10"}
		}),
		slice("a", discovery.AddressTypeIPv4, 5353, "dns", "UDP", ep{ip: "10.244.1.5"}))
	e.waitVIPs("Service_ns/web_UDP_cluster", map[string]string{"10.96.0.10:53": "10.244.1.5:5353"})
}

// With allowed ranges, an allowed address is programmed and a node's is
// refused with one Warning Event naming the address, the node and the way
// out; the refusal follows the node's addresses, and a resync repeats no
// Event.
func TestControllerExternalIPEventsAndNodeChanges(t *testing.T) {
	e := newCtrlEnv(t, func(f informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, kube *fake.Clientset) *Controller {
		return New(f, nb, commit, testr.New(t), time.Second, Options{
			Policy:   AddressPolicy{Allowed: []netip.Prefix{netip.MustParsePrefix("172.18.0.0/16")}, Reserved: testPolicy.Reserved},
			Recorder: newRecorder(kube),
		})
	})
	e.create(nodeWithIP("n1", "172.18.0.2"),
		service(func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"172.18.0.2", "172.18.0.50"} }),
		slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}))
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.1.5:8080", "172.18.0.50:80": "10.244.1.5:8080"})
	events := func() []corev1.Event {
		l, err := e.kube.CoreV1().Events("ns").List(context.Background(), metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	eventually(t, "a Warning Event on the service", func() error {
		evs := events()
		if len(evs) != 1 {
			return fmt.Errorf("%d events: %v", len(evs), evs)
		}
		ev := evs[0]
		if ev.Type != corev1.EventTypeWarning || ev.Reason != string(RefusedExternalIP) || ev.InvolvedObject.Kind != "Service" || ev.InvolvedObject.Name != "web" ||
			!strings.Contains(ev.Message, "external IP 172.18.0.2 is not programmed") || !strings.Contains(ev.Message, "node n1's address") ||
			!strings.Contains(ev.Message, "--external-ip-cidrs") {
			return fmt.Errorf("event %s %s %v: %s", ev.Type, ev.Reason, ev.InvolvedObject, ev.Message)
		}
		return nil
	})

	// A resync changes nothing and repeats no Event.
	e.c.Resync()
	time.Sleep(300 * time.Millisecond)
	eventually(t, "resync done", func() error {
		if !e.c.Idle() {
			return fmt.Errorf("busy")
		}
		return nil
	})
	if evs := events(); len(evs) != 1 || evs[0].Count > 1 {
		t.Fatalf("a resync repeated the Event: %v", evs)
	}

	// The node moves to the other address: the first becomes usable, the
	// second is refused.
	n, _ := e.kube.CoreV1().Nodes().Get(context.Background(), "n1", metav1.GetOptions{})
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, {Type: corev1.NodeExternalIP, Address: "172.18.0.50"}}
	if _, err := e.kube.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.1.5:8080", "172.18.0.2:80": "10.244.1.5:8080"})
	eventually(t, "an Event for the newly refused address", func() error {
		for _, ev := range events() {
			if strings.Contains(ev.Message, "external IP 172.18.0.50 is not programmed") {
				return nil
			}
		}
		return fmt.Errorf("none: %v", events())
	})
}

// newRecorder writes Events through kube, as the master's recorder does.
func newRecorder(kube kubernetes.Interface) record.EventRecorder {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	return b.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ovnkube-master"})
}

// internalTrafficPolicy Local on the NB: each node switch carries its own
// balancer of the ClusterIP (a switch created after the service gets its
// balancer too); switching the policy back to Cluster, or labelling the
// service for another proxy, removes every balancer of it.
func TestControllerInternalTrafficPolicyLocalOnNodeSwitches(t *testing.T) {
	e := newCtrlEnv(t, func(f informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, kube *fake.Clientset) *Controller {
		return New(f, nb, commit, testr.New(t), time.Second, Options{})
	})
	ctx := context.Background()
	addSwitch := func(node string) {
		ops, err := e.nb.Create(&nbdb.LogicalSwitch{Name: node, ExternalIDs: topology.Owner{Type: topology.OwnerNode, Name: node}.ExternalIDs()})
		if err == nil {
			_, err = e.nb.Transact(ctx, ops...)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	switchLBs := func(node string) []string {
		var ls []nbdb.LogicalSwitch
		_ = e.nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == node }).List(ctx, &ls)
		var names []string
		for _, s := range ls {
			for _, u := range s.LoadBalancer {
				lb := &nbdb.LoadBalancer{UUID: u}
				if e.nb.Get(ctx, lb) == nil {
					names = append(names, lb.Name)
				}
			}
		}
		return names
	}
	addSwitch("n1")
	e.create(nodeWithIP("n1", "172.18.0.3"), nodeWithIP("n2", "172.18.0.4"),
		service(func(s *corev1.Service) { s.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyLocal) }),
		onNode(slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}, ep{ip: "10.244.2.5"}), "n1", "n2"))
	e.waitVIPs("Service_ns/web_TCP_node_switch_n1", map[string]string{"10.96.0.10:80": "10.244.1.5:8080"})
	eventually(t, "n1's switch carries its balancer", func() error {
		if got := switchLBs("n1"); !reflect.DeepEqual(got, []string{"Service_ns/web_TCP_node_switch_n1"}) {
			return fmt.Errorf("n1's switch has %v", got)
		}
		return nil
	})
	if e.lb("Service_ns/web_TCP_cluster") != nil || e.lb("Service_ns/web_TCP_node_switch_n2") != nil {
		t.Fatalf("a cluster-wide balancer, or one for a node without a switch")
	}
	addSwitch("n2")
	e.waitVIPs("Service_ns/web_TCP_node_switch_n2", map[string]string{"10.96.0.10:80": "10.244.2.5:8080"})
	eventually(t, "n2's switch carries its balancer", func() error {
		if got := switchLBs("n2"); !reflect.DeepEqual(got, []string{"Service_ns/web_TCP_node_switch_n2"}) {
			return fmt.Errorf("n2's switch has %v", got)
		}
		return nil
	})

	svc, _ := e.kube.CoreV1().Services("ns").Get(ctx, "web", metav1.GetOptions{})
	svc.Spec.InternalTrafficPolicy = ptr(corev1.ServiceInternalTrafficPolicyCluster)
	if _, err := e.kube.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.1.5:8080,10.244.2.5:8080"})
	eventually(t, "the per-node balancers gone", func() error {
		if a, b := switchLBs("n1"), switchLBs("n2"); len(a)+len(b) > 0 || e.lb("Service_ns/web_TCP_node_switch_n1") != nil {
			return fmt.Errorf("switches still carry %v %v", a, b)
		}
		return nil
	})

	svc, _ = e.kube.CoreV1().Services("ns").Get(ctx, "web", metav1.GetOptions{})
	svc.Labels = map[string]string{ServiceProxyNameLabel: "another-proxy"}
	if _, err := e.kube.CoreV1().Services("ns").Update(ctx, svc, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "no balancer for a service of another proxy", func() error {
		if lbs := e.c.ownedLBs("ns/web"); len(lbs) > 0 {
			return fmt.Errorf("%d balancers left", len(lbs))
		}
		return nil
	})
}

// A service whose endpoint is a node's address, synced before that node
// had a subnet (so no management address to reach it at), is balanced
// cluster-wide; once the node has its subnet it is balanced per node
// switch, with no event of the service's own (found by ovnkube diff on a
// fresh install: the kubernetes Service).
func TestControllerHostBackedOnceItsNodeHasASubnet(t *testing.T) {
	e := newCtrlEnv(t, func(f informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, kube *fake.Clientset) *Controller {
		return New(f, nb, commit, testr.New(t), time.Second, Options{})
	})
	ctx := context.Background()
	ops, err := e.nb.Create(&nbdb.LogicalSwitch{Name: "n1", ExternalIDs: topology.Owner{Type: topology.OwnerNode, Name: "n1"}.ExternalIDs()})
	if err == nil {
		_, err = e.nb.Transact(ctx, ops...)
	}
	if err != nil {
		t.Fatal(err)
	}
	e.create(nodeWithIP("n1", "172.18.0.3"), service(),
		onNode(slice("a", discovery.AddressTypeIPv4, 6443, "http", "TCP", ep{ip: "172.18.0.3"}), "n1"))
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "172.18.0.3:6443"})
	n, err := e.kube.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Annotations = map[string]string{annotations.NodeSubnets: annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix("10.244.1.0/24")})}
	if _, err := e.kube.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitVIPs("Service_ns/web_TCP_node_switch_n1", map[string]string{"10.96.0.10:80": "10.244.1.2:6443"})
	eventually(t, "the cluster-wide balancer gone", func() error {
		if e.lb("Service_ns/web_TCP_cluster") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

// webInGroup starts a controller with the service ns/web of one endpoint
// and returns the env and its cluster balancer, once programmed.
func webInGroup(t *testing.T) (*ctrlEnv, *nbdb.LoadBalancer) {
	e := newCtrlEnv(t, func(f informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, kube *fake.Clientset) *Controller {
		return New(f, nb, commit, testr.New(t), time.Second, Options{})
	})
	e.create(service(func(*corev1.Service) {}), slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}))
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.1.5:8080"})
	return e, e.lb("Service_ns/web_TCP_cluster")
}

// A service's balancer taken out of the cluster group by another writer is
// put back when the service's balancer changes (inserted unasked), and,
// unchanged, at the next resync (which reads the members again).
func TestControllerPutsItsBalancerBackInTheGroup(t *testing.T) {
	e, lb := webInGroup(t)
	inGroup := func(want bool) func() error {
		return func() error {
			g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
			if err := e.nb.Get(context.Background(), g); err != nil {
				return err
			}
			if slices.Contains(g.LoadBalancer, lb.UUID) != want {
				return fmt.Errorf("group holds %v; want %s in it: %v", g.LoadBalancer, lb.UUID, want)
			}
			return nil
		}
	}
	eventually(t, "the balancer in the cluster group", inGroup(true))
	g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
	if err := e.nb.Get(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	ops, err := e.nb.Where(g).Mutate(g, model.Mutation{Field: &g.LoadBalancer, Mutator: ovsdb.MutateOperationDelete, Value: []string{lb.UUID}})
	if err == nil {
		_, err = e.nb.Transact(context.Background(), ops...)
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the balancer out of the group", inGroup(false))
	// The service syncs again when its endpoints change.
	_, err = e.kube.DiscoveryV1().EndpointSlices("ns").Update(context.Background(),
		slice("a", discovery.AddressTypeIPv4, 8080, "http", "TCP", ep{ip: "10.244.1.5"}, ep{ip: "10.244.1.6"}), metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	e.waitVIPs("Service_ns/web_TCP_cluster", map[string]string{"10.96.0.10:80": "10.244.1.5:8080,10.244.1.6:8080"})
	eventually(t, "the balancer back in the group", inGroup(true))
	// Removed again, the balancer unchanged and known a member (as after
	// any sync that asked): a resync puts it back.
	if !e.c.groups.has(context.Background(), e.c.nb, topology.ClusterLBGroup, lb.UUID) {
		t.Fatal("the group memo does not find the balancer a member")
	}
	if err := e.nb.Get(context.Background(), g); err != nil {
		t.Fatal(err)
	}
	ops, err = e.nb.Where(g).Mutate(g, model.Mutation{Field: &g.LoadBalancer, Mutator: ovsdb.MutateOperationDelete, Value: []string{lb.UUID}})
	if err == nil {
		_, err = e.nb.Transact(context.Background(), ops...)
	}
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the balancer out of the group again", inGroup(false))
	e.c.Resync()
	eventually(t, "the balancer back in the group after a resync", inGroup(true))
}

// A load balancer group deleted and created again (as the master repairs
// the cluster rows) holds no balancer: every service puts its own back.
func TestControllerFillsARecreatedGroup(t *testing.T) {
	e, lb := webInGroup(t)
	ctx := context.Background()
	g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
	if err := e.nb.Get(ctx, g); err != nil {
		t.Fatal(err)
	}
	del, err := e.nb.Where(g).Delete()
	if err != nil {
		t.Fatal(err)
	}
	add, err := e.nb.Create(&nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.Transact(ctx, append(del, add...)...); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the balancer in the re-created group", func() error {
		g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
		if err := e.nb.Get(ctx, g); err != nil {
			return err
		}
		if !slices.Contains(g.LoadBalancer, lb.UUID) {
			return fmt.Errorf("group %s holds %v; want %s", g.UUID, g.LoadBalancer, lb.UUID)
		}
		return nil
	})
}
