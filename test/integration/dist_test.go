package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// distObjects reads every object of dist/kubernetes, in file order.
func distObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(harness.RepoRoot(t), "dist", "kubernetes", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests in dist/kubernetes (%v)", err)
	}
	sort.Strings(files)
	var objs []*unstructured.Unstructured
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
		for {
			var m map[string]any
			if err := dec.Decode(&m); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if m != nil {
				objs = append(objs, &unstructured.Unstructured{Object: m})
			}
		}
	}
	return objs
}

// applyObjects server-side applies objs (only validated when dryRun).
func applyObjects(t *testing.T, kube *harness.KubeAPI, objs []*unstructured.Unstructured, dryRun bool) {
	t.Helper()
	dc, err := discovery.NewDiscoveryClientForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	dyn, err := dynamic.NewForConfig(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	opts := metav1.PatchOptions{FieldManager: "ovn-k8s-dist-test", Force: ptr(true)}
	if dryRun {
		opts.DryRun = []string{metav1.DryRunAll}
	}
	for _, o := range objs {
		gvk := o.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			t.Fatalf("%s %s: %v", gvk.Kind, o.GetName(), err)
		}
		var ri dynamic.ResourceInterface = dyn.Resource(mapping.Resource)
		if o.GetNamespace() != "" {
			ri = dyn.Resource(mapping.Resource).Namespace(o.GetNamespace())
		}
		data, err := json.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := ri.Patch(context.Background(), o.GetName(), types.ApplyPatchType, data, opts); err != nil {
			t.Fatalf("server-side apply (dry run %v) of %s %s/%s: %v", dryRun, gvk.Kind, o.GetNamespace(), o.GetName(), err)
		}
	}
}

// applyRBAC applies the namespace, ServiceAccounts, roles and admission
// policies of objs (waiting until the policies are in force: the roles'
// rules on k8s.ovn.org matter only through them) and returns a
// kubeconfig of the ServiceAccount sa.
func applyRBAC(t *testing.T, kube *harness.KubeAPI, objs []*unstructured.Unstructured, sa string) string {
	t.Helper()
	applyDistAccess(t, kube, objs)
	return tokenKubeconfig(t, kube, sa, serviceAccountToken(t, kube, "ovn-kubernetes", sa, nil))
}

// tokenKubeconfig writes a kubeconfig with token, a token of the
// ServiceAccount sa: the identity the component has in a real install.
func tokenKubeconfig(t *testing.T, kube *harness.KubeAPI, sa, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), sa+".kubeconfig")
	if err := os.WriteFile(path, []byte(harness.TokenKubeconfig(kube.URL, token)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// masterConverges checks, for round i, what the master must do with its
// permissions: a new node gets its subnet (nodes: list, watch, patch; every
// informer synced), a pod its address (pods), a node with a malformed gateway
// annotation an Event (events), all as the leader (leases).
func masterConverges(c *cluster, i int) func() error {
	node, bad, pod := fmt.Sprintf("rbac-n%d", i), fmt.Sprintf("rbac-bad%d", i), fmt.Sprintf("rbac-p%d", i)
	c.createNode(node, nil)
	c.createNode(bad, map[string]string{annotations.NodeL3GatewayConfig: "{not json"})
	c.createPod("default", pod, node)
	return func() error {
		n, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := n.Annotations[annotations.NodeSubnets]; !ok {
			return fmt.Errorf("node %s has no subnet", node)
		}
		p, err := c.kube.Client.CoreV1().Pods("default").Get(c.ctx(), pod, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := p.Annotations[annotations.PodNetworks]; !ok {
			return fmt.Errorf("pod %s has no address", pod)
		}
		return c.warningEvent("default", bad, "GatewayConfigInvalid")
	}
}

// Every manifest of dist/kubernetes passes server-side dry-run; the master
// runs with exactly its ServiceAccount's permissions, the admission policies
// in force, and works; and with any one rule of its roles removed it does not
// (no rule is superfluous: the k8s.ovn.org one through the policies).
func TestDistManifestsAndMasterRBAC(t *testing.T) {
	c := newCluster(t)
	objs := distObjects(t)
	applyObjects(t, c.kube, objs, true)
	kubeconfig := applyRBAC(t, c.kube, objs, "ovnkube-master")
	round := 0
	run := func() *harness.Process {
		round++
		return harness.Start(t, c.logDir, fmt.Sprintf("master-sa-%d", round), harness.Binary(t, "ovnkube"), "--loglevel", "4", "master",
			"--kubeconfig", kubeconfig, "--nb-address", c.ovn.NBAddress())
	}

	p := run()
	converged := masterConverges(c, round)
	harness.Eventually(t, 30*time.Second, "the master working with its ServiceAccount", converged)
	p.Stop()

	type roleRef struct{ namespace, name string }
	for _, ref := range []roleRef{{"", "ovnkube-master"}, {"ovn-kubernetes", "ovnkube-master-leader-election"}} {
		rules := roleRules(t, c, ref.namespace, ref.name)
		for i := range rules {
			without := append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...)
			setRoleRules(t, c, ref.namespace, ref.name, without)
			p := run()
			converged := masterConverges(c, round)
			neverWithin(t, converged, fmt.Sprintf("rule %v of %s is superfluous: the master works without it", rules[i], ref.name))
			p.Stop()
			setRoleRules(t, c, ref.namespace, ref.name, rules)
		}
	}
}

// neverWithin reports failure if cond holds at any time within 12 s: far
// longer than a component with every permission needs (under 5 s here).
func neverWithin(t *testing.T, cond func() error, failure string) {
	t.Helper()
	deadline := time.Now().Add(12 * time.Second)
	for time.Now().Before(deadline) {
		if cond() == nil {
			t.Error(failure)
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func roleRules(t *testing.T, c *cluster, ns, name string) []rbacv1.PolicyRule {
	t.Helper()
	if ns == "" {
		r, err := c.kube.Client.RbacV1().ClusterRoles().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return r.Rules
	}
	r, err := c.kube.Client.RbacV1().Roles(ns).Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return r.Rules
}

func setRoleRules(t *testing.T, c *cluster, ns, name string, rules []rbacv1.PolicyRule) {
	t.Helper()
	var err error
	if ns == "" {
		var r *rbacv1.ClusterRole
		if r, err = c.kube.Client.RbacV1().ClusterRoles().Get(c.ctx(), name, metav1.GetOptions{}); err == nil {
			r.Rules = rules
			_, err = c.kube.Client.RbacV1().ClusterRoles().Update(c.ctx(), r, metav1.UpdateOptions{})
		}
	} else {
		var r *rbacv1.Role
		if r, err = c.kube.Client.RbacV1().Roles(ns).Get(c.ctx(), name, metav1.GetOptions{}); err == nil {
			r.Rules = rules
			_, err = c.kube.Client.RbacV1().Roles(ns).Update(c.ctx(), r, metav1.UpdateOptions{})
		}
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The node daemon (with a gateway) runs with exactly its ServiceAccount's
// permissions and becomes ready; with any one rule of its role removed it
// never does. It runs with the DaemonSet's flags: the gateway's address and
// next hop are read from the bridge, as on every node of a DaemonSet.
func TestNodeDaemonRBAC(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	c.nodeSubnet("n1")
	gatewayBridge(t, n1)
	for _, args := range [][]string{
		{"addr", "add", "172.18.0.2/24", "dev", "breth1"},
		{"link", "set", "breth1", "up"},
		{"route", "add", "default", "via", "172.18.0.1", "dev", "breth1"},
	} {
		if out, err := n1.NS.Exec(append([]string{"ip"}, args...)...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	// The DaemonSet pod's token: bound to a pod on n1, so it carries the
	// node claim the admission policies confine the node daemon with.
	applyRBAC(t, c.kube, distObjects(t), "ovnkube-node")
	kubeconfig := tokenKubeconfig(t, c.kube, "ovnkube-node", nodeDaemonToken(t, c.kube, "n1"))
	round := 0
	run := func() *harness.Process {
		round++
		return harness.Start(t, c.logDir, fmt.Sprintf("node-sa-%d", round), "ip", "netns", "exec", n1.NS.Name, harness.Binary(t, "ovnkube"), "node",
			"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:"+c.ovn.SBSock,
			"--ovs-address", n1.OVSAddress(), "--kubeconfig", kubeconfig, "--datapath-type", "netdev", "--resync-interval", "500ms",
			"--bridge-interface", "breth1",
			"--metrics-address", "127.0.0.1:9410", "--cni-server-socket", filepath.Join(c.logDir, "cni.sock"))
	}
	get := httpGetIn(n1.NS, 9410)
	ready := func() error {
		code, body, err := get("/readyz")
		if err != nil {
			return err
		}
		if code != 200 {
			return fmt.Errorf("%d %s", code, body)
		}
		return nil
	}
	d := run()
	harness.Eventually(t, 30*time.Second, "the node daemon ready with its ServiceAccount", ready)
	harness.Eventually(t, 15*time.Second, "GR_n1 from the daemon's annotation", func() error {
		if c.routerNamed("GR_n1") == nil {
			return fmt.Errorf("no GR_n1")
		}
		return nil
	})
	node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gw, err := annotations.ParseL3GatewayConfig(node.Annotations[annotations.NodeL3GatewayConfig])
	if err != nil || fmt.Sprint(gw.IPs, gw.NextHops) != "[172.18.0.2/24] [172.18.0.1]" {
		t.Fatalf("gateway from the bridge: %+v %v, want address 172.18.0.2/24 and next hop 172.18.0.1", gw, err)
	}
	d.Stop()
	// Each run starts from a Node without the daemon's annotations (as a
	// new node does), so that it has to write them.
	unannotated := annotationPatch(map[string]*string{annotations.NodeChassisID: nil, annotations.NodeMgmtPortMAC: nil, annotations.NodeL3GatewayConfig: nil})
	rules := roleRules(t, c.cluster, "", "ovnkube-node")
	for i := range rules {
		setRoleRules(t, c.cluster, "", "ovnkube-node", append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...))
		if _, err := c.kube.Client.CoreV1().Nodes().Patch(c.ctx(), "n1", types.MergePatchType, unannotated, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		d := run()
		neverWithin(t, ready, fmt.Sprintf("rule %v of ovnkube-node is superfluous: the node daemon is ready without it", rules[i]))
		d.Stop()
		setRoleRules(t, c.cluster, "", "ovnkube-node", rules)
	}
}

// Every flag the shipped manifests and systemd units pass exists in the
// ovnkube subcommand they run (a renamed flag would stop the daemon).
func TestDistCommandsUseRealFlags(t *testing.T) {
	type command struct {
		where, sub string
		flags      []string
	}
	var cmds []command
	for _, o := range distObjects(t) {
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, ct := range containers {
			m, _ := ct.(map[string]any)
			cmd, _, _ := unstructured.NestedStringSlice(m, "command")
			args, _, _ := unstructured.NestedStringSlice(m, "args")
			if len(cmd) == 2 && cmd[0] == "/usr/bin/ovnkube" {
				cmds = append(cmds, command{o.GetName() + "/" + fmt.Sprint(m["name"]), cmd[1], args})
			}
		}
	}
	units, _ := filepath.Glob(filepath.Join(harness.RepoRoot(t), "dist", "systemd", "*.service"))
	for _, u := range units {
		b, err := os.ReadFile(u)
		if err != nil {
			t.Fatal(err)
		}
		text := strings.ReplaceAll(string(b), "\\\n", " ")
		for _, line := range strings.Split(text, "\n") {
			if exec, ok := strings.CutPrefix(line, "ExecStart="); ok {
				f := strings.Fields(exec)
				if len(f) < 2 || !strings.HasSuffix(f[0], "/ovnkube") {
					t.Fatalf("%s: ExecStart %q does not run ovnkube", u, exec)
				}
				cmds = append(cmds, command{filepath.Base(u), f[1], f[2:]})
			}
		}
	}
	if len(cmds) < 4 {
		t.Fatalf("found %d ovnkube commands in dist/, want the master and node of both the manifests and the units", len(cmds))
	}
	for _, c := range cmds {
		help, err := harness.Run(harness.Binary(t, "ovnkube"), c.sub, "--help")
		if err != nil {
			t.Fatalf("%s: ovnkube %s --help: %v", c.where, c.sub, err)
		}
		n := 0
		for _, a := range c.flags {
			name, ok := strings.CutPrefix(a, "--")
			if !ok {
				continue
			}
			name, _, _ = strings.Cut(name, "=")
			n++
			if !regexp.MustCompile(`--` + regexp.QuoteMeta(name) + `[ ,\n]`).MatchString(help) {
				t.Errorf("%s passes --%s, which `ovnkube %s` does not have", c.where, name, c.sub)
			}
		}
		if n == 0 {
			t.Errorf("%s: no flags found in %v", c.where, c.flags)
		}
	}
}
