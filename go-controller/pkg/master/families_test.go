package master

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// Issue 33, "Bad input": an annotation of the master's that carries an IP
// family the cluster does not have (written by a master of other families,
// or before the operator removed one) is reported once, on its object,
// naming the annotation, the address and the fix; the addresses of the
// cluster's families in it are kept, and the annotation is rewritten with
// those only.

// familyEvents lists the IPFamilyNotInCluster Warnings about an object as
// "<count>x <message>", so that a repeat of one Event shows.
func (e *env) familyEvents(kind, name string) []string {
	e.t.Helper()
	evs, err := e.kube.CoreV1().Events("").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	var out []string
	for _, ev := range evs.Items {
		if ev.Type == corev1.EventTypeWarning && ev.InvolvedObject.Kind == kind && ev.InvolvedObject.Name == name && ev.Reason == reasonIPFamilyNotInCluster {
			out = append(out, fmt.Sprintf("%dx %s", ev.Count, ev.Message))
		}
	}
	slices.Sort(out)
	return out
}

// waitFamilyEvents waits until the object's IPFamilyNotInCluster Warnings
// are one per entry of want, each seen once and holding every part of its
// entry.
func (e *env) waitFamilyEvents(kind, name string, want ...[]string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, fmt.Sprintf("%d %s Warnings on %s %s", len(want), reasonIPFamilyNotInCluster, kind, name), func() error {
		got := e.familyEvents(kind, name)
		if len(got) != len(want) {
			return fmt.Errorf("events %q", got)
		}
		for _, parts := range want {
			if !slices.ContainsFunc(got, func(ev string) bool { return strings.HasPrefix(ev, "1x ") && containsAll(ev, parts) }) {
				return fmt.Errorf("events %q; none seen once with %q", got, parts)
			}
		}
		return nil
	})
}

func containsAll(s string, parts []string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}

// annotation waits until an object's annotation has the wanted value.
func (e *env) waitAnnotation(kind, name, key, want string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, fmt.Sprintf("%s %s's %s = %s", kind, name, key, want), func() error {
		var ann map[string]string
		if kind == "Node" {
			n, err := e.kube.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ann = n.Annotations
		} else {
			ns, pod, _ := splitKey(name)
			p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), pod, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ann = p.Annotations
		}
		if got := ann[key]; got != want {
			return fmt.Errorf("%s is %q", key, got)
		}
		return nil
	})
}

// patches counts the master's annotation PATCHes of nodes and pods so far.
func (e *env) patches() int {
	n := 0
	for _, a := range e.kube.Actions() {
		if p, ok := a.(k8stesting.PatchAction); ok && (p.GetResource().Resource == "nodes" || p.GetResource().Resource == "pods") {
			n++
		}
	}
	return n
}

// settle waits for a full resync of the running master to drain.
func (e *env) settle() {
	e.t.Helper()
	e.m.resync(context.Background(), "test")
	time.Sleep(100 * time.Millisecond)
	harness.Eventually(e.t, 10*time.Second, "queues idle", func() error {
		if !e.m.nodeQueue.Idle() || !e.m.podQueue.Idle() {
			return fmt.Errorf("busy")
		}
		return nil
	})
	time.Sleep(300 * time.Millisecond) // Events are sent asynchronously
}

func mustCluster(t *testing.T, cluster, join, services []string) (cs []config.ClusterSubnet, js, ss []netip.Prefix) {
	t.Helper()
	cs, err := config.ParseClusterSubnets(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if js, err = config.ParseCIDRs(join); err != nil {
		t.Fatal(err)
	}
	if ss, err = config.ParseCIDRs(services); err != nil {
		t.Fatal(err)
	}
	return cs, js, ss
}

func gatewayConfig(node string, ips []string, hops []string) string {
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	c := annotations.L3GatewayConfig{Mode: "shared", InterfaceID: topology.LocalnetPort("breth0", node), MAC: mac, NodePortEnable: true}
	for _, ip := range ips {
		c.IPs = append(c.IPs, netip.MustParsePrefix(ip))
	}
	for _, h := range hops {
		c.NextHops = append(c.NextHops, netip.MustParseAddr(h))
	}
	return annotations.FormatL3GatewayConfig(c)
}

// podNetworkFor is the pod-networks annotation a master of cfg writes for
// uid holding ips (with the lengths of their host subnets).
func podNetworkFor(cfg config.Master, uid string, ips ...string) string {
	var addrs []netip.Addr
	var subnets []netip.Prefix
	for _, ip := range ips {
		p := netip.MustParsePrefix(ip)
		addrs, subnets = append(addrs, p.Addr()), append(subnets, p.Masked())
	}
	return annotations.FormatPodNetworks((&Master{cfg: cfg}).buildPodNetwork(uid, addrs, subnets))
}

// A master starts (empty NB: annotations are all it has) on objects whose
// annotations a master of other families wrote.
func TestAnnotationOfAFamilyTheClusterLacks(t *testing.T) {
	v4 := []string{"10.244.0.0/16/24"}
	dualNode := `{"default":["10.244.1.0/24","fd00:10:244:1::/64"]}`
	dualJoin := `{"ipv4":"100.64.0.5/16","ipv6":"fd98::5/64"}`
	dualPod := []string{"10.244.1.5/24", "fd00:10:244:1::5/64"}
	type events struct{ node, join, pod []string } // parts of each expected Event; nil: none
	for _, tc := range []struct {
		name                    string
		cluster, join, services []string
		gwIPs, gwHops           []string
		nodeAnn, joinAnn        string
		podIPs                  []string
		wantNode, wantJoin      string
		wantPodIPs, wantMAC     string
		want                    events
		wantNoPatch             bool
	}{{
		name:    "IPv6 on an IPv4-only cluster: the IPv4 addresses are kept",
		cluster: v4, join: []string{"100.64.0.0/16"}, services: []string{"10.96.0.0/16"},
		gwIPs: []string{"172.18.0.2/24"}, gwHops: []string{"172.18.0.1"},
		nodeAnn: dualNode, joinAnn: dualJoin, podIPs: dualPod,
		wantNode: `{"default":"10.244.1.0/24"}`, wantJoin: `{"ipv4":"100.64.0.5/16"}`,
		wantPodIPs: "[10.244.1.5/24]", wantMAC: "0a:58:0a:f4:01:05",
		want: events{
			node: []string{"node n1's k8s.ovn.org/node-subnets has fd00:10:244:1::/64, but the cluster has no IPv6 --cluster-subnet; the master keeps its IPv4 host subnet 10.244.1.0/24 and drops the IPv6 one"},
			join: []string{"node n1's k8s.ovn.org/node-gateway-router-lrp-ifaddr has fd98::5/64, but the cluster has no IPv6 --cluster-subnet; the master keeps its IPv4 gateway join address 100.64.0.5/16 and drops the IPv6 one"},
			pod:  []string{"pod ns/p1's k8s.ovn.org/pod-networks has fd00:10:244:1::5/64, but the cluster has no IPv6 --cluster-subnet; the master keeps its IPv4 address 10.244.1.5/24 and drops the IPv6 one", "its MAC stays 0a:58:0a:f4:01:05"},
		},
	}, {
		name:    "IPv4 on an IPv6-only cluster: the IPv6 addresses are kept",
		cluster: []string{"fd00:10:244::/48/64"}, join: []string{"fd98::/64"}, services: []string{"fd00:10:96::/112"},
		gwIPs: []string{"fc00:f853:ccd:e793::2/64"}, gwHops: []string{"fc00:f853:ccd:e793::1"},
		nodeAnn: dualNode, joinAnn: dualJoin, podIPs: dualPod,
		wantNode: `{"default":"fd00:10:244:1::/64"}`, wantJoin: `{"ipv6":"fd98::5/64"}`,
		wantPodIPs: "[fd00:10:244:1::5/64]", wantMAC: "0a:58:00:00:00:05", // the MAC follows the first address
		want: events{
			node: []string{"has 10.244.1.0/24, but the cluster has no IPv4 --cluster-subnet", "keeps its IPv6 host subnet fd00:10:244:1::/64"},
			join: []string{"has 100.64.0.5/16, but the cluster has no IPv4 --cluster-subnet", "keeps its IPv6 gateway join address fd98::5/64"},
			pod:  []string{"has 10.244.1.5/24, but the cluster has no IPv4 --cluster-subnet", "keeps its IPv6 address fd00:10:244:1::5/64", "its MAC is now 0a:58:00:00:00:05"},
		},
	}, {
		name:    "only a family the cluster lacks: new addresses of the cluster's",
		cluster: v4, join: []string{"100.64.0.0/16"}, services: []string{"10.96.0.0/16"},
		gwIPs: []string{"172.18.0.2/24"}, gwHops: []string{"172.18.0.1"},
		nodeAnn: `{"default":"fd00:10:244:1::/64"}`, joinAnn: `{"ipv6":"fd98::5/64"}`,
		podIPs:   []string{"fd00:10:244:1::5/64"},
		wantNode: `{"default":"10.244.0.0/24"}`, wantJoin: `{"ipv4":"100.64.0.2/16"}`,
		wantPodIPs: "[10.244.0.3/24]", wantMAC: "0a:58:0a:f4:00:03",
		want: events{
			node: []string{"has fd00:10:244:1::/64, but the cluster has no IPv6 --cluster-subnet; the master drops the IPv6 one; the node now has IPv4 host subnet 10.244.0.0/24"},
			join: []string{"has fd98::5/64, but the cluster has no IPv6 --cluster-subnet; the master drops the IPv6 one; the node now has IPv4 gateway join address 100.64.0.2/16"},
			pod:  []string{"has fd00:10:244:1::5/64, but the cluster has no IPv6 --cluster-subnet; the master drops the IPv6 one; the pod now has IPv4 address 10.244.0.3/24", "its MAC is now 0a:58:0a:f4:00:03"},
		},
	}, {
		name:    "malformed annotations: replaced as before, no family Event",
		cluster: v4, join: []string{"100.64.0.0/16"}, services: []string{"10.96.0.0/16"},
		gwIPs: []string{"172.18.0.2/24"}, gwHops: []string{"172.18.0.1"},
		nodeAnn: `{"default":["10.244.1.0/24","fd00:10:244:1::1/64"]}`, joinAnn: `{"ipv4":"100.64.0.5/16","ipv6":"100.64.0.6/16"}`,
		podIPs:   nil, // "{"
		wantNode: `{"default":"10.244.0.0/24"}`, wantJoin: `{"ipv4":"100.64.0.2/16"}`,
		wantPodIPs: "[10.244.0.3/24]", wantMAC: "0a:58:0a:f4:00:03",
	}, {
		name:    "the cluster's families: nothing changes",
		cluster: v4, join: []string{"100.64.0.0/16"}, services: []string{"10.96.0.0/16"},
		gwIPs: []string{"172.18.0.2/24"}, gwHops: []string{"172.18.0.1"},
		nodeAnn: `{"default":"10.244.1.0/24"}`, joinAnn: `{"ipv4":"100.64.0.5/16"}`,
		podIPs:   []string{"10.244.1.5/24"},
		wantNode: `{"default":"10.244.1.0/24"}`, wantJoin: `{"ipv4":"100.64.0.5/16"}`,
		wantPodIPs: "[10.244.1.5/24]", wantMAC: "0a:58:0a:f4:01:05",
		wantNoPatch: true,
	}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			e.cfg.ClusterSubnets, e.cfg.JoinSubnets, e.cfg.ServiceCIDRs = mustCluster(t, tc.cluster, tc.join, tc.services)
			e.createNode("n1")
			e.patchNode("n1", map[string]any{annotations.NodeSubnets: tc.nodeAnn, annotations.NodeGatewayJoinIP: tc.joinAnn,
				annotations.NodeL3GatewayConfig: gatewayConfig("n1", tc.gwIPs, tc.gwHops), annotations.NodeChassisID: "chassis-n1"})
			e.createPod("ns", "p1", "n1", func(p *corev1.Pod) {
				v := "{"
				if tc.podIPs != nil {
					v = podNetworkFor(e.cfg, string(p.UID), tc.podIPs...)
				}
				p.Annotations = map[string]string{annotations.PodNetworks: v}
			})
			before := e.patches()
			e.start()
			pn := e.podNetwork("ns", "p1")
			if got := fmt.Sprint(pn.IPs); got != tc.wantPodIPs || pn.MAC.String() != tc.wantMAC {
				t.Errorf("pod has %s %s, want %s %s", got, pn.MAC, tc.wantPodIPs, tc.wantMAC)
			}
			e.waitAnnotation("Node", "n1", annotations.NodeSubnets, tc.wantNode)
			e.waitAnnotation("Node", "n1", annotations.NodeGatewayJoinIP, tc.wantJoin)
			e.waitGateway("n1", "chassis=chassis-n1 join=["+strings.Trim(strings.SplitN(tc.wantJoin, `":"`, 2)[1], `"}`)+"]")
			e.lsp(topology.PodPort("ns", "p1"), func(l *nbdb.LogicalSwitchPort) error {
				if want := tc.wantMAC + " " + strings.Split(strings.Trim(tc.wantPodIPs, "[]"), "/")[0]; len(l.Addresses) != 1 || l.Addresses[0] != want {
					return fmt.Errorf("port addresses %v, want %q", l.Addresses, want)
				}
				return nil
			})
			var nodeWant [][]string
			for _, w := range [][]string{tc.want.node, tc.want.join} {
				if w != nil {
					nodeWant = append(nodeWant, w)
				}
			}
			var podWant [][]string
			if tc.want.pod != nil {
				podWant = append(podWant, tc.want.pod)
			}
			e.waitFamilyEvents("Node", "n1", nodeWant...)
			e.waitFamilyEvents("Pod", "p1", podWant...)
			if tc.wantNoPatch && e.patches() != before {
				t.Errorf("%d annotation PATCHes for annotations of the cluster's families", e.patches()-before)
			}
			// Reported and rewritten once: a resync and a restart repeat nothing.
			e.settle()
			patches := e.patches()
			if n := e.restartIdle(); n != 0 {
				t.Errorf("idle restart sent %d NB transactions; want 0", n)
			}
			time.Sleep(300 * time.Millisecond)
			if n := e.patches() - patches; n != 0 {
				t.Errorf("idle restart sent %d annotation PATCHes; want 0", n)
			}
			e.waitFamilyEvents("Node", "n1", nodeWant...)
			e.waitFamilyEvents("Pod", "p1", podWant...)
		})
	}
}

// The operator removes IPv6 from a running dual-stack cluster: after the
// restart every node, pod and gateway router keeps its IPv4 subnet, address
// and MAC, and join address, from the NB's rows and the annotations; the
// annotations lose their IPv6 part; each is reported once, and the next
// restart writes nothing.
func TestFamilyRemovedKeepsTheOtherFamily(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	e.createNode("n0")
	e.createNode("n1")
	// Not the first subnet: a node given a new one would show.
	e.patchNode("n1", map[string]any{annotations.NodeSubnets: `{"default":["10.244.5.0/24","fd00:10:244:5::/64"]}`,
		annotations.NodeL3GatewayConfig: gatewayConfig("n1", []string{"172.18.0.2/24", "fc00:f853:ccd:e793::2/64"}, []string{"172.18.0.1", "fc00:f853:ccd:e793::1"}),
		annotations.NodeChassisID:       "chassis-n1"})
	e.start()
	e.createPod("ns", "p0", "n1")
	e.createPod("ns", "p1", "n1")
	e.podNetwork("ns", "p0")
	pn := e.podNetwork("ns", "p1")
	if len(pn.IPs) != 2 || !netip.MustParsePrefix("10.244.5.0/24").Contains(pn.IPs[0].Addr()) { // p0 and p1 are allocated in either order
		t.Fatalf("dual-stack pod p1 has %v, want an IPv4 address of n1's subnet first", pn.IPs)
	}
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16 fd98::2/64]")
	e.waitAnnotation("Node", "n1", annotations.NodeGatewayJoinIP, `{"ipv4":"100.64.0.2/16","ipv6":"fd98::2/64"}`)
	e.stop()

	e.cfg.ClusterSubnets, e.cfg.JoinSubnets, _ = mustCluster(t, []string{"10.244.0.0/16/24"}, []string{"100.64.0.0/16"}, nil)
	e.start()
	e.waitAnnotation("Node", "n1", annotations.NodeSubnets, `{"default":"10.244.5.0/24"}`)
	e.waitAnnotation("Node", "n1", annotations.NodeGatewayJoinIP, `{"ipv4":"100.64.0.2/16"}`)
	harness.Eventually(t, 10*time.Second, "p1 keeps its IPv4 address and MAC", func() error {
		got := e.podNetwork("ns", "p1")
		if fmt.Sprint(got.IPs) != fmt.Sprint(pn.IPs[:1]) || got.MAC.String() != pn.MAC.String() {
			return fmt.Errorf("p1 has %v %s, had %v %s", got.IPs, got.MAC, pn.IPs, pn.MAC)
		}
		return nil
	})
	e.lsp(topology.PodPort("ns", "p1"), func(l *nbdb.LogicalSwitchPort) error {
		if want := pn.MAC.String() + " " + pn.IPs[0].Addr().String(); len(l.Addresses) != 1 || l.Addresses[0] != want {
			return fmt.Errorf("port addresses %v, want %q", l.Addresses, want)
		}
		return nil
	})
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16] nat=[10.244.0.0/16>172.18.0.2]")
	e.waitFamilyEvents("Node", "n1",
		[]string{"k8s.ovn.org/node-subnets has fd00:10:244:5::/64, but the cluster has no IPv6 --cluster-subnet; the master keeps its IPv4 host subnet 10.244.5.0/24 and drops the IPv6 one"},
		[]string{"k8s.ovn.org/node-gateway-router-lrp-ifaddr has fd98::2/64", "keeps its IPv4 gateway join address 100.64.0.2/16"})
	e.waitFamilyEvents("Pod", "p1", []string{"pod ns/p1's k8s.ovn.org/pod-networks has " + pn.IPs[1].String(), "keeps its IPv4 address " + pn.IPs[0].String()})

	e.settle()
	patches := e.patches()
	if n := e.restartIdle(); n != 0 {
		t.Errorf("idle restart after the family's removal sent %d NB transactions; want 0", n)
	}
	time.Sleep(300 * time.Millisecond)
	if n := e.patches() - patches; n != 0 {
		t.Errorf("idle restart after the family's removal sent %d annotation PATCHes; want 0", n)
	}
	e.waitFamilyEvents("Node", "n1", []string{"node-subnets"}, []string{"lrp-ifaddr"})
	e.waitFamilyEvents("Pod", "p1", []string{"pod-networks"})
}

// A node deleted while its pod runs keeps its subnet (its router port is
// all that remembers it) across a restart that removes IPv6: a new node
// does not get its IPv4 subnet, and registered again it gets it back, its
// pod keeping its IPv4 address (from its port) and MAC.
func TestFamilyRemovedKeepsDeletedNodesSubnetWhilePodsRun(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	e.createNode("n1")
	e.start()
	subnets := e.nodeSubnets("n1")
	e.createPod("ns", "p1", "n1")
	pn := e.podNetwork("ns", "p1")
	e.deleteNode("n1")
	e.stop()

	e.cfg.ClusterSubnets, e.cfg.JoinSubnets, _ = mustCluster(t, []string{"10.244.0.0/16/24"}, []string{"100.64.0.0/16"}, nil)
	e.start()
	e.createNode("n2")
	if s := e.nodeSubnets("n2"); s[0] == subnets[0] {
		t.Fatalf("n2 got subnet %v of deleted node n1, whose pod still runs", s)
	}
	e.createNode("n1")
	if s := e.nodeSubnets("n1"); fmt.Sprint(s) != fmt.Sprint(subnets[:1]) {
		t.Fatalf("re-registered n1 got %v, had %v", s, subnets)
	}
	harness.Eventually(t, 10*time.Second, "p1 keeps its IPv4 address and MAC", func() error {
		if got := e.podNetwork("ns", "p1"); fmt.Sprint(got.IPs, got.MAC) != fmt.Sprint(pn.IPs[:1], pn.MAC) {
			return fmt.Errorf("p1 has %v %s, had %v %s", got.IPs, got.MAC, pn.IPs, pn.MAC)
		}
		return nil
	})
}

// A dual-stack cluster restarted with its families unchanged writes
// nothing: no NB transaction, no annotation PATCH, no family Event.
func TestDualStackIdleRestartWritesNothing(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	e.createNode("n1")
	e.patchNode("n1", map[string]any{
		annotations.NodeL3GatewayConfig: gatewayConfig("n1", []string{"172.18.0.2/24", "fc00:f853:ccd:e793::2/64"}, []string{"172.18.0.1", "fc00:f853:ccd:e793::1"}),
		annotations.NodeChassisID:       "chassis-n1"})
	e.start()
	e.createPod("ns", "p1", "n1")
	pn := e.podNetwork("ns", "p1")
	e.waitGateway("n1", "chassis=chassis-n1 join=[100.64.0.2/16 fd98::2/64]")
	e.waitAnnotation("Node", "n1", annotations.NodeGatewayJoinIP, `{"ipv4":"100.64.0.2/16","ipv6":"fd98::2/64"}`)
	e.settle()
	for i := 0; i < 2; i++ {
		patches := e.patches()
		if n := e.restartIdle(); n != 0 {
			t.Errorf("idle restart %d sent %d NB transactions; want 0", i, n)
		}
		time.Sleep(300 * time.Millisecond)
		if n := e.patches() - patches; n != 0 {
			t.Errorf("idle restart %d sent %d annotation PATCHes; want 0", i, n)
		}
	}
	if got := e.podNetwork("ns", "p1"); addrs(got) != addrs(pn) {
		t.Errorf("pod re-addressed: %s, had %s", addrs(got), addrs(pn))
	}
	if evs := append(e.familyEvents("Node", "n1"), e.familyEvents("Pod", "p1")...); len(evs) != 0 {
		t.Errorf("family Events %q on a cluster whose families did not change", evs)
	}
}

// Trust: a pod's owner writes another pod's addresses, both families, into
// its own annotation (for its own UID) while the master is down and IPv6
// is removed. The NB's ports are trusted first: the other pod keeps its
// IPv4 address and MAC, the writer does not get it.
func TestForeignFamilyAnnotationCannotTakeARunningPodsAddress(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.JoinSubnets = []netip.Prefix{netip.MustParsePrefix("100.64.0.0/16"), netip.MustParsePrefix("fd98::/64")}
	e.createNode("n1")
	e.start()
	victim := forgeVictimAddresses(t, e)
	e.cfg.ClusterSubnets, e.cfg.JoinSubnets, _ = mustCluster(t, []string{"10.244.0.0/16/24"}, []string{"100.64.0.0/16"}, nil)
	e.start()
	harness.Eventually(t, 10*time.Second, "the victim keeps its IPv4 address, the attacker does not get it", func() error {
		a, v := e.podNetwork("ns", "attacker"), e.podNetwork("ns", "victim")
		if fmt.Sprint(v.IPs) != fmt.Sprint(victim.IPs[:1]) || v.MAC.String() != victim.MAC.String() {
			return fmt.Errorf("victim has %v %s, had %v %s", v.IPs, v.MAC, victim.IPs, victim.MAC)
		}
		if len(a.IPs) != 1 || a.IPs[0] == victim.IPs[0] {
			return fmt.Errorf("attacker has %v", a.IPs)
		}
		return nil
	})
	e.lsp(topology.PodPort("ns", "victim"), func(l *nbdb.LogicalSwitchPort) error {
		if want := victim.MAC.String() + " " + victim.IPs[0].Addr().String(); l.Addresses[0] != want {
			return fmt.Errorf("victim's port addresses %v, want %q", l.Addresses, want)
		}
		return nil
	})
}

func TestSplitFamilies(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	for _, tc := range []struct {
		name          string
		in            []netip.Prefix
		f             topology.Families
		kept, dropped string
	}{
		{"IPv4 cluster", pp("10.244.1.0/24", "fd00::/64"), topology.IPv4Only, "[10.244.1.0/24]", "[fd00::/64]"},
		{"IPv6 cluster", pp("10.244.1.0/24", "fd00::/64"), topology.Families{V6: true}, "[fd00::/64]", "[10.244.1.0/24]"},
		{"dual-stack", pp("fd00::/64", "10.244.1.0/24"), topology.Families{V4: true, V6: true}, "[fd00::/64 10.244.1.0/24]", "[]"},
		{"an IPv4-mapped IPv6 address is IPv6", pp("::ffff:10.244.1.5/120"), topology.IPv4Only, "[]", "[::ffff:10.244.1.5/120]"},
		{"nothing", nil, topology.IPv4Only, "[]", "[]"},
	} {
		kept, dropped := splitFamilies(tc.in, tc.f)
		if fmt.Sprint(kept) != tc.kept || fmt.Sprint(dropped) != tc.dropped {
			t.Errorf("%s: kept %v dropped %v, want %s %s", tc.name, kept, dropped, tc.kept, tc.dropped)
		}
	}
}

func TestFamilyDropMessage(t *testing.T) {
	pp := func(s ...string) []netip.Prefix {
		var out []netip.Prefix
		for _, x := range s {
			out = append(out, netip.MustParsePrefix(x))
		}
		return out
	}
	d := familyDrop{holder: "node", name: "n1", annotation: annotations.NodeSubnets, noun: "host subnet"}
	for _, tc := range []struct {
		name     string
		had, now []netip.Prefix
		f        topology.Families
		want     string // "" when nothing is to be reported
	}{
		{"kept", pp("10.244.1.0/24", "fd00::/64"), pp("10.244.1.0/24"), topology.IPv4Only,
			"node n1's k8s.ovn.org/node-subnets has fd00::/64, but the cluster has no IPv6 --cluster-subnet; the master keeps its IPv4 host subnet 10.244.1.0/24 and drops the IPv6 one; " +
				"if the cluster is meant to have IPv6, restart the master with an IPv6 --cluster-subnet, else nothing is to be done"},
		{"not kept (taken, or none of the cluster's families)", pp("10.244.1.0/24", "fd00::/64"), pp("10.244.2.0/24"), topology.IPv4Only,
			"node n1's k8s.ovn.org/node-subnets has fd00::/64, but the cluster has no IPv6 --cluster-subnet; the master drops the IPv6 one; the node now has IPv4 host subnet 10.244.2.0/24; " +
				"if the cluster is meant to have IPv6, restart the master with an IPv6 --cluster-subnet, else nothing is to be done"},
		{"the cluster's families only", pp("10.244.1.0/24", "fd00::/64"), pp("10.244.1.0/24", "fd00::/64"), topology.Families{V4: true, V6: true}, ""},
		{"nothing held yet", pp("fd00::/64"), nil, topology.IPv4Only,
			"node n1's k8s.ovn.org/node-subnets has fd00::/64, but the cluster has no IPv6 --cluster-subnet; the master drops the IPv6 one; the node now has no host subnet; " +
				"if the cluster is meant to have IPv6, restart the master with an IPv6 --cluster-subnet, else nothing is to be done"},
	} {
		d.had, d.now = tc.had, tc.now
		got, ok := d.message(tc.f)
		if got != tc.want || ok != (tc.want != "") {
			t.Errorf("%s:\n got %q (%v)\nwant %q", tc.name, got, ok, tc.want)
		}
	}
}
