package cluster

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// nodeDirs are the host directories every node has its own copy of, bound
// over the host's in the node's mount namespace: the components' default
// paths then work unchanged (a user's conflist, ovnkube's default OVS
// address) and nothing they write lands on the host.
var nodeDirs = []string{
	"/etc/kubernetes", "/etc/containerd", "/etc/cni/net.d", "/opt/cni/bin",
	"/var/lib/kubelet", "/var/lib/containerd", "/run/containerd", "/var/lib/cni", "/run/netns",
	"/var/log/pods", "/var/log/containers",
	"/etc/openvswitch", "/run/openvswitch", "/var/log/openvswitch",
	"/var/lib/ovn", "/run/ovn", "/var/log/ovn", "/var/lib/etcd", "/run/ovn-kubernetes",
}

// hostPath is where a node's private copy of an in-node path lives on the host.
func (n *Node) hostPath(p string) string { return filepath.Join(n.Root, p) }

// makeNamespaces creates the node's network namespace (wired to the
// underlay), its cgroups and its persistent mount namespace.
func (c *Cluster) makeNamespaces(n *Node) error {
	if err := c.record(func(st *state) { st.NetNS = append(st.NetNS, n.NetNS) }); err != nil {
		return err
	}
	veth, peer := "ul0", "ul-"+strings.TrimPrefix(n.Name, prefix+"-")
	if len(peer) > 15 {
		peer = peer[:15]
	}
	for _, args := range [][]string{
		{"ip", "netns", "add", n.NetNS},
		{"ip", "-n", n.NetNS, "link", "set", "lo", "up"},
		{"ip", "link", "add", veth, "netns", n.NetNS, "type", "veth", "peer", "name", peer, "netns", c.underlayNS()},
		{"ip", "-n", c.underlayNS(), "link", "set", peer, "master", "br0", "up"},
		{"ip", "-n", n.NetNS, "link", "set", veth, "up"},
	} {
		if _, err := run(args...); err != nil {
			return fmt.Errorf("node %s: %w", n.Name, err)
		}
	}
	if err := makeCgroup(n.Cgroup + "/daemons"); err != nil {
		return err
	}
	var binds []string
	for _, d := range nodeDirs {
		if err := os.MkdirAll(n.hostPath(d), 0o755); err != nil {
			return err
		}
		if err := c.ensureMountPoint(d); err != nil {
			return err
		}
		binds = append(binds, fmt.Sprintf("mount --bind %s %s", n.hostPath(d), d))
	}

	stage := n.hostPath(".cgroup")
	if err := os.MkdirAll(stage, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(n.MountNS, nil, 0o600); err != nil {
		return err
	}
	if err := c.record(func(st *state) { st.MountNS = append(st.MountNS, n.MountNS) }); err != nil {
		return err
	}
	// sysfs is mounted again from inside the network namespace, so that
	// /sys/class/net shows the node's interfaces (as `ip netns exec` does);
	// the cgroup hierarchies are carried over onto the new /sys.
	// Every mount shared, as systemd leaves a host's: containers that mount
	// /run/netns with HostToContainer propagation (the node daemon's CNI
	// server) must see the network namespaces containerd mounts later. The
	// peer groups are this namespace's own (it was made private).
	script := strings.Join(append([]string{
		"set -e",
		"mount --rbind /sys/fs/cgroup " + stage,
		"mount -t sysfs sysfs /sys",
		"mount --move " + stage + " /sys/fs/cgroup",
	}, append(binds, "mount --make-rshared /")...), "\n")
	if _, err := run("unshare", "--mount="+n.MountNS, "--propagation", "private", "--",
		"nsenter", "--net=/var/run/netns/"+n.NetNS, "--", "sh", "-c", script); err != nil {
		return fmt.Errorf("node %s: making its mount namespace: %w", n.Name, err)
	}
	// A UTS namespace too, named after the node, as a kind node's container
	// is: a host-network pod's hostname is its node's name.
	if err := os.WriteFile(n.utsNS(), nil, 0o600); err != nil {
		return err
	}
	if err := c.record(func(st *state) { st.MountNS = append(st.MountNS, n.utsNS()) }); err != nil {
		return err
	}
	if _, err := run("unshare", "--uts="+n.utsNS(), "hostname", n.Name); err != nil {
		return fmt.Errorf("node %s: making its UTS namespace: %w", n.Name, err)
	}
	return nil
}

// utsNS is the node's persistent UTS namespace file, beside its mount
// namespace's (Down unmounts both).
func (n *Node) utsNS() string { return n.MountNS + ".uts" }

// ensureMountPoint creates a missing host directory to mount over, and
// records it so Down removes it again.
func (c *Cluster) ensureMountPoint(dir string) error {
	var missing []string
	for d := dir; d != "/"; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); err == nil {
			break
		} else if !errors.Is(err, os.ErrNotExist) {
			return err
		}
		missing = append([]string{d}, missing...)
	}
	if len(missing) == 0 {
		return nil
	}
	if err := c.record(func(st *state) {
		for _, d := range missing {
			if !contains(st.MountPoints, d) {
				st.MountPoints = append(st.MountPoints, d)
			}
		}
	}); err != nil {
		return err
	}
	return os.MkdirAll(dir, 0o755)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// record applies a change to the state and writes it out before the host
// change it describes is made.
func (c *Cluster) record(change func(*state)) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	change(c.st)
	return c.saveState()
}

func (c *Cluster) underlayNS() string { return prefix + "-underlay" }

// makeUnderlay is the network between the nodes: a bridge in a namespace of
// its own.
func (c *Cluster) makeUnderlay() error {
	if err := c.record(func(st *state) { st.NetNS = append(st.NetNS, c.underlayNS()) }); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"ip", "netns", "add", c.underlayNS()},
		{"ip", "-n", c.underlayNS(), "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", c.underlayNS(), "link", "set", "br0", "up"},
	} {
		if _, err := run(args...); err != nil {
			return err
		}
	}
	return nil
}

// ovsVswitchdCtl is ovs-vswitchd's control socket on every node (it
// writes no pidfile, by which ovs-appctl would find it).
const ovsVswitchdCtl = "/run/openvswitch/ovs-vswitchd.ctl"

// startOVS starts the node's ovsdb-server and ovs-vswitchd (userspace
// datapath) and, as a user would, moves the node's NIC (ul0, holding its
// address) onto an OVS bridge with `ovnkube nics-to-bridge`: brul0 then
// carries the host's traffic, Geneve and the gateway router's.
func (c *Cluster) startOVS(n *Node, schema string) error {
	if _, err := c.Exec(n, "ovsdb-tool", "create", "/etc/openvswitch/conf.db", schema); err != nil {
		return err
	}
	if err := c.start(n, "ovsdb-server", "ovsdb-server", "/etc/openvswitch/conf.db",
		"--remote=punix:/run/openvswitch/db.sock", "--unixctl=/run/openvswitch/ovsdb-server.ctl", "--no-chdir"); err != nil {
		return err
	}
	if err := waitFile(n.hostPath("/run/openvswitch/db.sock")); err != nil {
		return fmt.Errorf("node %s: OVS database: %w", n.Name, err)
	}
	if _, err := c.Exec(n, "ovs-vsctl", "--no-wait", "init"); err != nil {
		return err
	}
	// --monitor restarts the daemon after a crash, as Debian's ovs-ctl runs
	// it: OVS 3.5.0's userspace conntrack can abort under the e2e suite's
	// load (lib/conntrack.c:1063 conn_update_state), see docs/conformance.md.
	if err := c.start(n, "ovs-vswitchd", "ovs-vswitchd", "unix:/run/openvswitch/db.sock",
		"--unixctl="+ovsVswitchdCtl, "--no-chdir", "--monitor"); err != nil {
		return err
	}
	if _, err := c.Exec(n, "ip", "addr", "add", fmt.Sprintf("%s/%d", n.IP, underlayLen), "dev", "ul0"); err != nil {
		return err
	}
	if c.has6() {
		if _, err := c.Exec(n, "ip", "-6", "addr", "add", fmt.Sprintf("%s/%d", n.IP6, underlayLen6), "dev", "ul0", "nodad"); err != nil {
			return err
		}
	}
	if _, err := c.Exec(n, c.bin("ovnkube"), "nics-to-bridge", "--datapath-type", "netdev", "ul0"); err != nil {
		return err
	}
	return nil
}

// installCNI puts ovn_cni and the conflist from dist/ where containerd looks,
// as a user would: the binary and the reference plugins it chains in
// /opt/cni/bin, the conflist unchanged in /etc/cni/net.d. ovn_cni is a shim
// of the node daemon's CNI server: no API credentials on the node for it.
func (c *Cluster) installCNI(n *Node) error {
	for src, dst := range map[string]string{
		"/usr/lib/cni/portmap":  "/opt/cni/bin/portmap",
		"/usr/lib/cni/loopback": "/opt/cni/bin/loopback",
	} {
		if err := copyFile(src, n.hostPath(dst), 0o755); err != nil {
			return err
		}
	}
	if c.Dist {
		return nil // the DaemonSet's init container installs ovn_cni and the conflist
	}
	if err := copyFile(c.bin("ovn_cni"), n.hostPath("/opt/cni/bin/ovn_cni"), 0o755); err != nil {
		return err
	}
	// The conflist as shipped: its socket and OVS paths are the node's.
	return copyFile(filepath.Join(c.Repo, "dist", "cni", "10-ovn-k8s.conflist"), n.hostPath("/etc/cni/net.d/10-ovn-k8s.conflist"), 0o644)
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("%w (run `make build deps`)", err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	return os.WriteFile(dst, b, mode)
}

func waitFile(p string) error {
	return poll(bg, 20e9, p, func() error {
		_, err := os.Stat(p)
		return err
	})
}
