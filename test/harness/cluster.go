package harness

import (
	"context"
	"fmt"
	"net/netip"
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
	starts   int
}

// ClusterNode is a node with its daemon and CNI invoker.
type ClusterNode struct {
	*Node
	Daemon *Process
	CNI    *CNI
	Subnet netip.Prefix
}

// Pod is a pod sandbox wired by ovn_cni.
type Pod struct {
	Namespace, Name, Node string
	UID                   string
	NS                    NetNS
	IP                    netip.Addr
	MAC                   string
	rt                    *libcni.RuntimeConf
}

// Key is namespace/name.
func (p *Pod) Key() string { return p.Namespace + "/" + p.Name }

// NewCluster starts the control plane and the master.
func NewCluster(t T, masterArgs ...string) *Cluster {
	t.Helper()
	c := &Cluster{T: t, OVN: StartOVNCentral(t), Kube: StartKubeAPI(t), Underlay: NewUnderlay(t), LogDir: t.TempDir(), Nodes: map[string]*ClusterNode{}}
	c.StartMaster(masterArgs...)
	return c
}

// StartMaster (re)starts ovnkube master.
func (c *Cluster) StartMaster(extra ...string) {
	c.starts++
	c.Master = StartMaster(c.T, c.LogDir, fmt.Sprintf("master-%d", c.starts), c.OVN, c.Kube, extra...)
}

// AddNode starts a node and its `ovnkube node` daemon and waits until its
// management port is configured.
func (c *Cluster) AddNode(name string) *ClusterNode {
	t := c.T
	t.Helper()
	n := &ClusterNode{Node: StartNode(t, c.OVN, c.Underlay, name)}
	n.ReachAPI(t, c.Kube)
	_, err := c.Kube.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Status:     corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: n.TunnelIP}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n.Daemon = Start(t, c.LogDir, "node-"+name, "ip", "netns", "exec", n.NS.Name, Binary(t, "ovnkube"), "--loglevel", "4", "node",
		"--node-name", name, "--encap-ip", n.TunnelIP, "--sb-address", "unix:"+c.OVN.SBSock,
		"--ovs-address", n.OVSAddress(), "--kubeconfig", c.Kube.Kubeconfig, "--datapath-type", "netdev")
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
		n.Subnet = subnets[0]
		if node.Annotations[annotations.NodeChassisID] == "" {
			return fmt.Errorf("no chassis id yet")
		}
		out, err := n.NS.Exec("ip", "-o", "-4", "addr", "show", "dev", "ovn-k8s-mp0")
		if err != nil || !strings.Contains(out, "inet ") {
			return fmt.Errorf("ovn-k8s-mp0 not configured yet")
		}
		return nil
	})
	n.CNI = NewCNI(t, n.Node, c.Kube.Kubeconfig, nil)
	c.Nodes[name] = n
	return n
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
	if err != nil || len(r) == 0 {
		t.Fatalf("CNI result for %s: %v", p.Key(), err)
	}
	p.IP = r[0]
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
