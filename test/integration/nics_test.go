package integration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// A node namespace with OVS and a "physical" NIC eth1 wired to an external
// router namespace: a static address, a DHCP-like one with lifetimes, and
// a default route through it.
func nicHost(t *testing.T) (*harness.Node, *ovs.Client) {
	t.Helper()
	c := newNodeCluster(t)
	n1 := c.addNode("n1")
	externalNIC(t, n1, []string{"addr", "add", "172.18.0.2/24", "dev", "eth1"},
		[]string{"addr", "add", "172.18.0.9/24", "dev", "eth1", "valid_lft", "3000", "preferred_lft", "2000"},
		[]string{"route", "add", "default", "via", "172.18.0.1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	sw, err := ovs.Connect(ctx, n1.OVSAddress(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sw.Close)
	return n1, sw
}

// moveIn runs nics-to-bridge in the node's namespace, in this process.
func moveIn(t *testing.T, n *harness.Node, sw *ovs.Client, m node.NICMove) error {
	t.Helper()
	var moveErr error
	err := ns.WithNetNSPath(n.NS.Path(), func(ns.NetNS) error {
		_, moveErr = node.MoveNICToBridge(context.Background(), m, sw, logr.Discard())
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return moveErr
}

// addrsOn lists "address flags…" lines of a device, lifetimes reduced to
// whether they are finite.
func addrsOn(n *harness.Node, dev string) string {
	out, _ := n.NS.Exec("ip", "-4", "addr", "show", "dev", dev)
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "inet ") {
			f := strings.Fields(l)
			lines = append(lines, f[1]+" dynamic="+fmt.Sprint(strings.Contains(l, "dynamic")))
		}
	}
	return strings.Join(lines, ", ")
}

const wantNICAddrs = "172.18.0.2/24 dynamic=false, 172.18.0.9/24 dynamic=true"

func reachExternal(t *testing.T, n *harness.Node, via string) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, "the external router reached through "+via, func() error {
		if routes, _ := n.NS.Exec("ip", "route", "show", "default"); !strings.Contains(routes, "dev "+via) {
			return fmt.Errorf("default route %q", routes)
		}
		_, err := n.NS.Exec("ping", "-c", "1", "-W", "1", "172.18.0.1")
		return err
	})
}

// Item 10: a failure at any step of nics-to-bridge leaves the host as it
// was: addresses (with their lifetimes) and routes on the NIC, no bridge,
// connectivity intact. Then the real move keeps flags and lifetimes.
func TestNICsToBridgeRollsBackOnFailure(t *testing.T) {
	n1, sw := nicHost(t)
	steps := []string{node.StepBridge, node.StepAddressesCopied, node.StepNICAttached, node.StepRoutesMoved, node.StepAddressesRemoved}
	for _, failAt := range steps {
		err := moveIn(t, n1, sw, node.NICMove{NIC: "eth1", DatapathType: "netdev", FailAfter: func(step string) error {
			if step == failAt {
				return errors.New("injected failure")
			}
			return nil
		}})
		if err == nil || !strings.Contains(err.Error(), "rolled back") {
			t.Fatalf("failure after %s: error %v, want a rolled-back failure", failAt, err)
		}
		if got := addrsOn(n1, "eth1"); got != wantNICAddrs {
			t.Errorf("after a failure at %s eth1 has %q, want %q", failAt, got, wantNICAddrs)
		}
		if _, err := n1.NS.Exec("ip", "link", "show", "breth1"); err == nil {
			t.Errorf("after a failure at %s breth1 is left", failAt)
		}
		if out, _ := n1.VSCtl("list-br"); strings.Contains(out, "breth1") {
			t.Errorf("after a failure at %s OVS still has bridge breth1: %q", failAt, out)
		}
		reachExternal(t, n1, "eth1")
	}
	if err := moveIn(t, n1, sw, node.NICMove{NIC: "eth1", DatapathType: "netdev"}); err != nil {
		t.Fatal(err)
	}
	if got := addrsOn(n1, "breth1"); got != wantNICAddrs {
		t.Errorf("breth1 has %q, want %q (flags and lifetimes kept)", got, wantNICAddrs)
	}
	if got := addrsOn(n1, "eth1"); got != "" {
		t.Errorf("eth1 still has %q", got)
	}
	reachExternal(t, n1, "breth1")
}

// Item 10: a NIC of another OVS bridge is refused, and only our
// other_config keys are written on a bridge.
func TestNICsToBridgeRefusesOtherBridgesNICAndKeepsForeignKeys(t *testing.T) {
	n1, sw := nicHost(t)
	if out, err := n1.VSCtl("add-br", "brother", "--", "set", "bridge", "brother", "datapath_type=netdev", "--", "add-port", "brother", "eth1"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	err := moveIn(t, n1, sw, node.NICMove{NIC: "eth1", DatapathType: "netdev"})
	if err == nil || !strings.Contains(err.Error(), "brother") {
		t.Fatalf("error %v, want a refusal naming bridge brother", err)
	}
	if out, _ := n1.VSCtl("port-to-br", "eth1"); strings.TrimSpace(out) != "brother" {
		t.Errorf("eth1 moved off brother: %q", out)
	}
	if out, err := n1.VSCtl("set", "bridge", "brother", "other_config:operator-key=keep"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if err := sw.EnsureBridge(context.Background(), ovs.Bridge{Name: "brother", DatapathType: "netdev", OtherConfig: map[string]string{"disable-in-band": "true"}}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Second, "both keys on brother", func() error {
		out, _ := n1.VSCtl("get", "bridge", "brother", "other_config")
		if !strings.Contains(out, "operator-key=keep") || !strings.Contains(out, `disable-in-band="true"`) {
			return fmt.Errorf("other_config %s", out)
		}
		return nil
	})
}
