package integration

import (
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func TestMasterProgramsNodesAndPods(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("node1", map[string]string{annotations.NodeMgmtPortMAC: "0e:00:00:00:00:01"})
	c.createNode("node2", nil)

	// Cluster-wide rows.
	harness.Eventually(t, 30*time.Second, "cluster router and join switch", func() error {
		r, j := c.routerNamed("ovn_cluster_router"), c.switchNamed("join")
		rtoj, jtor := c.lrp("rtoj-ovn_cluster_router"), c.lsp("jtor-ovn_cluster_router")
		if r == nil || j == nil || rtoj == nil || jtor == nil {
			return fmt.Errorf("missing: router %v join %v rtoj %v jtor %v", r != nil, j != nil, rtoj != nil, jtor != nil)
		}
		if !reflect.DeepEqual(rtoj.Networks, []string{"100.64.0.1/16"}) || !contains(r.Ports, rtoj.UUID) || !contains(j.Ports, jtor.UUID) {
			return fmt.Errorf("join wiring wrong: rtoj %+v", rtoj)
		}
		return nil
	})

	// ovn-northd's backoff, the master's default, beside northd's own options.
	harness.Eventually(t, 10*time.Second, "northd's backoff in NB_Global", func() error {
		out, err := c.ovn.NBCtl("get", "NB_Global", ".", "options")
		if err != nil || !strings.Contains(out, `northd-backoff-interval-ms="300"`) || !strings.Contains(out, "mac_prefix") {
			return fmt.Errorf("options %s (%v)", out, err)
		}
		return nil
	})

	// Nodes: distinct subnets, switch, router port, management port.
	s1, s2 := c.nodeSubnet("node1"), c.nodeSubnet("node2")
	if s1 == s2 || s1.Bits() != 24 || s2.Bits() != 24 || !netip.MustParsePrefix("10.244.0.0/16").Contains(s1.Addr()) {
		t.Fatalf("node subnets %s and %s", s1, s2)
	}
	for _, n := range []struct {
		name   string
		subnet netip.Prefix
		mac    string
	}{{"node1", s1, "0e:00:00:00:00:01"}, {"node2", s2, ""}} {
		gw, mgmt := s1.Addr().Next(), s1.Addr().Next().Next()
		if n.name == "node2" {
			gw, mgmt = s2.Addr().Next(), s2.Addr().Next().Next()
		}
		mac := n.mac
		if mac == "" {
			b := mgmt.As4()
			mac = fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
		}
		c.waitPort(n.name, "stor-"+n.name, func(p *nbdb.LogicalSwitchPort) error {
			if p.Type != "router" || p.Options["router-port"] != "rtos-"+n.name {
				return fmt.Errorf("stor port %+v", p)
			}
			return nil
		})
		c.waitPort(n.name, "k8s-"+n.name, func(p *nbdb.LogicalSwitchPort) error {
			if want := mac + " " + mgmt.String(); !reflect.DeepEqual(p.Addresses, []string{want}) {
				return fmt.Errorf("mgmt addresses %v, want %s", p.Addresses, want)
			}
			return nil
		})
		ls := c.switchNamed(n.name)
		if ls.OtherConfig["subnet"] != n.subnet.String() || ls.OtherConfig["exclude_ips"] != mgmt.String() {
			t.Errorf("switch %s other_config %v", n.name, ls.OtherConfig)
		}
		rtos := c.lrp("rtos-" + n.name)
		if rtos == nil || !reflect.DeepEqual(rtos.Networks, []string{gw.String() + "/24"}) || !contains(c.routerNamed("ovn_cluster_router").Ports, rtos.UUID) {
			t.Errorf("rtos-%s = %+v", n.name, rtos)
		}
	}

	// Pods: address, LSP, annotation; hostNetwork and unscheduled pods get nothing.
	c.kube.EnsureNamespace(t, "ns1")
	pod := c.createPod("ns1", "web", "node1")
	c.createPod("ns1", "web2", "node2")
	c.createPod("ns1", "host", "node1", func(p *corev1.Pod) { p.Spec.HostNetwork = true })
	c.createPod("ns1", "pending", "")
	pn := c.podNetwork("ns1", "web")
	ip := pn.IPs[0]
	if !s1.Contains(ip.Addr()) || ip.Bits() != 24 || ip.Addr() == s1.Addr() || ip.Addr() == s1.Addr().Next() || ip.Addr() == s1.Addr().Next().Next() {
		t.Fatalf("pod address %s not a pod address of %s", ip, s1)
	}
	b := ip.Addr().As4()
	wantMAC := fmt.Sprintf("0a:58:%02x:%02x:%02x:%02x", b[0], b[1], b[2], b[3])
	if pn.MAC.String() != wantMAC || len(pn.Gateways) != 1 || pn.Gateways[0] != s1.Addr().Next() {
		t.Errorf("pod annotation %+v", pn)
	}
	raw, _ := c.kube.Client.CoreV1().Pods("ns1").Get(c.ctx(), "web", metav1.GetOptions{})
	for _, field := range []string{`"ip_addresses"`, `"mac_address"`, `"gateway_ips"`, `"routes"`, `"ip_address"`, `"gateway_ip"`} {
		if !strings.Contains(raw.Annotations[annotations.PodNetworks], field) {
			t.Errorf("annotation lacks %s: %s", field, raw.Annotations[annotations.PodNetworks])
		}
	}
	want := wantMAC + " " + ip.Addr().String()
	c.waitPort("node1", "ns1_web", func(p *nbdb.LogicalSwitchPort) error {
		if !reflect.DeepEqual(p.Addresses, []string{want}) || !reflect.DeepEqual(p.PortSecurity, []string{want}) {
			return fmt.Errorf("addresses %v port_security %v", p.Addresses, p.PortSecurity)
		}
		if p.Options["requested-chassis"] != "node1" || p.Options["iface-id-ver"] != string(pod.UID) {
			return fmt.Errorf("options %v", p.Options)
		}
		if p.ExternalIDs["k8s.ovn.org/owner-type"] != "Pod" || p.ExternalIDs["k8s.ovn.org/name"] != "ns1/web" {
			return fmt.Errorf("external_ids %v", p.ExternalIDs)
		}
		return nil
	})
	c.waitPort("node2", "ns1_web2", nil)
	time.Sleep(time.Second)
	if c.lsp("ns1_host") != nil || c.lsp("ns1_pending") != nil {
		t.Error("hostNetwork or unscheduled pod got a port")
	}

	// A finished pod loses its port; a deleted one too.
	done, _ := c.kube.Client.CoreV1().Pods("ns1").Get(c.ctx(), "web2", metav1.GetOptions{})
	done.Status.Phase = corev1.PodSucceeded
	if _, err := c.kube.Client.CoreV1().Pods("ns1").UpdateStatus(c.ctx(), done, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.waitNoPort("ns1_web2")
	c.deletePod("ns1", "web")
	c.waitNoPort("ns1_web")

	// Node deleted: its switch and router port go, its subnet is free again.
	c.deleteNode("node2")
	harness.Eventually(t, 30*time.Second, "node2 rows removed", func() error {
		if c.switchNamed("node2") != nil || c.lrp("rtos-node2") != nil || c.lsp("k8s-node2") != nil {
			return fmt.Errorf("node2 rows still there")
		}
		return nil
	})
}

func TestMasterNeverDuplicatesAddresses(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--cluster-subnet", "10.244.0.0/16/26")
	c.createNode("node1", nil)
	c.kube.EnsureNamespace(t, "burst")
	const n = 60 // a /26 has 60 pod addresses (64 less network, gateway, management, broadcast)
	for i := 0; i < n; i++ {
		c.createPod("burst", fmt.Sprintf("p%02d", i), "node1")
	}
	seen := map[netip.Addr]string{}
	for i := 0; i < n; i++ {
		name := fmt.Sprintf("p%02d", i)
		pn := c.podNetwork("burst", name)
		if other, dup := seen[pn.IPs[0].Addr()]; dup {
			t.Fatalf("%s and %s share %s", other, name, pn.IPs[0])
		}
		seen[pn.IPs[0].Addr()] = name
		c.waitPort("node1", "burst_"+name, nil)
	}
	// The subnet is now full: an extra pod waits, and gets an address once
	// another pod is deleted.
	c.createPod("burst", "extra", "node1")
	harness.Eventually(t, 30*time.Second, "AddressAllocationFailed event on pod extra", func() error {
		return c.warningEvent("burst", "extra", "AddressAllocationFailed")
	})
	c.deletePod("burst", "p00")
	c.podNetwork("burst", "extra")
}

func TestMasterExhaustedClusterSubnet(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--cluster-subnet", "10.244.0.0/23/24")
	c.createNode("a", nil)
	c.createNode("b", nil)
	sa, sb := c.nodeSubnet("a"), c.nodeSubnet("b")
	c.createNode("c", nil)
	harness.Eventually(t, 30*time.Second, "SubnetAllocationFailed event on node c", func() error {
		return c.warningEvent("default", "c", "SubnetAllocationFailed")
	})
	if c.nodeSubnet("a") != sa || c.nodeSubnet("b") != sb {
		t.Fatal("other nodes' subnets changed")
	}
	c.deleteNode("a")
	if got := c.nodeSubnet("c"); got != sa {
		t.Fatalf("node c got %s, want the freed %s", got, sa)
	}
}

func TestMasterIgnoresMalformedAnnotations(t *testing.T) {
	c := newCluster(t)
	c.createNode("bad", map[string]string{
		annotations.NodeSubnets:     `{"default":"not-a-cidr"}`,
		annotations.NodeMgmtPortMAC: "garbage",
	})
	c.createNode("foreign", map[string]string{annotations.NodeSubnets: `{"default":"192.168.7.0/24"}`})
	c.kube.EnsureNamespace(t, "ns")
	c.startMaster()
	// The user-written annotations are there before the master replaces
	// them: wait for the replacement, not for any parseable value.
	cluster := netip.MustParsePrefix("10.244.0.0/16")
	var bad, foreign netip.Prefix
	harness.Eventually(t, 30*time.Second, "both nodes given subnets of the cluster", func() error {
		bad, foreign = c.nodeSubnet("bad"), c.nodeSubnet("foreign")
		if !cluster.Contains(bad.Addr()) || !cluster.Contains(foreign.Addr()) || bad == foreign {
			return fmt.Errorf("subnets %s %s", bad, foreign)
		}
		return nil
	})
	c.waitPort("bad", "k8s-bad", func(p *nbdb.LogicalSwitchPort) error {
		if !strings.HasPrefix(p.Addresses[0], "0a:58:") {
			return fmt.Errorf("mgmt MAC not derived: %v", p.Addresses)
		}
		return nil
	})
	for name, value := range map[string]string{
		"garbage":   "ovn",
		"wrongnet":  `{"default":{"ip_addresses":["10.1.2.3/24"],"mac_address":"0a:58:0a:01:02:03"}}`,
		"reserved":  fmt.Sprintf(`{"default":{"ip_addresses":["%s/24"],"mac_address":"0a:58:0a:01:02:03"}}`, bad.Addr().Next()),
		"otherjson": `{"blue":{"ip_addresses":["10.244.9.9/24"]}}`,
	} {
		c.createPod("ns", name, "bad", func(p *corev1.Pod) { p.Annotations = map[string]string{annotations.PodNetworks: value} })
	}
	for _, name := range []string{"garbage", "wrongnet", "reserved", "otherjson"} {
		// The port exists once the master has decided; the annotation it then
		// writes must match the port (the pod's own bad annotation is replaced).
		lsp := c.waitPort("bad", "ns_"+name, nil)
		harness.Eventually(t, 10*time.Second, "annotation of "+name+" rewritten", func() error {
			pn := c.podNetwork("ns", name)
			a := pn.IPs[0].Addr()
			if !strings.HasSuffix(lsp.Addresses[0], " "+a.String()) {
				return fmt.Errorf("annotation %s, port %v", a, lsp.Addresses)
			}
			if !bad.Contains(a) || a == bad.Addr().Next() || a == bad.Addr().Next().Next() {
				return fmt.Errorf("pod %s got %s", name, a)
			}
			return nil
		})
	}
	if c.master.Exited() {
		t.Fatal("master died on bad input")
	}
}

// A master that starts finds a node's subnet annotation and a pod's address
// annotation written for the pod's UID (the master stopped between its
// annotation and its port) and honours both; an annotation without the UID
// marker (written by hand) is never honoured: that pod gets an address of
// the master's choosing (issue 31 item 5).
func TestMasterHonoursValidPodAnnotation(t *testing.T) {
	c := newCluster(t)
	c.createNode("n1", map[string]string{annotations.NodeSubnets: `{"default":"10.244.42.0/24"}`})
	c.kube.EnsureNamespace(t, "ns")
	kept := c.createPod("ns", "kept", "n1")
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotations.PodNetworks,
		`{"default":{"ip_addresses":["10.244.42.77/24"],"mac_address":"0a:58:0a:f4:2a:4d","gateway_ips":["10.244.42.1"],"pod_uid":"`+string(kept.UID)+`"}}`)
	if _, err := c.kube.Client.CoreV1().Pods("ns").Patch(c.ctx(), "kept", types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	c.createPod("ns", "handwritten", "n1", func(p *corev1.Pod) {
		p.Annotations = map[string]string{annotations.PodNetworks: `{"default":{"ip_address":"10.244.42.78/24","mac_address":"0a:58:0a:f4:2a:4e","gateway_ip":"10.244.42.1"}}`}
	})
	c.startMaster()
	if got := c.nodeSubnet("n1"); got.String() != "10.244.42.0/24" {
		t.Fatalf("node subnet %s, want the annotated 10.244.42.0/24", got)
	}
	c.waitPort("n1", "ns_kept", func(p *nbdb.LogicalSwitchPort) error {
		if !reflect.DeepEqual(p.Addresses, []string{"0a:58:0a:f4:2a:4d 10.244.42.77"}) {
			return fmt.Errorf("addresses %v", p.Addresses)
		}
		return nil
	})
	c.waitPort("n1", "ns_handwritten", func(p *nbdb.LogicalSwitchPort) error {
		if len(p.Addresses) != 1 || strings.HasSuffix(p.Addresses[0], " 10.244.42.78") {
			return fmt.Errorf("addresses %v: the hand-written annotation was honoured", p.Addresses)
		}
		return nil
	})
}
