package cluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

var (
	bg      = context.Background()
	metaGet = metav1.GetOptions{}
)

// kubeconfig is the admin kubeconfig every component and test uses: a token
// of system:masters (the cluster has no other tenants; kubelets use it too).
func (c *Cluster) kubeconfig() string { return harness.TokenKubeconfig(c.APIServer(), adminToken) }

// Kubeconfig is the admin kubeconfig's path inside every node.
const Kubeconfig = "/etc/kubernetes/admin.conf"

// startControlPlane starts etcd, kube-apiserver, the controller-manager and
// the scheduler on the control-plane node.
func (c *Cluster) startControlPlane(n *Node) error {
	pki := n.hostPath("/etc/kubernetes/pki")
	if err := os.MkdirAll(pki, 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pki, "tokens.csv"), []byte(adminToken+",admin,admin,system:masters\n"), 0o600); err != nil {
		return err
	}
	if _, err := run("openssl", "genrsa", "-out", filepath.Join(pki, "sa.key"), "2048"); err != nil {
		return err
	}
	if err := c.start(n, "etcd", "etcd", "--data-dir", "/var/lib/etcd/data", "--name", n.Name,
		"--listen-client-urls", "http://127.0.0.1:2379", "--advertise-client-urls", "http://127.0.0.1:2379",
		"--listen-peer-urls", "http://127.0.0.1:2380", "--initial-advertise-peer-urls", "http://127.0.0.1:2380",
		"--initial-cluster", n.Name+"=http://127.0.0.1:2380", "--listen-metrics-urls", "http://127.0.0.1:2381",
		"--unsafe-no-fsync"); err != nil {
		return err
	}
	// The self-signed serving certificate kube-apiserver makes in --cert-dir
	// names the advertise address and the kubernetes Service's ClusterIP; the
	// file carries its CA too, so it serves as the cluster's root CA.
	if err := c.start(n, "kube-apiserver", c.bin("kube-apiserver"),
		"--etcd-servers=http://127.0.0.1:2379", "--bind-address="+c.anyAddress(), fmt.Sprintf("--secure-port=%d", apiPort),
		"--advertise-address="+c.nodeIPs(n)[0], "--cert-dir=/etc/kubernetes/pki", "--token-auth-file=/etc/kubernetes/pki/tokens.csv",
		"--authorization-mode=RBAC", "--allow-privileged=true",
		"--service-account-issuer=https://kubernetes.default.svc", "--service-account-key-file=/etc/kubernetes/pki/sa.key",
		"--service-account-signing-key-file=/etc/kubernetes/pki/sa.key", "--service-cluster-ip-range="+c.serviceCIDRFlag(),
		"--kubelet-preferred-address-types=InternalIP", "--profiling=false"); err != nil {
		return err
	}
	for _, node := range c.Nodes {
		if err := os.WriteFile(node.hostPath(Kubeconfig), []byte(c.kubeconfig()), 0o600); err != nil {
			return err
		}
	}
	if err := poll(bg, 90*time.Second, "kube-apiserver ready", func() error {
		_, err := c.Exec(n, c.bin("kubectl"), "--kubeconfig", Kubeconfig, "get", "--raw", "/readyz")
		return err
	}); err != nil {
		return fmt.Errorf("%w\n%s", err, tail(c.logPath(n, "kube-apiserver"), 20))
	}
	if err := c.start(n, "kube-controller-manager", c.bin("kube-controller-manager"),
		"--kubeconfig="+Kubeconfig, "--authentication-kubeconfig="+Kubeconfig, "--authorization-kubeconfig="+Kubeconfig,
		"--leader-elect=false", "--service-account-private-key-file=/etc/kubernetes/pki/sa.key",
		"--root-ca-file=/etc/kubernetes/pki/apiserver.crt", "--use-service-account-credentials=false",
		"--bind-address=127.0.0.1", "--controllers=*", "--profiling=false"); err != nil {
		return err
	}
	return c.start(n, "kube-scheduler", c.bin("kube-scheduler"),
		"--kubeconfig="+Kubeconfig, "--authentication-kubeconfig="+Kubeconfig, "--authorization-kubeconfig="+Kubeconfig,
		"--leader-elect=false", "--bind-address=127.0.0.1", "--profiling=false")
}

// startContainerd writes the node's containerd configuration, starts it and
// imports the images.
func (c *Cluster) startContainerd(n *Node, images []string) error {
	conf := `version = 2
root = "/var/lib/containerd"
state = "/run/containerd"

[grpc]
  address = "/run/containerd/containerd.sock"

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    sandbox_image = "registry.k8s.io/pause:3.10.1"
    # Required here: root lacks CAP_SYS_RESOURCE, and runc cannot lower oom_score_adj.
    restrict_oom_score_adj = true
    [plugins."io.containerd.grpc.v1.cri".containerd]
      snapshotter = "overlayfs"
      default_runtime_name = "runc"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
        runtime_type = "io.containerd.runc.v2"
        [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
          SystemdCgroup = false
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/opt/cni/bin"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
`
	if err := os.WriteFile(n.hostPath("/etc/containerd/config.toml"), []byte(conf), 0o644); err != nil {
		return err
	}
	if err := c.start(n, "containerd", "containerd", "--config", "/etc/containerd/config.toml"); err != nil {
		return err
	}
	if err := poll(bg, 30*time.Second, n.Name+" containerd", func() error {
		_, err := c.Exec(n, "ctr", "--address", "/run/containerd/containerd.sock", "version")
		return err
	}); err != nil {
		return err
	}
	for _, img := range images {
		if _, err := c.Exec(n, "ctr", "--address", "/run/containerd/containerd.sock", "-n", "k8s.io", "images", "import", img); err != nil {
			return fmt.Errorf("node %s: importing %s: %w", n.Name, img, err)
		}
	}
	return nil
}

// kubeletAddress is where the kubelet listens: its node's IPv4 address, or
// every address when the cluster has IPv6 (the API server reaches it at its
// node's first InternalIP, IPv6 on an IPv6-only cluster).
func (c *Cluster) kubeletAddress(n *Node) string {
	if c.has6() {
		return c.anyAddress()
	}
	return n.IP
}

// startKubelet writes the node's kubelet configuration and starts it.
func (c *Cluster) startKubelet(n *Node) error {
	taints := ""
	if n.ControlPlane {
		taints = "registerWithTaints:\n- {key: node-role.kubernetes.io/control-plane, effect: NoSchedule}\n"
	}
	// Pods that do not use the cluster DNS get a resolver that answers
	// nothing: no query leaves the machine.
	if err := os.WriteFile(n.hostPath("/etc/kubernetes/resolv.conf"), []byte("nameserver "+c.dnsIP()+"\noptions ndots:1\n"), 0o644); err != nil {
		return err
	}
	conf := fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: "%s"
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {enabled: true}
  webhook: {enabled: false}
authorization: {mode: AlwaysAllow}
containerRuntimeEndpoint: unix:///run/containerd/containerd.sock
cgroupDriver: cgroupfs
cgroupRoot: /%s
failSwapOn: false
failCgroupV1: false
makeIPTablesUtilChains: false
volumePluginDir: /var/lib/kubelet/volume-plugins
resolvConf: /etc/kubernetes/resolv.conf
clusterDNS: [%s]
clusterDomain: %s
evictionHard: {memory.available: "1Mi", nodefs.available: "1%%", imagefs.available: "1%%"}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
nodeStatusReportFrequency: 10s
nodeStatusUpdateFrequency: 4s
syncFrequency: 10s
fileCheckFrequency: 5s
%s`, c.kubeletAddress(n), n.Cgroup, c.dnsIP(), clusterDomain, taints)
	if err := os.WriteFile(n.hostPath("/var/lib/kubelet/config.yaml"), []byte(conf), 0o644); err != nil {
		return err
	}
	return c.start(n, "kubelet", c.bin("kubelet"), "--config=/var/lib/kubelet/config.yaml",
		"--kubeconfig="+Kubeconfig, "--hostname-override="+n.Name, "--node-ip="+strings.Join(c.nodeIPs(n), ","), "--v=1")
}

// labelControlPlane gives the control-plane node kind's role label (the
// kubelet may not set node-role labels on itself).
func (c *Cluster) labelControlPlane(n *Node) error {
	patch := `{"metadata":{"labels":{"node-role.kubernetes.io/control-plane":""}}}`
	_, err := c.Client.CoreV1().Nodes().Patch(bg, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// nodeReady reports why a node is not Ready yet.
func (c *Cluster) nodeReady(name string) error {
	node, err := c.Client.CoreV1().Nodes().Get(bg, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	for _, cond := range node.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			if cond.Status == corev1.ConditionTrue {
				return nil
			}
			return fmt.Errorf("node %s: %s: %s", name, cond.Reason, cond.Message)
		}
	}
	return fmt.Errorf("node %s has no Ready condition yet", name)
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return "--- " + path + ":\n" + strings.Join(lines, "\n")
}
