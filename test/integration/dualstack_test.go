package integration

import (
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/trace"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// Pods of a dual-stack cluster through ovn_cni, OVS and OVN: each gets an
// address of both families, usable at once (not left tentative by
// duplicate address detection), a gateway and default route per family in
// the CNI result and in the pod; pods reach each other over IPv6 and IPv4
// on one node and across nodes, their router's IPv6 address, the nodes'
// management ports, and a dual-stack Service's ClusterIP of each family;
// a node reaches another node's pod over IPv6.
func TestDualStackPods(t *testing.T) {
	ranges := []string{"--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--service-cidr", "10.96.0.0/16,fd00:10:96::/112"}
	c := newNodeCluster(t)
	c.startMaster(ranges...)
	n1 := c.addNode("n1")
	if out, err := c.minionInit(n1, ranges...); err != nil {
		t.Fatalf("minion-init: %v\n%s", err, out)
	}
	n2 := c.addNode("n2")
	if out, err := c.minionInit(n2, ranges...); err != nil {
		t.Fatalf("minion-init n2: %v\n%s", err, out)
	}
	// The management port has an address of each family, usable at once,
	// and routes to both cluster ranges.
	mp0, _ := n1.NS.Exec("ip", "-6", "-o", "addr", "show", "dev", "ovn-k8s-mp0", "scope", "global")
	if !strings.Contains(mp0, "fd00:10:244::2/64") || strings.Contains(mp0, "tentative") {
		t.Errorf("ovn-k8s-mp0 IPv6 addresses %q, want fd00:10:244::2/64, not tentative", mp0)
	}
	routes6, _ := n1.NS.Exec("ip", "-6", "route")
	for _, want := range []string{"fd00:10:244::/48 via fd00:10:244::1", "fd00:10:96::/112 via fd00:10:244::1", "fd69::5 via fd00:10:244::1"} {
		if !strings.Contains(routes6, want) {
			t.Errorf("node IPv6 routes lack %q:\n%s", want, routes6)
		}
	}
	cnis := map[string]*harness.CNI{"n1": harness.NewCNI(t, n1, c.kube.Kubeconfig, nil), "n2": harness.NewCNI(t, n2, c.kube.Kubeconfig, nil)}
	type pod struct {
		ns       harness.NetNS
		ip4, ip6 string
		gw6      string
	}
	pods := map[string]pod{}
	for i, name := range []string{"a", "b", "c"} {
		node := map[string]string{"a": "n1", "b": "n1", "c": "n2"}[name]
		p := c.createPod("default", name, node)
		pn := c.podNetwork("default", name)
		if len(pn.IPs) != 2 || !pn.IPs[0].Addr().Is4() || !pn.IPs[1].Addr().Is6() || len(pn.Gateways) != 2 {
			t.Fatalf("pod %s: addresses %v, gateways %v; want one of each family, IPv4 first", name, pn.IPs, pn.Gateways)
		}
		ns := harness.NewNetNS(t, "pod")
		res, err := cnis[node].Add(harness.RuntimeConf(fmt.Sprintf("0123456789abcdef012%d", i), ns, "default", name, string(p.UID)))
		if err != nil {
			t.Fatalf("CNI ADD %s: %v", name, err)
		}
		r, err := current.NewResultFromResult(res)
		if err != nil {
			t.Fatal(err)
		}
		if len(r.IPs) != 2 || r.IPs[1].Address.String() != pn.IPs[1].String() || r.IPs[1].Gateway.String() != pn.Gateways[1].String() {
			t.Errorf("pod %s: result IPs %+v, want %v via %v", name, r.IPs, pn.IPs, pn.Gateways)
		}
		addrs, _ := ns.Exec("ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "global")
		if !strings.Contains(addrs, pn.IPs[1].String()) || strings.Contains(addrs, "tentative") {
			t.Errorf("pod %s: IPv6 addresses %q, want %s and not tentative", name, addrs, pn.IPs[1])
		}
		routes, _ := ns.Exec("ip", "-6", "route")
		if !strings.Contains(routes, "default via "+pn.Gateways[1].String()) {
			t.Errorf("pod %s: IPv6 routes lack the default via %s:\n%s", name, pn.Gateways[1], routes)
		}
		pods[name] = pod{ns: ns, ip4: pn.IPs[0].Addr().String(), ip6: pn.IPs[1].Addr().String(), gw6: pn.Gateways[1].String()}
	}
	harness.ServeTCP(t, pods["b"].ns, 8080, "b")
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc := c.createService("default", "web", func(s *corev1.Service) {
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	})
	if len(svc.Spec.ClusterIPs) != 2 {
		t.Fatalf("service cluster IPs %v, want one per family", svc.Spec.ClusterIPs)
	}
	ports := []discovery.EndpointPort{port("http", corev1.ProtocolTCP, 8080)}
	c.applySlice("default", "web", "web-v4", ports, endpoint(pods["b"].ip4, true))
	c.applySlice("default", "web", "web-v6", ports, endpoint(pods["b"].ip6, true))
	for _, ip := range svc.Spec.ClusterIPs {
		addr := net.JoinHostPort(ip, "80")
		harness.Eventually(t, 20*time.Second, "a reaching b through "+addr, func() error {
			got, err := harness.DialTCP(pods["a"].ns, addr, time.Second)
			if err != nil || got != "b" {
				return fmt.Errorf("answer %q, %v", got, err)
			}
			return nil
		})
	}
	for _, hop := range []struct{ from, to, what string }{
		{"a", pods["b"].ip6, "b over IPv6"},
		{"b", pods["a"].ip6, "a over IPv6"},
		{"a", pods["b"].ip4, "b over IPv4"},
		{"a", pods["a"].gw6, "the router's IPv6 address"},
		{"a", "fd00:10:244::2", "the node's management port over IPv6"},
		{"a", pods["c"].ip6, "c on the other node over IPv6"},
		{"c", pods["a"].ip6, "a on the other node over IPv6"},
		{"c", pods["a"].ip4, "a on the other node over IPv4"},
	} {
		harness.Eventually(t, 20*time.Second, hop.from+" reaching "+hop.what, func() error {
			out, err := pods[hop.from].ns.Exec("ping", "-c", "1", "-W", "1", hop.to)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	harness.Eventually(t, 20*time.Second, "node n1 reaching c on n2 over IPv6", func() error {
		out, err := n1.NS.Exec("ping", "-c", "1", "-W", "1", pods["c"].ip6)
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	// ovnkube trace in each family (issue 36): the packets just sent, told.
	for _, tr := range []struct {
		args          []string
		port, src, in string
	}{
		{[]string{"--ipv6", "default/a", "default/c", "--tcp", "8080"}, "default_c", pods["a"].ip6, "tunnel: Geneve from n1's chassis to n2's"},
		{[]string{"--ipv4", "default/a", "default/c", "--tcp", "8080"}, "default_c", pods["a"].ip4, "tunnel: Geneve from n1's chassis to n2's"},
		{[]string{"-6", "default/a", "svc/default/web", "--backend", net.JoinHostPort(pods["b"].ip6, "8080")}, "default_b", pods["a"].ip6,
			"balances " + net.JoinHostPort(svc.Spec.ClusterIPs[1], "80") + " (Service_default/web_TCP_cluster) → backend " + net.JoinHostPort(pods["b"].ip6, "8080")},
	} {
		harness.Eventually(t, 20*time.Second, "trace "+strings.Join(tr.args, " "), func() error {
			r, code := c.runTrace(tr.args...)
			if r.Trace.Verdict != trace.Delivered || r.Trace.Port != tr.port || code != 0 {
				return fmt.Errorf("verdict %s at %q (exit %d), want delivered at %q:\n%s\n%s", r.Trace.Verdict, r.Trace.Port, code, tr.port, decisions(r), r.Raw)
			}
			if !strings.Contains(r.Microflow, tr.src) || !strings.Contains(decisions(r), tr.in) {
				return fmt.Errorf("microflow %s (want the source %s), decisions without %q:\n%s", r.Microflow, tr.src, tr.in, decisions(r))
			}
			return nil
		})
	}
	// ofproto/trace on the source node's OVS, when the trace can reach it
	// (here: told where n1's is): across nodes the packet leaves by the
	// Geneve tunnel to n2's address, on one node by a port; from a node
	// whose OVS does not hold the source's port, none, and why.
	ovsOf := func(n *harness.Node) []string {
		return []string{"--ovs-db", n.OVSAddress(), "--ovs-vswitchd-ctl", filepath.Join(n.Dir, "ovs-vswitchd.ctl")}
	}
	for _, tr := range []struct {
		args            []string
		verdict, tunnel string
	}{
		{[]string{"-6", "default/a", "default/c", "--tcp", "8080"}, trace.Delivered, n2.TunnelIP},
		{[]string{"-4", "default/a", "default/c", "--tcp", "8080"}, trace.Delivered, n2.TunnelIP},
		{[]string{"-6", "default/a", "default/b", "--tcp", "8080"}, trace.Delivered, ""},
	} {
		harness.Eventually(t, 20*time.Second, "ofproto/trace "+strings.Join(tr.args, " "), func() error {
			r, _ := c.runTrace(append(tr.args, ovsOf(n1)...)...)
			if o := r.OFProto; o == nil || o.Verdict != tr.verdict || o.Tunnel != tr.tunnel {
				return fmt.Errorf("ofproto/trace %+v (%s), want %s with tunnel %q", o, r.OFProtoNote, tr.verdict, tr.tunnel)
			}
			return nil
		})
	}
	if r, _ := c.runTrace(append([]string{"default/a", "default/c", "--tcp", "8080"}, ovsOf(n2)...)...); r.OFProto != nil || !strings.Contains(r.OFProtoNote, "is not on this host's OVS") {
		t.Errorf("ofproto/trace of n1's pod on n2's OVS: %+v, note %q; want none, and why", r.OFProto, r.OFProtoNote)
	}
}

// A dual-stack node's shared gateway: nics-to-bridge moves both families'
// addresses and default routes onto the bridge, the node daemon reads them
// from it (no address flags), the master builds GR_<node> with both; a pod
// reaches an external host over IPv6 and IPv4 with the node's address (the
// external host has no route to the pods: only SNAT answers); a NodePort
// answers over IPv6 to the external host and to the node itself (through
// the host's ip6tables chain).
func TestDualStackGateway(t *testing.T) {
	ranges := []string{"--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--service-cidr", "10.96.0.0/16,fd00:10:96::/112"}
	c := newNodeCluster(t)
	c.startMaster(ranges...)
	n1 := c.addNode("n1")
	ext := externalNIC(t, n1, []string{"addr", "add", "172.18.0.2/24", "dev", "eth1"}, []string{"-6", "addr", "add", "fc00:f853::2/64", "dev", "eth1", "nodad"},
		[]string{"route", "add", "default", "via", "172.18.0.1"}, []string{"-6", "route", "add", "default", "via", "fc00:f853::1"})
	// The external host computes its TCP checksums (a veth leaves them to
	// "hardware", which OVS's userspace conntrack refuses), as pods do.
	for _, args := range [][]string{{"ip", "-6", "addr", "add", "fc00:f853::1/64", "dev", "up0", "nodad"}, {"ethtool", "-K", "up0", "tx", "off"}} {
		if out, err := ext.Exec(args...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	ovnkube := harness.Binary(t, "ovnkube")
	if out, err := n1.NS.Exec(ovnkube, "nics-to-bridge", "--ovs-address", n1.OVSAddress(), "--datapath-type", "netdev", "eth1"); err != nil {
		t.Fatalf("nics-to-bridge: %v\n%s", err, out)
	}
	if out, _ := n1.NS.Exec("ip", "-6", "route"); !strings.Contains(out, "default via fc00:f853::1 dev breth1") {
		t.Errorf("IPv6 default route not moved to breth1:\n%s", out)
	}
	d := harness.Start(t, c.logDir, "node-n1", append([]string{"ip", "netns", "exec", n1.NS.Name, ovnkube, "node",
		"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:" + c.ovn.SBSock,
		"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev", "--resync-interval", "500ms",
		"--bridge-interface", "breth1"}, ranges...)...)
	harness.Eventually(t, 20*time.Second, "GR_n1's ports with both families", func() error {
		if d.Exited() {
			t.Fatalf("ovnkube node exited:\n%s", d.Tail(20))
		}
		rtoj, rtoe := c.lrp("rtoj-GR_n1"), c.lrp("rtoe-GR_n1")
		if rtoj == nil || rtoe == nil || !slices.Equal(rtoj.Networks, []string{"100.64.0.2/16", "fd98::2/64"}) ||
			!slices.Equal(rtoe.Networks, []string{"172.18.0.2/24", "fc00:f853::2/64"}) {
			return fmt.Errorf("rtoj-GR_n1 %+v, rtoe-GR_n1 %+v", rtoj, rtoe)
		}
		return nil
	})
	p := c.createPod("default", "web", "n1")
	pn := c.podNetwork("default", "web")
	podNS := harness.NewNetNS(t, "pod")
	if _, err := harness.NewCNI(t, n1, c.kube.Kubeconfig, nil).Add(harness.RuntimeConf("0123456789abcdef0199", podNS, "default", "web", string(p.UID))); err != nil {
		t.Fatalf("CNI ADD: %v (pod network %+v)", err, pn)
	}
	ping := func(from harness.NetNS, what, dst string) {
		t.Helper()
		harness.Eventually(t, 30*time.Second, what, func() error {
			out, err := from.Exec("ping", "-c", "1", "-W", "1", dst)
			if err != nil {
				return fmt.Errorf("%v: %s", err, out)
			}
			return nil
		})
	}
	ping(podNS, "pod reaching the external host over IPv6", "fc00:f853::1")
	ping(podNS, "pod reaching the external host over IPv4", "172.18.0.1")

	harness.ServeTCP(t, podNS, 8080, "web")
	policy := corev1.IPFamilyPolicyRequireDualStack
	svc := c.createService("default", "web", func(s *corev1.Service) {
		s.Spec.Type = corev1.ServiceTypeNodePort
		s.Spec.IPFamilyPolicy = &policy
		s.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	})
	ports := []discovery.EndpointPort{port("http", corev1.ProtocolTCP, 8080)}
	c.applySlice("default", "web", "web-v4", ports, endpoint(pn.IPs[0].Addr().String(), true))
	c.applySlice("default", "web", "web-v6", ports, endpoint(pn.IPs[1].Addr().String(), true))
	nodePort := fmt.Sprint(svc.Spec.Ports[0].NodePort)
	harness.Eventually(t, 20*time.Second, "the host's IPv6 NodePort chain", func() error {
		out, err := n1.NS.Exec("ip6tables", "-w", "-t", "nat", "-S", "OVN-KUBE-NODEPORT")
		if err != nil || !strings.Contains(out, "--dport "+nodePort) || !strings.Contains(out, "["+svc.Spec.ClusterIPs[1]+"]:80") {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	for _, from := range []struct {
		name string
		ns   harness.NetNS
	}{{"the external host", ext}, {"the node itself", n1.NS}, {"a pod", podNS}} {
		for _, addr := range []string{"[fc00:f853::2]:" + nodePort, "172.18.0.2:" + nodePort} {
			t.Run(from.name+" to "+addr, func(t *testing.T) {
				harness.Eventually(t, 20*time.Second, from.name+" reaching the NodePort at "+addr, func() error {
					got, err := harness.DialTCP(from.ns, addr, time.Second)
					if err != nil || got != "web" {
						return fmt.Errorf("answer %q, %v", got, err)
					}
					return nil
				})
			})
		}
	}
}
