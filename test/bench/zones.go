package main

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The scale scenario in zone mode (-scale-zones, issue 38) measures one
// zone of a cluster of a zone per node: node0000's. Its NB, SB and northd
// are the benchmark's OVN, joined by a real ovn-ic to an IC NB and SB; its
// master runs with --zone; the real cluster manager allocates every node's
// subnet. Every other node is a simulated zone: in the IC SB, the rows its
// ovn-ic would write (the zone, its gateway chassis and Geneve encap, its
// transit port and the route to its pods), and in the API, its pods'
// addresses written by the benchmark after each create, as that zone's
// master would. What node0000's zone then holds (remote chassis, remote
// ports, learned routes, every service, the policies with every peer) and
// what its master pays for the cluster's churn are what one node of a
// cluster that size costs in zone mode.

// zones is the zone-mode state of the scale scenario.
type zones struct {
	ic      *harness.Interconnect
	cluster []config.ClusterSubnet
	subnet  map[string]netip.Prefix // node → its IPv4 host subnet, as the cluster manager annotated it
	next    map[string]int          // node → the host number of its next pod
	added   map[string]bool         // simulated zones written to the IC SB
	remote  map[string]bool         // pod key → on another node: annotated by the benchmark, no port here
	local   int                     // pods on node0000 (its master's)
}

// zoneMasterArgs are the flags that make the benchmark's master node0000's
// zone's.
func (b *bench) zoneMasterArgs() []string {
	if b.zones == nil {
		return nil
	}
	return []string{"--zone", realNode}
}

// startZones joins the benchmark's OVN to a new interconnection as
// node0000's zone and starts the cluster manager.
func (b *bench) startZones() {
	cluster, err := config.ParseClusterSubnets([]string{scaleClusterSubnet})
	if err != nil {
		b.s.Fatal(err)
	}
	z := &zones{ic: harness.StartInterconnect(b.s), cluster: cluster, subnet: map[string]netip.Prefix{}, next: map[string]int{}, added: map[string]bool{}, remote: map[string]bool{}}
	b.ovn.Join(z.ic, realNode)
	harness.Start(b.s, b.logDir, "cluster-manager", harness.Binary(b.s, "ovnkube"), "--loglevel", "2", "cluster-manager",
		"--kubeconfig", b.kube.Kubeconfig, "--ic-nb-address", "unix:"+z.ic.NBSock, "--leader-elect=false",
		"--egressip-reachability-timeout", "0", "--cluster-subnet", scaleClusterSubnet)
	b.zones = z
	say("   zone mode: node0000's zone joined to an IC NB and SB by ovn-ic; the cluster manager allocates the subnets; every other node a simulated zone")
}

// zoneNode is a node of the zone-mode cluster: a zone of its own, and
// node0000 with the chassis its OVS reports (as its node daemon writes).
func (b *bench) zoneNode(node *corev1.Node) {
	if b.zones == nil {
		return
	}
	node.Annotations = map[string]string{annotations.NodeZone: node.Name}
	if node.Name == realNode {
		node.Annotations[annotations.NodeChassisID] = realNode
	}
}

// readZoneSubnets keeps every node's subnet once the cluster manager has
// annotated it.
func (b *bench) readZoneSubnets(nodes []corev1.Node) {
	if b.zones == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, n := range nodes {
		subnets, err := annotations.ParseNodeSubnets(n.Annotations[annotations.NodeSubnets])
		if err != nil || len(subnets) != 1 {
			b.s.Fatalf("node %s: %s %q: %v", n.Name, annotations.NodeSubnets, n.Annotations[annotations.NodeSubnets], err)
		}
		b.zones.subnet[n.Name] = subnets[0]
	}
}

// annotateRemotePod writes the address of a pod of another zone, as that
// zone's master would: the next of its node's subnet, for this incarnation.
func (b *bench) annotateRemotePod(pod *corev1.Pod) {
	b.mu.Lock()
	sub, ok := b.zones.subnet[pod.Spec.NodeName]
	host := max(3, b.zones.next[pod.Spec.NodeName]) // .1 the router, .2 the management port
	b.zones.next[pod.Spec.NodeName] = host + 1
	b.zones.remote[pod.Namespace+"/"+pod.Name] = true
	b.mu.Unlock()
	ip := sub.Addr().As4()
	ip[2], ip[3] = ip[2]+byte(host>>8), byte(host)
	addr := netip.AddrFrom4(ip)
	if !ok || !sub.Contains(addr) {
		b.s.Fatalf("pod %s/%s: no address left in node %s's subnet %v", pod.Namespace, pod.Name, pod.Spec.NodeName, sub)
	}
	gw := sub.Addr().Next()
	pn := annotations.PodNetwork{IPs: []netip.Prefix{netip.PrefixFrom(addr, sub.Bits())}, MAC: topology.MACFromIP(addr), Gateways: []netip.Addr{gw}, PodUID: string(pod.UID)}
	patch := annotations.MergePatch(string(pod.UID), annotations.PodNetworks, annotations.FormatPodNetworks(pn))
	if _, err := b.kube.Client.CoreV1().Pods(pod.Namespace).Patch(context.Background(), pod.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		b.s.Fatal(err)
	}
}

// localPods is how many pods the master programs: all of them in central
// mode, node0000's in zone mode.
func (b *bench) localPods() int {
	if b.zones == nil {
		return b.podCount
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.zones.local
}

// addZones writes the simulated zones of nodes 1..nodes-1 not there yet
// into the IC SB, each as its ovn-ic would: its Availability_Zone, its
// chassis as a Gateway with a Geneve Encap, its node's port on the transit
// switch (the cluster router's port there, at the node's transit address)
// and the route to its host subnet through that address. In transactions
// of 50 zones (a command line argument holds 128 KiB).
func (b *bench) addZones(nodes int) {
	z := b.zones
	var names []string
	for i := 1; i < nodes; i++ {
		if !z.added[scaleNode(i)] {
			names = append(names, scaleNode(i))
		}
	}
	for len(names) > 0 {
		batch := names[:min(50, len(names))]
		names = names[len(batch):]
		ops := []any{"OVN_IC_Southbound"}
		for j, name := range batch {
			b.mu.Lock()
			sub := z.subnet[name]
			b.mu.Unlock()
			addrs, err := config.NodeAddrs(config.DefaultTransitSubnets, z.cluster, []netip.Prefix{sub})
			if err != nil {
				b.s.Fatalf("node %s: %v", name, err)
			}
			port := topology.Transit(name, name, addrs).RouterPort
			idx := nodeIndex(name)
			az, encap := fmt.Sprintf("az%d", j), fmt.Sprintf("e%d", j)
			ops = append(ops,
				map[string]any{"op": "insert", "table": "Availability_Zone", "uuid-name": az, "row": map[string]any{"name": name}},
				map[string]any{"op": "insert", "table": "Encap", "uuid-name": encap, "row": map[string]any{
					"type": "geneve", "ip": simulatedEncapIP(idx), "gateway_name": name, "options": []any{"map", []any{[]any{"csum", "true"}}}}},
				map[string]any{"op": "insert", "table": "Gateway", "row": map[string]any{
					"name": name, "hostname": name, "availability_zone": []any{"named-uuid", az}, "encaps": []any{"named-uuid", encap}}},
				map[string]any{"op": "insert", "table": "Port_Binding", "row": map[string]any{
					"logical_port": topology.TransitSwitchPort(name), "transit_switch": topology.TransitSwitch,
					"availability_zone": []any{"named-uuid", az}, "tunnel_key": simulatedTunnelKey(idx), "gateway": name,
					"encap": []any{"named-uuid", encap}, "address": port.MAC + " " + strings.Join(port.Networks, " ")}},
				map[string]any{"op": "insert", "table": "Route", "row": map[string]any{
					"transit_switch": topology.TransitSwitch, "availability_zone": []any{"named-uuid", az}, "route_table": "",
					"ip_prefix": sub.String(), "nexthop": addrs[0].Addr().String(), "origin": "connected",
					// The zone's cluster router: ovn-ic (25.03) learns only routes naming theirs.
					"external_ids": []any{"map", []any{[]any{"lr-id", fmt.Sprintf("00000000-0000-4000-8000-%012d", idx)}}}}})
		}
		b.transactIC(ops)
		for _, name := range batch {
			z.added[name] = true
		}
	}
}

// simulatedEncapIP is a simulated node's made-up Geneve address (nothing
// is sent to it: node0000's tunnels to it carry no traffic).
func simulatedEncapIP(idx int) string {
	return fmt.Sprintf("10.%d.%d.%d", 64+idx/65536, idx/256%256, idx%256)
}

// simulatedTunnelKey is a simulated transit port's key: above those the
// real zone's ovn-ic allocates from 1 for its own port.
func simulatedTunnelKey(idx int) int { return 16384 + idx }

// transactIC sends one IC SB transaction; any error fails the benchmark.
func (b *bench) transactIC(ops []any) {
	transactOn(b.s, "unix:"+b.zones.ic.SBSock, ops, nil)
}

// waitZones waits until node0000's zone has learned every simulated zone
// through its ovn-ic: a remote port on the transit switch and a route to
// its subnet on the cluster router each, and its chassis as a remote one
// in the SB.
func (b *bench) waitZones(nodes int) {
	want := nodes - 1
	harness.Eventually(b.s, b.waitFor(want, 20), fmt.Sprintf("%d simulated zones learned by node0000's zone", want), func() error {
		ports, err1 := b.ovn.NBCtl("--bare", "--columns=name", "find", "logical_switch_port", "type=remote")
		routes, err2 := b.ovn.NBCtl("--bare", "--columns=_uuid", "find", "logical_router_static_route", "external_ids:ic-learned-route!=\"\"")
		remote, err3 := b.ovn.SBCtl("--bare", "--columns=name", "find", "chassis", "other_config:is-remote=true")
		if err := errors.Join(err1, err2, err3); err != nil {
			return err
		}
		p, r, c := len(strings.Fields(ports)), len(strings.Fields(routes)), len(strings.Fields(remote))
		if p < want || r < want || c < want {
			return fmt.Errorf("%d remote ports, %d learned routes, %d remote chassis of %d (ovn-ic: %s)", p, r, c, want, b.ovn.ICTail(3))
		}
		return nil
	})
}

// zoneProbeNode puts every tenth probe pod on node0000 in zone mode: its
// master's creation → annotation latency is measured on them (the others
// are annotated by the benchmark at once); what the other nine cost it is
// a remote pod's.
func (b *bench) zoneProbeNode(i int, placed int) int {
	if b.zones != nil && i%10 == 0 {
		return 0
	}
	return placed
}

// zoneLocal counts a pod created on node0000.
func (b *bench) zoneLocal(node string) {
	if b.zones != nil && node == realNode {
		b.mu.Lock()
		b.zones.local++
		b.mu.Unlock()
	}
}

// probeLatencyKeys are the probe pods whose annotation the master wrote.
func (b *bench) probeLatencyKeys(keys []string, nodes []int) []string {
	if b.zones == nil {
		return keys
	}
	var out []string
	for i, k := range keys {
		if nodes[i] == 0 {
			out = append(out, k)
		}
	}
	return out
}

// growZones adds the step's simulated zones (zone mode) and waits until
// node0000's zone has learned them, and northd has caught up.
func (b *bench) growZones(nodes int) {
	if b.zones == nil {
		return
	}
	start, cpu := time.Now(), cpuSnapshot()
	b.addZones(nodes)
	b.waitZones(nodes)
	if _, err := b.ovn.NBCtl("--timeout=600", "--wait=sb", "sync"); err != nil {
		b.s.Fatal(err)
	}
	say("   %d simulated zones in the IC SB, learned by node0000's zone in %.1f s; CPU: %s", nodes-1, time.Since(start).Seconds(), cpuSnapshot().since(cpu).describe(time.Since(start).Seconds()))
}
