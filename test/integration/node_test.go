package integration

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	current "github.com/containernetworking/cni/pkg/types/100"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	ovncni "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/cni"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// gatewayBridge gives the node an external NIC eth1 on the userspace bridge
// breth1, for a node daemon with a gateway (--bridge-interface breth1).
func gatewayBridge(t *testing.T, n *harness.Node) {
	t.Helper()
	externalNIC(t, n)
	if out, err := n.VSCtl("add-br", "breth1", "--", "set", "bridge", "breth1", "datapath_type=netdev", "--", "add-port", "breth1", "eth1"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
}

// nodeCluster is a cluster with real node namespaces.
type nodeCluster struct {
	*cluster
	underlay *harness.Underlay
}

func newNodeCluster(t *testing.T) *nodeCluster {
	if os.Geteuid() != 0 {
		t.Fatal("node tests need root (network namespaces, OVS); CI runs as root")
	}
	return &nodeCluster{cluster: newCluster(t), underlay: harness.NewUnderlay(t)}
}

// addNode starts the node's OVS and ovn-controller and creates its Node object.
func (c *nodeCluster) addNode(name string) *harness.Node {
	n := harness.StartNode(c.t, c.ovn, c.underlay, name)
	n.ReachAPI(c.t, c.kube)
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("%s", n.Logs())
		}
	})
	c.createNode(name, nil)
	return n
}

func (c *nodeCluster) minionInit(n *harness.Node, extra ...string) (string, error) {
	args := append([]string{"ip", "netns", "exec", n.NS.Name, harness.Binary(c.t, "ovnkube"), "minion-init",
		"--node-name", n.Name, "--encap-ip", n.TunnelIP, "--sb-address", "unix:" + c.ovn.SBSock,
		"--ovs-address", n.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev"}, extra...)
	return harness.Run(args...)
}

// ovsState is the configuration minion-init owns, UUIDs included, so a
// second run that recreated anything would show. Keys ovn-controller adds on
// its own schedule (ovn-installed, ...) are left out.
func ovsState(t *testing.T, n *harness.Node) string {
	var b strings.Builder
	for _, args := range [][]string{
		{"get", "open_vswitch", ".", "_uuid", "external_ids:system-id", "external_ids:hostname", "external_ids:ovn-remote",
			"external_ids:ovn-encap-type", "external_ids:ovn-encap-ip", "external_ids:ovn-bridge"},
		{"--format=csv", "--columns=_uuid,name,datapath_type,fail_mode,other_config,ports", "list", "bridge", "br-int"},
		{"--format=csv", "--columns=_uuid,name,interfaces", "list", "port", "ovn-k8s-mp0"},
		{"--format=csv", "--columns=_uuid,name,type,mac,mtu_request", "list", "interface", "ovn-k8s-mp0"},
		{"get", "interface", "ovn-k8s-mp0", "external_ids:iface-id"},
	} {
		out, err := n.VSCtl(args...)
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(out)
	}
	return b.String()
}

func TestMinionInitAndCNI(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	subnet := c.nodeSubnet("n1")
	gw, mgmt := subnet.Addr().Next(), subnet.Addr().Next().Next()

	if out, err := c.minionInit(n1); err != nil {
		t.Fatalf("minion-init: %v\n%s", err, out)
	}
	before := ovsState(t, n1)
	if out, err := c.minionInit(n1); err != nil {
		t.Fatalf("second minion-init: %v\n%s", err, out)
	}
	if after := ovsState(t, n1); after != before {
		t.Errorf("second minion-init changed OVS:\nbefore %s\nafter  %s", before, after)
	}
	for _, want := range []string{`"unix:` + c.ovn.SBSock + `"`, "geneve", `"` + n1.TunnelIP + `"`, "br-int", "netdev,secure", "k8s-n1"} {
		if !strings.Contains(before, want) {
			t.Errorf("OVS state lacks %s:\n%s", want, before)
		}
	}
	link, _ := n1.NS.Exec("ip", "-o", "addr", "show", "dev", "ovn-k8s-mp0")
	if !strings.Contains(link, mgmt.String()+"/24") {
		t.Errorf("ovn-k8s-mp0 lacks %s/24: %s", mgmt, link)
	}
	mtu, _ := n1.NS.Exec("cat", "/sys/class/net/ovn-k8s-mp0/mtu")
	if strings.TrimSpace(mtu) != "1400" {
		t.Errorf("ovn-k8s-mp0 MTU %s", mtu)
	}
	routes, _ := n1.NS.Exec("ip", "route")
	for _, want := range []string{"10.244.0.0/16 via " + gw.String(), "10.96.0.0/16 via " + gw.String(), "169.254.169.5 via " + gw.String()} {
		if !strings.Contains(routes, want) {
			t.Errorf("routes lack %q:\n%s", want, routes)
		}
	}
	node, _ := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	sysID, _ := n1.VSCtl("get", "open_vswitch", ".", "external_ids:system-id")
	if node.Annotations[annotations.NodeChassisID] != strings.Trim(strings.TrimSpace(sysID), `"`) || node.Annotations[annotations.NodeMgmtPortMAC] == "" {
		t.Errorf("node annotations %v (system-id %s)", node.Annotations, sysID)
	}
	// The master follows the published MAC, and the management port is bound and reachable.
	c.waitPort("n1", "k8s-n1", nil)
	harness.Eventually(t, 20*time.Second, "router reachable through ovn-k8s-mp0", func() error {
		_, err := n1.NS.Exec("ping", "-c", "1", "-W", "1", gw.String())
		return err
	})

	// ovn_cni through libcni with the dist conflist (ovn_cni, then portmap).
	pod := c.createPod("default", "web", "n1")
	pn := c.podNetwork("default", "web")
	podNS := harness.NewNetNS(t, "pod")
	cni := harness.NewCNI(t, n1, c.kube.Kubeconfig, nil)
	rt := harness.RuntimeConf("0123456789abcdef0123", podNS, "default", "web", string(pod.UID))
	res, err := cni.Add(rt)
	if err != nil {
		t.Fatalf("CNI ADD: %v", err)
	}
	r, err := current.NewResultFromResult(res)
	if err != nil {
		t.Fatal(err)
	}
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != pn.IPs[0].String() || r.IPs[0].Gateway.String() != gw.String() {
		t.Errorf("result IPs %+v, want %s via %s", r.IPs, pn.IPs[0], gw)
	}
	eth0, _ := podNS.Exec("ip", "-o", "link", "show", "eth0")
	if !strings.Contains(eth0, pn.MAC.String()) || !strings.Contains(eth0, "mtu 1400") {
		t.Errorf("eth0: %s", eth0)
	}
	addr, _ := podNS.Exec("ip", "-o", "addr", "show", "eth0")
	if !strings.Contains(addr, pn.IPs[0].String()) {
		t.Errorf("eth0 addresses: %s", addr)
	}
	podRoutes, _ := podNS.Exec("ip", "route")
	for _, want := range []string{"default via " + gw.String(), "10.96.0.0/16 via " + gw.String(), "100.64.0.0/16 via " + gw.String()} {
		if !strings.Contains(podRoutes, want) {
			t.Errorf("pod routes lack %q:\n%s", want, podRoutes)
		}
	}
	offload, _ := podNS.Exec("ethtool", "-k", "eth0")
	if !strings.Contains(offload, "tx-checksumming: off") {
		t.Errorf("TX checksum offload still on:\n%s", offload)
	}
	hostEnd := ovncni.HostVethName("0123456789abcdef0123")
	ids, _ := n1.VSCtl("get", "interface", hostEnd, "external_ids")
	for _, want := range []string{`iface-id=default_web`, `iface-id-ver="` + string(pod.UID), `sandbox="0123456789abcdef0123"`, `attached_mac="` + pn.MAC.String(), `ip_addresses="` + pn.IPs[0].String(), `ovn-installed="true"`} {
		if !strings.Contains(ids, want) {
			t.Errorf("OVS interface external_ids lack %s: %s", want, ids)
		}
	}
	harness.Eventually(t, 10*time.Second, "LSP default_web up", func() error {
		if lsp := c.lsp("default_web"); lsp == nil || lsp.Up == nil || !*lsp.Up {
			return fmt.Errorf("not up")
		}
		return nil
	})
	for _, dst := range []string{gw.String(), mgmt.String()} {
		harness.Eventually(t, 10*time.Second, "pod reaching "+dst, func() error {
			_, err := podNS.Exec("ping", "-c", "1", "-W", "1", dst)
			return err
		})
	}
	if err := cni.Check(rt); err != nil {
		t.Errorf("CNI CHECK: %v", err)
	}
	for i := 0; i < 2; i++ {
		if err := cni.Del(rt); err != nil {
			t.Fatalf("CNI DEL #%d: %v", i+1, err)
		}
	}
	if out, err := podNS.Exec("ip", "link", "show", "eth0"); err == nil {
		t.Errorf("eth0 left after DEL: %s", out)
	}
	if out, _ := n1.VSCtl("list-ports", "br-int"); strings.Contains(out, hostEnd) {
		t.Errorf("OVS port left after DEL: %s", out)
	}
	if out, err := n1.NS.Exec("ip", "link", "show", hostEnd); err == nil {
		t.Errorf("host veth left after DEL: %s", out)
	}
	// A container ID that names a host interface (the CNI library accepts
	// "ovn-k8s-mp0") touches nothing of the host on ADD or DEL.
	evilNS := harness.NewNetNS(t, "pod")
	evil := harness.RuntimeConf("ovn-k8s-mp0", evilNS, "default", "web", string(pod.UID))
	if _, err := cni.Add(evil); err != nil {
		t.Fatalf("CNI ADD with container ID ovn-k8s-mp0: %v", err)
	}
	if err := cni.Del(evil); err != nil {
		t.Fatalf("CNI DEL with container ID ovn-k8s-mp0: %v", err)
	}
	if link, _ := n1.NS.Exec("ip", "-o", "addr", "show", "dev", "ovn-k8s-mp0"); !strings.Contains(link, mgmt.String()+"/24") {
		t.Errorf("ovn-k8s-mp0 damaged by a CNI call for container ID ovn-k8s-mp0: %q", link)
	}
	if out, _ := n1.VSCtl("list-ports", "br-int"); !strings.Contains(out, "ovn-k8s-mp0") {
		t.Errorf("OVS port ovn-k8s-mp0 removed by a CNI call for container ID ovn-k8s-mp0: %s", out)
	}
	// DEL of a sandbox whose netns is gone is fine too.
	gone := harness.RuntimeConf("fedcba9876543210", harness.NetNS{Name: "ovnk-never-existed"}, "default", "web", string(pod.UID))
	if err := cni.Del(gone); err != nil {
		t.Errorf("DEL with a missing netns: %v", err)
	}
}

// cniError runs the plugin binary directly, as a runtime would, and decodes
// the error JSON it must print.
func cniError(t *testing.T, stdin string, env ...string) (uint, string) {
	cmd := exec.Command(harness.Binary(t, "ovn_cni"))
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err == nil {
		t.Fatalf("ovn_cni succeeded on bad input: %s", out)
	}
	var e struct {
		Code    uint   `json:"code"`
		Msg     string `json:"msg"`
		Details string `json:"details"`
	}
	if jerr := json.Unmarshal(out, &e); jerr != nil {
		t.Fatalf("ovn_cni printed no CNI error JSON: %q", out)
	}
	return e.Code, e.Msg + " " + e.Details
}

func TestCNIErrors(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	podNS := harness.NewNetNS(t, "pod")
	base := []string{"CNI_COMMAND=ADD", "CNI_CONTAINERID=abc123", "CNI_NETNS=" + podNS.Path(), "CNI_IFNAME=eth0", "CNI_PATH=/nonexistent"}

	code, msg := cniError(t, "{not json", append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=x")...)
	if code != 6 {
		t.Errorf("bad JSON: code %d (%s), want 6", code, msg)
	}
	code, msg = cniError(t, `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","mtu":50}`, append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=x")...)
	if code != 7 || !strings.Contains(msg, "mtu") {
		t.Errorf("bad mtu: code %d (%s), want 7", code, msg)
	}
	code, msg = cniError(t, `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","annotationTimeout":"soon"}`, append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=x")...)
	if code != 7 || !strings.Contains(msg, "annotationTimeout") {
		t.Errorf("bad duration: code %d (%s), want 7", code, msg)
	}
	code, msg = cniError(t, `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni"}`, append(base, "CNI_ARGS=IgnoreUnknown=1")...)
	if code != 4 {
		t.Errorf("no pod in CNI_ARGS: code %d (%s), want 4", code, msg)
	}
	code, msg = cniError(t, `{"cniVersion":"9.9.9","name":"n","type":"ovn_cni"}`, append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=x")...)
	if code != 1 {
		t.Errorf("unknown version: code %d (%s), want 1", code, msg)
	}
	// A pod that is never annotated (not scheduled): a bounded wait, code 11,
	// and a message naming the pod and what it waited for.
	c.createPod("default", "unscheduled", "")
	conf := fmt.Sprintf(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","kubeconfig":%q,"annotationTimeout":"1s"}`, c.kube.Kubeconfig)
	start := time.Now()
	code, msg = cniError(t, conf, append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=unscheduled")...)
	if code != 11 || !strings.Contains(msg, "default/unscheduled") || !strings.Contains(msg, annotations.PodNetworks) {
		t.Errorf("missing annotation: code %d (%s), want 11 naming the pod and the annotation", code, msg)
	}
	if time.Since(start) > 15*time.Second {
		t.Errorf("annotation wait not bounded by annotationTimeout: %s", time.Since(start))
	}
	// An annotation copied from an earlier incarnation (a re-applied manifest)
	// is not the master's word for this pod: never used.
	copied := annotations.FormatPodNetworks(annotations.PodNetwork{IPs: []netip.Prefix{netip.MustParsePrefix("10.244.0.9/24")},
		MAC: net.HardwareAddr{0x0a, 0x58, 10, 244, 0, 9}, PodUID: "uid-of-an-earlier-incarnation"})
	c.createPod("default", "copied", "", func(p *corev1.Pod) { p.Annotations = map[string]string{annotations.PodNetworks: copied} })
	code, msg = cniError(t, conf, append(base, "CNI_ARGS=K8S_POD_NAMESPACE=default;K8S_POD_NAME=copied")...)
	if code != 11 || !strings.Contains(msg, "uid-of-an-earlier-incarnation") {
		t.Errorf("copied annotation: code %d (%s), want 11 naming the foreign UID", code, msg)
	}
}

func TestNodeDaemonRecreatesManagementPort(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	c.nodeSubnet("n1")
	d := harness.Start(t, c.logDir, "node-n1", "ip", "netns", "exec", n1.NS.Name, harness.Binary(t, "ovnkube"), "node",
		"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:"+c.ovn.SBSock,
		"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev", "--resync-interval", "500ms",
		"--metrics-address", "127.0.0.1:9410")
	get := httpGetIn(n1.NS, 9410) // the daemon's endpoint is inside the node's namespace
	waitMgmt := func() {
		harness.Eventually(t, 20*time.Second, "ovn-k8s-mp0 configured", func() error {
			if d.Exited() {
				t.Fatalf("ovnkube node exited:\n%s", d.Tail(20))
			}
			out, err := n1.NS.Exec("ip", "-o", "addr", "show", "dev", "ovn-k8s-mp0")
			if err != nil || !strings.Contains(out, "inet ") {
				return fmt.Errorf("not yet: %v %s", err, out)
			}
			return nil
		})
	}
	waitMgmt()
	waitStatus(t, get, "/readyz", 200)
	waitMetric(t, get, "ovnkube_node_ready", func(v float64) bool { return v == 1 })
	waitMetric(t, get, "ovnkube_node_repairs_total", func(v float64) bool { return v == 0 })
	ifaceUUID := func() string {
		out, _ := n1.VSCtl("--if-exists", "get", "interface", "ovn-k8s-mp0", "_uuid")
		return strings.TrimSpace(out)
	}
	before := ifaceUUID()
	if _, err := n1.VSCtl("del-port", "br-int", "ovn-k8s-mp0"); err != nil {
		t.Fatal(err)
	}
	// The daemon notices (periodic check, or any node event) and recreates it:
	// a new OVS interface row, and the link configured again.
	harness.Eventually(t, 20*time.Second, "ovn-k8s-mp0 recreated", func() error {
		if now := ifaceUUID(); now == "" || now == before {
			return fmt.Errorf("interface row %q (was %q)", now, before)
		}
		return nil
	})
	waitMgmt()
	waitMetric(t, get, "ovnkube_node_repairs_total", func(v float64) bool { return v >= 1 })
	waitStatus(t, get, "/readyz", 200)
}

func TestCNIStandaloneAndChained(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	c.nodeSubnet("n1")
	if out, err := c.minionInit(n1); err != nil {
		t.Fatalf("minion-init: %v\n%s", err, out)
	}
	cni := harness.NewCNI(t, n1, c.kube.Kubeconfig, nil)

	// Standalone: one network config, no list.
	solo := c.createPod("default", "solo", "n1")
	soloNS := harness.NewNetNS(t, "pod")
	rt := harness.RuntimeConf("5010500000000000aaaa", soloNS, "default", "solo", string(solo.UID))
	res, err := cni.AddSingle(rt)
	if err != nil {
		t.Fatalf("standalone ADD: %v", err)
	}
	r, _ := current.NewResultFromResult(res)
	if len(r.IPs) != 1 || len(r.Interfaces) != 2 {
		t.Errorf("standalone result %+v", r)
	}
	// A new sandbox of the same pod (the runtime recreated it without a DEL):
	// the stale port with the same iface-id is replaced, so OVN binds the new one.
	soloNS2 := harness.NewNetNS(t, "pod")
	rt2 := harness.RuntimeConf("7e5a2b0000000000cccc", soloNS2, "default", "solo", string(solo.UID))
	if _, err := cni.AddSingle(rt2); err != nil {
		t.Fatalf("ADD of a second sandbox: %v", err)
	}
	ids, _ := n1.VSCtl("--bare", "--columns=name", "find", "interface", "external_ids:iface-id=default_solo")
	if got := strings.Fields(ids); len(got) != 1 {
		t.Errorf("interfaces bound to default_solo after a new sandbox: %v, want exactly one", got)
	}
	if err := cni.DelSingle(rt2); err != nil {
		t.Errorf("DEL of the second sandbox: %v", err)
	}
	if err := cni.DelSingle(rt); err != nil {
		t.Errorf("standalone DEL: %v", err)
	}

	// Chained behind ovn_cni: bandwidth and portmap receive our result as
	// prevResult and pass it on; CHECK and DEL run through the whole chain.
	chained := cni.WithPlugins(t, `{"type":"bandwidth","capabilities":{"bandwidth":true}}`, `{"type":"portmap","capabilities":{"portMappings":true}}`)
	pod := c.createPod("default", "chained", "n1")
	podNS := harness.NewNetNS(t, "pod")
	rt = harness.RuntimeConf("c4a1ed0000000000bbbb", podNS, "default", "chained", string(pod.UID))
	res, err = chained.Add(rt)
	if err != nil {
		t.Fatalf("chained ADD: %v", err)
	}
	r, _ = current.NewResultFromResult(res)
	pn := c.podNetwork("default", "chained")
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != pn.IPs[0].String() {
		t.Errorf("chained result lost ovn_cni's address: %+v", r)
	}
	// CHECK over the shipped chain (ovn_cni, portmap): Debian's bandwidth
	// plugin itself crashes on CHECK when no rate is configured.
	if err := cni.Check(rt); err != nil {
		t.Errorf("chained CHECK: %v", err)
	}
	if err := chained.Del(rt); err != nil {
		t.Errorf("chained DEL: %v", err)
	}
	if out, _ := n1.VSCtl("list-ports", "br-int"); strings.Contains(out, "c4a1ed000000000") || strings.Contains(out, "5010500000000000") {
		t.Errorf("ports left: %s", out)
	}
}

// Issue 13, items 1 and 2: the master rebuilds the gateway the node daemon
// asked for when the NB is replaced by an empty database or its router is
// deleted by hand; the node daemon keeps the gateway bridge's flows exactly
// the desired set after a flow is deleted by hand and across its restart.
func TestNodeDaemonKeepsGatewayFlowsAndRows(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	c.nodeSubnet("n1")
	gatewayBridge(t, n1)
	startDaemon := func() *harness.Process {
		// The daemon's older flag names (--gateway-bridge, --gateway-ip, --gateway-nexthop) still work.
		return harness.Start(t, c.logDir, "node-n1", "ip", "netns", "exec", n1.NS.Name, harness.Binary(t, "ovnkube"), "node",
			"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:"+c.ovn.SBSock,
			"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev", "--resync-interval", "500ms",
			"--gateway-bridge", "breth1", "--gateway-ip", "172.18.0.2/24", "--default-gw", "172.18.0.1")
	}
	d := startDaemon()
	waitGateway := func(what string) {
		harness.Eventually(t, 15*time.Second, what, func() error {
			if d.Exited() {
				t.Fatalf("ovnkube node exited:\n%s", d.Tail(20))
			}
			if c.routerNamed("GR_n1") == nil || c.lrp("rtoj-GR_n1") == nil || c.switchNamed("ext_n1") == nil {
				return fmt.Errorf("gateway rows missing")
			}
			return nil
		})
	}
	waitGateway("GR_n1 built by the master from the node daemon's annotation")
	mgmt := "unix:" + n1.Dir + "/breth1.mgmt"
	dump := func() string {
		out, _ := n1.NS.Exec("ovs-ofctl", "dump-flows", "--no-stats", mgmt)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(lines)
		return strings.Join(lines, "\n")
	}
	// The desired set includes the patch port once ovn-controller made it.
	var desired string
	harness.Eventually(t, 20*time.Second, "breth1's flows include the patch port", func() error {
		desired = dump()
		if !strings.Contains(desired, "priority=9,in_port=") {
			return fmt.Errorf("flows:\n%s", desired)
		}
		return nil
	})
	if out, err := n1.NS.Exec("ovs-ofctl", "del-flows", "--strict", mgmt, "table=0,priority=9,in_port=2"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if out, err := n1.NS.Exec("ovs-ofctl", "add-flow", mgmt, "table=0,priority=1000,actions=NORMAL"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	harness.Eventually(t, 10*time.Second, "breth1's flows restored exactly", func() error {
		if got := dump(); got != desired {
			return fmt.Errorf("flows:\n%s", got)
		}
		return nil
	})
	d.Stop()
	d = startDaemon()
	harness.Eventually(t, 10*time.Second, "the restarted daemon leaves breth1's flows as they were", func() error {
		if d.Exited() {
			t.Fatalf("ovnkube node exited:\n%s", d.Tail(20))
		}
		if got := dump(); got != desired {
			return fmt.Errorf("flows:\n%s", got)
		}
		return nil
	})

	c.ovn.ResetNB()
	c.nb = harness.WatchNB(t, c.ovn)
	waitGateway("GR_n1 rebuilt after the NB was replaced")
	if out, err := c.ovn.NBCtl("lr-del", "GR_n1"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	waitGateway("GR_n1 rebuilt after it was deleted by hand")
}
