// Package e2e proves the pieces work together the way a real cluster uses
// them: pods wired by ovn_cni on two nodes, traffic through OVN's switches,
// router, Geneve tunnels and load balancers. Each subtest names the path it checks.
package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	ovncni "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/cni"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

const (
	tcpPort  = 8080
	udpPort  = 5353
	hostPort = 10180 // a host-network server's
	ns       = "e2e"
)

func ptr[T any](v T) *T { return &v }

type env struct {
	t *testing.T
	c *harness.Cluster
}

// runServers makes a pod answer TCP and UDP with its name.
func runServers(t *testing.T, p *harness.Pod) {
	harness.ServeTCP(t, p.NS, tcpPort, p.Name)
	harness.ServeUDP(t, p.NS, udpPort, p.Name)
}

func (e *env) service(name string, backends ...*harness.Pod) string {
	return e.serviceIn(ns, name, backends...)
}

// webPorts are a service's TCP port 80 and UDP port 53, to the servers of runServers.
var webPorts = []harness.ServicePort{
	{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: tcpPort},
	{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: udpPort},
}

// serviceIn creates a service in a namespace with the backends as
// endpoints and returns its (primary) ClusterIP.
func (e *env) serviceIn(namespace, name string, backends ...*harness.Pod) string {
	return e.c.CreateService(namespace, name, webPorts, backends).Spec.ClusterIP
}

// serviceTo creates a TCP service, port 80 to targetPort on the backends.
func (e *env) serviceTo(name string, targetPort int32, backends ...*harness.Pod) string {
	ports := []harness.ServicePort{{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: targetPort}}
	return e.c.CreateService(ns, name, ports, backends).Spec.ClusterIP
}

func (e *env) setEndpoints(svc string, backends ...*harness.Pod) {
	e.setEndpointsIn(ns, svc, backends...)
}

// setEndpointsIn writes the service's EndpointSlices (no controller-manager runs).
func (e *env) setEndpointsIn(namespace, svc string, backends ...*harness.Pod) {
	e.c.SetEndpoints(namespace, svc, webPorts, backends...)
}

// askUntil asks on the flow (every 100 ms, one socket throughout) until want
// answers, for at most 15 s, and fails with the last answer.
func askUntil(t *testing.T, flow *harness.UDPFlow, want string) {
	t.Helper()
	harness.Eventually(t, 15*time.Second, "the UDP flow answered by "+want, func() error {
		got, err := flow.Ask(100 * time.Millisecond)
		if err != nil {
			time.Sleep(100 * time.Millisecond) // a rejected datagram fails at once
			return err
		}
		if got != want {
			return fmt.Errorf("answered by %q", got)
		}
		return nil
	})
}

// reach retries a TCP request until it answers (new flows need a moment on
// the userspace datapath) and returns the answer.
func reach(t *testing.T, from harness.NetNS, addr string) string {
	t.Helper()
	var got string
	harness.Eventually(t, 20*time.Second, "TCP "+addr+" from "+from.Name, func() error {
		var err error
		got, err = harness.DialTCP(from, addr, 2*time.Second)
		return err
	})
	return got
}

func reachUDP(t *testing.T, from harness.NetNS, addr string) string {
	t.Helper()
	var got string
	harness.Eventually(t, 20*time.Second, "UDP "+addr+" from "+from.Name, func() error {
		var err error
		got, err = harness.DialUDP(from, addr, time.Second)
		return err
	})
	return got
}

func ping(t *testing.T, from harness.NetNS, ip string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, "ICMP "+ip+" from "+from.Name, func() error { return harness.Ping(from, ip) })
}

// backendsReached sends requests to a VIP until every expected backend answered.
func backendsReached(t *testing.T, from harness.NetNS, addr string, want ...string) {
	t.Helper()
	seen := map[string]bool{}
	for i := 0; i < 60 && len(seen) < len(want); i++ {
		if got, err := harness.DialTCP(from, addr, 2*time.Second); err == nil {
			seen[got] = true
		}
	}
	for _, w := range want {
		if !seen[w] {
			t.Fatalf("backend %s never answered on %s (answers: %v)", w, addr, seen)
		}
	}
}

// startEnv starts a cluster (root only: namespaces, OVS) whose master and
// node daemon logs are shown when the test fails.
func startEnv(t *testing.T, start func() *harness.Cluster) (*harness.Cluster, *env) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("e2e needs root (network namespaces, OVS); CI runs as root")
	}
	c := start()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("master log:\n%s", c.Master.Tail(40))
			for _, n := range c.Nodes {
				t.Logf("%s\n--- node daemon %s:\n%s", n.Logs(), n.Name, n.Daemon.Tail(20))
			}
		}
	})
	return c, &env{t: t, c: c}
}

func TestE2E(t *testing.T) {
	c, e := startEnv(t, func() *harness.Cluster { return harness.NewCluster(t) })
	n1, n2 := c.AddNode("n1"), c.AddNode("n2")
	c.EnsureNamespace(ns)
	a1 := c.RunPod(ns, "a1", "n1", nil)
	a2 := c.RunPod(ns, "a2", "n1", nil)
	b1 := c.RunPod(ns, "b1", "n2", nil)
	for _, p := range []*harness.Pod{a1, a2, b1} {
		runServers(t, p)
	}
	t.Logf("pods: a1 %s (n1), a2 %s (n1), b1 %s (n2)", a1.IP, a2.IP, b1.IP)

	t.Run("pod-to-pod/same-node/icmp", func(t *testing.T) { ping(t, a1.NS, a2.IP.String()) })
	t.Run("pod-to-pod/same-node/tcp", func(t *testing.T) {
		if got := reach(t, a1.NS, fmt.Sprintf("%s:%d", a2.IP, tcpPort)); got != "a2" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("pod-to-pod/cross-node-geneve/icmp", func(t *testing.T) { ping(t, a1.NS, b1.IP.String()) })
	t.Run("pod-to-pod/cross-node-geneve/tcp", func(t *testing.T) {
		if got := reach(t, a1.NS, fmt.Sprintf("%s:%d", b1.IP, tcpPort)); got != "b1" {
			t.Fatalf("answer %q", got)
		}
		if got := reach(t, b1.NS, fmt.Sprintf("%s:%d", a1.IP, tcpPort)); got != "a1" {
			t.Fatalf("answer %q", got)
		}
	})

	vip := e.service("web", a2, b1)
	t.Logf("service web: %s -> a2, b1", vip)
	t.Run("pod-to-clusterip/tcp/backends-on-both-nodes", func(t *testing.T) {
		reach(t, a1.NS, vip+":80")
		backendsReached(t, a1.NS, vip+":80", "a2", "b1")
	})
	t.Run("pod-to-clusterip/udp", func(t *testing.T) {
		if got := reachUDP(t, a1.NS, vip+":53"); got != "a2" && got != "b1" {
			t.Fatalf("answer %q", got)
		}
	})
	self := e.service("self", a2)
	t.Run("pod-to-clusterip/hairpin", func(t *testing.T) {
		if got := reach(t, a2.NS, self+":80"); got != "a2" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("node-to-pod/mgmt-port/cross-node", func(t *testing.T) {
		ping(t, n1.NS, b1.IP.String())
		if got := reach(t, n1.NS, fmt.Sprintf("%s:%d", b1.IP, tcpPort)); got != "b1" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("node-to-clusterip/mgmt-port", func(t *testing.T) {
		backendsReached(t, n2.NS, vip+":80", "a2", "b1")
	})
	t.Run("conntrack/udp-flow-follows-backend-replacement", func(t *testing.T) {
		// One UDP socket asking without pause, as a DNS client does: its
		// conntrack entry would keep it on the old backend (which still
		// answers here) for as long as it sends, unless the entry goes
		// with the backend.
		ct := e.service("ct", b1)
		// The balancer is programmed (a fresh socket is answered) before the
		// kept flow starts: its first datagrams must not meet the VIP empty.
		if got := reachUDP(t, a1.NS, ct+":53"); got != "b1" {
			t.Fatalf("answer %q", got)
		}
		flow, err := harness.OpenUDPFlow(a1.NS, ct+":53")
		if err != nil {
			t.Fatal(err)
		}
		defer flow.Close()
		askUntil(t, flow, "b1")
		e.setEndpoints("ct", a2)
		askUntil(t, flow, "a2")
	})
	t.Run("clusterip/own-host-network-endpoint/from-node-and-pods", func(t *testing.T) {
		// A host-network server on n1 behind a ClusterIP: n1 itself (through
		// its management port), a pod on n1, a pod and the host on n2.
		harness.ServeTCP(t, n1.NS, hostPort, "n1-host")
		host := &harness.Pod{Name: "n1-host", Node: "n1", IP: netip.MustParseAddr(n1.TunnelIP)}
		svc := e.serviceTo("hostep", hostPort, host)
		for _, from := range []harness.NetNS{n1.NS, a1.NS, b1.NS, n2.NS} {
			if got := reach(t, from, svc+":80"); got != "n1-host" {
				t.Fatalf("from %s: answer %q", from.Name, got)
			}
		}
	})
	t.Run("clusterip-without-endpoints/refuses-at-once-then-works", func(t *testing.T) {
		empty := e.service("empty")
		harness.Eventually(t, 20*time.Second, "connection refused by "+empty, func() error {
			start := time.Now()
			_, err := harness.DialTCP(a1.NS, empty+":80", 3*time.Second)
			if err == nil || !strings.Contains(err.Error(), "refused") {
				return fmt.Errorf("want connection refused, got %v", err)
			}
			if d := time.Since(start); d > time.Second {
				return fmt.Errorf("refused only after %s", d)
			}
			return nil
		})
		e.setEndpoints("empty", b1)
		if got := reach(t, a1.NS, empty+":80"); got != "b1" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("pod-deleted/port-lsp-veth-gone/ip-released", func(t *testing.T) {
		tmp := c.RunPod(ns, "tmp", "n1", nil)
		hostVeth := ovncni.HostVethName(strings.ReplaceAll(tmp.UID, "-", ""))
		c.DeletePod(tmp)
		harness.Eventually(t, 20*time.Second, "tmp's LSP removed", func() error {
			out, _ := c.OVN.NBCtl("--if-exists", "get", "logical_switch_port", ns+"_tmp", "name")
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("LSP still there")
			}
			return nil
		})
		if out, _ := n1.VSCtl("list-ports", "br-int"); strings.Contains(out, hostVeth) {
			t.Errorf("OVS port %s left", hostVeth)
		}
		if _, err := n1.NS.Exec("ip", "link", "show", hostVeth); err == nil {
			t.Errorf("host veth %s left", hostVeth)
		}
		// The freed address is held by no port (and a pod can no longer ask
		// for an address by writing the annotation itself: the master honours
		// only annotations it wrote for the pod's UID).
		out, err := c.OVN.NBCtl("--bare", "--columns=name,addresses", "list", "logical_switch_port")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(out, " "+tmp.IP.String()+"\n") || strings.HasSuffix(strings.TrimSpace(out), " "+tmp.IP.String()) {
			t.Errorf("a port still holds %s:\n%s", tmp.IP, out)
		}
	})
	var late *harness.Pod
	t.Run("master-restarted/traffic-flows-and-changes-apply", func(t *testing.T) {
		c.Master.Stop()
		if got := reach(t, a1.NS, fmt.Sprintf("%s:%d", b1.IP, tcpPort)); got != "b1" {
			t.Fatalf("answer %q with the master down", got)
		}
		backendsReached(t, a1.NS, vip+":80", "a2", "b1")
		c.StartMaster()
		late = c.RunPod(ns, "late", "n2", nil)
		runServers(t, late)
		if got := reach(t, a1.NS, fmt.Sprintf("%s:%d", late.IP, tcpPort)); got != "late" {
			t.Fatalf("answer %q", got)
		}
		e.setEndpoints("web", a2, b1, late)
		backendsReached(t, a1.NS, vip+":80", "a2", "b1", "late")
	})
	t.Run("node-reregistered/pods-keep-addresses-and-traffic", func(t *testing.T) {
		ctx := context.Background()
		before, err := c.Kube.Client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		lspBefore, _ := c.OVN.NBCtl("--bare", "--columns=_uuid,addresses", "list", "logical_switch_port", ns+"_b1")
		if err := c.Kube.Client.CoreV1().Nodes().Delete(ctx, "n2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// As the kubelet would: the Node object comes back at once.
		again := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: before.Status.Addresses}}
		harness.Eventually(t, 10*time.Second, "n2 re-registered", func() error {
			_, err := c.Kube.Client.CoreV1().Nodes().Create(ctx, again, metav1.CreateOptions{})
			return err
		})
		harness.Eventually(t, 20*time.Second, "n2 annotated with its old subnet", func() error {
			n, err := c.Kube.Client.CoreV1().Nodes().Get(ctx, "n2", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if got, want := n.Annotations[annotations.NodeSubnets], before.Annotations[annotations.NodeSubnets]; got != want {
				return fmt.Errorf("subnets %q, had %q", got, want)
			}
			return nil
		})
		if lspAfter, _ := c.OVN.NBCtl("--bare", "--columns=_uuid,addresses", "list", "logical_switch_port", ns+"_b1"); lspAfter != lspBefore {
			t.Fatalf("b1's port changed: %q, was %q", lspAfter, lspBefore)
		}
		if got := reach(t, a1.NS, fmt.Sprintf("%s:%d", b1.IP, tcpPort)); got != "b1" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("node-deleted/switch-gone-with-its-last-pod", func(t *testing.T) {
		if err := c.Kube.Client.CoreV1().Nodes().Delete(context.Background(), "n2", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		// Its pods' addresses stay reserved until pod GC removes them.
		for _, p := range []*harness.Pod{b1, late} {
			if p == nil {
				continue
			}
			zero := int64(0)
			if err := c.Kube.Client.CoreV1().Pods(ns).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
		}
		harness.Eventually(t, 20*time.Second, "switch n2 removed", func() error {
			out, _ := c.OVN.NBCtl("--bare", "--columns=name", "find", "logical_switch", "name=n2")
			if strings.TrimSpace(out) != "" {
				return fmt.Errorf("still there")
			}
			return nil
		})
	})
}
