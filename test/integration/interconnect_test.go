package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// zoneNode is one zone's node in TestInterconnectJoinsZones: its router port
// on the transit switch and its node subnet, in both families.
type zoneNode struct {
	ovn                   *harness.OVNCentral
	name, mac             string
	transit, subnets, gws []string
}

// OVN interconnection as the zone mode (issue 38) will use it, on the real
// ovn-ic of the stack: two zones (each its own NB, SB and northd) join the
// IC databases; a transit switch made in the IC NB appears in both zones'
// NBs; each zone's router port on it is a remote port in the other, with
// its addresses of both families, and its gateway a remote chassis; each
// zone's node subnets are learned by the other's router as routes via that
// zone's transit addresses, and withdrawn when the subnet's port goes.
func TestInterconnectJoinsZones(t *testing.T) {
	ic := harness.StartInterconnect(t)
	nodes := []zoneNode{
		{harness.StartOVNCentral(t), "node-a", "0a:58:64:58:00:02", []string{"100.88.0.2/16", "fd97::2/64"}, []string{"10.244.0.0/24", "fd00:10:244:1::/64"}, []string{"10.244.0.1/24", "fd00:10:244:1::1/64"}},
		{harness.StartOVNCentral(t), "node-b", "0a:58:64:58:00:03", []string{"100.88.0.3/16", "fd97::3/64"}, []string{"10.244.1.0/24", "fd00:10:244:2::/64"}, []string{"10.244.1.1/24", "fd00:10:244:2::1/64"}},
	}
	nodes[0].ovn.Join(ic, "az-a")
	nodes[1].ovn.Join(ic, "az-b")
	must := func(out string, err error) string {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	// waitFor polls a zone's ovn-nbctl or ovn-sbctl output until check
	// accepts it, and reports the last output.
	waitFor := func(what string, run func() (string, error), check func(string) bool) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, what, func() error {
			out, err := run()
			if err == nil && !check(out) {
				err = fmt.Errorf("not yet: %q", out)
			}
			return err
		})
	}
	must(ic.NBCtl("ts-add", "transit_switch"))
	for _, n := range nodes {
		waitFor("the transit switch in "+n.name+"'s zone", func() (string, error) {
			return n.ovn.NBCtl("--bare", "--columns=other_config", "find", "Logical_Switch", "name=transit_switch")
		}, func(out string) bool { return strings.Contains(out, "interconn-ts=transit_switch") })
		// The node is its zone's interconnection gateway.
		must(n.ovn.SBCtl("chassis-add", n.name, "geneve", "192.0.2."+n.mac[len(n.mac)-1:]))
		must(n.ovn.SBCtl("set", "chassis", n.name, "other_config:is-interconn=true"))
		must(n.ovn.NBCtl("set", "NB_Global", ".", "options:ic-route-adv=true", "options:ic-route-learn=true"))
		must(n.ovn.NBCtl(append([]string{"lr-add", "ovn_cluster_router", "--", "lrp-add", "ovn_cluster_router", "rtots-" + n.name, n.mac}, n.transit...)...))
		must(n.ovn.NBCtl("lsp-add", "transit_switch", "tstor-"+n.name, "--", "lsp-set-type", "tstor-"+n.name, "router",
			"--", "lsp-set-addresses", "tstor-"+n.name, "router", "--", "lsp-set-options", "tstor-"+n.name, "router-port=rtots-"+n.name,
			"--", "lrp-set-gateway-chassis", "rtots-"+n.name, n.name))
		must(n.ovn.NBCtl(append([]string{"lrp-add", "ovn_cluster_router", "rtos-" + n.name, "0a:58:0a:f4:00:01"}, n.gws...)...))
	}
	for i, n := range nodes {
		other := nodes[1-i]
		wantAddr := other.mac + " " + strings.Join(other.transit, " ")
		waitFor(other.name+"'s router port as a remote port in "+n.name+"'s zone", func() (string, error) {
			return n.ovn.NBCtl("--bare", "--columns=type,addresses", "find", "Logical_Switch_Port", "name=tstor-"+other.name)
		}, func(out string) bool { return strings.Fields(out)[0] == "remote" && strings.Contains(out, wantAddr) })
		waitFor(other.name+" as a remote chassis in "+n.name+"'s zone", func() (string, error) {
			return n.ovn.SBCtl("--bare", "--columns=other_config", "find", "Chassis", "name="+other.name)
		}, func(out string) bool { return strings.Contains(out, "is-remote=true") })
		for j, subnet := range other.subnets {
			via := strings.Split(other.transit[j], "/")[0]
			waitFor(n.name+"'s router learns "+subnet, func() (string, error) {
				return n.ovn.NBCtl("lr-route-list", "ovn_cluster_router")
			}, func(out string) bool { return routeLearned(out, subnet, via) })
		}
		if out := must(n.ovn.NBCtl("lr-route-list", "ovn_cluster_router")); routeLearned(out, n.subnets[0], "") {
			t.Errorf("%s's router learned its own subnet:\n%s", n.name, out)
		}
	}
	// A node subnet that goes is withdrawn from the other zone.
	must(nodes[0].ovn.NBCtl("lrp-del", "rtos-node-a"))
	waitFor("node-a's subnets withdrawn from node-b's router", func() (string, error) {
		return nodes[1].ovn.NBCtl("lr-route-list", "ovn_cluster_router")
	}, func(out string) bool {
		return !routeLearned(out, nodes[0].subnets[0], "") && !routeLearned(out, nodes[0].subnets[1], "")
	})
	if msg := nodes[0].ovn.Exited() + nodes[1].ovn.Exited(); msg != "" {
		t.Errorf("exited: %s", msg)
	}
}

// routeLearned says whether lr-route-list's output holds a route ovn-ic
// learned to subnet (a connected route's prefix is its port's network,
// which lr-route-list prints masked), via the next hop when one is given.
func routeLearned(out, subnet, via string) bool {
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 3 && f[0] == subnet && (via == "" || f[1] == via) && strings.Contains(line, "(learned)") {
			return true
		}
	}
	return false
}
