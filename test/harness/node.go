package harness

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	corev1 "k8s.io/api/core/v1"
)

// NetNS is a network namespace made for a test, deleted at test end.
type NetNS struct{ Name string }

// Path is the netns file a CNI runtime passes as CNI_NETNS.
func (n NetNS) Path() string { return "/var/run/netns/" + n.Name }

// Exec runs a command inside the namespace.
func (n NetNS) Exec(args ...string) (string, error) {
	return Run(append([]string{"ip", "netns", "exec", n.Name}, args...)...)
}

// NewNetNS creates a namespace with lo up; the name gets a random suffix so
// parallel and leftover runs never collide.
func NewNetNS(t T, prefix string) NetNS {
	t.Helper()
	b := make([]byte, 3)
	_, _ = rand.Read(b)
	name := fmt.Sprintf("ovnk-%s-%s", prefix, hex.EncodeToString(b))
	if _, err := Run("ip", "netns", "add", name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = Run("ip", "netns", "del", name) })
	if _, err := Run("ip", "-n", name, "link", "set", "lo", "up"); err != nil {
		t.Fatal(err)
	}
	return NetNS{Name: name}
}

// Underlay is the physical network between node namespaces: a Linux bridge
// in a namespace of its own, so no address ever appears in the root namespace.
type Underlay struct {
	NS     NetNS
	Subnet string // e.g. 172.30.0.0/24; nodes get .11, .12, ...
	// Families are those of the nodes' addresses, the first carrying the
	// tunnels (IPv4 unless NewUnderlayFor said otherwise).
	Families []corev1.IPFamily
	nodes    int
}

// NewUnderlay creates the underlay namespace and its bridge, IPv4.
func NewUnderlay(t T) *Underlay {
	t.Helper()
	return NewUnderlayFor(t, IPv4)
}

// NewUnderlayFor creates an underlay whose nodes get an address of each
// family (Plans' Underlay ranges); the first family's carries the tunnels.
func NewUnderlayFor(t T, families ...corev1.IPFamily) *Underlay {
	t.Helper()
	u := &Underlay{NS: NewNetNS(t, "ul"), Subnet: Plans[families[0]].Underlay.String(), Families: families}
	for _, args := range [][]string{
		{"ip", "-n", u.NS.Name, "link", "add", "br0", "type", "bridge"},
		{"ip", "-n", u.NS.Name, "link", "set", "br0", "up"},
	} {
		if _, err := Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	return u
}

// Node is one Kubernetes node: a namespace with its own ovsdb-server,
// ovs-vswitchd (userspace datapath) and ovn-controller, wired to the underlay
// through br-phy, which carries the tunnel address.
type Node struct {
	Name     string
	NS       NetNS
	Dir      string
	OVSSock  string
	TunnelIP string
	// IPs are the node's underlay addresses, one per family of the
	// underlay, the tunnel's first (the Node object's InternalIPs).
	IPs   []netip.Addr
	procs map[string]*Process
	t     T
}

// OVSAddress is the node's OVS database address.
func (n *Node) OVSAddress() string { return "unix:" + n.OVSSock }

// VSCtl runs ovs-vsctl against the node's OVS (tests only; ovn-k8s never does).
func (n *Node) VSCtl(args ...string) (string, error) {
	return Run(append([]string{"ovs-vsctl", "--db=" + n.OVSAddress(), "--timeout=10"}, args...)...)
}

// StartNode starts a node's OVS and ovn-controller on the underlay.
func StartNode(t T, central *OVNCentral, u *Underlay, name string) *Node {
	t.Helper()
	LookPath(t, "ovs-vswitchd")
	LookPath(t, "ovn-controller")
	u.nodes++
	n := &Node{Name: name, NS: NewNetNS(t, "node"), Dir: t.TempDir(), procs: map[string]*Process{}, t: t}
	n.OVSSock = filepath.Join(n.Dir, "db.sock")
	families := u.Families
	if len(families) == 0 {
		families = []corev1.IPFamily{IPv4}
	}
	for _, f := range families {
		n.IPs = append(n.IPs, Host(Plans[f].Underlay, 10+u.nodes))
	}
	n.TunnelIP = n.IPs[0].String()
	ul := fmt.Sprintf("ul%d", u.nodes)
	peer := fmt.Sprintf("ulp%d", u.nodes)
	for _, args := range [][]string{
		{"ip", "link", "add", ul, "netns", n.NS.Name, "type", "veth", "peer", "name", peer, "netns", u.NS.Name},
		{"ip", "-n", u.NS.Name, "link", "set", peer, "master", "br0", "up"},
		{"ip", "-n", n.NS.Name, "link", "set", ul, "up"},
	} {
		if _, err := Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := Run("ovsdb-tool", "create", filepath.Join(n.Dir, "conf.db"), CurrentStack.Schema(t, OVSSchema)); err != nil {
		t.Fatal(err)
	}
	// OVS_RUNDIR keeps each node's control sockets (br-int.mgmt, ...) in its own directory.
	n.procs["ovsdb-server"] = Start(t, n.Dir, "ovsdb-server", "ip", "netns", "exec", n.NS.Name, "env", "OVS_RUNDIR="+n.Dir, "ovsdb-server", filepath.Join(n.Dir, "conf.db"),
		"--remote=punix:"+n.OVSSock, "--unixctl="+filepath.Join(n.Dir, "ovsdb-server.ctl"), "--no-chdir")
	Eventually(t, 10*time.Second, name+" OVS database", func() error {
		_, err := os.Stat(n.OVSSock)
		return err
	})
	if _, err := n.VSCtl("--no-wait", "init"); err != nil {
		t.Fatal(err)
	}
	n.procs["ovs-vswitchd"] = Start(t, n.Dir, "ovs-vswitchd", "ip", "netns", "exec", n.NS.Name, "env", "OVS_RUNDIR="+n.Dir, "ovs-vswitchd", n.OVSAddress(),
		"--unixctl="+filepath.Join(n.Dir, "ovs-vswitchd.ctl"), "--no-chdir")
	if _, err := n.VSCtl("add-br", "br-phy", "--", "set", "bridge", "br-phy", "datapath_type=netdev", "other-config:disable-in-band=true",
		"--", "add-port", "br-phy", ul); err != nil {
		t.Fatal(err)
	}
	Eventually(t, 10*time.Second, name+" br-phy device", func() error {
		_, err := Run("ip", "-n", n.NS.Name, "link", "show", "br-phy")
		return err
	})
	var cmds [][]string
	for i, f := range families {
		cmds = append(cmds, addrCmd(n.NS.Name, "br-phy", netip.PrefixFrom(n.IPs[i], Plans[f].Underlay.Bits())))
	}
	for _, args := range append(cmds, []string{"ip", "-n", n.NS.Name, "link", "set", "br-phy", "up"}) {
		if _, err := Run(args...); err != nil {
			t.Fatal(err)
		}
	}
	// ovn-controller finds br-int's management socket through OVS_RUNDIR.
	n.procs["ovn-controller"] = Start(t, n.Dir, "ovn-controller", "ip", "netns", "exec", n.NS.Name,
		"env", "OVS_RUNDIR="+n.Dir, "OVN_RUNDIR="+n.Dir,
		"ovn-controller", n.OVSAddress(), "--no-chdir")
	return n
}

// Process is one of the node's processes by name (ovsdb-server,
// ovs-vswitchd, ovn-controller), nil for another name.
func (n *Node) Process(name string) *Process { return n.procs[name] }

// Tail returns the end of one of the node's process logs.
func (n *Node) Tail(proc string, lines int) string {
	if p := n.procs[proc]; p != nil {
		return p.Tail(lines)
	}
	return ""
}

// Logs summarises the node's logs for a failure message.
func (n *Node) Logs() string {
	var b strings.Builder
	for name, p := range n.procs {
		fmt.Fprintf(&b, "--- %s %s:\n%s\n", n.Name, name, p.Tail(15))
	}
	return b.String()
}

// ReachAPI makes the API server reachable from inside the node namespace at
// the same 127.0.0.1:PORT as from the root namespace (so one kubeconfig
// serves both): a TCP relay whose listening socket is created in the node
// namespace and whose outgoing connections start in the root namespace.
func (n *Node) ReachAPI(t T, kube *KubeAPI) {
	t.Helper()
	u, err := url.Parse(kube.URL)
	if err != nil {
		t.Fatal(err)
	}
	var l net.Listener
	err = ns.WithNetNSPath(n.NS.Path(), func(ns.NetNS) error {
		var err error
		l, err = net.Listen("tcp", u.Host)
		return err
	})
	if err != nil {
		t.Fatalf("relay listener in %s: %v", n.NS.Name, err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.Dial("tcp", u.Host)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); done <- struct{}{} }()
				<-done
			}()
		}
	}()
}
