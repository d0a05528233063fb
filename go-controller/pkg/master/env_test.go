package master

import (
	"context"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/testr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// env is a master over the fake clientset and libovsdb's in-memory NB,
// reached through a fault-injecting proxy.
type env struct {
	t      *testing.T
	kube   *fake.Clientset
	proxy  *ovndbtest.Proxy
	nb     libovsdbclient.Client // the test's own view, through the proxy too
	cfg    config.Master
	apis   APIs // the custom resources the master follows
	m      *Master
	cancel context.CancelFunc
	done   chan struct{}
	// checked: the end-of-test invariant has run.
	checked bool
}

func newEnv(t *testing.T, objs ...any) *env {
	t.Helper()
	cs, err := config.ParseClusterSubnets([]string{"10.244.0.0/16/24"})
	if err != nil {
		t.Fatal(err)
	}
	e := &env{t: t, kube: fake.NewSimpleClientset(), proxy: ovndbtest.NewProxy(t, ovndbtest.NewServer(t))}
	e.cfg = config.Master{ClusterSubnets: cs, ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")},
		JoinSubnets: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}, RetryMaxDelay: 500 * time.Millisecond}
	e.nb = ovndbtest.ConnectObserver(t, e.proxy.Sock) // every column, those the master leaves out included
	t.Cleanup(e.stop)
	t.Cleanup(e.checkReferences) // runs first, while the master still runs
	return e
}

// replaceNB switches the proxy to a new, empty NB (the database lost
// everything); the invariant is then checked before that NB stops.
func (e *env) replaceNB() {
	e.proxy.SwitchTo(ovndbtest.NewServer(e.t))
	e.t.Cleanup(e.checkReferences)
}

// checkReferences is the invariant every test ends on: no ACL names an
// address set or port group that does not exist (OVN would ignore it).
// It runs once, before the newest NB stops.
func (e *env) checkReferences() {
	if e.t.Failed() || e.checked {
		return
	}
	e.checked = true
	harness.Eventually(e.t, 10*time.Second, "every ACL's sets and groups exist", func() error {
		// A fresh cache of the NB as it is now (the test's own client may be
		// between two databases).
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		nb, err := ovndb.ConnectNBFull(ctx, []string{"unix:" + e.proxy.Sock}, logr.Discard())
		if err != nil {
			return err
		}
		defer nb.Close()
		if d := ovndbtest.DanglingReferences(nb); len(d) > 0 {
			return fmt.Errorf("%s", strings.Join(d, "; "))
		}
		return nil
	})
}

// start runs a master (a new process, as after a restart) and waits for its first sync.
func (e *env) start() {
	e.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	nb := ovndbtest.Connect(e.t, e.proxy.Sock)
	e.m = New(e.cfg, e.kube, nb, NewInformers(e.kube), e.apis, testr.NewWithOptions(e.t, testr.Options{Verbosity: 0}))
	e.cancel, e.done = cancel, make(chan struct{})
	go func() { defer close(e.done); _ = e.m.Run(ctx) }()
	select {
	case <-e.m.Synced():
	case <-time.After(20 * time.Second):
		e.t.Fatal("master did not finish its first sync")
	}
}

// restartIdle restarts the master, waits until its node and policy queues
// are idle, and returns how many NB transactions the new master sent.
func (e *env) restartIdle() uint64 {
	e.t.Helper()
	e.stop()
	e.start()
	harness.Eventually(e.t, 5*time.Second, "restarted master idle", func() error {
		if !e.m.nodeQueue.Idle() || !e.m.policies.Idle() {
			return fmt.Errorf("node or policy queue busy")
		}
		return nil
	})
	return e.m.Committer().Transactions()
}

func (e *env) stop() {
	if e.cancel != nil {
		e.cancel()
		<-e.done
		e.cancel = nil
	}
}

func (e *env) createNode(name string) {
	e.t.Helper()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name + fmt.Sprint(time.Now().UnixNano()))}}
	if _, err := e.kube.CoreV1().Nodes().Create(context.Background(), n, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deleteNode(name string) {
	e.t.Helper()
	if err := e.kube.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createPod(ns, name, node string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	e.t.Helper()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(fmt.Sprintf("uid-%s-%d", name, time.Now().UnixNano()))},
		Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodPending}}
	for _, f := range mutate {
		f(p)
	}
	p, err := e.kube.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	return p
}

func (e *env) deletePod(ns, name string) {
	e.t.Helper()
	if err := e.kube.CoreV1().Pods(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// podNetwork waits for the pod's annotation written for its current UID.
func (e *env) podNetwork(ns, name string) annotations.PodNetwork {
	e.t.Helper()
	var pn annotations.PodNetwork
	harness.Eventually(e.t, 10*time.Second, "pod "+ns+"/"+name+" annotated for its UID", func() error {
		p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		v, ok := p.Annotations[annotations.PodNetworks]
		if !ok {
			return fmt.Errorf("no annotation")
		}
		if pn, err = annotations.ParsePodNetworks(v); err != nil {
			return err
		}
		if !pn.WrittenFor(string(p.UID)) {
			return fmt.Errorf("annotation %s not written for UID %s", v, p.UID)
		}
		return nil
	})
	return pn
}

func (e *env) nodeSubnets(name string) []netip.Prefix {
	e.t.Helper()
	var subnets []netip.Prefix
	harness.Eventually(e.t, 10*time.Second, "node "+name+" annotated", func() error {
		n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		subnets, err = annotations.ParseNodeSubnets(n.Annotations[annotations.NodeSubnets])
		return err
	})
	return subnets
}

// lsp waits for a port and returns it.
func (e *env) lsp(name string, check func(*nbdb.LogicalSwitchPort) error) *nbdb.LogicalSwitchPort {
	e.t.Helper()
	var lsp *nbdb.LogicalSwitchPort
	harness.Eventually(e.t, 15*time.Second, "port "+name, func() error {
		lsp = &nbdb.LogicalSwitchPort{Name: name}
		if err := e.nb.Get(context.Background(), lsp); err != nil {
			return err
		}
		if check != nil {
			return check(lsp)
		}
		return nil
	})
	return lsp
}

func (e *env) createService(ns, name, clusterIP string, endpoints ...string) {
	e.t.Helper()
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: clusterIP, ClusterIPs: []string{clusterIP},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := e.kube.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
	e.createSlice(ns, name+"-x", name, endpoints...)
}

func (e *env) createSlice(ns, name, service string, endpoints ...string) {
	e.t.Helper()
	port, proto, pname := int32(8080), corev1.ProtocolTCP, "http"
	ready := true
	s := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{discovery.LabelServiceName: service}},
		AddressType: discovery.AddressTypeIPv4, Ports: []discovery.EndpointPort{{Name: &pname, Protocol: &proto, Port: &port}}}
	for _, ip := range endpoints {
		s.Endpoints = append(s.Endpoints, discovery.Endpoint{Addresses: []string{ip}, Conditions: discovery.EndpointConditions{Ready: &ready}})
	}
	if _, err := e.kube.DiscoveryV1().EndpointSlices(ns).Create(context.Background(), s, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// vips waits until the named load balancer exists once with these VIPs.
func (e *env) waitVIPs(name string, want map[string]string) {
	e.t.Helper()
	harness.Eventually(e.t, 15*time.Second, "load balancer "+name, func() error {
		var lbs []nbdb.LoadBalancer
		_ = e.nb.WhereCache(func(l *nbdb.LoadBalancer) bool { return l.Name == name }).List(context.Background(), &lbs)
		if len(lbs) != 1 {
			return fmt.Errorf("%d rows named %s", len(lbs), name)
		}
		if fmt.Sprint(lbs[0].Vips) != fmt.Sprint(want) {
			return fmt.Errorf("vips %v, want %v", lbs[0].Vips, want)
		}
		return nil
	})
}
