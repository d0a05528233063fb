package nbdiff

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/master"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

// cluster is a fake API server's objects and an in-memory NB.
type cluster struct {
	t    *testing.T
	kube *fake.Clientset
	sock string
	cfg  config.Master
}

func newCluster(t *testing.T) *cluster {
	cs, err := config.ParseClusterSubnets([]string{"10.244.0.0/16/24"})
	if err != nil {
		t.Fatal(err)
	}
	proto := corev1.ProtocolTCP
	port := int32(8080)
	ready := true
	node := "n1"
	objs := []any{
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node, UID: "uid-n1"}},
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web", Labels: map[string]string{"app": "web"}},
			Spec: corev1.PodSpec{NodeName: node}, Status: corev1.PodStatus{Phase: corev1.PodRunning}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, ClusterIP: "10.96.0.10", ClusterIPs: []string{"10.96.0.10"},
				Ports: []corev1.ServicePort{{Protocol: proto, Port: 80, TargetPort: intstr.FromInt32(port)}}}},
		&discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
			AddressType: discovery.AddressTypeIPv4, Ports: []discovery.EndpointPort{{Protocol: &proto, Port: &port}},
			Endpoints: []discovery.Endpoint{{Addresses: []string{"10.244.0.5"}, Conditions: discovery.EndpointConditions{Ready: &ready}, NodeName: &node}}},
	}
	kube := fake.NewSimpleClientset()
	for _, o := range objs {
		var err error
		switch o := o.(type) {
		case *corev1.Node:
			_, err = kube.CoreV1().Nodes().Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.Namespace:
			_, err = kube.CoreV1().Namespaces().Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.Pod:
			_, err = kube.CoreV1().Pods(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *corev1.Service:
			_, err = kube.CoreV1().Services(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		case *discovery.EndpointSlice:
			_, err = kube.DiscoveryV1().EndpointSlices(o.Namespace).Create(context.Background(), o, metav1.CreateOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	return &cluster{t: t, kube: kube, sock: ovndbtest.NewServer(t), cfg: config.Master{ClusterSubnets: cs,
		ServiceCIDRs: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/16")}, JoinSubnets: []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")},
		RetryMaxDelay: 500 * time.Millisecond}}
}

// runMaster runs a master on the NB until it has converged.
func (c *cluster) runMaster() {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := c.cfg
	cfg.NBAddress = []string{"unix:" + c.sock}
	factory := master.NewInformers(c.kube)
	factory.Start(ctx.Done())
	nb, err := ovndb.ConnectNB(ctx, cfg.NBAddress, logr.Discard())
	if err != nil {
		c.t.Fatal(err)
	}
	defer nb.Close()
	if _, err := converge(ctx, Options{Master: cfg, Kube: c.kube, Quiet: 300 * time.Millisecond, Log: logr.Discard()}, factory, nb, nil); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) diff() Result {
	c.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cfg := c.cfg
	cfg.NBAddress = []string{"unix:" + c.sock}
	// Each pass makes its own custom resources' APIs: their informers run
	// once, and a second pass on the first one's would read stale objects.
	made := 0
	apis := func() master.APIs { made++; return master.APIs{} }
	r, err := Diff(ctx, Options{Master: cfg, Kube: c.kube, APIs: apis, Quiet: 300 * time.Millisecond, Log: logr.Discard()})
	if err != nil {
		c.t.Fatal(err)
	}
	// One master on the NB, and one more on the copy when that one wanted
	// to write.
	if want := map[bool]int{false: 1, true: 2}[r.OnCopy]; made != want {
		c.t.Errorf("one pass made the custom resources' APIs %d times, want %d (on a copy: %v)", made, want, r.OnCopy)
	}
	if _, copied := r.Phases["copy"]; copied != r.OnCopy {
		c.t.Errorf("phases %v with OnCopy %v", r.Phases, r.OnCopy)
	}
	return r
}

func (c *cluster) nb() libovsdbclient.Client { return ovndbtest.ConnectObserver(c.t, c.sock) }

func summary(rows []ovndb.RowDiff) string {
	var out []string
	for _, r := range rows {
		s := r.Kind + " " + r.Table + " " + r.Row
		for _, col := range r.Columns {
			s += fmt.Sprintf("; %s: %s → %s", col.Column, col.Have, col.Want)
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n")
}

// A converged NB has no difference; each fault the master repairs is
// reported as exactly what it is: a port deleted by hand (missing, and its
// switch's ports), a balancer's VIPs edited (differs), a stale balancer of
// a deleted service (stale); none once a master has repaired them; every
// row after the NB was wiped. The NB is never written by the diff.
func TestDiffReportsWhatTheMasterWouldRepair(t *testing.T) {
	c := newCluster(t)
	c.runMaster()
	if r := c.diff(); len(r.Rows) != 0 || r.OnCopy {
		t.Fatalf("converged NB, differences (on a copy: %v):\n%s", r.OnCopy, summary(r.Rows))
	}

	nb := c.nb()
	ctx := context.Background()
	var lsps []nbdb.LogicalSwitchPort
	if err := nb.WhereCache(func(p *nbdb.LogicalSwitchPort) bool { return p.Name == "default_web" }).List(ctx, &lsps); err != nil || len(lsps) != 1 {
		t.Fatalf("pod port: %v %v", lsps, err)
	}
	var sws []nbdb.LogicalSwitch
	_ = nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == "n1" }).List(ctx, &sws)
	var lbs []nbdb.LoadBalancer
	_ = nb.WhereCache(func(lb *nbdb.LoadBalancer) bool { return strings.HasPrefix(lb.Name, "Service_default/web_TCP") }).List(ctx, &lbs)
	if len(sws) != 1 || len(lbs) != 1 {
		t.Fatalf("switch %v, balancer %v", sws, lbs)
	}
	lb := lbs[0]
	var ops []ovsdb.Operation
	add := func(o []ovsdb.Operation, err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, o...)
	}
	add((nb.Where(&sws[0]).Mutate(&sws[0], model.Mutation{Field: &sws[0].Ports, Mutator: "delete", Value: []string{lsps[0].UUID}})))
	add((nb.Where(&lsps[0]).Delete()))
	edited := lb
	edited.Vips = map[string]string{"10.96.0.10:80": "10.244.0.99:8080"}
	add((nb.Where(&edited).Update(&edited, &edited.Vips)))
	stale := nbdb.LoadBalancer{UUID: "stale", Name: "Service_default/gone_TCP_cluster", Protocol: lb.Protocol, Vips: map[string]string{"10.96.0.11:80": ""},
		Options: lb.Options, ExternalIDs: map[string]string{}}
	for k, v := range lb.ExternalIDs {
		stale.ExternalIDs[k] = strings.ReplaceAll(v, "default/web", "default/gone")
	}
	add((nb.Create(&stale)))
	var groups []nbdb.LoadBalancerGroup
	_ = nb.WhereCache(func(g *nbdb.LoadBalancerGroup) bool { return true }).List(ctx, &groups)
	for _, g := range groups {
		for _, u := range g.LoadBalancer {
			if u == lb.UUID {
				add((nb.Where(&g).Mutate(&g, model.Mutation{Field: &g.LoadBalancer, Mutator: "insert", Value: []string{"stale"}})))
			}
		}
	}
	if err := ovndb.Transact(ctx, nb, ops); err != nil {
		t.Fatal(err)
	}
	before := ovndb.TakeSnapshot(c.nb())

	faulty := c.diff()
	got := summary(faulty.Rows)
	t.Logf("after the faults:\n%s", got)
	if !faulty.OnCopy {
		t.Errorf("the master on the NB settled without a write to repair the faults: phases %v", faulty.Phases)
	}
	for _, want := range []string{
		"missing Logical_Switch_Port default_web",
		"differs Logical_Switch n1; ports: ",
		"differs Load_Balancer Service_default/web_TCP_cluster; vips: {10.96.0.10:80=10.244.0.99:8080} → {10.96.0.10:80=10.244.0.5:8080}",
		"stale Load_Balancer Service_default/gone_TCP_cluster",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diff lacks %q:\n%s", want, got)
		}
	}
	if n := strings.Count(got, "\n") + 1; n != 5 {
		t.Errorf("%d differences, want 5 (the four above and the group that holds the stale balancer):\n%s", n, got)
	}
	if after := ovndb.TakeSnapshot(c.nb()); len(ovndb.Compare(before, after)) != 0 {
		t.Errorf("the diff wrote to the NB:\n%s", summary(ovndb.Compare(before, after)))
	}

	c.runMaster()
	if r := c.diff(); len(r.Rows) != 0 {
		t.Errorf("after the master's repair, differences:\n%s", summary(r.Rows))
	}

	// The NB wiped: every row is missing.
	full := ovndb.TakeSnapshot(c.nb())
	c.sock = ovndbtest.NewServer(t)
	empty := ovndb.TakeSnapshot(c.nb())
	r := c.diff()
	missing := 0
	for _, d := range r.Rows {
		if d.Kind == ovndb.RowMissing {
			missing++
		}
	}
	if missing != full.Rows()-empty.Rows() || missing == 0 {
		t.Errorf("wiped NB: %d rows missing, want %d (%d converged, %d in the empty NB):\n%s", missing, full.Rows()-empty.Rows(), full.Rows(), empty.Rows(), summary(r.Rows))
	}
}

// The master's NB client in the diff's first pass sends selects and
// refuses anything else, which it does not send.
func TestReadOnlyNBRefusesWrites(t *testing.T) {
	sock := ovndbtest.NewServer(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nb, err := ovndb.ConnectNB(ctx, []string{"unix:" + sock}, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	ro := &readOnlyNB{Client: nb, refused: make(chan struct{})}
	if _, err := ro.Transact(ctx, ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbdb.LogicalSwitchTable, Where: []ovsdb.Condition{}}); err != nil {
		t.Fatalf("a select: %v", err)
	}
	select {
	case <-ro.refused:
		t.Fatal("a select counted as a write")
	default:
	}
	before := ovndb.TakeSnapshot(ovndbtest.ConnectObserver(t, sock))
	sw := &nbdb.LogicalSwitch{UUID: "new", Name: "intruder"}
	ops, err := nb.Create(sw)
	if err != nil {
		t.Fatal(err)
	}
	read := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbdb.LogicalSwitchTable, Where: []ovsdb.Condition{}}
	if _, err := ro.Transact(ctx, append([]ovsdb.Operation{read}, ops...)...); !errors.Is(err, errWouldWrite) {
		t.Fatalf("an insert after a select: %v, want errWouldWrite", err)
	}
	select {
	case <-ro.refused:
	default:
		t.Fatal("the refused write was not signalled")
	}
	if _, err := ro.Transact(ctx, ops...); !errors.Is(err, errWouldWrite) {
		t.Fatalf("a second write: %v, want errWouldWrite", err)
	}
	if after := ovndb.TakeSnapshot(ovndbtest.ConnectObserver(t, sock)); len(ovndb.Compare(before, after)) != 0 {
		t.Errorf("the refused write reached the NB:\n%s", summary(ovndb.Compare(before, after)))
	}
}
