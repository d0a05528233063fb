package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// distObjects reads every object of dist/kubernetes, in file order, then
// those of zone mode's workloads (dist/kubernetes/zones).
func distObjects(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	var files []string
	for _, dir := range []string{"", "zones"} {
		found, err := filepath.Glob(filepath.Join(harness.RepoRoot(t), "dist", "kubernetes", dir, "*.yaml"))
		if err != nil || len(found) == 0 {
			t.Fatalf("no manifests in dist/kubernetes/%s (%v)", dir, err)
		}
		sort.Strings(found)
		files = append(files, found...)
	}
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
// informer synced, the admin policies' too), a pod its address (pods), a
// node with a malformed gateway annotation an Event (events), a new
// ClusterNetworkPolicy and AdminNetworkPolicy their status (their /status),
// as an EgressFirewall in a new namespace (egressfirewalls), an EgressIP
// its assignment (egressips), all as the leader (leases).
func masterConverges(c *cluster, i int) func() error {
	node, bad, pod := fmt.Sprintf("rbac-n%d", i), fmt.Sprintf("rbac-bad%d", i), fmt.Sprintf("rbac-p%d", i)
	c.createNode(node, nil)
	c.createNode(bad, map[string]string{annotations.NodeL3GatewayConfig: "{not json"})
	c.createPod("default", pod, node)
	admin := dynamicFor(c.t, c.kube.Config)
	name := fmt.Sprintf("rbac-%d", i)
	statuses := statusesReported(c, i)
	eipNode := fmt.Sprintf("rbac-eip%d", i) // a node that may host an egress IP, and an EgressIP for it
	c.createGatewayNode(eipNode, fmt.Sprintf("172.18.0.%d", 100+i), map[string]string{k8sovnv1.EgressAssignableLabel: ""})
	c.createEIP(name, []string{fmt.Sprintf("172.18.0.%d", 200+i)}, nil, nil)
	return func() error {
		e, err := admin.Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if items, _, _ := unstructured.NestedSlice(e.Object, "status", "items"); len(items) == 0 {
			return fmt.Errorf("EgressIP %s is not assigned", name)
		}
		if err := statuses(); err != nil {
			return err
		}
		return nodePodAndEvent(c, node, annotations.NodeSubnets, pod, bad)
	}
}

// nodePodAndEvent wants node to carry the annotation key, the pod
// default/pod its address, and node bad (a malformed gateway) an Event.
func nodePodAndEvent(c *cluster, node, key, pod, bad string) error {
	n, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), node, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if _, ok := n.Annotations[key]; !ok {
		return fmt.Errorf("node %s has no %s", node, key)
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

// statusesReported creates round i's ClusterNetworkPolicy and
// AdminNetworkPolicy (one of each API version; the
// BaselineAdminNetworkPolicy is a singleton) and an EgressFirewall in a
// namespace of its own; the check it returns wants each to have a status.
func statusesReported(c *cluster, i int) func() error {
	admin := dynamicFor(c.t, c.kube.Config)
	policies := policyResources[:2]
	name := fmt.Sprintf("rbac-%d", i)
	for _, r := range policies {
		o := r.object(name)
		if err := unstructured.SetNestedField(o.Object, int64(i), "spec", "priority"); err != nil {
			c.t.Fatal(err)
		}
		if _, err := admin.Resource(r.gvr).Create(c.ctx(), o, metav1.CreateOptions{}); err != nil {
			c.t.Fatal(err)
		}
	}
	efNS := fmt.Sprintf("rbac-ef%d", i) // one EgressFirewall per namespace
	c.namespace(efNS, nil)
	ef := upstreamEgressFirewallObject(c.t)
	ef.SetNamespace(efNS)
	if _, err := admin.Resource(k8sovnv1.EgressFirewallResource).Namespace(efNS).Create(c.ctx(), ef, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return func() error {
		o, err := admin.Resource(k8sovnv1.EgressFirewallResource).Namespace(efNS).Get(c.ctx(), k8sovnv1.EgressFirewallName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if st, _, _ := unstructured.NestedString(o.Object, "status", "status"); st == "" {
			return fmt.Errorf("EgressFirewall %s/default has no status", efNS)
		}
		for _, r := range policies {
			o, err := admin.Resource(r.gvr).Get(c.ctx(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions"); len(conds) == 0 {
				return fmt.Errorf("%s %s has no status", r.kind, name)
			}
		}
		return nil
	}
}

// Every manifest of dist/kubernetes (and zones/) passes server-side dry-run; the master
// runs with exactly its ServiceAccount's permissions, the admission policies
// in force and the CRDs of dist/kubernetes served, and works; and with any
// one rule of its roles removed it does not (no rule is superfluous: the
// k8s.ovn.org one on podnetworks and nodeallocations through the policies).
func TestDistManifestsAndMasterRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	c := newCluster(t)
	objs := distObjects(t)
	applyObjects(t, c.kube, objs, true)
	c.kube.InstallCRDs(t) // before the master starts: it follows the kinds served then
	kubeconfig := applyRBAC(t, c.kube, objs, "ovnkube-master")
	round := 0
	run := func() *harness.Process {
		round++
		return harness.Start(t, c.logDir, fmt.Sprintf("master-sa-%d", round), harness.Binary(t, "ovnkube"), "--loglevel", "4", "master",
			"--kubeconfig", kubeconfig, "--nb-address", c.ovn.NBAddress(), "--dns-servers", harness.NoDNS,
			"--egressip-reachability-timeout", "0")
	}
	worksThenEachRuleNeeded(c, "the master", []roleRef{{"", "ovnkube-master"}, {"ovn-kubernetes", "ovnkube-master-leader-election"}}, run,
		func() func() error { return masterConverges(c, round) })
}

// policyAPIGroup is SIG Network's network-policy-api, whose CRDs
// dist/kubernetes ships (05-crd-*.yaml, from the modules: hack/npapi).
const policyAPIGroup = "policy.networking.k8s.io"

// policyResource is one of the cluster-wide policies the master reads and
// reports on, with a minimal valid object of it.
type policyResource struct {
	gvr  schema.GroupVersionResource
	kind string
	name string // BaselineAdminNetworkPolicy's must be "default"
	spec map[string]any
}

var policyResources = []policyResource{
	{schema.GroupVersionResource{Group: policyAPIGroup, Version: "v1alpha2", Resource: "clusternetworkpolicies"}, "ClusterNetworkPolicy", "rbac-probe",
		map[string]any{"tier": "Admin", "priority": int64(10), "subject": map[string]any{"namespaces": map[string]any{}}}},
	{schema.GroupVersionResource{Group: policyAPIGroup, Version: "v1alpha1", Resource: "adminnetworkpolicies"}, "AdminNetworkPolicy", "rbac-probe",
		map[string]any{"priority": int64(10), "subject": map[string]any{"namespaces": map[string]any{}}}},
	{schema.GroupVersionResource{Group: policyAPIGroup, Version: "v1alpha1", Resource: "baselineadminnetworkpolicies"}, "BaselineAdminNetworkPolicy", "default",
		map[string]any{"subject": map[string]any{"namespaces": map[string]any{}}}},
}

func (r policyResource) object(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": r.gvr.GroupVersion().String(), "kind": r.kind,
		"metadata": map[string]any{"name": name}, "spec": r.spec}}
}

// statusCondition is a status the policy API accepts (conditions are required).
func statusCondition(reason string) map[string]any {
	return map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True", "reason": reason,
		"message": "set by " + reason, "lastTransitionTime": time.Now().UTC().Format(time.RFC3339)}}}
}

// policyAccess does one request on r as client: get, list, watch,
// "update status", "patch status", and the writes the master may not do:
// create, update (its spec), delete. admin reads what an update starts from.
func policyAccess(ctx context.Context, client, admin dynamic.Interface, r policyResource, access string) error {
	ri := client.Resource(r.gvr)
	switch access {
	case "get":
		_, err := ri.Get(ctx, r.name, metav1.GetOptions{})
		return err
	case "list":
		_, err := ri.List(ctx, metav1.ListOptions{})
		return err
	case "watch":
		w, err := ri.Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr(int64(1))})
		if err == nil {
			w.Stop()
		}
		return err
	case "update status", "update":
		o, err := admin.Resource(r.gvr).Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin get: %w", err)
		}
		if access == "update" {
			o.SetLabels(map[string]string{"changed": "yes"})
			_, err = ri.Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
		o.Object["status"] = statusCondition("UpdateStatus")
		_, err = ri.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		return err
	case "patch status":
		b, _ := json.Marshal(map[string]any{"status": statusCondition("PatchStatus")})
		_, err := ri.Patch(ctx, r.name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
		return err
	case "create":
		_, err := ri.Create(ctx, r.object(r.name), metav1.CreateOptions{})
		return err
	case "delete":
		return ri.Delete(ctx, r.name, metav1.DeleteOptions{})
	}
	panic("unknown access " + access)
}

// grantedAccesses are the accesses a rule on the policy API grants.
func grantedAccesses(rule rbacv1.PolicyRule) map[string][]string {
	out := map[string][]string{}
	for _, res := range rule.Resources {
		res, sub, _ := strings.Cut(res, "/")
		for _, verb := range rule.Verbs {
			if sub != "" {
				verb += " " + sub
			}
			out[res] = append(out[res], verb)
		}
	}
	return out
}

func dynamicFor(t *testing.T, cfg *rest.Config) dynamic.Interface {
	t.Helper()
	d, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// The network-policy-api's ClusterNetworkPolicy, AdminNetworkPolicy and
// BaselineAdminNetworkPolicy, served from dist/kubernetes's CRDs (issue 34):
// the master's ServiceAccount may list and watch them (its informers) and
// update their status, and not get, create, change or delete them, nor
// patch their status; with each of
// its rules on them removed in turn, exactly what that rule grants is
// refused and the other rule's still works. The node daemon's identity (its
// DaemonSet pod's token on n1) and a user with no grant may do none of it:
// only the master reports a policy's status.
func TestDistPolicyAPIRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	kube := harness.StartKubeAPI(t)
	c := &cluster{t: t, kube: kube}
	ctx := context.Background()
	objs := distObjects(t)
	kube.InstallCRDs(t)
	applyDistAccess(t, kube, objs)
	admin := dynamicFor(t, kube.Config)
	for _, r := range policyResources {
		if _, err := admin.Resource(r.gvr).Create(ctx, r.object(r.name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenConfig := func(token string) *rest.Config {
		return &rest.Config{Host: kube.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	}
	master := dynamicFor(t, tokenConfig(serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-master", nil)))
	nodeDaemon := dynamicFor(t, tokenConfig(nodeDaemonToken(t, kube, "n1")))
	nobodyCfg := rest.CopyConfig(kube.Config)
	nobodyCfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:authenticated"}}
	nobody := dynamicFor(t, nobodyCfg)

	masterMay := []string{"list", "watch", "update status"}
	check := func(who string, client dynamic.Interface, r policyResource, access string, allowed bool) error {
		err := policyAccess(ctx, client, admin, r, access)
		switch {
		case allowed && err != nil:
			return fmt.Errorf("%s: %s %s refused, want allowed: %v", who, access, r.gvr.Resource, err)
		case !allowed && !apierrors.IsForbidden(err):
			return fmt.Errorf("%s: %s %s: %v, want forbidden", who, access, r.gvr.Resource, err)
		}
		return nil
	}
	for _, r := range policyResources {
		for _, access := range append(slices.Clone(masterMay), "get", "patch status", "create", "update", "delete") {
			if err := check("the master", master, r, access, slices.Contains(masterMay, access)); err != nil {
				t.Error(err)
			}
		}
		for _, access := range masterMay {
			for who, client := range map[string]dynamic.Interface{"the node daemon of n1": nodeDaemon, "a user with no grant": nobody} {
				if err := check(who, client, r, access, false); err != nil {
					t.Error(err)
				}
			}
		}
		// What the master wrote is there: the status, not the labels.
		o, err := admin.Resource(r.gvr).Get(ctx, r.name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
		if len(conds) != 1 || conds[0].(map[string]any)["reason"] != "UpdateStatus" || o.GetLabels()["changed"] != "" {
			t.Errorf("%s after the master's writes: status %v, labels %v; want its updated status, no label", r.kind, conds, o.GetLabels())
		}
	}
	if t.Failed() {
		return
	}

	rules := roleRules(t, c, "", "ovnkube-master")
	var policyRules []int
	for i, rule := range rules {
		if slices.Contains(rule.APIGroups, policyAPIGroup) {
			policyRules = append(policyRules, i)
		}
	}
	if len(policyRules) != 2 {
		t.Fatalf("ovnkube-master has %d rules on %s, want 2 (read; write status)", len(policyRules), policyAPIGroup)
	}
	// every access of the master's, as granted by rules
	accessesOf := func(rules []rbacv1.PolicyRule) map[string][]string {
		out := map[string][]string{}
		for _, rule := range rules {
			if !slices.Contains(rule.APIGroups, policyAPIGroup) {
				continue
			}
			for res, acc := range grantedAccesses(rule) {
				out[res] = append(out[res], acc...)
			}
		}
		return out
	}
	all := accessesOf(rules)
	for _, r := range policyResources {
		if got := all[r.gvr.Resource]; !slices.Equal(sortedCopy(got), sortedCopy(masterMay)) {
			t.Fatalf("ovnkube-master's rules grant %v on %s, want %v", got, r.gvr.Resource, masterMay)
		}
	}
	for _, i := range policyRules {
		without := append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...)
		setRoleRules(t, c, "", "ovnkube-master", without)
		kept := accessesOf(without)
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("the master without rule %v", rules[i]), func() error {
			var errs []error
			for _, r := range policyResources {
				for _, access := range masterMay {
					errs = append(errs, check("the master", master, r, access, slices.Contains(kept[r.gvr.Resource], access)))
				}
			}
			return errors.Join(errs...)
		})
		setRoleRules(t, c, "", "ovnkube-master", rules)
		harness.Eventually(t, 30*time.Second, "the master with every rule again", func() error {
			var errs []error
			for _, r := range policyResources {
				for _, access := range masterMay {
					errs = append(errs, check("the master", master, r, access, true))
				}
			}
			return errors.Join(errs...)
		})
	}
}

func sortedCopy(s []string) []string {
	c := slices.Clone(s)
	sort.Strings(c)
	return c
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
// permissions, becomes ready and follows EgressIPs; with any one rule of its
// role removed it never becomes ready, but for its rule on egressips: without
// that one it is ready and says it cannot list them (it announces no IPv6
// egress IP, and nothing else needs them). It runs with the DaemonSet's
// flags: the gateway's address and next hop are read from the bridge, as on
// every node of a DaemonSet.
func TestNodeDaemonRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	c := newNodeCluster(t)
	c.kube.InstallCRDs(t) // EgressIPs served: the daemon follows them
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
	harness.WaitForLog(t, d, "following EgressIPs", 30*time.Second)
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
		if rbacRuleOn(rules[i], "egressips") {
			harness.Eventually(t, 30*time.Second, "the node daemon ready without its rule on egressips", ready)
			harness.WaitForLog(t, d, "cannot list EgressIPs", 30*time.Second)
		} else {
			neverWithin(t, ready, fmt.Sprintf("rule %v of ovnkube-node is superfluous: the node daemon is ready without it", rules[i]))
		}
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

// upstreamEgressFirewall is an EgressFirewall as upstream OVN-Kubernetes's
// documentation writes one: 05-crd-egressfirewalls.yaml must take it as is.
const upstreamEgressFirewall = `
kind: EgressFirewall
apiVersion: k8s.ovn.org/v1
metadata: {name: default, namespace: default}
spec:
  egress:
  - type: Allow
    to: {cidrSelector: 1.2.3.0/24}
  - type: Allow
    to: {dnsName: www.openvswitch.org}
  - type: Allow
    to: {cidrSelector: 4.5.6.0/24}
    ports: [{protocol: UDP, port: 55}]
  - type: Allow
    to: {nodeSelector: {matchLabels: {region: east}}}
  - type: Deny
    to: {cidrSelector: 0.0.0.0/0}
`

func upstreamEgressFirewallObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(upstreamEgressFirewall), 4096).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// rbacRuleOn says whether rule is on resource of k8s.ovn.org (or one of
// its subresources).
func rbacRuleOn(rule rbacv1.PolicyRule, resource string) bool {
	return slices.Contains(rule.APIGroups, k8sovnv1.GroupVersion.Group) && slices.ContainsFunc(rule.Resources, func(r string) bool {
		res, _, _ := strings.Cut(r, "/")
		return res == resource
	})
}

// masterStatusKind is a kind of k8s.ovn.org the master follows and reports
// on (EgressFirewall, EgressIP), as TestDistEgressFirewallRBAC and
// TestDistEgressIPRBAC check its RBAC: access does one request on the
// test's object as client ("get", "list", "watch", "patch status",
// "update status", "create", "update", "patch", "delete"); admin reads what
// an update starts from. nodeMay is what of those the node daemon may do
// (EgressIP: list and watch, to announce its node's IPv6 egress IPs).
type masterStatusKind struct {
	resource string
	access   func(ctx context.Context, client, admin dynamic.Interface, access string) error
	nodeMay  []string
}

// What the master may do on such a kind: read them all (its informer) and
// merge patch their status; of the other accesses, nothing.
var (
	statusKindMasterMay = []string{"list", "watch", "patch status"}
	statusKindAccesses  = append(slices.Clone(statusKindMasterMay), "get", "create", "update", "update status", "patch", "delete")
)

// rbacIdentities are the clients TestDistEgressFirewallRBAC and
// TestDistEgressIPRBAC act as, on an API server with dist/kubernetes's CRDs,
// RBAC and admission policies: the test's administrator, the master's
// ServiceAccount, the node daemon's identity (its DaemonSet pod's token on
// n1) and a user with no grant.
type rbacIdentities struct {
	c                                 *cluster
	admin, master, nodeDaemon, nobody dynamic.Interface
}

func newRBACIdentities(t *testing.T) rbacIdentities {
	t.Helper()
	kube := harness.StartKubeAPI(t)
	kube.InstallCRDs(t)
	applyDistAccess(t, kube, distObjects(t))
	if _, err := kube.Client.CoreV1().Nodes().Create(context.Background(), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tokenConfig := func(token string) *rest.Config {
		return &rest.Config{Host: kube.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	}
	nobodyCfg := rest.CopyConfig(kube.Config)
	nobodyCfg.Impersonate = rest.ImpersonationConfig{UserName: "mallory", Groups: []string{"system:authenticated"}}
	return rbacIdentities{
		c:          &cluster{t: t, kube: kube},
		admin:      dynamicFor(t, kube.Config),
		master:     dynamicFor(t, tokenConfig(serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-master", nil))),
		nodeDaemon: dynamicFor(t, tokenConfig(nodeDaemonToken(t, kube, "n1"))),
		nobody:     dynamicFor(t, nobodyCfg),
	}
}

// check does access as client, which must be allowed or forbidden.
func (k masterStatusKind) check(ctx context.Context, ids rbacIdentities, who string, client dynamic.Interface, access string, allowed bool) error {
	err := k.access(ctx, client, ids.admin, access)
	switch {
	case allowed && err != nil:
		return fmt.Errorf("%s: %s %s refused, want allowed: %v", who, access, k.resource, err)
	case !allowed && !apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %s %s: %v, want forbidden", who, access, k.resource, err)
	}
	return nil
}

// checkAccesses checks every access: the master may do what
// statusKindMasterMay says and nothing else, the node daemon what nodeMay
// says and nothing else, the user with no grant nothing.
func (k masterStatusKind) checkAccesses(t *testing.T, ctx context.Context, ids rbacIdentities) {
	t.Helper()
	for _, access := range statusKindAccesses {
		if err := k.check(ctx, ids, "the master", ids.master, access, slices.Contains(statusKindMasterMay, access)); err != nil {
			t.Error(err)
		}
		if err := k.check(ctx, ids, "the node daemon of n1", ids.nodeDaemon, access, slices.Contains(k.nodeMay, access)); err != nil {
			t.Error(err)
		}
		if err := k.check(ctx, ids, "a user with no grant", ids.nobody, access, false); err != nil {
			t.Error(err)
		}
	}
}

// checkEachRule checks ovnkube-master has two rules on the kind (read;
// patch status) granting exactly statusKindMasterMay, and that with each
// removed in turn exactly what it grants is refused and the other's still
// works.
func (k masterStatusKind) checkEachRule(t *testing.T, ctx context.Context, ids rbacIdentities) {
	t.Helper()
	rules := roleRules(t, ids.c, "", "ovnkube-master")
	var own []int
	for i, rule := range rules {
		if rbacRuleOn(rule, k.resource) {
			own = append(own, i)
		}
	}
	if len(own) != 2 {
		t.Fatalf("ovnkube-master has %d rules on %s, want 2 (read; patch status)", len(own), k.resource)
	}
	accessesOf := func(rules []rbacv1.PolicyRule) []string {
		var out []string
		for _, rule := range rules {
			if rbacRuleOn(rule, k.resource) {
				out = append(out, grantedAccesses(rule)[k.resource]...)
			}
		}
		return out
	}
	if got := accessesOf(rules); !slices.Equal(sortedCopy(got), sortedCopy(statusKindMasterMay)) {
		t.Fatalf("ovnkube-master's rules grant %v on %s, want %v", got, k.resource, statusKindMasterMay)
	}
	for _, i := range own {
		without := append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...)
		setRoleRules(t, ids.c, "", "ovnkube-master", without)
		kept := accessesOf(without)
		harness.Eventually(t, 30*time.Second, fmt.Sprintf("the master without rule %v", rules[i]), func() error {
			var errs []error
			for _, access := range statusKindMasterMay {
				errs = append(errs, k.check(ctx, ids, "the master", ids.master, access, slices.Contains(kept, access)))
			}
			return errors.Join(errs...)
		})
		setRoleRules(t, ids.c, "", "ovnkube-master", rules)
		harness.Eventually(t, 30*time.Second, "the master with every rule again", func() error {
			var errs []error
			for _, access := range statusKindMasterMay {
				errs = append(errs, k.check(ctx, ids, "the master", ids.master, access, true))
			}
			return errors.Join(errs...)
		})
	}
}

// egressFirewallAccess does one request on the EgressFirewall default/default
// as client: get, list and watch (of every namespace, as the informer does),
// "patch status" (WriteEgressFirewallStatus, as the master writes it),
// "update status", and the writes of the object: create, update (its spec),
// patch (its spec), delete. admin reads what an update starts from.
func egressFirewallAccess(ctx context.Context, t *testing.T, client, admin dynamic.Interface, access string) error {
	gvr := k8sovnv1.EgressFirewallResource
	ri := client.Resource(gvr).Namespace("default")
	name := k8sovnv1.EgressFirewallName
	switch access {
	case "get":
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		return err
	case "list":
		_, err := client.Resource(gvr).List(ctx, metav1.ListOptions{})
		return err
	case "watch":
		w, err := client.Resource(gvr).Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr(int64(1))})
		if err == nil {
			w.Stop()
		}
		return err
	case "patch status":
		return k8sovnv1.WriteEgressFirewallStatus(ctx, client, "default", name,
			k8sovnv1.EgressFirewallStatus{Status: k8sovnv1.EgressFirewallNotApplied, Messages: []string{"patched status"}})
	case "update status", "update":
		o, err := admin.Resource(gvr).Namespace("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin get: %w", err)
		}
		if access == "update" {
			o.SetLabels(map[string]string{"changed": "yes"})
			egress, _, _ := unstructured.NestedSlice(o.Object, "spec", "egress")
			egress[0].(map[string]any)["type"] = "Deny"
			_ = unstructured.SetNestedSlice(o.Object, egress, "spec", "egress")
			_, err = ri.Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
		o.Object["status"] = map[string]any{"status": "updated status"}
		_, err = ri.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		return err
	case "patch":
		_, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"egress":[{"type":"Allow","to":{"cidrSelector":"0.0.0.0/0"}}]}}`), metav1.PatchOptions{})
		return err
	case "create":
		_, err := ri.Create(ctx, upstreamEgressFirewallObject(t), metav1.CreateOptions{})
		return err
	case "delete":
		return ri.Delete(ctx, name, metav1.DeleteOptions{})
	}
	panic("unknown access " + access)
}

// EgressFirewall (k8s.ovn.org/v1), served from dist/kubernetes's CRD: the
// master's ServiceAccount may list and watch them (its informer, which
// syncs with that identity) and patch their status (WriteEgressFirewallStatus),
// and not get, create, update, patch or delete one, nor update its status;
// with each of its two rules on them removed in turn, exactly what that rule
// grants is refused and the other rule's still works. The node daemon's
// identity (its DaemonSet pod's token on n1) and a user with no grant may do
// none of it: a namespace's tenant cannot loosen the firewall its admin set,
// and only the master reports whether it is in force.
func TestDistEgressFirewallRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	ids := newRBACIdentities(t)
	ctx := context.Background()
	gvr := k8sovnv1.EgressFirewallResource
	if _, err := ids.admin.Resource(gvr).Namespace("default").Create(ctx, upstreamEgressFirewallObject(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := masterStatusKind{resource: gvr.Resource, access: func(ctx context.Context, client, admin dynamic.Interface, access string) error {
		return egressFirewallAccess(ctx, t, client, admin, access)
	}}
	k.checkAccesses(t, ctx, ids)
	// What the master wrote is there: the status, not the spec or labels.
	o, err := ids.admin.Resource(gvr).Namespace("default").Get(ctx, k8sovnv1.EgressFirewallName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, _, _ := unstructured.NestedMap(o.Object, "status")
	wantStatus := map[string]any{"status": k8sovnv1.EgressFirewallNotApplied, "messages": []any{"patched status"}}
	if !equalJSON(status, wantStatus) || !equalJSON(o.Object["spec"], upstreamEgressFirewallObject(t).Object["spec"]) || len(o.GetLabels()) != 0 {
		t.Errorf("after the master's writes: status %v (want %v), spec %v, labels %v", status, wantStatus, o.Object["spec"], o.GetLabels())
	}

	// The master's informer, with its identity: typed, synced, following.
	inf := k8sovnv1.NewEgressFirewallInformer(ids.master, 0)
	infCtx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(infCtx)
	harness.Eventually(t, 30*time.Second, "the master's EgressFirewall informer synced", func() error {
		if !inf.HasSynced() {
			return fmt.Errorf("not synced")
		}
		obj, ok, _ := inf.GetIndexer().GetByKey("default/default")
		ef, _ := obj.(*k8sovnv1.EgressFirewall)
		if !ok || ef == nil || len(ef.Spec.Egress) != 5 || ef.Spec.Egress[3].To.NodeSelector.MatchLabels["region"] != "east" ||
			ef.Spec.Egress[2].Ports[0] != (k8sovnv1.EgressFirewallPort{Protocol: "UDP", Port: 55}) || ef.Status.Status != k8sovnv1.EgressFirewallNotApplied {
			return fmt.Errorf("store: %#v", obj)
		}
		return nil
	})
	if err := k8sovnv1.WriteEgressFirewallStatus(ctx, ids.master, "default", "default", k8sovnv1.EgressFirewallStatus{Status: k8sovnv1.EgressFirewallApplied}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the informer following the master's status write", func() error {
		obj, _, _ := inf.GetIndexer().GetByKey("default/default")
		if ef, _ := obj.(*k8sovnv1.EgressFirewall); ef == nil || ef.Status.Status != k8sovnv1.EgressFirewallApplied || ef.Status.Messages != nil {
			return fmt.Errorf("store: %#v", obj)
		}
		return nil
	})
	stop()
	if t.Failed() {
		return
	}
	k.checkEachRule(t, ctx, ids)
}

// equalJSON compares two values as their JSON.
func equalJSON(a, b any) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}

// 05-crd-egressfirewalls.yaml takes upstream's example unchanged (every
// field kept, the status column shown) and the variants upstream allows,
// and refuses, each with its rule's message, what upstream's validation
// refuses: a second EgressFirewall in a namespace, a rule with no or two
// destinations, an unknown rule type or protocol, a port out of range or
// missing, a malformed DNS name or CIDR, more than 8000 rules.
func TestDistEgressFirewallCRD(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	kube.InstallCRDs(t)
	ctx := context.Background()
	dyn := dynamicFor(t, kube.Config)
	gvr := k8sovnv1.EgressFirewallResource
	created, err := dyn.Resource(gvr).Namespace("default").Create(ctx, upstreamEgressFirewallObject(t), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var ef k8sovnv1.EgressFirewall
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &ef); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(created.Object["spec"], upstreamEgressFirewallObject(t).Object["spec"]) || len(ef.Spec.Egress) != 5 {
		t.Fatalf("stored spec %v, want the manifest's", created.Object["spec"])
	}
	// The printer column shows the status the master writes.
	if err := k8sovnv1.WriteEgressFirewallStatus(ctx, dyn, "default", "default", k8sovnv1.EgressFirewallStatus{Status: k8sovnv1.EgressFirewallApplied}); err != nil {
		t.Fatal(err)
	}
	if cols, cells := crdTable(t, kube, "/apis/k8s.ovn.org/v1/namespaces/default/egressfirewalls"); !slices.Contains(cols, "EgressFirewall Status") || !slices.Contains(cells, k8sovnv1.EgressFirewallApplied) {
		t.Errorf("table: columns %v, cells %v; want an EgressFirewall Status column showing %q", cols, cells, k8sovnv1.EgressFirewallApplied)
	}

	// variants: the example with its first rule replaced (dry run, in a
	// namespace without one)
	if _, err := kube.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ef"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	withRule := func(rule map[string]any) *unstructured.Unstructured {
		o := upstreamEgressFirewallObject(t)
		o.SetNamespace("ef")
		egress, _, _ := unstructured.NestedSlice(o.Object, "spec", "egress")
		egress[0] = rule
		if err := unstructured.SetNestedSlice(o.Object, egress, "spec", "egress"); err != nil {
			t.Fatal(err)
		}
		return o
	}
	withRules := func(n int) *unstructured.Unstructured {
		o := upstreamEgressFirewallObject(t)
		o.SetNamespace("ef")
		egress := make([]any, n)
		for i := range egress {
			egress[i] = map[string]any{"type": "Deny", "to": map[string]any{"cidrSelector": fmt.Sprintf("10.%d.%d.0/24", i/256, i%256)}}
		}
		_ = unstructured.SetNestedSlice(o.Object, egress, "spec", "egress")
		return o
	}
	to := func(dest map[string]any) map[string]any { return map[string]any{"type": "Allow", "to": dest} }
	ports := func(p ...any) map[string]any {
		return map[string]any{"type": "Allow", "to": map[string]any{"cidrSelector": "4.5.6.0/24"}, "ports": p}
	}
	port := func(protocol string, n int64) map[string]any { return map[string]any{"protocol": protocol, "port": n} }
	accepted := map[string]*unstructured.Unstructured{
		"an IPv6 CIDR":                   withRule(to(map[string]any{"cidrSelector": "2001:db8::/32"})),
		"the longest CIDR":               withRule(to(map[string]any{"cidrSelector": "2001:0db8:0000:0000:0000:0000:255.255.255.255/128"})),
		"a wildcard DNS name":            withRule(to(map[string]any{"dnsName": "*.example.com"})),
		"a DNS name with a trailing dot": withRule(to(map[string]any{"dnsName": "example.com."})),
		"a DNS name of 253 characters":   withRule(to(map[string]any{"dnsName": strings.Repeat("a", 249) + ".com"})),
		"an empty node selector":         withRule(to(map[string]any{"nodeSelector": map[string]any{}})),
		"a node selector's expression": withRule(to(map[string]any{"nodeSelector": map[string]any{"matchExpressions": []any{
			map[string]any{"key": "zone", "operator": "In", "values": []any{"a", "b"}}}}})),
		"every protocol, the extreme ports": withRule(ports(port("TCP", 1), port("UDP", 65535), port("SCTP", 9))),
		"8000 rules":                        withRules(8000),
	}
	for what, o := range accepted {
		if _, err := dyn.Resource(gvr).Namespace("ef").Create(ctx, o, dry); err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
	}

	other, noSpec, noEgress := withRules(1), withRules(1), withRules(1)
	other.SetName("other")
	delete(noSpec.Object, "spec")
	noEgress.Object["spec"] = map[string]any{}
	refused := []struct {
		what string
		obj  *unstructured.Unstructured
		msg  string // in the error
	}{
		{"a second name", other, "only one EgressFirewall per namespace, named default"},
		{"no spec", noSpec, "spec: Required value"},
		{"no rules", noEgress, "spec.egress: Required value"},
		{"more than 8000 rules", withRules(8001), "spec.egress: Too many"},
		{"two destinations", withRule(to(map[string]any{"cidrSelector": "1.2.3.0/24", "dnsName": "www.openvswitch.org"})), "spec.egress[0].to: Too many"},
		{"three destinations", withRule(to(map[string]any{"cidrSelector": "1.2.3.0/24", "dnsName": "a.org", "nodeSelector": map[string]any{}})), "spec.egress[0].to: Too many"},
		{"no destination", withRule(to(map[string]any{})), "spec.egress[0].to: Invalid value"},
		{"a rule without to", withRule(map[string]any{"type": "Allow"}), "spec.egress[0].to: Required value"},
		{"a rule without type", withRule(map[string]any{"to": map[string]any{"cidrSelector": "1.2.3.0/24"}}), "spec.egress[0].type: Required value"},
		{"type Allowed", withRule(map[string]any{"type": "Allowed", "to": map[string]any{"cidrSelector": "1.2.3.0/24"}}), `spec.egress[0].type: Unsupported value: "Allowed"`},
		{"type allow", withRule(map[string]any{"type": "allow", "to": map[string]any{"cidrSelector": "1.2.3.0/24"}}), `spec.egress[0].type: Unsupported value: "allow"`},
		{"protocol ICMP", withRule(ports(port("ICMP", 1))), `spec.egress[0].ports[0].protocol: Unsupported value: "ICMP"`},
		{"protocol tcp", withRule(ports(port("tcp", 80))), `spec.egress[0].ports[0].protocol: Unsupported value: "tcp"`},
		{"protocol xUDP", withRule(ports(port("xUDP", 80))), `spec.egress[0].ports[0].protocol: Unsupported value: "xUDP"`},
		{"port 0", withRule(ports(port("TCP", 0))), "spec.egress[0].ports[0].port: Invalid value: 0"},
		{"port 65536", withRule(ports(port("TCP", 65536))), "spec.egress[0].ports[0].port: Invalid value: 65536"},
		{"a port without its number", withRule(ports(map[string]any{"protocol": "TCP"})), "spec.egress[0].ports[0].port: Required value"},
		{"a port without its protocol", withRule(ports(map[string]any{"port": int64(80)})), "spec.egress[0].ports[0].protocol: Required value"},
		{"a DNS name with an underscore", withRule(to(map[string]any{"dnsName": "bad_name.example.com"})), "spec.egress[0].to.dnsName: Invalid value"},
		{"a DNS name with two wildcards", withRule(to(map[string]any{"dnsName": "*.*.example.com"})), "spec.egress[0].to.dnsName: Invalid value"},
		{"a DNS name with an empty label", withRule(to(map[string]any{"dnsName": "a..example.com"})), "spec.egress[0].to.dnsName: Invalid value"},
		{"a DNS name of 254 characters", withRule(to(map[string]any{"dnsName": strings.Repeat("a", 250) + ".com"})), "spec.egress[0].to.dnsName: Too long"},
		{"a CIDR with prefix 33", withRule(to(map[string]any{"cidrSelector": "1.2.3.0/33"})), "cidrSelector must be a CIDR"},
		{"an address without a prefix", withRule(to(map[string]any{"cidrSelector": "1.2.3.4"})), "cidrSelector must be a CIDR"},
		{"not a CIDR", withRule(to(map[string]any{"cidrSelector": "www.openvswitch.org/24"})), "cidrSelector must be a CIDR"},
		{"an empty CIDR", withRule(to(map[string]any{"cidrSelector": ""})), "cidrSelector must be a CIDR"},
	}
	for _, r := range refused {
		_, err := dyn.Resource(gvr).Namespace("ef").Create(ctx, r.obj, dry)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), r.msg) {
			t.Errorf("%s: %v, want invalid: %s", r.what, err, r.msg)
		}
	}
}

// crdTable is what kubectl get shows of the objects at path (such as
// /apis/k8s.ovn.org/v1/namespaces/default/egressfirewalls, what kubectl get
// egressfirewalls -n default shows): the column names and every row's cells.
func crdTable(t *testing.T, kube *harness.KubeAPI, path string) (cols []string, cells []string) {
	t.Helper()
	hc, err := rest.HTTPClientFor(kube.Config)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodGet, kube.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var table metav1.Table
	if err := json.NewDecoder(resp.Body).Decode(&table); err != nil {
		t.Fatal(err)
	}
	for _, c := range table.ColumnDefinitions {
		cols = append(cols, c.Name)
	}
	for _, r := range table.Rows {
		for _, c := range r.Cells {
			cells = append(cells, fmt.Sprint(c))
		}
	}
	return cols, cells
}

// upstreamEgressIPManifest is an EgressIP as upstream OVN-Kubernetes's
// documentation writes one: 05-crd-egressips.yaml must take it as is.
const upstreamEgressIPManifest = `
apiVersion: k8s.ovn.org/v1
kind: EgressIP
metadata: {name: egressip-prod}
spec:
  egressIPs: [172.18.0.33, 172.18.0.44, "fc00:f853:ccd:e793::33"]
  namespaceSelector: {matchLabels: {environment: prod}}
  podSelector: {matchLabels: {app: web}}
`

func upstreamEgressIPObject(t *testing.T) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(upstreamEgressIPManifest), 4096).Decode(&m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

// egressIPAccess does one request on the EgressIP egressip-prod as client:
// get, list, watch, "patch status" (WriteEgressIPStatus, as the master
// writes it), "update status", and the writes of the object: create, update
// (its spec), patch (its spec), delete. admin reads what an update starts
// from.
func egressIPAccess(ctx context.Context, t *testing.T, client, admin dynamic.Interface, access string) error {
	gvr := k8sovnv1.EgressIPResource
	ri := client.Resource(gvr)
	name := upstreamEgressIPObject(t).GetName()
	switch access {
	case "get":
		_, err := ri.Get(ctx, name, metav1.GetOptions{})
		return err
	case "list":
		_, err := ri.List(ctx, metav1.ListOptions{})
		return err
	case "watch":
		w, err := ri.Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr(int64(1))})
		if err == nil {
			w.Stop()
		}
		return err
	case "patch status":
		return k8sovnv1.WriteEgressIPStatus(ctx, client, name, k8sovnv1.EgressIPStatus{Items: []k8sovnv1.EgressIPStatusItem{{Node: "n1", EgressIP: "172.18.0.33"}}})
	case "update status", "update":
		o, err := admin.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return fmt.Errorf("admin get: %w", err)
		}
		if access == "update" {
			o.SetLabels(map[string]string{"changed": "yes"})
			_ = unstructured.SetNestedStringSlice(o.Object, []string{"172.18.0.99"}, "spec", "egressIPs")
			_, err = ri.Update(ctx, o, metav1.UpdateOptions{})
			return err
		}
		o.Object["status"] = map[string]any{"items": []any{map[string]any{"node": "n1", "egressIP": "172.18.0.99"}}}
		_, err = ri.UpdateStatus(ctx, o, metav1.UpdateOptions{})
		return err
	case "patch":
		_, err := ri.Patch(ctx, name, types.MergePatchType, []byte(`{"spec":{"namespaceSelector":{}}}`), metav1.PatchOptions{})
		return err
	case "create":
		o := upstreamEgressIPObject(t)
		o.SetName("another")
		_, err := ri.Create(ctx, o, metav1.CreateOptions{})
		return err
	case "delete":
		return ri.Delete(ctx, name, metav1.DeleteOptions{})
	}
	panic("unknown access " + access)
}

// EgressIP (k8s.ovn.org/v1, cluster-scoped), served from dist/kubernetes's
// CRD: the master's ServiceAccount may list and watch them (its informer,
// which syncs with that identity) and patch their status
// (WriteEgressIPStatus), and not get, create, update, patch or delete one,
// nor update its status; with each of its two rules on them removed in
// turn, exactly what that rule grants is refused and the other rule's still
// works. The node daemon's identity (its DaemonSet pod's token on n1) may
// list and watch them (its informer syncs with that identity: it announces
// the IPv6 egress IPs of its node), from one rule of ovnkube-node, and
// nothing else: not get, create, update, patch or delete one, nor write
// its status. A user with no grant may do none of it: no tenant picks the
// source address of other namespaces' traffic, and only the master reports
// where an egress IP is.
func TestDistEgressIPRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	ids := newRBACIdentities(t)
	ctx := context.Background()
	gvr := k8sovnv1.EgressIPResource
	name := upstreamEgressIPObject(t).GetName()
	if _, err := ids.admin.Resource(gvr).Create(ctx, upstreamEgressIPObject(t), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	k := masterStatusKind{resource: gvr.Resource, access: func(ctx context.Context, client, admin dynamic.Interface, access string) error {
		return egressIPAccess(ctx, t, client, admin, access)
	}, nodeMay: []string{"list", "watch"}}
	var nodeGrants []string
	for _, rule := range roleRules(t, ids.c, "", "ovnkube-node") {
		if rbacRuleOn(rule, gvr.Resource) {
			nodeGrants = append(nodeGrants, fmt.Sprint(grantedAccesses(rule)))
		}
	}
	if want := fmt.Sprint(map[string][]string{gvr.Resource: k.nodeMay}); len(nodeGrants) != 1 || nodeGrants[0] != want {
		t.Errorf("ovnkube-node's rules on %s grant %v, want one granting %s", gvr.Resource, nodeGrants, want)
	}
	k.checkAccesses(t, ctx, ids)
	// What the master wrote is there: the status, not the spec or labels;
	// and nobody created another.
	o, err := ids.admin.Resource(gvr).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status, _, _ := unstructured.NestedMap(o.Object, "status")
	wantStatus := map[string]any{"items": []any{map[string]any{"node": "n1", "egressIP": "172.18.0.33"}}}
	if !equalJSON(status, wantStatus) || !equalJSON(o.Object["spec"], upstreamEgressIPObject(t).Object["spec"]) || len(o.GetLabels()) != 0 {
		t.Errorf("after the master's writes: status %v (want %v), spec %v, labels %v", status, wantStatus, o.Object["spec"], o.GetLabels())
	}
	if l, err := ids.admin.Resource(gvr).List(ctx, metav1.ListOptions{}); err != nil || len(l.Items) != 1 {
		t.Errorf("EgressIPs after the refused creations: %v %v, want %s alone", l, err, name)
	}

	// The master's informer, with its identity: typed, synced, following.
	inf := k8sovnv1.NewEgressIPInformer(ids.master, 0)
	infCtx, stop := context.WithCancel(ctx)
	defer stop()
	go inf.RunWithContext(infCtx)
	harness.Eventually(t, 30*time.Second, "the master's EgressIP informer synced", func() error {
		if !inf.HasSynced() {
			return fmt.Errorf("not synced")
		}
		obj, ok, _ := inf.GetIndexer().GetByKey(name)
		eip, _ := obj.(*k8sovnv1.EgressIP)
		if !ok || eip == nil || !slices.Equal(eip.Spec.EgressIPs, []string{"172.18.0.33", "172.18.0.44", "fc00:f853:ccd:e793::33"}) ||
			eip.Spec.NamespaceSelector.MatchLabels["environment"] != "prod" || eip.Spec.PodSelector.MatchLabels["app"] != "web" ||
			len(eip.Status.Items) != 1 || eip.Status.Items[0] != (k8sovnv1.EgressIPStatusItem{Node: "n1", EgressIP: "172.18.0.33"}) {
			return fmt.Errorf("store: %#v", obj)
		}
		return nil
	})
	if err := k8sovnv1.WriteEgressIPStatus(ctx, ids.master, name, k8sovnv1.EgressIPStatus{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, "the informer following the master's status write", func() error {
		obj, _, _ := inf.GetIndexer().GetByKey(name)
		if eip, _ := obj.(*k8sovnv1.EgressIP); eip == nil || eip.Status.Items == nil || len(eip.Status.Items) != 0 {
			return fmt.Errorf("store: %#v", obj)
		}
		return nil
	})
	// The node daemon's informer, with its identity: synced, typed.
	nodeInf := k8sovnv1.NewEgressIPInformer(ids.nodeDaemon, 0)
	go nodeInf.RunWithContext(infCtx)
	harness.Eventually(t, 30*time.Second, "the node daemon's EgressIP informer synced", func() error {
		obj, _, _ := nodeInf.GetIndexer().GetByKey(name)
		if eip, _ := obj.(*k8sovnv1.EgressIP); !nodeInf.HasSynced() || eip == nil || len(eip.Spec.EgressIPs) != 3 {
			return fmt.Errorf("synced %v, store: %#v", nodeInf.HasSynced(), obj)
		}
		return nil
	})
	stop()
	if t.Failed() {
		return
	}
	k.checkEachRule(t, ctx, ids)
}

// 05-crd-egressips.yaml takes upstream's example unchanged (every field
// kept, the printer columns upstream's, showing the status the master
// writes) and the variants upstream allows, and refuses, each with its
// rule's message: no spec, no or too many egress IPs, one that is not an
// IP address, no namespace selector, a malformed selector; a status item
// without its node or address. A status written with the object is dropped
// (the status is a subresource: the master's alone).
func TestDistEgressIPCRD(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	kube.InstallCRDs(t)
	ctx := context.Background()
	dyn := dynamicFor(t, kube.Config)
	ri := dyn.Resource(k8sovnv1.EgressIPResource)
	withStatus := upstreamEgressIPObject(t)
	withStatus.Object["status"] = map[string]any{"items": []any{map[string]any{"node": "n9", "egressIP": "172.18.0.33"}}}
	created, err := ri.Create(ctx, withStatus, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var eip k8sovnv1.EgressIP
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(created.Object, &eip); err != nil {
		t.Fatal(err)
	}
	if !equalJSON(created.Object["spec"], upstreamEgressIPObject(t).Object["spec"]) || len(eip.Spec.EgressIPs) != 3 || created.Object["status"] != nil {
		t.Fatalf("stored spec %v, status %v; want the manifest's spec and no status", created.Object["spec"], created.Object["status"])
	}
	// The printer columns show the spec and the status the master writes:
	// of a column's values (its path's [*]) the first, as upstream's do (the
	// API server prints only the first result of a column's JSONPath).
	if err := k8sovnv1.WriteEgressIPStatus(ctx, dyn, eip.Name, k8sovnv1.EgressIPStatus{Items: []k8sovnv1.EgressIPStatusItem{
		{Node: "n1", EgressIP: "172.18.0.33"}, {Node: "n2", EgressIP: "fc00:f853:ccd:e793::33"}}}); err != nil {
		t.Fatal(err)
	}
	cols, cells := crdTable(t, kube, "/apis/k8s.ovn.org/v1/egressips")
	row := map[string]string{}
	for i, c := range cols {
		if len(cells) == len(cols) {
			row[c] = cells[i]
		}
	}
	want := map[string]string{"Name": "egressip-prod", "EgressIPs": "172.18.0.33", "Assigned Node": "n1", "Assigned EgressIPs": "172.18.0.33"}
	if !equalJSON(row, want) {
		t.Errorf("table: columns %v, cells %v; want %v", cols, cells, want)
	}
	// A status without its items, or an item without its node or address.
	for _, bad := range []struct{ patch, msg string }{
		{`{"status":{"items":null}}`, "status.items: Required value"},
		{`{"status":{"items":[{"egressIP":"172.18.0.33"}]}}`, "status.items[0].node: Required value"},
		{`{"status":{"items":[{"node":"n1"}]}}`, "status.items[0].egressIP: Required value"},
	} {
		_, err := ri.Patch(ctx, eip.Name, types.MergePatchType, []byte(bad.patch), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status")
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("status patch %s: %v, want invalid: %s", bad.patch, err, bad.msg)
		}
	}

	// variants: the example with its spec changed (dry run)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	with := func(change func(spec map[string]any)) *unstructured.Unstructured {
		o := upstreamEgressIPObject(t)
		o.SetName("variant")
		change(o.Object["spec"].(map[string]any))
		return o
	}
	ips := func(ips ...string) *unstructured.Unstructured {
		return with(func(spec map[string]any) {
			l := make([]any, len(ips))
			for i, ip := range ips {
				l[i] = ip
			}
			spec["egressIPs"] = l
		})
	}
	nIPs := func(n int) *unstructured.Unstructured {
		var l []string
		for i := range n {
			l = append(l, fmt.Sprintf("10.0.%d.%d", i/256, i%256))
		}
		return ips(l...)
	}
	set := func(field string, v any) *unstructured.Unstructured {
		return with(func(spec map[string]any) { spec[field] = v })
	}
	without := func(field string) *unstructured.Unstructured {
		return with(func(spec map[string]any) { delete(spec, field) })
	}
	expr := func(e map[string]any) map[string]any { return map[string]any{"matchExpressions": []any{e}} }
	accepted := map[string]*unstructured.Unstructured{
		"one IPv4 address":                ips("172.18.0.33"),
		"one IPv6 address":                ips("fc00::33"),
		"the longest address":             ips("2001:0db8:0000:0000:0000:0000:255.255.255.255"),
		"256 egress IPs":                  nIPs(256),
		"no pod selector":                 without("podSelector"),
		"an empty namespace selector":     set("namespaceSelector", map[string]any{}),
		"an empty pod selector":           set("podSelector", map[string]any{}),
		"a namespace selector's Exists":   set("namespaceSelector", expr(map[string]any{"key": "environment", "operator": "Exists"})),
		"a pod selector's In expression":  set("podSelector", expr(map[string]any{"key": "app", "operator": "In", "values": []any{"web", "api"}})),
		"labels and expressions together": set("podSelector", map[string]any{"matchLabels": map[string]any{"app": "web"}, "matchExpressions": []any{map[string]any{"key": "tier", "operator": "DoesNotExist"}}}),
	}
	for what, o := range accepted {
		if _, err := ri.Create(ctx, o, dry); err != nil {
			t.Errorf("%s refused: %v", what, err)
		}
	}

	noSpec := upstreamEgressIPObject(t)
	noSpec.SetName("variant")
	delete(noSpec.Object, "spec")
	const notIP = "each of egressIPs must be an IP address"
	refused := []struct {
		what string
		obj  *unstructured.Unstructured
		msg  string // in the error
	}{
		{"no spec", noSpec, "spec: Required value"},
		{"no egressIPs", without("egressIPs"), "spec.egressIPs: Required value"},
		{"no egress IP", ips(), "spec.egressIPs: Invalid value: 0: spec.egressIPs in body should have at least 1 items"},
		{"257 egress IPs", nIPs(257), "spec.egressIPs: Too many"},
		{"egressIPs not a list", set("egressIPs", "172.18.0.33"), "spec.egressIPs: Invalid value"},
		{"a name", ips("172.18.0.33", "egress.example.com"), "spec.egressIPs[1]: Invalid value: \"string\": " + notIP},
		{"a CIDR", ips("172.18.0.0/24"), notIP},
		{"an IPv4 address out of range", ips("172.18.0.256"), notIP},
		{"an IPv4 address with a leading zero", ips("172.18.0.033"), notIP},
		{"an IPv6 address with a zone", ips("fe80::1%eth0"), notIP},
		{"an empty address", ips(""), notIP},
		{"an address too long", ips("2001:0db8:0000:0000:0000:0000:0255.255.255.255"), "spec.egressIPs[0]: Too long"},
		{"no namespaceSelector", without("namespaceSelector"), "spec.namespaceSelector: Required value"},
		{"a namespace selector not an object", set("namespaceSelector", "environment=prod"), "spec.namespaceSelector: Invalid value"},
		{"an expression without operator", set("namespaceSelector", expr(map[string]any{"key": "environment"})), "spec.namespaceSelector.matchExpressions[0].operator: Required value"},
		{"an expression without key", set("podSelector", expr(map[string]any{"operator": "Exists"})), "spec.podSelector.matchExpressions[0].key: Required value"},
		{"an expression's values not a list", set("podSelector", expr(map[string]any{"key": "app", "operator": "In", "values": "web"})), "spec.podSelector.matchExpressions[0].values: Invalid value"},
		{"a label value not a string", set("podSelector", map[string]any{"matchLabels": map[string]any{"app": int64(1)}}), "spec.podSelector.matchLabels.app: Invalid value"},
		{"matchLabels a list", set("namespaceSelector", map[string]any{"matchLabels": []any{"environment"}}), "spec.namespaceSelector.matchLabels: Invalid value"},
	}
	for _, r := range refused {
		_, err := ri.Create(ctx, r.obj, dry)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), r.msg) {
			t.Errorf("%s: %v, want invalid: %s", r.what, err, r.msg)
		}
	}
}

// clusterManagerConverges checks, for round i, what the cluster manager
// must do with its permissions: a new node gets its host subnet (nodes:
// list, watch, patch; nodeallocations through the admission policy), an
// EgressIP its assignment (egressips, their status), one that no node can
// host a Warning Event (events), all as the leader (leases).
func clusterManagerConverges(c *cluster, i int) func() error {
	node, eip, stray := fmt.Sprintf("cm-n%d", i), fmt.Sprintf("cm-eip%d", i), fmt.Sprintf("cm-stray%d", i)
	c.createNode(node, nil)
	gw := fmt.Sprintf("cm-gw%d", i)
	c.createGatewayNode(gw, fmt.Sprintf("172.18.0.%d", 100+i), map[string]string{k8sovnv1.EgressAssignableLabel: ""})
	// Its gateway router's join address, as its zone's master writes it.
	join := annotations.FormatGatewayJoinIPs([]netip.Prefix{netip.MustParsePrefix(fmt.Sprintf("100.64.0.%d/16", 100+i))})
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:%q}}}`, annotations.NodeGatewayJoinIP, join)
	if _, err := c.kube.Client.CoreV1().Nodes().Patch(c.ctx(), gw, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		c.t.Fatal(err)
	}
	c.createEIP(eip, []string{fmt.Sprintf("172.18.0.%d", 200+i)}, nil, nil)
	c.createEIP(stray, []string{fmt.Sprintf("198.51.100.%d", 10+i)}, nil, nil) // on no node's network
	admin := dynamicFor(c.t, c.kube.Config)
	return func() error {
		n, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if _, ok := n.Annotations[annotations.NodeSubnets]; !ok {
			return fmt.Errorf("node %s has no subnet", node)
		}
		e, err := admin.Resource(k8sovnv1.EgressIPResource).Get(c.ctx(), eip, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if items, _, _ := unstructured.NestedSlice(e.Object, "status", "items"); len(items) == 0 {
			return fmt.Errorf("EgressIP %s is not assigned", eip)
		}
		return c.warningEvent("default", stray, "EgressIPNotAssigned")
	}
}

// The cluster manager (zone mode) runs with exactly its ServiceAccount's
// permissions (13-rbac-cluster-manager.yaml), the admission policies in
// force, and works; with any one rule of its roles removed it does not.
func TestDistClusterManagerRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	c := newCluster(t)
	objs := distObjects(t)
	c.kube.InstallCRDs(t)
	kubeconfig := applyRBAC(t, c.kube, objs, "ovnkube-cluster-manager")
	ic := harness.StartInterconnect(t)
	// The cluster DNS, streaming its answers to the cluster manager of the
	// round; www.cm<i>.test is the name round i's EgressFirewall covers.
	tapSock := filepath.Join(t.TempDir(), "dnstap.sock")
	dnsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	var hosts []string
	for i := 1; i <= 40; i++ {
		hosts = append(hosts, fmt.Sprintf("192.0.2.50 www.cm%d.test", i))
	}
	startCoreDNS(t, dnsAddr, "unix://"+tapSock, map[string]string{".": strings.Join(hosts, "\n        ")})
	round := 0
	run := func() *harness.Process {
		round++
		return harness.Start(t, c.logDir, fmt.Sprintf("cluster-manager-sa-%d", round), harness.Binary(t, "ovnkube"), "--loglevel", "4", "cluster-manager",
			"--kubeconfig", kubeconfig, "--ic-nb-address", "unix:"+ic.NBSock, "--egressip-reachability-timeout", "0", "--dns-tap-address", "unix:"+tapSock)
	}
	worksThenEachRuleNeeded(c, "the cluster manager", []roleRef{{"", "ovnkube-cluster-manager"}, {"ovn-kubernetes", "ovnkube-cluster-manager-leader-election"}}, run,
		func() func() error {
			subnets := clusterManagerConverges(c, round)
			dns := relayConverges(c, round, dnsAddr)
			return func() error { return errors.Join(subnets(), dns()) }
		})
}

// relayConverges checks, for round i, the cluster manager's relay of the
// cluster DNS's answers: an EgressFirewall naming *.cm<i>.test gets its
// DNSNameResolver (dnsnameresolvers: create, list, watch; egressfirewalls
// and the admin policy kinds: list, watch) with the address CoreDNS
// answered for www.cm<i>.test (dnsnameresolvers/status: patch; the cluster
// DNS's EndpointSlices: list, watch), and one no policy names is deleted
// (delete).
func relayConverges(c *cluster, i int, dnsAddr string) func() error {
	ns, wild := fmt.Sprintf("cm-dns%d", i), fmt.Sprintf("*.cm%d.test", i)
	c.namespace(ns, nil)
	c.createEF(ns, efAllow(k8sovnv1.EgressFirewallDestination{DNSName: wild}))
	admin := dynamicFor(c.t, c.kube.Config)
	ri := admin.Resource(k8sovnv1.DNSNameResolverResource)
	gone := fmt.Sprintf("gone%d.test", i)
	orphan := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "DNSNameResolver",
		"metadata": map[string]any{"name": k8sovnv1.DNSNameResolverName(gone)}, "spec": map[string]any{"name": gone}}}
	if _, err := ri.Create(c.ctx(), orphan, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
	return func() error {
		if _, err := dnsQuery(dnsAddr, fmt.Sprintf("www.cm%d.test", i), dns.TypeA); err != nil {
			return err
		}
		u, err := ri.Get(c.ctx(), k8sovnv1.DNSNameResolverName(wild), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "resolvedAddresses"); len(addrs) != 1 {
			return fmt.Errorf("DNSNameResolver of %s: status %v, want 192.0.2.50", wild, u.Object["status"])
		}
		if _, err := ri.Get(c.ctx(), orphan.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("DNSNameResolver of %s, which no policy names, not deleted (%v)", gone, err)
		}
		return nil
	}
}

// worksThenEachRuleNeeded runs the component with all its rules and waits
// until it does what converges asks (its log's tail shown if the test
// fails), then eachRuleNeeded.
func worksThenEachRuleNeeded(c *cluster, who string, roles []roleRef, run func() *harness.Process, converges func() func() error) {
	c.t.Helper()
	p := run()
	c.t.Cleanup(func() {
		if c.t.Failed() {
			c.t.Logf("%s: log tail:\n%s", who, p.Tail(30))
		}
	})
	harness.Eventually(c.t, 30*time.Second, who+" working with its ServiceAccount", converges())
	p.Stop()
	eachRuleNeeded(c, who, roles, run, converges)
}

// The zone master (zones/41-zone-master.yaml) runs with its ServiceAccount's
// token bound to a pod on its node, as the DaemonSet's is, the admission
// policies in force, and works (its zone's NB here is a central one); with
// any one rule of its roles removed it does not, the k8s.ovn.org one on
// podnetworks and nodeallocations (update-own-node) through the policies.
// What the same token may not do on other nodes: TestAdmissionZoneMaster.
func TestDistZoneMasterRBAC(t *testing.T) {
	t.Parallel() // wait-bound, on its own API server: beside the other RBAC tests
	c := newCluster(t)
	objs := distObjects(t)
	c.kube.InstallCRDs(t)
	applyDistAccess(t, c.kube, objs)
	const sa = "ovnkube-zone-master"
	// Where the cluster DNS's stream goes (no cluster manager here): the
	// master reads the DNSNameResolvers (list, watch) before it syncs.
	tapSock := filepath.Join(t.TempDir(), "dnstap.sock")
	round := 0
	run := func() *harness.Process {
		round++
		zone := fmt.Sprintf("zone-n%d", round) // a zone per node, named after it
		c.createNode(zone, zoneNodeAnnotations(zone, round, fmt.Sprintf(`{"default":{"mode":"shared","interface-id":"breth0_%s_localnet","mac-address":"0a:00:00:00:01:%02x","ip-addresses":["172.18.1.%d/24"],"next-hops":["172.18.1.1"],"node-port-enable":"true"}}`,
			zone, round, 10+round)))
		kubeconfig := tokenKubeconfig(t, c.kube, sa, boundToken(t, c.kube, sa, zone))
		return harness.Start(t, c.logDir, fmt.Sprintf("zone-master-sa-%d", round), harness.Binary(t, "ovnkube"), "--loglevel", "4", "master",
			"--kubeconfig", kubeconfig, "--nb-address", c.ovn.NBAddress(), "--zone", zone, "--dns-servers", harness.NoDNS,
			"--egressip-reachability-timeout", "0", "--dns-tap-address", "unix:"+tapSock)
	}
	worksThenEachRuleNeeded(c, "the zone master", []roleRef{{"", sa}, {"ovn-kubernetes", sa + "-leader-election"}}, run,
		func() func() error { return zoneMasterConverges(c, round) })
}

// zoneNodeAnnotations are a node of zone mode as the cluster manager (its
// host subnet, 10.244.i.0/24) and its node daemon (zone, chassis, gateway)
// leave it.
func zoneNodeAnnotations(zone string, i int, gateway string) map[string]string {
	return map[string]string{annotations.NodeZone: zone, annotations.NodeChassisID: fmt.Sprintf("chassis-%d", i),
		annotations.NodeSubnets: fmt.Sprintf(`{"default":"10.244.%d.0/24"}`, i), annotations.NodeL3GatewayConfig: gateway}
}

// zoneMasterConverges checks, for round i, what the zone master of node
// zone-n<i> (created by the round's run) must do with its permissions: that
// node gets its gateway join address (nodes: list, watch, patch;
// nodeallocations), a pod on it its address (pods; podnetworks), another
// node of its zone with a malformed gateway an Event (events), the round's
// policies and EgressFirewall their status (statusesReported), all as the
// zone's leader (leases).
func zoneMasterConverges(c *cluster, i int) func() error {
	zone, bad, pod := fmt.Sprintf("zone-n%d", i), fmt.Sprintf("zone-bad%d", i), fmt.Sprintf("zone-p%d", i)
	c.createNode(bad, zoneNodeAnnotations(zone, 100+i, "{not json"))
	c.createPod("default", pod, zone)
	statuses := statusesReported(c, i)
	return func() error {
		if err := statuses(); err != nil {
			return err
		}
		return nodePodAndEvent(c, zone, annotations.NodeGatewayJoinIP, pod, bad)
	}
}

// roleRef names a ClusterRole (namespace "") or a Role.
type roleRef struct{ namespace, name string }

// eachRuleNeeded removes each rule of the roles in turn, runs the component
// (run) and checks that it never does what converges (called after the
// start, for that round's objects) asks: no rule is superfluous.
func eachRuleNeeded(c *cluster, who string, roles []roleRef, run func() *harness.Process, converges func() func() error) {
	c.t.Helper()
	for _, ref := range roles {
		rules := roleRules(c.t, c, ref.namespace, ref.name)
		for i := range rules {
			without := append(append([]rbacv1.PolicyRule{}, rules[:i]...), rules[i+1:]...)
			setRoleRules(c.t, c, ref.namespace, ref.name, without)
			p := run()
			neverWithin(c.t, converges(), fmt.Sprintf("rule %v of %s is superfluous: %s works without it", rules[i], ref.name, who))
			p.Stop()
			setRoleRules(c.t, c, ref.namespace, ref.name, rules)
		}
	}
}

// 05-crd-dnsnameresolvers.yaml takes what the cluster manager writes (a
// wildcard name, a status of both families, written through the status
// subresource and read back as written) and refuses, each with its rule's
// message: a name not normalized or not a DNS name, a changed spec, a
// status address that is not an IP address, more than 256 addresses.
func TestDistDNSNameResolverCRD(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	kube.InstallCRDs(t)
	ctx := context.Background()
	dyn := dynamicFor(t, kube.Config)
	ri := dyn.Resource(k8sovnv1.DNSNameResolverResource)
	const name = "*.wild.example.com"
	created, err := k8sovnv1.CreateDNSNameResolver(ctx, dyn, name)
	if err != nil {
		t.Fatal(err)
	}
	exp := metav1.NewTime(time.Now().Add(time.Minute).Truncate(time.Second))
	status := k8sovnv1.DNSNameResolverStatus{ResolvedAddresses: []k8sovnv1.ResolvedAddress{{IP: "192.0.2.1", Expires: exp}, {IP: "2001:db8::1", Expires: exp}}}
	if err := k8sovnv1.WriteDNSNameResolverStatus(ctx, dyn, created.Name, status); err != nil {
		t.Fatal(err)
	}
	u, err := ri.Get(ctx, created.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var got k8sovnv1.DNSNameResolver
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &got); err != nil {
		t.Fatal(err)
	}
	if got.Spec.Name != name || got.Name != k8sovnv1.DNSNameResolverName(name) || len(got.Status.Expiries()) != 2 ||
		!got.Status.Expiries()[netip.MustParseAddr("2001:db8::1")].Equal(exp.Time) {
		t.Errorf("read back %+v, want %s's with %+v", got, name, status)
	}
	if err := k8sovnv1.WriteDNSNameResolverStatus(ctx, dyn, created.Name, k8sovnv1.DNSNameResolverStatus{}); err != nil {
		t.Fatal(err)
	}
	if u, err = ri.Get(ctx, created.Name, metav1.GetOptions{}); err != nil || u.Object["status"] != nil && len(u.Object["status"].(map[string]any)) > 0 {
		t.Errorf("an empty status written: read back %v (%v), want none", u.Object["status"], err)
	}
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	for _, bad := range []string{"Upper.example.com", "trailing.dot.", "a.*.example.com", "*", "under_score.example.com", strings.Repeat("a.", 127) + "com"} {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "DNSNameResolver",
			"metadata": map[string]any{"name": "bad"}, "spec": map[string]any{"name": bad}}}
		if _, err := ri.Create(ctx, obj, dry); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.name") {
			t.Errorf("spec.name %q: %v, want invalid", bad, err)
		}
	}
	if _, err := ri.Patch(ctx, created.Name, types.MergePatchType, []byte(`{"spec":{"name":"other.example.com"}}`), metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec is immutable") {
		t.Errorf("spec changed: %v, want invalid: spec is immutable", err)
	}
	many := make([]any, 257)
	for i := range many {
		many[i] = map[string]any{"ip": fmt.Sprintf("10.0.%d.%d", i/256, i%256), "expires": exp.UTC().Format(time.RFC3339)}
	}
	for _, bad := range []struct {
		addrs []any
		msg   string
	}{
		{[]any{map[string]any{"ip": "192.0.2.1/32", "expires": exp.UTC().Format(time.RFC3339)}}, "must be an IP address"},
		{[]any{map[string]any{"ip": "192.0.2.1"}}, "expires: Required value"},
		{many, "Too many"},
	} {
		body, _ := json.Marshal(map[string]any{"status": map[string]any{"resolvedAddresses": bad.addrs}})
		if _, err := ri.Patch(ctx, created.Name, types.MergePatchType, body, metav1.PatchOptions{DryRun: []string{metav1.DryRunAll}}, "status"); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.msg) {
			t.Errorf("status %.80v: %v, want invalid: %s", bad.addrs, err, bad.msg)
		}
	}
}
