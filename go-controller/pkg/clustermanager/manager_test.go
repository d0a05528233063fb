package clustermanager

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/icnbdb"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

var dualStack = []config.ClusterSubnet{
	{CIDR: netip.MustParsePrefix("10.244.0.0/16"), HostSubnetLength: 24},
	{CIDR: netip.MustParsePrefix("fd00:10:244::/48"), HostSubnetLength: 64},
}

func node(name, subnets string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name)}}
	if subnets != "" {
		n.Annotations = map[string]string{annotations.NodeSubnets: subnets}
	}
	return n
}

// run starts a manager on kube (and ic, if any) and stops it at the test's end.
func run(t *testing.T, kube kubernetes.Interface, ic libovsdbclient.Client) *Manager {
	t.Helper()
	m, stop := start(t, kube, ic, EgressIPs{})
	t.Cleanup(stop)
	return m
}

// start starts a manager; stop ends it and waits for it.
func start(t *testing.T, kube kubernetes.Interface, ic libovsdbclient.Client, eips EgressIPs) (m *Manager, stop func()) {
	return startWith(t, kube, ic, eips, DNSOptions{})
}

// startWith is start relaying the cluster DNS's answers as dns says.
func startWith(t *testing.T, kube kubernetes.Interface, ic libovsdbclient.Client, eips EgressIPs, dns DNSOptions) (m *Manager, stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	factory := informers.NewSharedInformerFactory(kube, 0)
	m = New(dualStack, kube, factory, ic, eips, logr.Discard())
	m.RelayDNS(dns)
	factory.Start(ctx.Done())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx, 2) }()
	return m, func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}
}

// eventually polls cond until it holds (5 s), failing with its last error.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	var last error
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if last = cond(); last == nil {
			return
		}
	}
	t.Fatalf("%s: %v", what, last)
}

func annotated(kube kubernetes.Interface, name, want string) func() error {
	return func() error {
		n, err := kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if got := n.Annotations[annotations.NodeSubnets]; got != want {
			return fmt.Errorf("node %s annotated %q, want %q", name, got, want)
		}
		return nil
	}
}

func TestHostSubnetsKeptAllocatedAndFreed(t *testing.T) {
	// b and c claim one subnet: b (first by name) keeps it, c is moved; a
	// IPv4-only annotation on a dual-stack cluster is replaced.
	kube := fake.NewSimpleClientset(
		node("b", `{"default":["10.244.0.0/24","fd00:10:244::/64"]}`),
		node("c", `{"default":["10.244.0.0/24","fd00:10:244::/64"]}`),
		node("d", `{"default":"10.244.5.0/24"}`),
		node("a", ""),
	)
	m := run(t, kube, nil)
	eventually(t, "b keeps its subnets", annotated(kube, "b", `{"default":["10.244.0.0/24","fd00:10:244::/64"]}`))
	for _, n := range []string{"a", "c", "d"} {
		eventually(t, n+" gets subnets", func() error {
			if s := m.Held(n); len(s) != 2 || s[0].String() == "10.244.0.0/24" {
				return fmt.Errorf("holds %v", s)
			}
			return annotated(kube, n, annotations.FormatNodeSubnets(m.Held(n)))()
		})
	}
	seen := map[string]string{}
	for _, n := range []string{"a", "b", "c", "d"} {
		for _, s := range m.Held(n) {
			if other, dup := seen[s.String()]; dup {
				t.Fatalf("%s given to %s and %s", s, other, n)
			}
			seen[s.String()] = n
		}
	}

	// A user rewriting the annotation is undone.
	held := annotations.FormatNodeSubnets(m.Held("a"))
	patch := annotations.MergePatch("uid-a", annotations.NodeSubnets, `{"default":["10.244.0.0/24","fd00:10:244::/64"]}`)
	if _, err := kube.CoreV1().Nodes().Patch(context.Background(), "a", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "a's annotation restored", annotated(kube, "a", held))

	// A deleted node's subnets are free again: a node annotated with them keeps them.
	freed := m.Held("d")
	if err := kube.CoreV1().Nodes().Delete(context.Background(), "d", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "d's subnets freed", func() error {
		if s := m.Held("d"); s != nil {
			return fmt.Errorf("d still holds %v", s)
		}
		return nil
	})
	if _, err := kube.CoreV1().Nodes().Create(context.Background(), node("e", annotations.FormatNodeSubnets(freed)), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "e keeps d's freed subnets", func() error {
		if got := annotations.FormatNodeSubnets(m.Held("e")); got != annotations.FormatNodeSubnets(freed) {
			return fmt.Errorf("e holds %s", got)
		}
		return nil
	})
}

func TestRestartKeepsEveryAnnotation(t *testing.T) {
	kube := fake.NewSimpleClientset(node("a", ""), node("b", ""))
	m, stop := start(t, kube, nil, EgressIPs{})
	eventually(t, "both annotated", func() error {
		for _, n := range []string{"a", "b"} {
			if m.Held(n) == nil {
				return fmt.Errorf("%s holds nothing", n)
			}
			if err := annotated(kube, n, annotations.FormatNodeSubnets(m.Held(n)))(); err != nil {
				return err
			}
		}
		return nil
	})
	stop()
	before := len(kube.Actions())
	m2 := run(t, kube, nil)
	eventually(t, "restarted manager settled", func() error {
		if !m2.Idle() || m2.Held("a") == nil || m2.Held("b") == nil {
			return fmt.Errorf("not settled")
		}
		return nil
	})
	for _, a := range kube.Actions()[before:] {
		if a.GetVerb() == "patch" {
			t.Fatalf("a restart patched a node: %v", a)
		}
	}
}

// serveIC serves an in-memory interconnection NB and connects to it.
func serveIC(t *testing.T) libovsdbclient.Client {
	t.Helper()
	return connectIC(t, serveICSocket(t))
}

// serveICSocket serves an empty in-memory IC NB on a new socket.
func serveICSocket(t *testing.T) string {
	t.Helper()
	clientModel, err := ICModel()
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(t.TempDir(), "ic-nb.sock")
	db, err := ovndb.ServeInMemory(icnbdb.Schema(), clientModel, sock, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(db.Close)
	return sock
}

// connectIC is the cluster manager's IC NB client on sock.
func connectIC(t *testing.T, sock string) libovsdbclient.Client {
	t.Helper()
	clientModel, err := ICModel()
	if err != nil {
		t.Fatal(err)
	}
	ic, err := ovndb.Connect(context.Background(), []string{"unix:" + sock}, clientModel, nil, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ic.Close)
	return ic
}

func TestTransitSwitchKept(t *testing.T) {
	ctx := context.Background()
	ic := serveIC(t)
	run(t, fake.NewSimpleClientset(), ic)
	ts := &icnbdb.TransitSwitch{Name: topology.TransitSwitch}
	eventually(t, "transit switch created", func() error { return ic.Get(ctx, ts) })
	if !topology.OwnedBy(ts.ExternalIDs, transitOwner) {
		t.Fatalf("transit switch external_ids %v: not ours", ts.ExternalIDs)
	}
	// Deleted (a wiped IC NB, a hand): made again.
	ops, err := ic.Where(ts).Delete()
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(ctx, ic, ops); err != nil {
		t.Fatal(err)
	}
	eventually(t, "transit switch made again", func() error {
		again := &icnbdb.TransitSwitch{Name: topology.TransitSwitch}
		if err := ic.Get(ctx, again); err != nil {
			return err
		}
		if again.UUID == ts.UUID {
			return fmt.Errorf("the deleted row is still cached")
		}
		return nil
	})
}

func TestEnsureTransitSwitchAdoptsOneMadeByHand(t *testing.T) {
	ctx := context.Background()
	ic := serveIC(t)
	hand := &icnbdb.TransitSwitch{Name: topology.TransitSwitch, ExternalIDs: map[string]string{"made-by": "ovn-ic-nbctl"},
		OtherConfig: map[string]string{"requested-tnl-key": "7"}}
	ops, err := ic.Create(hand)
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(ctx, ic, ops); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		if err := EnsureTransitSwitch(ctx, ic); err != nil {
			t.Fatal(err)
		}
	}
	var all []icnbdb.TransitSwitch
	if err := ic.List(ctx, &all); err != nil {
		t.Fatal(err)
	}
	if len(all) != 1 {
		t.Fatalf("%d transit switches, want the one made by hand", len(all))
	}
	got := all[0]
	if !topology.OwnedBy(got.ExternalIDs, transitOwner) || got.ExternalIDs["made-by"] != "ovn-ic-nbctl" || got.OtherConfig["requested-tnl-key"] != "7" {
		t.Fatalf("adopted switch %+v: want our owner ids beside its own keys", got)
	}
}

// The cluster manager assigns EgressIPs (their status) with no NB: the
// zones program them.
func TestEgressIPsAssigned(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{k8sovnv1.EgressIPResource: "EgressIPList"})
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	n := node("n1", `{"default":["10.244.0.0/24","fd00:10:244::/64"]}`)
	n.Labels = map[string]string{k8sovnv1.EgressAssignableLabel: ""}
	n.Annotations[annotations.NodeL3GatewayConfig] = annotations.FormatL3GatewayConfig(annotations.L3GatewayConfig{Mode: "shared",
		InterfaceID: "breth0_n1_localnet", MAC: mac, IPs: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/24")}, NextHops: []netip.Addr{netip.MustParseAddr("172.18.0.1")}})
	n.Annotations[annotations.NodeGatewayJoinIP] = annotations.FormatGatewayJoinIPs([]netip.Prefix{netip.MustParsePrefix("100.64.0.2/16")})
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	kube := fake.NewSimpleClientset(n)
	api := &egressip.API{Dynamic: dyn, Informer: k8sovnv1.NewEgressIPInformer(dyn, 0)}
	_, stop := start(t, kube, nil, EgressIPs{API: api, JoinSubnets: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}})
	t.Cleanup(stop)
	ctx := context.Background()
	obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "EgressIP",
		"metadata": map[string]any{"name": "e1"}, "spec": map[string]any{"egressIPs": []any{"172.18.0.100"}, "namespaceSelector": map[string]any{}}}}
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "e1 assigned to n1", func() error {
		o, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(ctx, "e1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		items, _, _ := unstructured.NestedSlice(o.Object, "status", "items")
		if len(items) != 1 || fmt.Sprint(items[0].(map[string]any)["node"]) != "n1" {
			return fmt.Errorf("status items %v", items)
		}
		return nil
	})
}

// The cluster manager is ready once it has restored the nodes' subnets,
// not while its interconnection NB is unreachable, and again once it is back.
func TestReadyFollowsStartAndTheICNB(t *testing.T) {
	sock := serveICSocket(t)
	proxy := ovndbtest.NewProxy(t, sock)
	ic := connectIC(t, proxy.Sock)
	kube := fake.NewSimpleClientset(node("n1", ""))
	if err := New(dualStack, kube, informers.NewSharedInformerFactory(kube, 0), ic, EgressIPs{}, logr.Discard()).Ready(); err == nil {
		t.Error("a manager not started is ready")
	}
	m := run(t, kube, ic)
	eventually(t, "ready", m.Ready)
	proxy.SwitchTo(filepath.Join(t.TempDir(), "gone.sock"))
	eventually(t, "not ready without the IC NB", func() error {
		if err := m.Ready(); err == nil || !strings.Contains(err.Error(), "interconnection NB") {
			return fmt.Errorf("Ready() = %v", err)
		}
		return nil
	})
	proxy.SwitchTo(sock)
	eventually(t, "ready again", m.Ready)
}
