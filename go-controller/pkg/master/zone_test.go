package master

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// EnsureGlobal names the zone and writes its route exchange options beside
// the options others keep in NB_Global (northd's), changes only what
// differs, and writes nothing the second time.
func TestEnsureGlobalKeepsOthersOptions(t *testing.T) {
	ctx, nb, commit, ops := countingNB(t)
	join := []netip.Prefix{netip.MustParsePrefix("100.64.0.1/16"), netip.MustParsePrefix("fd98::/64")}
	global := func() nbdb.NBGlobal {
		t.Helper()
		var gs []nbdb.NBGlobal
		deadline := time.Now().Add(5 * time.Second)
		for {
			gs = nil
			if err := nb.List(ctx, &gs); err != nil || len(gs) != 1 {
				t.Fatalf("NB_Global: %v %v", gs, err)
			}
			if gs[0].Name != "" || time.Now().After(deadline) {
				return gs[0]
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	// No NB_Global yet: one is made.
	if err := EnsureGlobal(ctx, nb, commit, "az-1", topology.ZoneOptions(join)); err != nil {
		t.Fatal(err)
	}
	g := global()
	want := "ic-route-adv=true ic-route-blacklist=100.64.0.0/16,fd98::/64 ic-route-denylist=100.64.0.0/16,fd98::/64 ic-route-learn=true"
	if got := optionsString(g.Options); g.Name != "az-1" || got != want {
		t.Fatalf("NB_Global %q %s, want az-1 %s", g.Name, got, want)
	}
	// northd's options and a stale value of ours.
	g.Options["mac_prefix"] = "0a:00:00"
	g.Options["ic-route-learn"] = "false"
	if err := ovndb.Transact(ctx, nb, mustOps(t)(nb.Where(&g).Update(&g, &g.Options))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the options written", func() bool { return global().Options["mac_prefix"] != "" })
	*ops = 0
	if err := EnsureGlobal(ctx, nb, commit, "az-2", topology.ZoneOptions(join)); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the zone renamed", func() bool { return global().Name == "az-2" })
	if got := optionsString(global().Options); got != "ic-route-adv=true ic-route-blacklist=100.64.0.0/16,fd98::/64 ic-route-denylist=100.64.0.0/16,fd98::/64 ic-route-learn=true mac_prefix=0a:00:00" {
		t.Errorf("options after repair: %s", got)
	}
	if *ops != 3 { // the name, the stale key deleted and inserted again
		t.Errorf("repair took %d operations, want 3", *ops)
	}
	*ops = 0
	if err := EnsureGlobal(ctx, nb, commit, "az-2", topology.ZoneOptions(join)); err != nil || *ops != 0 {
		t.Errorf("again: %d operations, %v; want none", *ops, err)
	}
}

// A node's transit port waits for ovn-ic's transit switch (an error that
// says so), refuses a switch of that name that is not one, then makes the
// router port with its gateway, the switch port, and nothing more the
// second time even with ovn-ic's key among the port's options; a new
// chassis replaces the gateway.
func TestEnsureTransitPort(t *testing.T) {
	ctx, nb, commit, ops := countingNB(t)
	addrs := []netip.Prefix{netip.MustParsePrefix("100.88.0.5/16"), netip.MustParsePrefix("fd97::5/64")}
	if err := EnsureCluster(ctx, nb, commit, []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}); err != nil {
		t.Fatal(err)
	}
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-1", addrs); err == nil || !strings.Contains(err.Error(), "is ovn-ic running") {
		t.Fatalf("without a transit switch: %v", err)
	}
	impostor := &nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch}
	if err := ovndb.Transact(ctx, nb, mustOps(t)(nb.Create(impostor))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the switch cached", func() bool { return switchNamed(nb, topology.TransitSwitch) != nil })
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-1", addrs); err == nil || !strings.Contains(err.Error(), "not a transit switch") {
		t.Fatalf("a switch that is not a transit switch: %v", err)
	}
	ts := switchNamed(nb, topology.TransitSwitch)
	ts.OtherConfig = map[string]string{"interconn-ts": topology.TransitSwitch}
	if err := ovndb.Transact(ctx, nb, mustOps(t)(nb.Where(ts).Update(ts, &ts.OtherConfig))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the switch made a transit switch", func() bool { return switchNamed(nb, topology.TransitSwitch).OtherConfig["interconn-ts"] != "" })
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-1", addrs); err != nil {
		t.Fatal(err)
	}
	lrp := &nbdb.LogicalRouterPort{Name: "rtots-n1"}
	lsp := &nbdb.LogicalSwitchPort{Name: "tstor-n1"}
	waitFor(t, "the ports", func() bool { return nb.Get(ctx, lrp) == nil && nb.Get(ctx, lsp) == nil })
	if strings.Join(lrp.Networks, " ") != "100.88.0.5/16 fd97::5/64" || lrp.MAC != "0a:58:64:58:00:05" || len(lrp.GatewayChassis) != 1 {
		t.Errorf("router port: %+v", lrp)
	}
	gw := &nbdb.GatewayChassis{UUID: lrp.GatewayChassis[0]}
	if err := nb.Get(ctx, gw); err != nil || gw.ChassisName != "chassis-1" {
		t.Errorf("gateway: %+v %v", gw, err)
	}
	if lsp.Type != "router" || lsp.Options["router-port"] != "rtots-n1" {
		t.Errorf("switch port: %+v", lsp)
	}
	members := &nbdb.LogicalSwitch{Name: topology.TransitSwitch}
	if _, err := ovndb.FetchByName(ctx, nb, members, &members.Ports); err != nil || !slices.Contains(members.Ports, lsp.UUID) {
		t.Errorf("transit switch ports %v (%v), want %s among them", members.Ports, err, lsp.UUID)
	}
	// ovn-ic's tunnel key among the port's options stays.
	lsp.Options["requested-tnl-key"] = "7"
	if err := ovndb.Transact(ctx, nb, mustOps(t)(nb.Where(lsp).Update(lsp, &lsp.Options))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the key cached", func() bool { _ = nb.Get(ctx, lsp); return lsp.Options["requested-tnl-key"] == "7" })
	*ops = 0
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-1", addrs); err != nil || *ops != 0 {
		t.Errorf("again: %d operations, %v; want none", *ops, err)
	}
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-2", addrs); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the new gateway", func() bool {
		_ = nb.Get(ctx, lrp)
		g := &nbdb.GatewayChassis{UUID: lrp.GatewayChassis[0]}
		return len(lrp.GatewayChassis) == 1 && nb.Get(ctx, g) == nil && g.ChassisName == "chassis-2"
	})
	var gws []nbdb.GatewayChassis
	if err := nb.List(ctx, &gws); err != nil || len(gws) != 1 {
		t.Errorf("gateway chassis rows after the move: %v %v, want the new one only", gws, err)
	}
}

// countingNB is an in-memory NB and a commit that counts its operations.
func countingNB(t *testing.T) (context.Context, libovsdbclient.Client, CommitFunc, *int) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	ops := new(int)
	return ctx, nb, func(ctx context.Context, o []ovsdb.Operation) error {
		*ops += len(o)
		return ovndb.Transact(ctx, nb, o)
	}, ops
}

func optionsString(m map[string]string) string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		out = append(out, k+"="+m[k])
	}
	return strings.Join(out, " ")
}

func mustOps(t *testing.T) func([]ovsdb.Operation, error) []ovsdb.Operation {
	return func(ops []ovsdb.Operation, err error) []ovsdb.Operation {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return ops
	}
}

// waitFor polls cond (a cache catching up with a commit) for up to 5 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	harness.Eventually(t, 5*time.Second, what, func() error {
		if !cond() {
			return fmt.Errorf("not yet")
		}
		return nil
	})
}

// switchNamed is the cached switch of that name, nil when there is none.
func switchNamed(nb libovsdbclient.Client, name string) *nbdb.LogicalSwitch {
	return ovndb.Lookup(ovndb.NewTxn(nb), &nbdb.LogicalSwitch{Name: name})
}

// zoneNodes creates nodes as the cluster-wide part and their daemons leave
// them in zone mode: each in a zone, with a host subnet and a chassis.
func (e *env) zoneNode(name, zone, subnet string) {
	e.t.Helper()
	e.createNode(name)
	values := map[string]any{annotations.NodeZone: zone, annotations.NodeChassisID: "chassis-" + name}
	if subnet != "" {
		values[annotations.NodeSubnets] = annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix(subnet)})
	}
	e.patchNode(name, values)
}

// zoneRows summarises what the NB holds for a node of a zone: its switch,
// its transit router port's networks and gateway, whether the transit
// switch holds its port, and the routes it owns as another zone's node
// ("" for nothing).
func (e *env) zoneRows(node string) string {
	ctx := context.Background()
	var out []string
	if switchNamed(e.nb, node) != nil {
		out = append(out, "switch")
	}
	lrp := &nbdb.LogicalRouterPort{Name: topology.TransitRouterPort(node)}
	if e.nb.Get(ctx, lrp) == nil {
		gw := ""
		if len(lrp.GatewayChassis) == 1 {
			g := &nbdb.GatewayChassis{UUID: lrp.GatewayChassis[0]}
			if e.nb.Get(ctx, g) == nil {
				gw = g.ChassisName
			}
		}
		out = append(out, "rtots "+strings.Join(lrp.Networks, ",")+" via "+gw)
	}
	lsp := &nbdb.LogicalSwitchPort{Name: topology.TransitSwitchPort(node)}
	if ts := switchNamed(e.nb, topology.TransitSwitch); e.nb.Get(ctx, lsp) == nil && ts != nil && slices.Contains(ts.Ports, lsp.UUID) {
		out = append(out, "tstor")
	}
	if r := ovndb.Lookup(ovndb.NewTxn(e.nb), &nbdb.LogicalRouter{Name: topology.ClusterRouter}); r != nil {
		for _, route := range ovndb.OwnedChildren[nbdb.LogicalRouterStaticRoute](e.nb, topology.Owner{Type: topology.OwnerRemoteNode, Name: node}, r.StaticRoutes) {
			rt := route.(*nbdb.LogicalRouterStaticRoute)
			out = append(out, "route "+rt.IPPrefix+" via "+rt.Nexthop)
		}
	}
	return strings.Join(out, "; ")
}

func (e *env) waitZoneRows(node, want string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, node+"'s zone rows", func() error {
		if got := e.zoneRows(node); got != want {
			return fmt.Errorf("have %q, want %q", got, want)
		}
		return nil
	})
}

// A zone's master programs its zone's nodes and their pods only: the
// NB is named after the zone, its node gets a switch and a transit port
// (the address its host subnet numbers, gatewayed on its chassis), its
// pods ports and annotations; another zone's node and pods get nothing
// here, nor any annotation from this master; a node of the zone without a
// host subnet yet waits for it (a zone allocates none); a node that moves
// to another zone takes its rows and its pods' ports with it; an idle
// restart writes nothing.
func TestZoneMasterProgramsItsZoneOnly(t *testing.T) {
	e := newEnv(t)
	e.cfg.Zone = "z1"
	ctx := context.Background()
	ts := &nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch, OtherConfig: map[string]string{"interconn-ts": topology.TransitSwitch}}
	if err := ovndb.Transact(ctx, e.nb, mustOps(t)(e.nb.Create(ts))); err != nil { // as ovn-ic makes it
		t.Fatal(err)
	}
	e.zoneNode("n1", "z1", "10.244.0.0/24")
	e.zoneNode("n2", "z2", "10.244.1.0/24")
	e.zoneNode("n3", "z1", "")
	e.createPod("default", "p1", "n1")
	e.createPod("default", "p2", "n2")
	e.start()
	e.waitZoneRows("n1", "switch; rtots 100.88.0.2/16 via chassis-n1; tstor")
	e.lsp("default_p1", nil)
	if pn := e.podNetwork("default", "p1"); len(pn.IPs) != 1 || !netip.MustParsePrefix("10.244.0.0/24").Contains(pn.IPs[0].Addr()) {
		t.Errorf("p1's addresses %v, want one in n1's subnet", pn.IPs)
	}
	harness.Eventually(t, 10*time.Second, "the NB named after the zone", func() error {
		var gs []nbdb.NBGlobal
		if err := e.nb.List(ctx, &gs); err != nil || len(gs) != 1 || gs[0].Name != "z1" || gs[0].Options["ic-route-denylist"] != "100.64.0.0/16" {
			return fmt.Errorf("NB_Global %+v %v", gs, err)
		}
		return nil
	})
	e.settle()
	// Neither the other zone's pod nor the node waiting for its subnet is
	// a failing sync, retried for ever.
	if n := e.m.podQueue.Retries("default/p2"); n != 0 {
		t.Errorf("pod default/p2: %d failed syncs", n)
	}
	if n := e.m.nodeQueue.Retries("n3"); n != 0 {
		t.Errorf("node n3: %d failed syncs", n)
	}
	// The other zone's node: a route to its gateway router's join
	// address (numbered by its host subnet) via its transit address.
	if got := e.zoneRows("n2"); got != "route 100.64.0.3/32 via 100.88.0.3" {
		t.Errorf("n2: rows %q, want only the route to its gateway's join address", got)
	}
	if got := e.zoneRows("n3"); got != "" {
		t.Errorf("n3: rows %q, want none", got)
	}
	if e.nb.Get(ctx, &nbdb.LogicalSwitchPort{Name: "default_p2"}) == nil {
		t.Error("p2, on another zone's node, has a port here")
	}
	p2, err := e.kube.CoreV1().Pods("default").Get(ctx, "p2", metav1.GetOptions{})
	if err != nil || p2.Annotations[annotations.PodNetworks] != "" {
		t.Errorf("p2 annotated by another zone's master: %v %v", p2.Annotations, err)
	}
	n3, err := e.kube.CoreV1().Nodes().Get(ctx, "n3", metav1.GetOptions{})
	if err != nil || n3.Annotations[annotations.NodeSubnets] != "" {
		t.Errorf("n3 given a host subnet by a zone's master: %v %v", n3.Annotations, err)
	}
	// The subnet comes: the node is built.
	e.patchNode("n3", map[string]any{annotations.NodeSubnets: annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix("10.244.5.0/24")})})
	e.waitZoneRows("n3", "switch; rtots 100.88.0.7/16 via chassis-n3; tstor")
	if n := e.restartIdle(); n != 0 {
		t.Errorf("an idle restart sent %d transactions", n)
	}
	// n1 moves to zone z2, n2 to this one.
	e.patchNode("n1", map[string]any{annotations.NodeZone: "z2"})
	e.waitZoneRows("n1", "route 100.64.0.2/32 via 100.88.0.2")
	e.patchNode("n2", map[string]any{annotations.NodeZone: "z1", annotations.NodeChassisID: "chassis-n2"})
	e.waitZoneRows("n2", "switch; rtots 100.88.0.3/16 via chassis-n2; tstor")
	harness.Eventually(t, 10*time.Second, "p1's port gone", func() error {
		if e.nb.Get(ctx, &nbdb.LogicalSwitchPort{Name: "default_p1"}) == nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	e.waitZoneRows("n3", "switch; rtots 100.88.0.7/16 via chassis-n3; tstor")
	// A node of another zone deleted: its route goes.
	if err := e.kube.CoreV1().Nodes().Delete(ctx, "n1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitZoneRows("n1", "")
}

// In zone mode a zone's master programs EgressIPs from the status the
// cluster manager wrote, and writes none: an address hosted by another
// zone's node is rerouted to that node's transit address with no NAT here
// (its gateway router is in its own zone's NB); one hosted here to the
// node's gateway router's join address, SNATed there. The zone's cluster
// router has a default route to its gateway router, for the other zones'
// pods rerouted here.
func TestZoneMasterProgramsEgressIPFromStatus(t *testing.T) {
	e := newEnv(t)
	e.cfg.Zone = "z1"
	dyn := e.withEgressIPs()
	ctx := context.Background()
	ts := &nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch, OtherConfig: map[string]string{"interconn-ts": topology.TransitSwitch}}
	if err := ovndb.Transact(ctx, e.nb, mustOps(t)(e.nb.Create(ts))); err != nil {
		t.Fatal(err)
	}
	for i, n := range []struct{ name, zone, subnet string }{{"n1", "z1", "10.244.0.0/24"}, {"n2", "z2", "10.244.1.0/24"}} {
		e.egressNode(n.name, fmt.Sprintf("172.18.0.%d", i+2))
		e.patchNode(n.name, map[string]any{annotations.NodeZone: n.zone,
			annotations.NodeSubnets: annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix(n.subnet)})})
	}
	e.createNamespace("prod", map[string]string{"env": "prod"})
	e.createPod("prod", "a", "n1")
	e.start()
	e.podNetwork("prod", "a")
	obj := egressIPObject("eip1", "172.18.0.100")
	obj.Object["status"] = map[string]any{"items": []any{map[string]any{"node": "n2", "egressIP": "172.18.0.100"}}}
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	reroute := func(want string) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, "eip1 rerouted to "+want, func() error {
			var ps []nbdb.LogicalRouterPolicy
			_ = e.nb.WhereCache(func(p *nbdb.LogicalRouterPolicy) bool {
				o, _ := topology.OwnerOf(p.ExternalIDs)
				return o.Type == egressip.OwnerEgressIP && o.Name == "eip1"
			}).List(ctx, &ps)
			if len(ps) != 1 || !slices.Equal(ps[0].Nexthops, []string{want}) {
				return fmt.Errorf("reroutes %+v", ps)
			}
			return nil
		})
	}
	reroute("100.88.0.3") // n2's transit address
	if n := e.grEgressNATs("n1"); n != 0 {
		t.Errorf("GR_n1 holds %d NATs of an egress IP hosted by n2", n)
	}
	// The cluster manager moves it to n1: its NAT on GR_n1, the reroute to n1's gateway only.
	obj, err := dyn.Resource(k8sovnv1.EgressIPResource).Get(ctx, "eip1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// An item for an address the spec does not ask for is not taken.
	_ = unstructured.SetNestedSlice(obj.Object, []any{map[string]any{"node": "n1", "egressIP": "172.18.0.100"},
		map[string]any{"node": "n2", "egressIP": "172.18.0.200"}}, "status", "items")
	if _, err := dyn.Resource(k8sovnv1.EgressIPResource).UpdateStatus(ctx, obj, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	reroute("100.64.0.2") // n1's gateway join address, numbered by its host subnet
	harness.Eventually(t, 10*time.Second, "a's SNAT on GR_n1", func() error {
		if n := e.grEgressNATs("n1"); n != 1 {
			return fmt.Errorf("%d NATs", n)
		}
		return nil
	})
	for _, a := range dyn.Actions() {
		if a.GetSubresource() == "status" && a.GetVerb() != "get" && a.GetVerb() != "update" {
			t.Errorf("a zone's master wrote an EgressIP status: %v", a)
		}
	}
	var routes []nbdb.LogicalRouterStaticRoute
	cluster := ovndb.Lookup(ovndb.NewTxn(e.nb), &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	_ = e.nb.WhereCache(func(r *nbdb.LogicalRouterStaticRoute) bool {
		return r.IPPrefix == "0.0.0.0/0" && cluster != nil && slices.Contains(cluster.StaticRoutes, r.UUID)
	}).List(ctx, &routes)
	if len(routes) != 1 || routes[0].Nexthop != "100.64.0.2" {
		t.Errorf("the cluster router's default routes %+v, want one to GR_n1's join address", routes)
	}
}

// A zone's master syncs no pod of another zone's node (it sees every pod
// of the cluster, for the policies' address sets): not on their events, not
// at start; a node that comes into the zone brings its pods.
func TestZoneMasterSyncsNoPodOfOtherZones(t *testing.T) {
	e := newEnv(t)
	e.cfg.Zone = "z1"
	ctx := context.Background()
	ts := &nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch, OtherConfig: map[string]string{"interconn-ts": topology.TransitSwitch}}
	if err := ovndb.Transact(ctx, e.nb, mustOps(t)(e.nb.Create(ts))); err != nil {
		t.Fatal(err)
	}
	e.zoneNode("n1", "z1", "10.244.0.0/24")
	e.zoneNode("n2", "z2", "10.244.1.0/24")
	e.createPod("default", "p1", "n1")
	e.start()
	e.lsp("default_p1", nil)
	idle := func() {
		t.Helper()
		harness.Eventually(t, 10*time.Second, "pod queue idle", func() error {
			if !e.m.podQueue.Idle() || !e.m.nodeQueue.Idle() {
				return fmt.Errorf("busy")
			}
			return nil
		})
	}
	idle()
	before := e.m.podQueue.Syncs()
	const remote = 20
	for i := range remote {
		p := e.createPod("default", fmt.Sprintf("r%02d", i), "n2")
		// Annotated by its zone's master.
		pn := annotations.PodNetwork{IPs: []netip.Prefix{netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 244, 1, byte(3 + i)}), 24)}, PodUID: string(p.UID)}
		patch := annotations.MergePatch(string(p.UID), annotations.PodNetworks, annotations.FormatPodNetworks(pn))
		if _, err := e.kube.CoreV1().Pods("default").Patch(ctx, p.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A pod of this zone last: once it is programmed, the events before it
	// have been handled (one informer delivers them in order).
	e.createPod("default", "p2", "n1")
	e.lsp("default_p2", nil)
	idle()
	if n := e.m.podQueue.Syncs() - before; n >= remote {
		t.Errorf("%d pod syncs for %d pods of another zone and one of this zone: want those of this zone's only", n, remote)
	}
	timed := 0
	e.m.latency.timers.Range(func(any, any) bool { timed++; return true })
	if timed != 0 {
		t.Errorf("%d pods still timed: another zone's pods are not this master's to time", timed)
	}
	e.stop()
	e.start()
	idle()
	if n := e.m.podQueue.Syncs(); n >= remote {
		t.Errorf("a restart synced %d pods, with 2 in this zone and %d in another", n, remote)
	}
	// n2 comes into this zone: its pods are programmed here.
	e.patchNode("n2", map[string]any{annotations.NodeZone: "z1"})
	for i := range remote {
		e.lsp(fmt.Sprintf("default_r%02d", i), nil)
	}
}

// zoneEnv is a master of zone z1 with the transit switch ovn-ic would make
// and node n1 of the zone, without its chassis report yet.
func zoneEnv(t *testing.T) *env {
	t.Helper()
	e := newEnv(t)
	e.cfg.Zone = "z1"
	ts := &nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch, OtherConfig: map[string]string{"interconn-ts": topology.TransitSwitch}}
	if err := ovndb.Transact(context.Background(), e.nb, mustOps(t)(e.nb.Create(ts))); err != nil {
		t.Fatal(err)
	}
	e.createNode("n1")
	e.patchNode("n1", map[string]any{annotations.NodeZone: "z1",
		annotations.NodeSubnets: annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")})})
	return e
}

// The transaction that makes a node's transit port commits and its reply is
// lost: the retry finds the rows and completes them, and the node's sync
// stops failing.
func TestZoneTransitPortAfterLostReply(t *testing.T) {
	e := zoneEnv(t)
	e.start()
	e.waitZoneRows("n1", "switch")
	lost := e.proxy.LoseNextReply()
	e.patchNode("n1", map[string]any{annotations.NodeChassisID: "chassis-n1"})
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	e.waitZoneRows("n1", "switch; rtots 100.88.0.2/16 via chassis-n1; tstor")
	e.settle()
	if n := e.m.nodeQueue.Retries("n1"); n != 0 {
		t.Errorf("node n1's sync still failing: %d retries", n)
	}
	if n := e.restartIdle(); n != 0 {
		t.Errorf("an idle restart sent %d transactions", n)
	}
}

// The master is stopped while the transit port's transaction is on its way
// (the process killed between its writes); the transaction lands after. A
// new master finds what landed and completes the rest, and a restart after
// that writes nothing.
func TestZoneTransitPortKilledBetweenWrites(t *testing.T) {
	e := zoneEnv(t)
	e.start()
	e.waitZoneRows("n1", "switch")
	held, release := e.proxy.HoldNextTransact()
	e.patchNode("n1", map[string]any{annotations.NodeChassisID: "chassis-n1"})
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction held")
	}
	e.stop()
	release()
	e.start()
	e.waitZoneRows("n1", "switch; rtots 100.88.0.2/16 via chassis-n1; tstor")
	e.settle()
	if n := e.restartIdle(); n != 0 {
		t.Errorf("an idle restart sent %d transactions", n)
	}
}

// A node of the zone deleted takes its switch and transit port with it;
// re-created with the same name and another chassis, it gets them again,
// gatewayed on the new chassis.
func TestZoneNodeRecreatedWithTheSameName(t *testing.T) {
	e := zoneEnv(t)
	e.patchNode("n1", map[string]any{annotations.NodeChassisID: "chassis-n1"})
	e.start()
	e.waitZoneRows("n1", "switch; rtots 100.88.0.2/16 via chassis-n1; tstor")
	e.deleteNode("n1")
	e.waitZoneRows("n1", "")
	e.createNode("n1")
	e.patchNode("n1", map[string]any{annotations.NodeZone: "z1", annotations.NodeChassisID: "chassis-new",
		annotations.NodeSubnets: annotations.FormatNodeSubnets([]netip.Prefix{netip.MustParsePrefix("10.244.0.0/24")})})
	e.waitZoneRows("n1", "switch; rtots 100.88.0.2/16 via chassis-new; tstor")
	var gws []nbdb.GatewayChassis
	_ = e.nb.WhereCache(func(g *nbdb.GatewayChassis) bool { return g.ExternalIDs != nil && strings.Contains(g.Name, "n1") }).List(context.Background(), &gws)
	if len(gws) != 1 {
		t.Errorf("gateway chassis rows of n1: %+v, want the new one only", gws)
	}
}

// A master in central mode keeps northd's backoff in NB_Global's options
// beside northd's own, and names no zone: it puts the value back when another
// writer changes or removes it or replaces the row, an idle restart writes
// nothing, and an NB replaced by an empty database gets it again.
func TestMasterKeepsNorthdBackoff(t *testing.T) {
	e := newEnv(t)
	e.cfg.NorthdBackoff = 300 * time.Millisecond
	e.start()
	ctx := context.Background()
	// global is the NB_Global row, or a row with no options while there is none.
	global := func() nbdb.NBGlobal {
		var gs []nbdb.NBGlobal
		if err := e.nb.List(ctx, &gs); err != nil || len(gs) == 0 {
			return nbdb.NBGlobal{}
		}
		return gs[0]
	}
	backoff := func() string { return global().Options[topology.NorthdBackoffOption] }
	waitFor(t, "the backoff written", func() bool { return backoff() == "300" })
	if g := global(); g.Name != "" {
		t.Errorf("central mode named the NB %q", g.Name)
	}
	// Another writer's value, beside an option of northd's.
	g := global()
	g.Options = map[string]string{topology.NorthdBackoffOption: "0", "mac_prefix": "0a:00:00"}
	if err := ovndb.Transact(ctx, e.nb, mustOps(t)(e.nb.Where(&g).Update(&g, &g.Options))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backoff put back, northd's option kept", func() bool {
		o := global().Options
		return o[topology.NorthdBackoffOption] == "300" && o["mac_prefix"] == "0a:00:00"
	})
	// Removed.
	g = global()
	ops := mustOps(t)(e.nb.Where(&g).Mutate(&g, model.Mutation{Field: &g.Options, Mutator: ovsdb.MutateOperationDelete, Value: []string{topology.NorthdBackoffOption}}))
	if err := ovndb.Transact(ctx, e.nb, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the removed backoff put back", func() bool { return backoff() == "300" })
	// The row replaced by one without it (as northd makes one when there is none).
	g = global()
	ops = append(mustOps(t)(e.nb.Where(&g).Delete()), mustOps(t)(e.nb.Create(&nbdb.NBGlobal{Options: map[string]string{"mac_prefix": "0a:00:00"}}))...)
	if err := ovndb.Transact(ctx, e.nb, ops); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the backoff in the new row", func() bool {
		g := global()
		return g.UUID != "" && backoff() == "300" && g.Options["mac_prefix"] == "0a:00:00"
	})
	if n := e.restartIdle(); n != 0 {
		t.Errorf("idle restart sent %d NB transactions; want 0", n)
	}
	e.replaceNB()
	waitFor(t, "the backoff in the new NB", func() bool { return backoff() == "300" })
}

func TestGlobalOptions(t *testing.T) {
	join := []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16")}
	for _, c := range []struct {
		zone    string
		backoff time.Duration
		want    string
	}{
		{"", 300 * time.Millisecond, "northd-backoff-interval-ms=300"},
		{"", 0, "northd-backoff-interval-ms=0"},
		{"az-1", 1500 * time.Millisecond, "ic-route-adv=true ic-route-blacklist=100.64.0.0/16 ic-route-denylist=100.64.0.0/16 ic-route-learn=true northd-backoff-interval-ms=1500"},
	} {
		if got := optionsString(topology.GlobalOptions(c.zone, join, c.backoff)); got != c.want {
			t.Errorf("GlobalOptions(%q, %s) = %s, want %s", c.zone, c.backoff, got, c.want)
		}
	}
}
