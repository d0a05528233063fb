package integration

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func TestNICsToBridgeAndGatewayInit(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	subnet := c.nodeSubnet("n1")
	if out, err := c.minionInit(n1); err != nil {
		t.Fatalf("minion-init: %v\n%s", err, out)
	}
	// The node's "physical" NIC eth1, wired to an external router namespace.
	externalNIC(t, n1, []string{"addr", "add", "172.18.0.2/24", "dev", "eth1"}, []string{"route", "add", "default", "via", "172.18.0.1"})
	ovnkube := harness.Binary(t, "ovnkube")
	nicsToBridge := func() string {
		out, err := n1.NS.Exec(ovnkube, "nics-to-bridge", "--ovs-address", n1.OVSAddress(), "--datapath-type", "netdev", "eth1")
		if err != nil {
			t.Fatalf("nics-to-bridge: %v\n%s", err, out)
		}
		return out
	}
	if out := nicsToBridge(); !strings.Contains(out, "breth1") {
		t.Fatalf("nics-to-bridge printed %q", out)
	}
	onBridge, _ := n1.NS.Exec("ip", "-o", "-4", "addr", "show", "dev", "breth1")
	onNIC, _ := n1.NS.Exec("ip", "-o", "-4", "addr", "show", "dev", "eth1")
	if !strings.Contains(onBridge, "172.18.0.2/24") || strings.TrimSpace(onNIC) != "" {
		t.Errorf("address not moved to breth1: bridge %q, NIC %q", onBridge, onNIC)
	}
	routes, _ := n1.NS.Exec("ip", "route")
	if !strings.Contains(routes, "default via 172.18.0.1 dev breth1") {
		t.Errorf("default route not moved:\n%s", routes)
	}
	harness.Eventually(t, 10*time.Second, "node reaching the external router through breth1", func() error {
		_, err := n1.NS.Exec("ping", "-c", "1", "-W", "1", "172.18.0.1")
		return err
	})
	brState := func() string {
		out, _ := n1.VSCtl("--format=csv", "--columns=_uuid,name,ports,other_config", "list", "bridge", "breth1")
		return out
	}
	before := brState()
	nicsToBridge()
	if after := brState(); after != before {
		t.Errorf("second nics-to-bridge changed the bridge:\n%s\n%s", before, after)
	}

	gatewayInit := func(extra ...string) {
		args := append([]string{ovnkube, "gateway-init", "--node-name", "n1", "--bridge-interface", "breth1",
			"--physical-ip", "172.18.0.2/24", "--default-gw", "172.18.0.1", "--nb-address", c.ovn.NBAddress(),
			"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig}, extra...)
		out, err := n1.NS.Exec(args...)
		if err != nil {
			t.Fatalf("gateway-init %v: %v\n%s", extra, err, out)
		}
	}
	gatewayInit() // returns once the master has built GR_n1
	sysID, _ := n1.VSCtl("get", "open_vswitch", ".", "external_ids:system-id")
	sysID = strings.Trim(strings.TrimSpace(sysID), `"`)
	gr := c.routerNamed("GR_n1")
	if gr == nil || gr.Options["chassis"] != sysID || gr.Options["lb_force_snat_ip"] != "router_ip" {
		t.Fatalf("GR_n1 = %+v (system-id %s)", gr, sysID)
	}
	if g := c.group(); g == nil || !contains(gr.LoadBalancerGroup, g.UUID) {
		t.Errorf("GR_n1 lacks the cluster load balancer group")
	}
	c.waitPort("join", "jtor-GR_n1", nil)
	c.waitPort("ext_n1", "breth1_n1_localnet", func(p *nbdb.LogicalSwitchPort) error {
		if p.Type != "localnet" || p.Options["network_name"] != "physnet" {
			return fmt.Errorf("localnet port %+v", p)
		}
		return nil
	})
	c.waitPort("ext_n1", "etor-GR_n1", nil)
	brMAC, _ := n1.NS.Exec("cat", "/sys/class/net/breth1/address")
	harness.Eventually(t, 10*time.Second, "GR_n1's NAT, routes and ports", func() error {
		rtoj, rtoe := c.lrp("rtoj-GR_n1"), c.lrp("rtoe-GR_n1")
		if rtoj == nil || !reflect.DeepEqual(rtoj.Networks, []string{"100.64.0.2/16"}) {
			return fmt.Errorf("rtoj-GR_n1 = %+v", rtoj)
		}
		if rtoe == nil || rtoe.MAC != strings.TrimSpace(brMAC) || !reflect.DeepEqual(rtoe.Networks, []string{"172.18.0.2/24"}) {
			return fmt.Errorf("rtoe-GR_n1 = %+v (breth1 MAC %s)", rtoe, brMAC)
		}
		show, _ := c.ovn.NBCtl("lr-nat-list", "GR_n1")
		if !strings.Contains(show, "snat") || !strings.Contains(show, "172.18.0.2") || !strings.Contains(show, "10.244.0.0/16") {
			return fmt.Errorf("GR_n1 NAT:\n%s", show)
		}
		grRoutes, _ := c.ovn.NBCtl("lr-route-list", "GR_n1")
		for _, want := range []string{"10.244.0.0/16", "100.64.0.1", "0.0.0.0/0", "172.18.0.1", "rtoe-GR_n1"} {
			if !strings.Contains(grRoutes, want) {
				return fmt.Errorf("GR_n1 routes lack %s:\n%s", want, grRoutes)
			}
		}
		crRoutes, _ := c.ovn.NBCtl("lr-route-list", "ovn_cluster_router")
		if !strings.Contains(crRoutes, subnet.String()) || !strings.Contains(crRoutes, "100.64.0.2") || !strings.Contains(crRoutes, "src-ip") {
			return fmt.Errorf("cluster router lacks the src-ip route for %s:\n%s", subnet, crRoutes)
		}
		return nil
	})
	mappings, _ := n1.VSCtl("get", "open_vswitch", ".", "external_ids:ovn-bridge-mappings")
	if !strings.Contains(mappings, "physnet:breth1") {
		t.Errorf("ovn-bridge-mappings = %s", mappings)
	}
	node, _ := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	gwCfg, err := annotations.ParseL3GatewayConfig(node.Annotations[annotations.NodeL3GatewayConfig])
	if err != nil || gwCfg.Mode != "shared" || gwCfg.InterfaceID != "breth1_n1_localnet" || gwCfg.IPs[0].String() != "172.18.0.2/24" || gwCfg.NextHops[0].String() != "172.18.0.1" {
		t.Errorf("l3-gateway-config %+v %v", gwCfg, err)
	}
	// The bridge's flows: no learning switch any more, and the host still
	// reaches the external router through them.
	flows, err := n1.NS.Exec("ovs-ofctl", "dump-flows", "unix:"+n1.Dir+"/breth1.mgmt")
	if err != nil || strings.Contains(flows, "NORMAL") || !strings.Contains(flows, "ct(commit,zone=64000") {
		t.Errorf("breth1 flows (%v):\n%s", err, flows)
	}
	harness.Eventually(t, 10*time.Second, "node reaching the external router through breth1's flows", func() error {
		_, err := n1.NS.Exec("ping", "-c", "1", "-W", "1", "172.18.0.1")
		return err
	})
	// ovn-controller binds the gateway router to this chassis.
	harness.Eventually(t, 20*time.Second, "GR_n1 bound to n1's chassis", func() error {
		out, err := c.ovn.SBCtl("--bare", "--columns=chassis", "find", "port_binding", "logical_port=cr-rtoe-GR_n1")
		if err == nil && strings.TrimSpace(out) != "" {
			return nil
		}
		out, err = c.ovn.SBCtl("--bare", "--columns=chassis", "find", "port_binding", "logical_port=rtoe-GR_n1")
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("not bound: %v %q", err, out)
		}
		return nil
	})

	// Idempotent.
	if n := c.changesDuring(func() { gatewayInit() }); n != 0 {
		t.Errorf("second gateway-init changed %d NB rows", n)
	}
	// Removed: the master removes the rows, the bridge is a learning switch
	// again and the host keeps its connectivity.
	gatewayInit("--remove")
	harness.Eventually(t, 20*time.Second, "n1 gateway rows removed", func() error {
		if c.routerNamed("GR_n1") != nil || c.switchNamed("ext_n1") != nil || c.lsp("jtor-GR_n1") != nil {
			return fmt.Errorf("still there")
		}
		return nil
	})
	if flows, _ := n1.NS.Exec("ovs-ofctl", "dump-flows", "unix:"+n1.Dir+"/breth1.mgmt"); !strings.Contains(flows, "NORMAL") || strings.Contains(flows, "zone=64000") {
		t.Errorf("breth1 flows after removal:\n%s", flows)
	}
	if _, err := n1.NS.Exec("ping", "-c", "1", "-W", "2", "172.18.0.1"); err != nil {
		t.Errorf("host lost the external router after the gateway was removed: %v", err)
	}
	// Node deleted: its gateway goes with it.
	gatewayInit()
	c.deleteNode("n1")
	harness.Eventually(t, 20*time.Second, "n1 gateway rows removed", func() error {
		if c.routerNamed("GR_n1") != nil || c.switchNamed("ext_n1") != nil || c.lsp("jtor-GR_n1") != nil {
			return fmt.Errorf("still there")
		}
		routes, _ := c.ovn.NBCtl("lr-route-list", "ovn_cluster_router")
		if strings.Contains(routes, subnet.String()) {
			return fmt.Errorf("src-ip route remains:\n%s", routes)
		}
		return nil
	})
}
