package master

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// EnsureZone names the zone and writes its route exchange options beside
// the options others keep in NB_Global (northd's), changes only what
// differs, and writes nothing the second time.
func TestEnsureZoneKeepsOthersOptions(t *testing.T) {
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
	if err := EnsureZone(ctx, nb, commit, "az-1", join); err != nil {
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
	if err := EnsureZone(ctx, nb, commit, "az-2", join); err != nil {
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
	if err := EnsureZone(ctx, nb, commit, "az-2", join); err != nil || *ops != 0 {
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
	waitFor(t, "the switch cached", func() bool { return lookupSwitch(ctx, nb) != nil })
	if err := EnsureTransitPort(ctx, nb, commit, "n1", "chassis-1", addrs); err == nil || !strings.Contains(err.Error(), "not a transit switch") {
		t.Fatalf("a switch that is not a transit switch: %v", err)
	}
	ts := lookupSwitch(ctx, nb)
	ts.OtherConfig = map[string]string{"interconn-ts": topology.TransitSwitch}
	if err := ovndb.Transact(ctx, nb, mustOps(t)(nb.Where(ts).Update(ts, &ts.OtherConfig))); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the switch made a transit switch", func() bool { return lookupSwitch(ctx, nb).OtherConfig["interconn-ts"] != "" })
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
	for deadline := time.Now().Add(5 * time.Second); !cond(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
	}
}

func lookupSwitch(ctx context.Context, nb libovsdbclient.Client) *nbdb.LogicalSwitch {
	ts := &nbdb.LogicalSwitch{Name: topology.TransitSwitch}
	var found []nbdb.LogicalSwitch
	_ = nb.WhereCache(func(s *nbdb.LogicalSwitch) bool { return s.Name == ts.Name }).List(ctx, &found)
	if len(found) != 1 {
		return nil
	}
	return &found[0]
}
