// Package cluster runs a real Kubernetes cluster in a box on ovn-k8s: a
// control-plane node and workers, each a network namespace and a mount
// namespace of its own (as a kind node is a container), with kubelet and
// containerd, OVS on the userspace datapath, ovn-controller and `ovnkube
// node`; the control plane adds etcd, kube-apiserver, kube-controller-manager,
// kube-scheduler, OVN central and `ovnkube master`. Pods are started by the
// kubelets through containerd, which calls ovn_cni installed from dist/.
//
// Every address lives in namespaces made here; every process runs in a
// cgroup below the cluster's own root, so Down finds and stops all of them
// (containers included), then removes the namespaces, the mounts, the
// cgroups and restores the host sysctls the kubelets changed, even when the
// process that ran Up is gone: what Up changes is recorded first in
// state.json.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
)

// Addresses and names (kind's, where kind has one).
const (
	underlayPrefix = "172.18.0."
	underlayLen    = 16
	apiPort        = 6443
	sbPort         = 6642
	clusterSubnet  = "10.244.0.0/16"
	serviceCIDR    = "10.96.0.0/16"
	// The IPv6 side of a dual-stack cluster (kind's underlay range).
	underlayPrefix6 = "fc00:f853:ccd:e793::"
	underlayLen6    = 64
	clusterSubnet6  = "fd00:10:244::/48"
	serviceCIDR6    = "fd00:10:96::/112"
	dnsServiceIP    = "10.96.0.10"
	dnsServiceIP6   = "fd00:10:96::a"
	clusterDomain   = "cluster.local"
	adminToken      = "ovn-k8s-cluster-admin-token"
	// The name prefix of everything the cluster creates on the host.
	prefix = "ovnkc"
)

// Config describes the cluster to build.
type Config struct {
	Repo    string // the checkout: binaries in _output/bin, dist/, images in _output/images
	Dir     string // state and logs, e.g. _output/cluster
	Workers int
	// Dist installs ovn-k8s from dist/kubernetes/ and the ovnkube image
	// (dist.go) instead of starting the master and node daemons itself.
	Dist bool
	// IPFamily is "ipv4" (the default), "ipv6" or "dual" (IPv4 primary):
	// the families of the nodes' Kubernetes addresses, pods and services.
	IPFamily string
	// Zones is ZonesPerNode for zone mode (zones.go); "": central mode.
	Zones string
	Log   func(format string, args ...any)
}

// IP families of the cluster in a box.
const (
	IPv4 = "ipv4"
	IPv6 = "ipv6"
	Dual = "dual"
)

// Families are the -ip-family values.
var Families = []string{IPv4, IPv6, Dual}

func (c *Cluster) has4() bool { return c.IPFamily != IPv6 }
func (c *Cluster) has6() bool { return c.IPFamily != IPv4 }

// perFamily keeps, of an IPv4 value and its IPv6 twin, those of the
// cluster's families, the primary first (IPv4 on a dual-stack cluster).
func (c *Cluster) perFamily(v4, v6 string) []string {
	var out []string
	if c.has4() {
		out = append(out, v4)
	}
	if c.has6() {
		out = append(out, v6)
	}
	return out
}

// ipFamily is one family of the cluster in a box, with the addresses the
// demo's and the north-south paths use in it.
type ipFamily struct {
	v6  bool
	tag string // after the report's "from": "" for IPv4, " (IPv6)"
	// The external host's address, a Service's external IP and a
	// LoadBalancer's ingress IP (external.go).
	external, serviceExternalIP, ingressIP string
	node                                   func(*Node) string
}

// families are the cluster's families, the primary first.
func (c *Cluster) families() []ipFamily {
	var out []ipFamily
	if c.has4() {
		out = append(out, ipFamily{tag: "", external: externalIP, serviceExternalIP: externalIPs, ingressIP: ingressIP,
			node: func(n *Node) string { return n.IP }})
	}
	if c.has6() {
		out = append(out, ipFamily{v6: true, tag: " (IPv6)", external: externalIP6, serviceExternalIP: externalIPs6, ingressIP: ingressIP6,
			node: func(n *Node) string { return n.IP6 }})
	}
	return out
}

// of is the first of ips in the family, "" if none is.
func (f ipFamily) of(ips []string) string {
	for _, ip := range ips {
		if a, err := netip.ParseAddr(ip); err == nil && a.Is6() == f.v6 {
			return ip
		}
	}
	return ""
}

// hostPort is host:port, with brackets around an IPv6 host.
func hostPort(host string, port int32) string { return net.JoinHostPort(host, strconv.Itoa(int(port))) }

// clusterSubnetFlag and serviceCIDRFlag are the ranges of the cluster's
// families, as ovnkube and the Kubernetes components take them.
func (c *Cluster) clusterSubnetFlag() string {
	return strings.Join(c.perFamily(clusterSubnet+"/24", clusterSubnet6+"/64"), ",")
}

func (c *Cluster) serviceCIDRFlag() string {
	return strings.Join(c.perFamily(serviceCIDR, serviceCIDR6), ",")
}

// dnsIP is CoreDNS's ClusterIP, of the primary family.
func (c *Cluster) dnsIP() string { return c.perFamily(dnsServiceIP, dnsServiceIP6)[0] }

// anyAddress is the address a server listens on to be reached over every
// family of the cluster and over the IPv4 underlay ("::" takes both).
func (c *Cluster) anyAddress() string {
	if c.has6() {
		return "::"
	}
	return "0.0.0.0"
}

// nodeIPs are the node's addresses of the cluster's families, the primary
// first. The underlay has both families whatever the cluster's: OVN's
// databases, Geneve and the API server's URL stay on IPv4.
func (c *Cluster) nodeIPs(n *Node) []string { return c.perFamily(n.IP, n.IP6) }

// physicalIPs are the node's address/lengths on the underlay, of the
// cluster's families.
func (c *Cluster) physicalIPs(n *Node) string {
	return strings.Join(c.perFamily(fmt.Sprintf("%s/%d", n.IP, underlayLen), fmt.Sprintf("%s/%d", n.IP6, underlayLen6)), ",")
}

// Node is one Kubernetes node.
type Node struct {
	Name         string
	IP           string
	IP6          string
	ControlPlane bool
	NetNS        string // network namespace name
	MountNS      string // persistent mount namespace file
	Root         string // host directory holding the node's private /var/lib/kubelet, /etc/..., ...
	Cgroup       string // relative cgroup path, the kubelet's cgroupRoot
}

// Cluster is a running (or starting) cluster.
type Cluster struct {
	Config
	Nodes  []*Node
	Client kubernetes.Interface
	st     *state
	mu     sync.Mutex
}

// New describes the cluster; nothing is changed on the host.
func New(cfg Config) *Cluster {
	if cfg.IPFamily == "" {
		cfg.IPFamily = IPv4
	}
	if cfg.Log == nil {
		cfg.Log = func(format string, args ...any) { fmt.Printf(format+"\n", args...) }
	}
	c := &Cluster{Config: cfg, st: &state{CgroupRoot: prefix}}
	names := []string{prefix + "-control-plane"}
	for i := 1; i <= cfg.Workers; i++ {
		if i == 1 {
			names = append(names, prefix+"-worker")
		} else {
			names = append(names, fmt.Sprintf("%s-worker%d", prefix, i))
		}
	}
	for i, name := range names {
		c.Nodes = append(c.Nodes, &Node{
			Name: name, IP: underlayPrefix + strconv.Itoa(i+2), IP6: underlayPrefix6 + strconv.Itoa(i+2), ControlPlane: i == 0,
			NetNS: name, MountNS: filepath.Join(cfg.Dir, "ns", name),
			Root: filepath.Join(cfg.Dir, "nodes", name), Cgroup: prefix + "/" + name,
		})
	}
	return c
}

// ControlPlane is the control-plane node.
func (c *Cluster) ControlPlane() *Node { return c.Nodes[0] }

// APIServer is the API server's URL (reachable inside the node namespaces).
func (c *Cluster) APIServer() string {
	return fmt.Sprintf("https://%s:%d", c.ControlPlane().IP, apiPort)
}

func (c *Cluster) bin(name string) string { return filepath.Join(c.Repo, "_output", "bin", name) }

func (c *Cluster) logPath(n *Node, name string) string {
	return filepath.Join(c.Dir, "logs", n.Name, name+".log")
}

// Exec runs a command inside a node (its network and mount namespaces).
func (c *Cluster) Exec(n *Node, args ...string) (string, error) {
	return run(append(n.enter(), args...)...)
}

// Command is Exec as an *exec.Cmd, for callers that stream its output.
func (c *Cluster) Command(n *Node, args ...string) *exec.Cmd {
	all := append(n.enter(), args...)
	return exec.Command(all[0], all[1:]...)
}

func (n *Node) enter() []string {
	return []string{"nsenter", "--mount=" + n.MountNS, "--uts=" + n.utsNS(), "--net=/var/run/netns/" + n.NetNS, "--"}
}

// start runs a long-lived process inside a node, in the node's daemons
// cgroup, detached (it outlives the command that ran Up; Down stops it).
func (c *Cluster) start(n *Node, name string, args ...string) error {
	logFile := c.logPath(n, name)
	if err := os.MkdirAll(filepath.Dir(logFile), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	// The shell joins every hierarchy's daemons cgroup, then becomes the process.
	var join []string
	for _, h := range cgroupHierarchies() {
		join = append(join, filepath.Join("/sys/fs/cgroup", h, n.Cgroup, "daemons", "cgroup.procs"))
	}
	script := `for f in ` + strings.Join(join, " ") + `; do echo $$ > $f || exit 1; done; exec "$@"`
	all := append(n.enter(), append([]string{"sh", "-c", script, "sh"}, args...)...)
	cmd := exec.Command(all[0], all[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s on %s: %w", name, n.Name, err)
	}
	go func() { _ = cmd.Wait() }()
	return nil
}

// poll calls cond until it returns nil or the timeout passes; the error
// names what was awaited and the last thing cond said.
func poll(ctx context.Context, timeout time.Duration, what string, cond func() error) error {
	deadline := time.Now().Add(timeout)
	var err error
	for {
		if err = cond(); err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("timed out after %s waiting for %s: %v", timeout, what, err)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w (last: %v)", what, ctx.Err(), err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// Running reports whether a cluster's state exists in dir.
func Running(dir string) bool {
	st, err := loadState(dir)
	return err == nil && st != nil
}

// Down stops every process of the cluster recorded in dir and undoes every
// host change; it is safe to run at any time, and again.
func Down(dir string, log func(string, ...any)) error {
	st, err := loadState(dir)
	if err != nil || st == nil {
		return err
	}
	var errs []error
	if st.CgroupRoot != "" {
		if err := killCgroup(st.CgroupRoot, 30*time.Second); err != nil {
			errs = append(errs, err)
		}
	}
	// Mounts inside the node mount namespaces (container root filesystems,
	// pod network namespaces, volumes) go with the namespaces.
	for _, f := range st.MountNS {
		if len(mountedAt(f)) > 0 {
			if err := syscall.Unmount(f, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", f, err))
			}
		}
	}
	if st.PrivateDir != "" {
		for len(mountedAt(st.PrivateDir)) > 0 {
			if err := syscall.Unmount(st.PrivateDir, syscall.MNT_DETACH); err != nil {
				errs = append(errs, fmt.Errorf("unmounting %s: %w", st.PrivateDir, err))
				break
			}
		}
	}
	for _, ns := range st.NetNS {
		if _, err := os.Stat("/var/run/netns/" + ns); err == nil {
			if _, err := run("ip", "netns", "del", ns); err != nil {
				errs = append(errs, err)
			}
		}
	}
	if st.CgroupRoot != "" {
		if err := removeCgroup(st.CgroupRoot); err != nil {
			errs = append(errs, err)
		}
	}
	if err := restoreSysctls(st.Sysctls); err != nil {
		errs = append(errs, err)
	}
	for i := len(st.MountPoints) - 1; i >= 0; i-- {
		_ = os.Remove(st.MountPoints[i]) // only if still empty
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("tearing down the cluster in %s: %w", dir, err)
	}
	if log != nil {
		log("cluster removed: processes, namespaces, mounts, cgroups; host sysctls restored")
	}
	return os.Remove(filepath.Join(dir, "state.json"))
}
