package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/containernetworking/cni/libcni"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/plugins/pkg/ns"
)

// CNI invokes ovn_cni the way a container runtime does: through libcni, with
// the conflist shipped in dist/, from inside the node's network namespace
// (where the runtime, ovs-vswitchd and the host veth ends live).
type CNI struct {
	Node     *Node
	ConfList *libcni.NetworkConfigList
	cni      *libcni.CNIConfig
}

// NewCNI loads dist/cni/10-ovn-k8s.conflist with the node's OVS and the
// test's kubeconfig filled in, standalone; overrides set further ovn_cni
// keys (cniServerSocket: through a node daemon).
func NewCNI(t T, node *Node, kubeconfig string, overrides map[string]any) *CNI {
	t.Helper()
	root := RepoRoot(t)
	raw, err := os.ReadFile(filepath.Join(root, "dist", "cni", "10-ovn-k8s.conflist"))
	if err != nil {
		t.Fatal(err)
	}
	var list map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		t.Fatal(err)
	}
	plugins := list["plugins"].([]any)
	first := plugins[0].(map[string]any)
	first["kubeconfig"] = kubeconfig
	first["ovsAddress"] = node.OVSAddress()
	// Standalone (the plugin reads the API itself) unless a test names a
	// node daemon's CNI server.
	first["cniServerSocket"] = ""
	for k, v := range overrides {
		first[k] = v
	}
	raw, _ = json.Marshal(list)
	conf, err := libcni.ConfListFromBytes(raw)
	if err != nil {
		t.Fatal(err)
	}
	Binary(t, "ovn_cni")
	dirs := []string{filepath.Join(root, "_output", "bin"), "/usr/lib/cni"}
	return &CNI{Node: node, ConfList: conf, cni: libcni.NewCNIConfigWithCacheDir(dirs, t.TempDir(), nil)}
}

// RuntimeConf is what a runtime passes for a pod sandbox.
func RuntimeConf(containerID string, netns NetNS, podNS, pod, uid string) *libcni.RuntimeConf {
	return &libcni.RuntimeConf{
		ContainerID: containerID,
		NetNS:       netns.Path(),
		IfName:      "eth0",
		Args: [][2]string{
			{"IgnoreUnknown", "1"},
			{"K8S_POD_NAMESPACE", podNS},
			{"K8S_POD_NAME", pod},
			{"K8S_POD_UID", uid},
			{"K8S_POD_INFRA_CONTAINER_ID", containerID},
		},
	}
}

// inNode runs f on a thread inside the node namespace, so the plugin
// processes libcni starts are born there.
func (c *CNI) inNode(f func() error) error {
	return ns.WithNetNSPath(c.Node.NS.Path(), func(ns.NetNS) error { return f() })
}

// Add runs ADD over the whole conflist.
func (c *CNI) Add(rt *libcni.RuntimeConf) (types.Result, error) {
	var res types.Result
	err := c.inNode(func() error {
		var err error
		res, err = c.cni.AddNetworkList(context.Background(), c.ConfList, rt)
		return err
	})
	return res, err
}

// Check runs CHECK over the conflist (with the cached ADD result).
func (c *CNI) Check(rt *libcni.RuntimeConf) error {
	return c.inNode(func() error { return c.cni.CheckNetworkList(context.Background(), c.ConfList, rt) })
}

// Del runs DEL over the conflist.
func (c *CNI) Del(rt *libcni.RuntimeConf) error {
	return c.inNode(func() error { return c.cni.DelNetworkList(context.Background(), c.ConfList, rt) })
}

// WithPlugins returns an invoker over the same ovn_cni configuration followed
// by other plugins (raw JSON objects), for chaining tests.
func (c *CNI) WithPlugins(t T, extra ...string) *CNI {
	t.Helper()
	first := string(c.ConfList.Plugins[0].Bytes)
	raw := fmt.Sprintf(`{"cniVersion":%q,"name":%q,"plugins":[%s,%s]}`, c.ConfList.CNIVersion, c.ConfList.Name, first, strings.Join(extra, ","))
	conf, err := libcni.ConfListFromBytes([]byte(raw))
	if err != nil {
		t.Fatal(err)
	}
	return &CNI{Node: c.Node, ConfList: conf, cni: c.cni}
}

// single is ovn_cni's configuration as a standalone network config (the
// name and version a list would otherwise lend it).
func (c *CNI) single() (*libcni.NetworkConfig, error) {
	var m map[string]any
	if err := json.Unmarshal(c.ConfList.Plugins[0].Bytes, &m); err != nil {
		return nil, err
	}
	m["name"], m["cniVersion"] = c.ConfList.Name, c.ConfList.CNIVersion
	raw, _ := json.Marshal(m)
	return libcni.ConfFromBytes(raw)
}

// AddSingle runs ADD with ovn_cni alone (a plain network config, no list).
func (c *CNI) AddSingle(rt *libcni.RuntimeConf) (types.Result, error) {
	conf, err := c.single()
	if err != nil {
		return nil, err
	}
	var res types.Result
	err = c.inNode(func() error {
		var err error
		res, err = c.cni.AddNetwork(context.Background(), conf, rt)
		return err
	})
	return res, err
}

// DelSingle runs DEL with ovn_cni alone.
func (c *CNI) DelSingle(rt *libcni.RuntimeConf) error {
	conf, err := c.single()
	if err != nil {
		return err
	}
	return c.inNode(func() error { return c.cni.DelNetwork(context.Background(), conf, rt) })
}
