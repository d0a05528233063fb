package e2e

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// portUUID is the UUID of a switch port in an NB, "" if it has none.
func portUUID(t *testing.T, ovn *harness.OVNCentral, name string) string {
	t.Helper()
	out, err := ovn.NBCtl("--bare", "--columns=_uuid", "find", "Logical_Switch_Port", "name="+name)
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// zoneFamilies are the families zone mode is proven in on this stack: OVN
// 23.03.1's ovn-ic learns no IPv6 route once its deny list holds an IPv6
// range (OVN's defect, fixed in 23.03.3; docs/design.md, "Zones"), so there
// it is IPv4 only.
func zoneFamilies() []corev1.IPFamily {
	if harness.CurrentStack.Name == "23.03" {
		return []corev1.IPFamily{harness.IPv4}
	}
	return []corev1.IPFamily{harness.IPv4, harness.IPv6}
}

// TestE2EZonesPaths runs TestE2EDualStack's paths (NodePorts, egress to
// the external host, policies, namespace isolation) on a cluster in zone
// mode, a zone per node: every path from one node to the other crosses
// zones.
func TestE2EZonesPaths(t *testing.T) {
	familyPaths(t, harness.ClusterOptions{Zones: harness.ZonesPerNode}, zoneFamilies()...)
}

// TestE2EZones is the cluster in zone mode (issue 38), a zone per node:
// each node has its own NB, SB, northd, ovn-ic and `ovnkube master
// --zone`, and `ovnkube cluster-manager` gives the host subnets and the
// transit switch. Packets cross zones through the transit switch: pod to
// pod, a ClusterIP whose backends are in both zones, a node to another
// zone's pod, a NetworkPolicy whose allowed peer is in another zone; then
// one zone's NB is wiped and traffic across zones comes back while the
// other zone's NB is not written; a zone's master killed and restarted
// changes none of its rows.
func TestE2EZones(t *testing.T) {
	fams := zoneFamilies()
	c, e := startEnv(t, func() *harness.Cluster {
		return harness.NewClusterWith(t, harness.ClusterOptions{Families: fams, Zones: harness.ZonesPerNode})
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster-manager log:\n%s", c.Master.Tail(30))
			for name, z := range c.Zones {
				t.Logf("--- zone %s master:\n%s", name, z.Master.Tail(30))
			}
		}
	})
	c.AddNode("node1")
	c.AddNode("node2")
	c.EnsureNamespace(ns)
	a := c.RunPod(ns, "a", "node1", map[string]string{"app": "client"})
	b := c.RunPod(ns, "b", "node2", map[string]string{"app": "web"})
	b1 := c.RunPod(ns, "b1", "node1", map[string]string{"app": "web"})
	for _, p := range []*harness.Pod{a, b, b1} {
		runServers(t, p)
	}
	// Each zone's NB holds its own pods only, and reaches the other's
	// node subnets through routes ovn-ic learned.
	for _, z := range []struct{ zone, own, other, remoteNode string }{{"node1", "a", "b", "node2"}, {"node2", "b", "a", "node1"}} {
		nb := c.Zones[z.zone].OVN
		if uuid := portUUID(t, nb, topology.PodPort(ns, z.own)); uuid == "" {
			t.Fatalf("zone %s's NB has no port for its pod %s", z.zone, z.own)
		}
		if uuid := portUUID(t, nb, topology.PodPort(ns, z.other)); uuid != "" {
			t.Fatalf("zone %s's NB has a port for pod %s of zone %s", z.zone, z.other, z.remoteNode)
		}
		for _, subnet := range c.Nodes[z.remoteNode].Subnets {
			harness.Eventually(t, 10*time.Second, "zone "+z.zone+" learned "+subnet.String(), func() error {
				out, err := nb.NBCtl("--bare", "--columns=ip_prefix", "find", "Logical_Router_Static_Route", "external_ids:ic-learned-route!=\"\"")
				if err != nil {
					return err
				}
				for _, f := range strings.Fields(out) { // the router port's address/length
					if p, err := netip.ParsePrefix(f); err == nil && p.Masked() == subnet {
						return nil
					}
				}
				return fmt.Errorf("learned routes: %q", out)
			})
		}
	}
	for _, f := range fams {
		t.Run("pod to pod across zones "+string(f), func(t *testing.T) {
			if got := reach(t, a.NS, at(b.Addr(f), tcpPort)); got != "b" {
				t.Fatalf("answered by %q, want b", got)
			}
			if got := reach(t, b.NS, at(a.Addr(f), tcpPort)); got != "a" {
				t.Fatalf("answered by %q, want a", got)
			}
			ping(t, a.NS, b.Addr(f).String())
		})
		t.Run("node to another zone's pod "+string(f), func(t *testing.T) {
			if got := reach(t, c.Nodes["node1"].NS, at(b.Addr(f), tcpPort)); got != "b" {
				t.Fatalf("answered by %q, want b", got)
			}
		})
	}
	t.Run("ClusterIP with a backend in each zone", func(t *testing.T) {
		vip := e.service("web", b, b1)
		backendsReached(t, a.NS, vip+":80", "b", "b1")
		backendsReached(t, b.NS, vip+":80", "b", "b1")
	})
	t.Run("NetworkPolicy with a peer in another zone", func(t *testing.T) {
		other := c.RunPod(ns, "other", "node1", map[string]string{"app": "other"})
		f := fams[0]
		reach(t, other.NS, at(b.Addr(f), tcpPort))
		e.policy(ns, "web-from-client", networkingv1.NetworkPolicySpec{
			PodSelector: *selector("app", "web"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: selector("app", "client")}}}},
		})
		blocked(t, other.NS, at(b.Addr(f), tcpPort))
		for _, fam := range fams {
			if got := reach(t, a.NS, at(b.Addr(fam), tcpPort)); got != "b" {
				t.Fatalf("the allowed peer in the other zone: answered by %q, want b", got)
			}
		}
	})
	t.Run("a zone's NB wiped", func(t *testing.T) {
		z1, z2 := c.Zones["node1"], c.Zones["node2"]
		// Zone node1's own ports (the remote ones are ovn-ic's).
		ours := func() string {
			out, err := z1.OVN.NBCtl("--format=csv", "--no-headings", "--columns=_uuid,name", "find", "Logical_Switch_Port", "type!=remote")
			if err != nil {
				t.Fatal(err)
			}
			return out
		}
		before, bPort := ours(), portUUID(t, z2.OVN, topology.PodPort(ns, "b"))
		z2.OVN.ResetNB() // ovn-ic reconnects; the zone's master names the NB again
		harness.Eventually(t, 30*time.Second, "pod b's port made again in zone node2's new NB", func() error {
			if now := portUUID(t, z2.OVN, topology.PodPort(ns, "b")); now == "" || now == bPort {
				return fmt.Errorf("port %q (was %s)", now, bPort)
			}
			return nil
		})
		f := fams[0]
		harness.Eventually(t, 60*time.Second, "a reaches b again after node2's zone NB was wiped", func() error {
			got, err := harness.DialTCP(a.NS, at(b.Addr(f), tcpPort), time.Second)
			if err == nil && got != "b" {
				err = fmt.Errorf("answered by %q", got)
			}
			return err
		})
		blocked(t, c.RunPod(ns, "other2", "node1", map[string]string{"app": "other"}).NS, at(b.Addr(f), tcpPort))
		after := ours()
		for _, line := range strings.Split(strings.TrimSpace(before), "\n") {
			if !strings.Contains(after, line) {
				t.Errorf("zone node1's port %s changed or went when zone node2's NB was wiped", line)
			}
		}
	})
	t.Run("a zone's master killed and restarted", func(t *testing.T) {
		z1 := c.Zones["node1"]
		rows := func() []string {
			var out []string
			for _, q := range [][]string{
				{"Logical_Switch_Port", "_uuid,name,addresses"}, {"Logical_Router_Port", "_uuid,name,networks"},
				{"ACL", "_uuid,match,action"}, {"Logical_Router_Static_Route", "_uuid,ip_prefix,nexthop"},
				{"Logical_Router_Policy", "_uuid,match,nexthops"}, {"Load_Balancer", "_uuid,name,vips"},
			} {
				o, err := z1.OVN.NBCtl("--format=csv", "--no-headings", "--columns="+q[1], "list", q[0])
				if err != nil {
					t.Fatal(err)
				}
				for _, l := range strings.Split(strings.TrimSpace(o), "\n") {
					out = append(out, q[0]+" "+l)
				}
			}
			return out
		}
		before := rows()
		z1.Master.Kill()
		z1.StartMaster(c)
		// A pod created after the restart is programmed: the master has synced.
		p := c.RunPod(ns, "after-restart", "node1", nil)
		runServers(t, p)
		if got := reach(t, b.NS, at(p.Addr(fams[0]), tcpPort)); got != "after-restart" {
			t.Fatalf("answered by %q", got)
		}
		after := strings.Join(rows(), "\n")
		for _, r := range before {
			if !strings.Contains(after, r) {
				t.Errorf("a restart of zone node1's master changed or removed %s", r)
			}
		}
	})
}

// TestE2EZonesEgressIP: EgressIPs hosted by a node of another zone. The
// cluster manager assigns the addresses (one per family, each on its own
// node: an EgressIP puts one address per node), the zones program them:
// pod a on node1 and pod b on node2 leave as the egress IP of each family,
// so for each family one of them is in another zone than its egress node
// (its zone reroutes to the egress node's transit address, that zone on to
// its gateway router, which SNATs); a pod it does not select leaves as its
// own node's address.
func TestE2EZonesEgressIP(t *testing.T) {
	fams := zoneFamilies()
	c, _ := startEnv(t, func() *harness.Cluster {
		return harness.NewClusterWith(t, harness.ClusterOptions{Families: fams, Gateway: true, Zones: harness.ZonesPerNode, CRDs: true})
	})
	n1 := c.AddNode("node1")
	c.AddNode("node2")
	for _, n := range []string{"node1", "node2"} {
		c.SetNodeReady(n)
		c.LabelNode(n, map[string]string{k8sovnv1.EgressAssignableLabel: ""})
	}
	c.EnsureNamespace(ns)
	a := c.RunPod(ns, "a", "node1", map[string]string{"egress": "yes"})
	b := c.RunPod(ns, "b", "node2", map[string]string{"egress": "yes"})
	other := c.RunPod(ns, "other", "node1", nil)
	harness.ServeTCPPeer(t, c.External.NS, extPort)
	var eips []string
	for _, f := range fams {
		eips = append(eips, harness.Host(harness.Plans[f].External, 100).String())
	}
	c.CreateEgressIP("zones", eips, map[string]string{"kubernetes.io/metadata.name": ns}, map[string]string{"egress": "yes"})
	t.Cleanup(func() {
		if t.Failed() {
			for name, z := range c.Zones {
				pol, _ := z.OVN.NBCtl("lr-policy-list", topology.ClusterRouter)
				nat, _ := z.OVN.NBCtl("lr-nat-list", topology.GatewayRouter(name))
				t.Logf("zone %s: policies\n%s\n%s NATs\n%s", name, pol, topology.GatewayRouter(name), nat)
			}
		}
	})
	hosts := c.EgressIPStatus("zones", eips)
	for i, f := range fams {
		ext := at(c.External.Host(f), extPort)
		for _, p := range []*harness.Pod{a, b} {
			where := "the egress node's zone"
			if p.Node != hosts[eips[i]] {
				where = "another zone than the egress node"
			}
			t.Run(fmt.Sprintf("%s leaves as %s from %s", p.Name, eips[i], where), func(t *testing.T) {
				seenAs(t, p.NS, ext, eips[i])
			})
		}
		t.Run("unselected pod leaves as its node "+string(f), func(t *testing.T) {
			seenAs(t, other.NS, ext, harness.Of(n1.GatewayIPs, f).String())
		})
	}
}

// seenAs waits until a connection from ns to addr is seen there from want.
func seenAs(t *testing.T, from harness.NetNS, addr, want string) {
	t.Helper()
	harness.Eventually(t, 30*time.Second, addr+" sees "+from.Name+" as "+want, func() error {
		got, err := harness.DialTCP(from, addr, time.Second)
		if err == nil && got != want {
			err = fmt.Errorf("seen as %q", got)
		}
		return err
	})
}

// TestE2EMigrateToZones moves a running central-mode cluster to zone mode,
// a zone per node (harness.MigrateToZones, docs/operations.md's
// procedure), while pod a keeps connecting to pod b on the other node: the
// connections stop for a bounded time (logged: the interruption the
// procedure costs), then pods keep their addresses and reach each other
// and a ClusterIP across the new zones, and a pod started after the move
// gets an address and is reached.
func TestE2EMigrateToZones(t *testing.T) {
	fams := zoneFamilies()
	c, e := startEnv(t, func() *harness.Cluster {
		return harness.NewClusterWith(t, harness.ClusterOptions{Families: fams})
	})
	c.AddNode("node1")
	c.AddNode("node2")
	c.EnsureNamespace(ns)
	a := c.RunPod(ns, "a", "node1", nil)
	b := c.RunPod(ns, "b", "node2", nil)
	b1 := c.RunPod(ns, "b1", "node1", nil)
	for _, p := range []*harness.Pod{a, b, b1} {
		runServers(t, p)
	}
	vip := e.service("web", b, b1)
	backendsReached(t, a.NS, vip+":80", "b", "b1")
	subnets := map[string]string{}
	for name, n := range c.Nodes {
		subnets[name] = fmt.Sprint(n.Subnets)
	}

	// a asks b every 100 ms throughout; the longest run of failures is the interruption.
	target := at(b.Addr(fams[0]), tcpPort)
	stop, done := make(chan struct{}), make(chan time.Duration)
	go func() {
		var longest time.Duration
		var failingSince time.Time
		for {
			select {
			case <-stop:
				done <- longest
				return
			case <-time.After(100 * time.Millisecond):
			}
			got, err := harness.DialTCP(a.NS, target, 200*time.Millisecond)
			switch {
			case (err != nil || got != "b") && failingSince.IsZero():
				failingSince = time.Now()
			case err == nil && got == "b" && !failingSince.IsZero():
				longest = max(longest, time.Since(failingSince))
				failingSince = time.Time{}
			}
		}
	}()
	start := time.Now()
	c.MigrateToZones()
	for _, f := range fams {
		if got := reach(t, a.NS, at(b.Addr(f), tcpPort)); got != "b" {
			t.Fatalf("%s: answered by %q, want b", f, got)
		}
	}
	restored := time.Since(start)
	close(stop)
	t.Logf("migration to zone mode: pod to pod across nodes restored %s after the master was stopped; longest interruption seen every 100 ms: %s",
		restored.Round(10*time.Millisecond), (<-done).Round(10*time.Millisecond))

	for name, n := range c.Nodes {
		if got := fmt.Sprint(n.Subnets); got != subnets[name] {
			t.Errorf("node %s's host subnets %s after the move, %s before", name, got, subnets[name])
		}
	}
	for _, p := range []*harness.Pod{a, b, b1} {
		if uuid := portUUID(t, c.Zones[p.Node].OVN, topology.PodPort(ns, p.Name)); uuid == "" {
			t.Errorf("pod %s has no port in zone %s's NB", p.Name, p.Node)
		}
	}
	backendsReached(t, a.NS, vip+":80", "b", "b1")
	backendsReached(t, b.NS, vip+":80", "b", "b1")
	c2 := c.RunPod(ns, "c", "node2", nil)
	runServers(t, c2)
	for _, f := range fams {
		if got := reach(t, a.NS, at(c2.Addr(f), tcpPort)); got != "c" {
			t.Fatalf("%s: the pod started after the move: answered by %q, want c", f, got)
		}
	}
}

// TestE2EZonesOfGroups: a zone per group of nodes, node1 and node2 in zone
// "a", node3 in zone "b": pods reach each other inside zone a (its own
// tunnel between its two chassis) and across zones from either node of a,
// through a ClusterIP too, and node2 reaches zone b's pod.
func TestE2EZonesOfGroups(t *testing.T) {
	fams := zoneFamilies()
	zoneOf := map[string]string{"node1": "a", "node2": "a", "node3": "b"}
	c, e := startEnv(t, func() *harness.Cluster {
		return harness.NewClusterWith(t, harness.ClusterOptions{Families: fams, Zones: harness.ZonesPerNode,
			ZoneOf: func(node string) string { return zoneOf[node] }})
	})
	for _, n := range []string{"node1", "node2", "node3"} {
		c.AddNode(n)
	}
	c.EnsureNamespace(ns)
	var pods []*harness.Pod
	for i, n := range []string{"node1", "node2", "node3"} {
		p := c.RunPod(ns, fmt.Sprintf("p%d", i+1), n, nil)
		runServers(t, p)
		pods = append(pods, p)
	}
	if c.Zones["node1"] != c.Zones["node2"] || c.Zones["node1"] == c.Zones["node3"] {
		t.Fatal("node1 and node2 should share zone a, node3 be in zone b")
	}
	for _, f := range fams {
		for _, pair := range [][2]int{{0, 1}, {1, 0}, {0, 2}, {1, 2}, {2, 0}, {2, 1}} {
			from, to := pods[pair[0]], pods[pair[1]]
			t.Run(fmt.Sprintf("%s %s to %s", f, from.Node, to.Node), func(t *testing.T) {
				if got := reach(t, from.NS, at(to.Addr(f), tcpPort)); got != to.Name {
					t.Fatalf("answered by %q, want %s", got, to.Name)
				}
			})
		}
		t.Run(string(f)+" node2 to zone b's pod", func(t *testing.T) {
			if got := reach(t, c.Nodes["node2"].NS, at(pods[2].Addr(f), tcpPort)); got != "p3" {
				t.Fatalf("answered by %q, want p3", got)
			}
		})
	}
	t.Run("ClusterIP from zone a to a backend in zone b", func(t *testing.T) {
		vip := e.service("only-b", pods[2])
		for _, p := range pods[:2] {
			backendsReached(t, p.NS, vip+":80", "p3")
		}
	})
}
