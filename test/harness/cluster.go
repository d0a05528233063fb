package harness

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/containernetworking/cni/libcni"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
)

// Cluster is a whole cluster in a box: OVN central, etcd + kube-apiserver,
// ovnkube master, and nodes in network namespaces running OVS (userspace
// datapath), ovn-controller and `ovnkube node`. Pods are network namespaces
// wired by ovn_cni through libcni, as a container runtime does.
type Cluster struct {
	T        T
	OVN      *OVNCentral
	Kube     *KubeAPI
	Underlay *Underlay
	LogDir   string
	Master   *Process
	Nodes    map[string]*ClusterNode
	// Families are the cluster's IP families, the primary first.
	Families []corev1.IPFamily
	// External is the network of the nodes' shared gateways (nil without
	// ClusterOptions.Gateway).
	External *ExternalNetwork
	// IC and Zones are zone mode's (ClusterOptions.Zones): the
	// interconnection databases and each node's zone, by node name (the
	// nodes of a zone share one); OVN is nil then and Master is `ovnkube
	// cluster-manager`.
	IC         *Interconnect
	Zones      map[string]*Zone
	zoneOf     func(node string) string
	masterArgs []string
	starts     int
}

// Zone is a zone of a cluster in zone mode: its OVN (joined to the
// cluster's Interconnect under the zone's name) and its master.
type Zone struct {
	Name   string
	OVN    *OVNCentral
	Master *Process
	args   []string
	starts int
}

// ClusterNode is a node with its daemon and CNI invoker.
type ClusterNode struct {
	*Node
	Daemon *Process
	CNI    *CNI
	Subnet netip.Prefix // the primary family's host subnet
	// Subnets are its host subnets, one per family, the primary first.
	Subnets []netip.Prefix
	// GatewayIPs are its addresses on the external network (the shared
	// gateway's, which NodePorts answer on and egress is SNATed to), one
	// per family; none without a gateway.
	GatewayIPs []netip.Addr
	daemonArgs []string
}

// Pod is a pod sandbox wired by ovn_cni.
type Pod struct {
	Namespace, Name, Node string
	UID                   string
	NS                    NetNS
	IP                    netip.Addr   // the primary family's address
	IPs                   []netip.Addr // one per family, the primary first
	MAC                   string
	rt                    *libcni.RuntimeConf
}

// Key is namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// Addrs are the pod's addresses (IP alone when IPs was not filled in).
func (p *Pod) Addrs() []netip.Addr {
	if len(p.IPs) > 0 {
		return p.IPs
	}
	return []netip.Addr{p.IP}
}

// Addr is the pod's address of a family (invalid when it has none).
func (p *Pod) Addr(f corev1.IPFamily) netip.Addr { return Of(p.Addrs(), f) }

// NewCluster starts the control plane and the master, IPv4 only.
func NewCluster(t T, masterArgs ...string) *Cluster {
	t.Helper()
	return NewClusterWith(t, ClusterOptions{MasterArgs: masterArgs})
}

// NewClusterWith starts the control plane and the master for the options'
// families: the API server serves their service ranges and the master gets
// their cluster, service and join ranges (Plans).
func NewClusterWith(t T, o ClusterOptions) *Cluster {
	t.Helper()
	fams := o.families()
	c := &Cluster{T: t, Kube: StartKubeAPI(t, kubeServiceRanges(o)...), Underlay: NewUnderlayFor(t, fams...),
		LogDir: t.TempDir(), Nodes: map[string]*ClusterNode{}, Families: fams}
	if len(o.Families) > 0 {
		c.masterArgs = rangeFlags(fams, true)
	}
	if o.Gateway {
		c.External = NewExternalNetwork(t, fams...)
	}
	if o.CRDs {
		c.Kube.InstallCRDs(t)
	}
	switch o.Zones {
	case "":
		c.OVN = StartOVNCentral(t)
		c.StartMaster(o.MasterArgs...)
	case ZonesPerNode:
		c.IC, c.Zones, c.zoneOf = StartInterconnect(t), map[string]*Zone{}, o.ZoneOf
		c.masterArgs = append(c.masterArgs, o.MasterArgs...)
		c.startClusterManager()
	default:
		t.Fatalf("ClusterOptions.Zones %q: want %q or empty", o.Zones, ZonesPerNode)
	}
	return c
}

// startClusterManager starts zone mode's cluster-wide part.
func (c *Cluster) startClusterManager() {
	args := []string{Binary(c.T, "ovnkube"), "--loglevel", "4", "cluster-manager", "--kubeconfig", c.Kube.Kubeconfig,
		"--ic-nb-address", "unix:" + c.IC.NBSock, "--leader-elect=false", "--egressip-reachability-timeout", "0"}
	if len(c.masterArgs) > 0 { // the families' pod ranges, as the masters have them
		var cluster []string
		for _, f := range c.Families {
			cluster = append(cluster, Plans[f].ClusterSubnet)
		}
		args = append(args, "--cluster-subnet", strings.Join(cluster, ","))
	}
	c.Master = Start(c.T, c.LogDir, "cluster-manager", args...)
}

// addZone gives a node its zone (zone mode): the zone's OVN, joined to the
// cluster's Interconnect, and its master, started with the zone's first node.
func (c *Cluster) addZone(node string) *Zone {
	name := node
	if c.zoneOf != nil {
		name = c.zoneOf(node)
	}
	for _, z := range c.Zones {
		if z.Name == name {
			c.Zones[node] = z
			return z
		}
	}
	z := &Zone{Name: name, OVN: StartOVNCentral(c.T)}
	z.OVN.Join(c.IC, name)
	z.args = append(append([]string{}, c.masterArgs...), "--zone", name, "--leader-elect=false")
	z.StartMaster(c)
	c.Zones[node] = z
	return z
}

// StartMaster (re)starts the zone's master.
func (z *Zone) StartMaster(c *Cluster) {
	z.starts++
	z.Master = StartMaster(c.T, c.LogDir, fmt.Sprintf("master-%s-%d", z.Name, z.starts), z.OVN, c.Kube, z.args...)
}

// kubeServiceRanges keeps the API server's default (both families) for
// the callers that name no family.
func kubeServiceRanges(o ClusterOptions) []string {
	if len(o.Families) == 0 {
		return nil
	}
	return serviceRanges(o.Families)
}

// StartMaster (re)starts ovnkube master; extra follows the families' ranges.
func (c *Cluster) StartMaster(extra ...string) {
	c.starts++
	args := append(append([]string{}, c.masterArgs...), extra...)
	c.Master = StartMaster(c.T, c.LogDir, fmt.Sprintf("master-%d", c.starts), c.OVN, c.Kube, args...)
}

// RestartMasters stops the master (every zone's, in zone mode) and starts
// it again with extra flags added.
func (c *Cluster) RestartMasters(extra ...string) {
	if c.Zones == nil {
		c.Master.Stop()
		c.StartMaster(extra...)
		return
	}
	restarted := map[*Zone]bool{}
	for _, z := range c.Zones {
		if restarted[z] {
			continue
		}
		restarted[z] = true
		z.Master.Stop()
		z.args = append(z.args, extra...)
		z.StartMaster(c)
	}
}

// AddNode starts a node and its `ovnkube node` daemon (with a shared
// gateway when the cluster has an external network) and waits until its
// management port has an address of each family.
func (c *Cluster) AddNode(name string) *ClusterNode {
	t := c.T
	t.Helper()
	ovn, zoneArgs := c.OVN, []string(nil)
	if c.Zones != nil {
		z := c.addZone(name)
		ovn, zoneArgs = z.OVN, []string{"--zone", z.Name}
	}
	n := &ClusterNode{Node: StartNode(t, ovn, c.Underlay, name)}
	n.ReachAPI(t, c.Kube)
	var addrs []corev1.NodeAddress
	for _, ip := range n.IPs {
		addrs = append(addrs, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip.String()})
	}
	_, err := c.Kube.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Addresses: addrs},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"ip", "netns", "exec", n.NS.Name, Binary(t, "ovnkube"), "--loglevel", "4", "node",
		"--node-name", name, "--encap-ip", n.TunnelIP, "--sb-address", "unix:" + ovn.SBSock,
		"--ovs-address", n.OVSAddress(), "--kubeconfig", c.Kube.Kubeconfig, "--datapath-type", "netdev"}
	args = append(args, zoneArgs...)
	if len(c.masterArgs) > 0 {
		args = append(args, rangeFlags(c.Families, false)...)
	}
	if c.External != nil {
		for _, a := range c.External.Attach(t, n.Node, "eth1", len(c.Nodes)+1) {
			n.GatewayIPs = append(n.GatewayIPs, a.Addr())
		}
		// The daemon reads the bridge's addresses and default routes.
		args = append(args, "--bridge-interface", SharedGateway(t, n.Node, "eth1"))
	}
	n.daemonArgs = args
	n.Daemon = Start(t, c.LogDir, "node-"+name, args...)
	c.waitNodeDaemon(n)
	n.CNI = NewCNI(t, n.Node, c.Kube.Kubeconfig, nil)
	c.Nodes[name] = n
	return n
}

// waitNodeDaemon waits until a node's daemon has configured the node (its
// host subnets read, its chassis reported, its management port addressed).
func (c *Cluster) waitNodeDaemon(n *ClusterNode) {
	t, name := c.T, n.Name
	t.Helper()
	Eventually(t, 60*time.Second, "node "+name+" ready (ovn-k8s-mp0 configured)", func() error {
		if n.Daemon.Exited() {
			t.Fatalf("ovnkube node %s exited:\n%s", name, n.Daemon.Tail(30))
		}
		node, err := c.Kube.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		subnets, err := annotations.ParseNodeSubnets(node.Annotations[annotations.NodeSubnets])
		if err != nil {
			return err
		}
		if len(subnets) != len(c.Families) {
			return fmt.Errorf("host subnets %v, want one per family %v", subnets, c.Families)
		}
		n.Subnet, n.Subnets = subnets[0], subnets
		if node.Annotations[annotations.NodeChassisID] == "" {
			return fmt.Errorf("no chassis id yet")
		}
		for _, f := range c.Families {
			out, err := n.NS.Exec("ip", "-o", familyFlag(f), "addr", "show", "dev", "ovn-k8s-mp0", "scope", "global")
			if err != nil || !strings.Contains(out, "inet") || strings.Contains(out, "tentative") {
				return fmt.Errorf("ovn-k8s-mp0 has no usable %s address yet: %q %v", f, out, err)
			}
		}
		return nil
	})
}

// MigrateToZones moves a running cluster in central mode to zone mode, a
// zone per node, as docs/operations.md's procedure does: the master
// stopped; the interconnection databases and the cluster manager started
// (which keeps every node's host subnets); then each node in turn gets its
// zone (NB, SB, northd, ovn-ic, master) and its daemon is restarted with
// --zone and its zone's SB, which its ovn-controller moves to. Pods keep
// their addresses (their annotations). Returns once every node daemon has
// configured its node again; the old central OVN is left running, unused.
func (c *Cluster) MigrateToZones() {
	t := c.T
	t.Helper()
	if c.Zones != nil {
		t.Fatal("the cluster is in zone mode already")
	}
	c.Master.Stop()
	c.IC, c.Zones = StartInterconnect(t), map[string]*Zone{}
	c.startClusterManager()
	for name, n := range c.Nodes {
		z := c.addZone(name)
		n.Daemon.Stop()
		args := slices.Clone(n.daemonArgs)
		args[slices.Index(args, "--sb-address")+1] = "unix:" + z.OVN.SBSock
		n.daemonArgs = append(args, "--zone", z.Name)
		n.Daemon = Start(t, c.LogDir, "node-"+name+"-zone", n.daemonArgs...)
		c.waitNodeDaemon(n)
	}
	c.OVN = nil
}

// EnsureNamespace creates a namespace with its default ServiceAccount.
func (c *Cluster) EnsureNamespace(name string) { c.Kube.EnsureNamespace(c.T, name) }

// RunPod creates the Pod object on a node, then its sandbox: a netns wired by
// ovn_cni (ADD through libcni with the dist conflist), as the runtime would.
// mutate may change the object before it is created (container ports).
func (c *Cluster) RunPod(namespace, name, node string, labels map[string]string, mutate ...func(*corev1.Pod)) *Pod {
	t := c.T
	t.Helper()
	n := c.Nodes[node]
	if n == nil {
		t.Fatalf("no node %s", node)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	for _, f := range mutate {
		f(pod)
	}
	obj, err := c.Kube.Client.CoreV1().Pods(namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p := &Pod{Namespace: namespace, Name: name, Node: node, UID: string(obj.UID), NS: NewNetNS(t, "pod")}
	containerID := strings.ReplaceAll(string(obj.UID), "-", "")
	p.rt = RuntimeConf(containerID, p.NS, namespace, name, p.UID)
	res, err := n.CNI.Add(p.rt)
	if err != nil {
		t.Fatalf("CNI ADD for pod %s on %s: %v", p.Key(), node, err)
	}
	r, err := resultIPs(res)
	if err != nil || len(r) != len(c.Families) {
		t.Fatalf("CNI result for %s: addresses %v (want one per family %v), %v", p.Key(), r, c.Families, err)
	}
	for i, f := range c.Families {
		if Family(r[i]) != f {
			t.Fatalf("CNI result for %s: addresses %v, want one per family in the order %v", p.Key(), r, c.Families)
		}
	}
	p.IP, p.IPs = r[0], r
	mac, _ := p.NS.Exec("cat", "/sys/class/net/eth0/address")
	p.MAC = strings.TrimSpace(mac)
	t.Cleanup(func() { _ = n.CNI.Del(p.rt) })
	return p
}

// DeletePod tears the sandbox down (CNI DEL, netns removed) and deletes the object.
func (c *Cluster) DeletePod(p *Pod) {
	t := c.T
	t.Helper()
	if err := c.Nodes[p.Node].CNI.Del(p.rt); err != nil {
		t.Fatalf("CNI DEL for %s: %v", p.Key(), err)
	}
	_, _ = Run("ip", "netns", "del", p.NS.Name)
	zero := int64(0)
	if err := c.Kube.Client.CoreV1().Pods(p.Namespace).Delete(context.Background(), p.Name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatal(err)
	}
}
