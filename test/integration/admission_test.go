package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The admission policies of dist/kubernetes/12-admission-policies.yaml, run
// by a real kube-apiserver, with the components' real ServiceAccount tokens
// (the node daemon's bound to a pod on its node, as the DaemonSet's are) and
// users impersonated by the test's administrator.

// admissionPolicies are the policies dist/kubernetes ships, by name.
var admissionPolicies = []string{"ovn-k8s-pod-networks", "ovn-k8s-node-annotations", "ovn-k8s-node-daemon-own-node", "ovn-k8s-tenant",
	"ovn-k8s-egress-assignable", "ovn-k8s-zone-master-own-node"}

// applyDistAccess applies the RBAC and the admission policies of
// dist/kubernetes and waits until every policy is in force.
func applyDistAccess(t *testing.T, kube *harness.KubeAPI, objs []*unstructured.Unstructured) {
	t.Helper()
	var access []*unstructured.Unstructured
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
			"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			access = append(access, o)
		}
	}
	applyObjects(t, kube, access, false)
	waitPoliciesInForce(t, kube)
}

// waitPoliciesInForce waits until each shipped policy refuses a probe
// request: policies take a moment to reach the admission plugin after they
// are created.
func waitPoliciesInForce(t *testing.T, kube *harness.KubeAPI) {
	t.Helper()
	ctx := context.Background()
	// A prober holding every RBAC permission the probes need, and none of
	// the policies' virtual ones; and the node daemon's ServiceAccount
	// without a node claim, in the prober's group (the Node probe is a
	// creation, which its own role does not allow).
	probe := "ovn-k8s-policy-probe"
	grantCluster(t, kube, probe, rbacv1.Subject{Kind: rbacv1.UserKind, Name: probe}, []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "nodes", "namespaces"}, Verbs: []string{"create"}},
	})
	bindCluster(t, kube, probe+"-group", probe, rbacv1.Subject{Kind: rbacv1.GroupKind, Name: probe})
	prober := impersonate(t, kube, probe)
	nodeSA := impersonate(t, kube, "system:serviceaccount:ovn-kubernetes:ovnkube-node", probe)
	zoneMasterSA := impersonate(t, kube, "system:serviceaccount:ovn-kubernetes:ovnkube-zone-master", probe)
	dry := metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	probes := map[string]func() error{
		"ovn-k8s-pod-networks": func() error {
			p := podSpec("default", "policy-probe", "")
			p.Annotations = map[string]string{annotations.PodNetworks: "{}"}
			_, err := prober.CoreV1().Pods("default").Create(ctx, p, dry)
			return err
		},
		"ovn-k8s-node-annotations": func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe-2", Annotations: map[string]string{annotations.NodeSubnets: "{}"}}}
			_, err := prober.CoreV1().Nodes().Create(ctx, n, dry)
			return err
		},
		"ovn-k8s-node-daemon-own-node": func() error {
			_, err := nodeSA.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe"}}, dry)
			return err
		},
		"ovn-k8s-tenant": func() error {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe", Annotations: map[string]string{policy.TenantAnnotation: "global"}}}
			_, err := prober.CoreV1().Namespaces().Create(ctx, ns, dry)
			return err
		},
		"ovn-k8s-zone-master-own-node": func() error {
			_, err := zoneMasterSA.CoreV1().Pods("default").Create(ctx, podSpec("default", "policy-probe", "n1"), dry)
			return err
		},
		"ovn-k8s-egress-assignable": func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "policy-probe-3", Labels: map[string]string{k8sovnv1.EgressAssignableLabel: ""}}}
			_, err := prober.CoreV1().Nodes().Create(ctx, n, dry)
			return err
		},
	}
	for _, name := range admissionPolicies {
		harness.Eventually(t, 30*time.Second, "policy "+name+" refusing its probe", func() error {
			err := probes[name]()
			if err == nil || !refusedBy(err, name) {
				return fmt.Errorf("probe answered %v", err)
			}
			return nil
		})
	}
}

// The shipped policies type-check against the API's schemas without a
// warning: a misspelt field would otherwise be an error at run time, which
// failurePolicy Fail turns into refusing every request the policy matches.
// The check is kube-controller-manager's (its policy status controller,
// alone here), as in a real cluster.
func TestAdmissionPoliciesTypeCheck(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyObjects(t, kube, distObjects(t), false)
	harness.Start(t, t.TempDir(), "kube-controller-manager", harness.Binary(t, "kube-controller-manager"),
		"--kubeconfig="+kube.Kubeconfig, "--leader-elect=false", "--secure-port=0",
		"--controllers=validatingadmissionpolicy-status-controller")
	for _, name := range admissionPolicies {
		harness.Eventually(t, 60*time.Second, "policy "+name+" type-checked", func() error {
			p, err := kube.Client.AdmissionregistrationV1().ValidatingAdmissionPolicies().Get(context.Background(), name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if p.Status.ObservedGeneration != p.Generation || p.Status.TypeChecking == nil {
				return fmt.Errorf("observed generation %d of %d", p.Status.ObservedGeneration, p.Generation)
			}
			for _, w := range p.Status.TypeChecking.ExpressionWarnings {
				t.Errorf("policy %s: type checking %s: %s", name, w.FieldRef, w.Warning)
			}
			return nil
		})
	}
}

// impersonate is a client of the test's administrator acting as user (in
// groups, and system:authenticated as every authenticated user is).
func impersonate(t *testing.T, kube *harness.KubeAPI, user string, groups ...string) kubernetes.Interface {
	t.Helper()
	cfg := rest.CopyConfig(kube.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append(groups, "system:authenticated")}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// tokenClient is a client presenting a ServiceAccount token.
func tokenClient(t *testing.T, kube *harness.KubeAPI, token string) kubernetes.Interface {
	t.Helper()
	cfg := &rest.Config{Host: kube.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	c, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serviceAccountToken is a token of the ServiceAccount, bound to ref (nil:
// bound to nothing, so it carries no node claim).
func serviceAccountToken(t *testing.T, kube *harness.KubeAPI, ns, sa string, ref *authenticationv1.BoundObjectReference) string {
	t.Helper()
	tr, err := kube.Client.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), sa, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600)), BoundObjectRef: ref}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// nodeDaemonToken is the token the kubelet of node gives the DaemonSet's
// pod there: the ovnkube-node ServiceAccount's, bound to a (host-network)
// pod on that node, so the API server adds the node claim
// authentication.kubernetes.io/node-name. The pod stays (deleting it would
// revoke the token).
func nodeDaemonToken(t *testing.T, kube *harness.KubeAPI, node string) string {
	t.Helper()
	return boundToken(t, kube, "ovnkube-node", node)
}

// boundToken is the token the kubelet of node gives a DaemonSet's pod
// there running as the ServiceAccount sa of ovn-kubernetes (nodeDaemonToken).
func boundToken(t *testing.T, kube *harness.KubeAPI, sa, node string) string {
	t.Helper()
	pod := podSpec("ovn-kubernetes", sa+"-"+node, node)
	pod.Spec.ServiceAccountName = sa
	pod.Spec.HostNetwork = true
	p, err := kube.Client.CoreV1().Pods("ovn-kubernetes").Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return serviceAccountToken(t, kube, "ovn-kubernetes", sa,
		&authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID})
}

// grantCluster binds subject to a ClusterRole called name with rules.
func grantCluster(t *testing.T, kube *harness.KubeAPI, name string, subject rbacv1.Subject, rules []rbacv1.PolicyRule) {
	t.Helper()
	ctx := context.Background()
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}
	if _, err := kube.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	bindCluster(t, kube, name, name, subject)
}

func bindCluster(t *testing.T, kube *harness.KubeAPI, name, role string, subject rbacv1.Subject) {
	t.Helper()
	b := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
		Subjects: []rbacv1.Subject{subject}}
	if _, err := kube.Client.RbacV1().ClusterRoleBindings().Create(context.Background(), b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func user(name string) rbacv1.Subject { return rbacv1.Subject{Kind: rbacv1.UserKind, Name: name} }

// annotationPatch is a merge patch setting each annotation (nil value: removing it).
func annotationPatch(values map[string]*string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
	return b
}

// write is one request and what must come of it: refused by the named
// policy with a message containing every want, or accepted (policy "").
type write struct {
	what   string
	do     func() error
	policy string
	want   []string
}

func checkWrites(t *testing.T, writes []write) {
	t.Helper()
	for _, w := range writes {
		err := w.do()
		switch {
		case w.policy == "" && err != nil:
			t.Errorf("%s: refused, want accepted: %v", w.what, err)
		case w.policy == "":
		case err == nil:
			t.Errorf("%s: accepted, want refused by %s", w.what, w.policy)
		case !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err):
			t.Errorf("%s: %v, want refused by %s", w.what, err, w.policy)
		case !refusedBy(err, w.policy):
			t.Errorf("%s: refused, but not by %s: %v", w.what, w.policy, err)
		default:
			for _, s := range w.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("%s: refusal %q does not say %q", w.what, err, s)
				}
			}
		}
	}
}

// refusedBy says whether err is the refusal of one of the policies named
// in names ("a|b").
func refusedBy(err error, names string) bool {
	for _, n := range strings.Split(names, "|") {
		if strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+n+"'") {
			return true
		}
	}
	return false
}

func s(v string) *string { return &v }

// Only the master's identity sets, changes or removes a pod's
// k8s.ovn.org/pod-networks (issue 31, item 5): the pod's owner cannot by
// creating the pod with it, patching it, patching the pod's status, or
// binding the pod with it; the master's ServiceAccount can, and the owner's
// other writes go through.
func TestAdmissionPodNetworks(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyDistAccess(t, kube, distObjects(t))
	ctx := context.Background()
	ns := "tenant-a"
	kube.EnsureNamespace(t, ns)
	// alice owns the namespace's pods, and may also write their status and
	// bindings: every way to a pod's annotations.
	grantCluster(t, kube, "pod-owner", user("alice"), []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"create", "get", "patch", "update", "delete"}},
		{APIGroups: []string{""}, Resources: []string{"pods/status", "pods/binding"}, Verbs: []string{"create", "patch", "update"}}})
	alice := impersonate(t, kube, "alice")
	master := tokenClient(t, kube, serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-master", nil))
	pods := func(c kubernetes.Interface) func(name string, patch []byte, sub ...string) func() error {
		return func(name string, patch []byte, sub ...string) func() error {
			return func() error {
				_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}, sub...)
				return err
			}
		}
	}
	asAlice, asMaster := pods(alice), pods(master)
	a1 := `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","pod_uid":"x"}}`
	a2 := `{"default":{"ip_addresses":["10.244.1.9/24"],"mac_address":"0a:58:0a:f4:01:09","pod_uid":"x"}}`
	for _, name := range []string{"p1", "p2"} {
		if _, err := kube.Client.CoreV1().Pods(ns).Create(ctx, podSpec(ns, name, ""), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	const pn, refusal = annotations.PodNetworks, "is written only by the ovn-k8s master"
	checkWrites(t, []write{
		{"the owner creating a pod with the annotation", func() error {
			p := podSpec(ns, "forged", "")
			p.Annotations = map[string]string{pn: a1}
			_, err := alice.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
			return err
		}, "ovn-k8s-pod-networks", []string{pn, refusal, "alice may not set it"}},
		{"the owner creating a pod without it", func() error {
			_, err := alice.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "plain", ""), metav1.CreateOptions{})
			return err
		}, "", nil},
		{"the owner adding it to a running pod", asAlice("p1", annotationPatch(map[string]*string{pn: s(a1)})), "ovn-k8s-pod-networks", []string{"alice may not set it"}},
		{"the master adding it", asMaster("p1", annotationPatch(map[string]*string{pn: s(a1)})), "", nil},
		{"the owner changing it", asAlice("p1", annotationPatch(map[string]*string{pn: s(a2)})), "ovn-k8s-pod-networks", []string{"alice may not change it"}},
		{"the owner changing it through the pod's status", asAlice("p1", annotationPatch(map[string]*string{pn: s(a2)}), "status"), "ovn-k8s-pod-networks", []string{"may not change it"}},
		{"the owner removing it", asAlice("p1", annotationPatch(map[string]*string{pn: nil})), "ovn-k8s-pod-networks", []string{"alice may not remove it"}},
		{"the owner writing the pod's other annotations and labels", asAlice("p1", []byte(`{"metadata":{"labels":{"app":"x"},"annotations":{"note":"y"}}}`)), "", nil},
		{"the owner binding a pod with the annotation", func() error {
			b := &corev1.Binding{ObjectMeta: metav1.ObjectMeta{Name: "p2", Namespace: ns, Annotations: map[string]string{pn: a1}},
				Target: corev1.ObjectReference{Kind: "Node", Name: "n1"}}
			return alice.CoreV1().Pods(ns).Bind(ctx, b, metav1.CreateOptions{})
		}, "ovn-k8s-pod-networks", []string{"alice may not set it"}},
		{"the master changing it", asMaster("p1", annotationPatch(map[string]*string{pn: s(a2)})), "", nil},
		{"the master removing it", asMaster("p1", annotationPatch(map[string]*string{pn: nil})), "", nil},
	})
	p2, err := kube.Client.CoreV1().Pods(ns).Get(ctx, "p2", metav1.GetOptions{})
	if err != nil || p2.Spec.NodeName != "" || p2.Annotations[pn] != "" {
		t.Errorf("p2 after a refused binding: node %q, annotation %q (%v); want neither", p2.Spec.NodeName, p2.Annotations[pn], err)
	}
}

// A node daemon writes only its own Node, and of the k8s.ovn.org
// annotations only the node's own (chassis, management port MAC, gateway
// config); only the master writes what it allocates (subnets, gateway join
// address) (issue 31, item 6).
func TestAdmissionNodeAnnotations(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyDistAccess(t, kube, distObjects(t))
	ctx := context.Background()
	for _, n := range []string{"n1", "n2"} {
		if _, err := kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	n1Daemon := tokenClient(t, kube, nodeDaemonToken(t, kube, "n1"))
	// The claim the policies read, as the API server presents it.
	review, err := n1Daemon.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if u := review.Status.UserInfo; u.Username != "system:serviceaccount:ovn-kubernetes:ovnkube-node" ||
		fmt.Sprint(u.Extra["authentication.kubernetes.io/node-name"]) != "[n1]" {
		t.Fatalf("the DaemonSet pod's token on n1 authenticates as %s with extra %v; want ovnkube-node with node-name [n1]", u.Username, u.Extra)
	}
	// The same ServiceAccount's token bound to nothing (no node claim), and
	// one bound to the Node n1 (how a node daemon outside a pod gets one:
	// kubectl create token --bound-object-kind Node).
	unbound := tokenClient(t, kube, serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-node", nil))
	n1obj, err := kube.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	n1Bound := tokenClient(t, kube, serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-node",
		&authenticationv1.BoundObjectReference{Kind: "Node", APIVersion: "v1", Name: "n1", UID: n1obj.UID}))
	master := tokenClient(t, kube, serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-master", nil))
	// Another pod's ServiceAccount on n1 that may patch Nodes: the node
	// claim alone is not the node daemon's permission.
	kube.EnsureNamespace(t, "monitoring")
	if _, err := kube.Client.CoreV1().ServiceAccounts("monitoring").Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "agent"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	grantCluster(t, kube, "node-patcher", rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "agent", Namespace: "monitoring"},
		[]rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "create", "patch"}}})
	bindCluster(t, kube, "node-patcher-carol", "node-patcher", user("carol"))
	agentPod := podSpec("monitoring", "agent", "n1")
	agentPod.Spec.ServiceAccountName = "agent"
	ap, err := kube.Client.CoreV1().Pods("monitoring").Create(ctx, agentPod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agent := tokenClient(t, kube, serviceAccountToken(t, kube, "monitoring", "agent", &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: ap.Name, UID: ap.UID}))
	carol := impersonate(t, kube, "carol")

	patch := func(c kubernetes.Interface, node string, body []byte, sub ...string) func() error {
		return func() error {
			_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}, sub...)
			return err
		}
	}
	ann := func(k, v string) []byte { return annotationPatch(map[string]*string{k: s(v)}) }
	const (
		byMaster   = "is written only by the ovn-k8s master"
		byDaemon   = "is written only by the node daemon of"
		ownNode    = "ovn-k8s-node-daemon-own-node"
		annPolicy  = "ovn-k8s-node-annotations"
		nodeDaemon = "system:serviceaccount:ovn-kubernetes:ovnkube-node"
	)
	gw := `{"default":{"mode":"shared","interface-id":"breth0_n1","mac-address":"0a:00:00:00:00:01","ip-addresses":["172.18.0.2/24"],"next-hops":["172.18.0.1"],"node-port-enable":"true"}}`
	register := func(name string, ann map[string]string) func() error {
		return func() error {
			n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}
			_, err := carol.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
			return err
		}
	}
	// Where two policies refuse a request, either may be the one reported.
	const both = annPolicy + "|" + ownNode
	checkWrites(t, []write{
		// The node daemon on its own Node.
		{"the node daemon of n1 writing n1's chassis, management port MAC and gateway", patch(n1Daemon, "n1", annotationPatch(map[string]*string{
			annotations.NodeChassisID: s("c-n1"), annotations.NodeMgmtPortMAC: s("0a:58:0a:f4:01:02"), annotations.NodeL3GatewayConfig: s(gw)})), "", nil},
		{"the node daemon of n1 removing n1's gateway", patch(n1Daemon, "n1", annotationPatch(map[string]*string{annotations.NodeL3GatewayConfig: nil})), "", nil},
		{"the node daemon of n1 writing n1's zone", patch(n1Daemon, "n1", ann(annotations.NodeZone, "zone-n1")), "", nil},
		{"the node daemon of n1 writing n1's labels", patch(n1Daemon, "n1", []byte(`{"metadata":{"labels":{"x":"y"}}}`)), "", nil},
		{"the node daemon of n1 writing n1's subnet", patch(n1Daemon, "n1", ann(annotations.NodeSubnets, `{"default":"10.244.9.0/24"}`)), annPolicy,
			[]string{annotations.NodeSubnets + " of Node n1 " + byMaster, nodeDaemon + " may not write it"}},
		{"the node daemon of n1 writing n1's gateway join address", patch(n1Daemon, "n1", ann(annotations.NodeGatewayJoinIP, `{"ipv4":"100.64.0.9/16"}`)), annPolicy,
			[]string{annotations.NodeGatewayJoinIP, byMaster}},
		// ... and on another.
		{"the node daemon of n1 writing n2's labels", patch(n1Daemon, "n2", []byte(`{"metadata":{"labels":{"x":"y"}}}`)), ownNode,
			[]string{"the node daemon of n1 may write only its own Node, not Node n2"}},
		{"the node daemon of n1 writing n2's chassis", patch(n1Daemon, "n2", ann(annotations.NodeChassisID, "c-n1")), both, nil},
		{"the node daemon of n1 moving n2 to its zone", patch(n1Daemon, "n2", ann(annotations.NodeZone, "zone-n1")), both, nil},
		// The node daemon's ServiceAccount with no node claim, or bound to the Node.
		{"the node daemon's ServiceAccount with no node claim writing n1's labels", patch(unbound, "n1", []byte(`{"metadata":{"labels":{"x":"z"}}}`)), ownNode,
			[]string{"this token has no node claim", "may not write Node n1"}},
		{"the node daemon's ServiceAccount with no node claim writing n1's chassis", patch(unbound, "n1", ann(annotations.NodeChassisID, "c-x")), both, nil},
		{"a token of the node daemon's ServiceAccount bound to Node n1 writing n1's chassis", patch(n1Bound, "n1", ann(annotations.NodeChassisID, "c-n1b")), "", nil},
		{"a token of the node daemon's ServiceAccount bound to Node n1 writing n2's chassis", patch(n1Bound, "n2", ann(annotations.NodeChassisID, "c-n1b")), both, nil},
		// Others who may patch Nodes.
		{"another pod's ServiceAccount on n1 writing n1's chassis", patch(agent, "n1", ann(annotations.NodeChassisID, "c-agent")), annPolicy,
			[]string{annotations.NodeChassisID + " of Node n1 " + byDaemon + " n1", "system:serviceaccount:monitoring:agent of node n1 may not write it"}},
		{"a user who may patch Nodes writing n1's chassis", patch(carol, "n1", ann(annotations.NodeChassisID, "c-carol")), annPolicy,
			[]string{"carol, with no node claim, may not write it"}},
		{"a user who may patch Nodes moving n1 to another zone", patch(carol, "n1", ann(annotations.NodeZone, "zone-carol")), annPolicy,
			[]string{annotations.NodeZone + " of Node n1 " + byDaemon + " n1", "carol, with no node claim, may not write it"}},
		{"a user who may patch Nodes writing n1's gateway through its status", patch(carol, "n1", ann(annotations.NodeL3GatewayConfig, gw), "status"), annPolicy, nil},
		{"a user who may patch Nodes writing n2's subnet", patch(carol, "n2", ann(annotations.NodeSubnets, `{"default":"10.244.9.0/24"}`)), annPolicy,
			[]string{byMaster, "carol may not write it"}},
		{"a user who may patch Nodes writing n2's labels", patch(carol, "n2", []byte(`{"metadata":{"labels":{"x":"y"}}}`)), "", nil},
		{"a user who may create Nodes registering one with a subnet", register("n3", map[string]string{annotations.NodeSubnets: `{"default":"10.244.3.0/24"}`}), annPolicy,
			[]string{annotations.NodeSubnets + " of Node n3 " + byMaster}},
		{"a user who may create Nodes registering one with a chassis", register("n3", map[string]string{annotations.NodeChassisID: "c-n3"}), annPolicy,
			[]string{annotations.NodeChassisID + " of Node n3 " + byDaemon}},
		{"a user who may create Nodes registering one without them", register("n3", map[string]string{"other": "x"}), "", nil},
		// The master.
		{"the master writing n1's subnet and gateway join address", patch(master, "n1", annotationPatch(map[string]*string{
			annotations.NodeSubnets: s(`{"default":"10.244.1.0/24"}`), annotations.NodeGatewayJoinIP: s(`{"ipv4":"100.64.0.2/16"}`)})), "", nil},
		{"the master removing n1's gateway join address", patch(master, "n1", annotationPatch(map[string]*string{annotations.NodeGatewayJoinIP: nil})), "", nil},
		{"the master writing n1's chassis", patch(master, "n1", ann(annotations.NodeChassisID, "c-master")), annPolicy,
			[]string{byDaemon, "system:serviceaccount:ovn-kubernetes:ovnkube-master, with no node claim, may not write it"}},
		// A cluster administrator.
		{"the administrator writing n2's chassis and subnet", patch(kube.Client, "n2", annotationPatch(map[string]*string{
			annotations.NodeChassisID: s("c-admin"), annotations.NodeSubnets: s(`{"default":"10.244.2.0/24"}`)})), "", nil},
	})
	n1obj, err = kube.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := n1obj.Annotations[annotations.NodeChassisID]; got != "c-n1b" {
		t.Errorf("n1's chassis is %q, want c-n1b (the last accepted write)", got)
	}
}

// Zone mode's zone master (14-rbac-zone-master.yaml) runs on every node, so
// its token is on every node's host: with it, a node writes the pod-networks
// of its own pods and its own Node's gateway join address, and nothing of
// another node: not its pods' addresses or labels, not its Node, not even
// its own host subnet (the cluster manager's). The token without a node
// claim writes nothing.
func TestAdmissionZoneMaster(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyDistAccess(t, kube, distObjects(t))
	ctx := context.Background()
	const ns = "tenant-a"
	kube.EnsureNamespace(t, ns)
	for _, n := range []string{"n1", "n2"} {
		if _, err := kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: n}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := kube.Client.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "pod-"+n, n), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := kube.Client.CoreV1().Pods(ns).Create(ctx, podSpec(ns, "pending", ""), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	n1Master := tokenClient(t, kube, boundToken(t, kube, "ovnkube-zone-master", "n1"))
	unbound := tokenClient(t, kube, serviceAccountToken(t, kube, "ovn-kubernetes", "ovnkube-zone-master", nil))
	pod := func(c kubernetes.Interface, name string, body []byte) func() error {
		return func() error {
			_, err := c.CoreV1().Pods(ns).Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			return err
		}
	}
	node := func(c kubernetes.Interface, name string, body []byte) func() error {
		return func() error {
			_, err := c.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			return err
		}
	}
	ann := func(k, v string) []byte { return annotationPatch(map[string]*string{k: s(v)}) }
	const (
		pn       = annotations.PodNetworks
		a1       = `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","pod_uid":"x"}}`
		podsOwn  = "ovn-k8s-zone-master-own-node"
		podNets  = "ovn-k8s-pod-networks"
		nodesOwn = "ovn-k8s-node-daemon-own-node"
		nodeAnn  = "ovn-k8s-node-annotations"
		join     = `{"ipv4":"100.64.0.2/16"}`
		zm       = "system:serviceaccount:ovn-kubernetes:ovnkube-zone-master"
	)
	checkWrites(t, []write{
		{"the zone master of n1 setting the address of a pod on n1", pod(n1Master, "pod-n1", ann(pn, a1)), "", nil},
		{"the zone master of n1 removing it", pod(n1Master, "pod-n1", annotationPatch(map[string]*string{pn: nil})), "", nil},
		{"the zone master of n1 setting the address of a pod on n2", pod(n1Master, "pod-n2", ann(pn, a1)), podsOwn + "|" + podNets, nil},
		{"the zone master of n1 setting the address of a pod on no node", pod(n1Master, "pending", ann(pn, a1)), podsOwn + "|" + podNets, nil},
		{"the zone master of n1 relabelling a pod on n2", pod(n1Master, "pod-n2", []byte(`{"metadata":{"labels":{"app":"web"}}}`)), podsOwn,
			[]string{"the zone master of n1 may write only pods on its own node, not pod " + ns + "/pod-n2"}},
		{"the zone master of n1 writing n1's gateway join address", node(n1Master, "n1", ann(annotations.NodeGatewayJoinIP, join)), "", nil},
		{"the zone master of n1 writing n2's gateway join address", node(n1Master, "n2", ann(annotations.NodeGatewayJoinIP, join)), nodesOwn + "|" + nodeAnn, nil},
		{"the zone master of n1 writing n2's labels", node(n1Master, "n2", []byte(`{"metadata":{"labels":{"x":"y"}}}`)), nodesOwn,
			[]string{"the zone master of n1 may write only its own Node, not Node n2"}},
		{"the zone master of n1 writing n1's host subnet", node(n1Master, "n1", ann(annotations.NodeSubnets, `{"default":"10.244.2.0/24"}`)), nodeAnn,
			[]string{annotations.NodeSubnets + " of Node n1 is written only by the ovn-k8s master", zm + " may not write it (its token is bound to node n1)"}},
		{"the zone master's ServiceAccount with no node claim setting a pod's address", pod(unbound, "pod-n1", ann(pn, a1)), podsOwn + "|" + podNets, nil},
		{"the zone master's ServiceAccount with no node claim writing n1's gateway join address", node(unbound, "n1", ann(annotations.NodeGatewayJoinIP, join)), nodesOwn + "|" + nodeAnn, nil},
	})
}

// k8s.ovn.org/tenant (namespace isolation: joining another tenant or going
// global) is set, changed or removed only by a cluster administrator (issue
// 31, item 3): whoever holds update on tenants.k8s.ovn.org,
// as cluster-admin does.
func TestAdmissionTenantAnnotation(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyDistAccess(t, kube, distObjects(t))
	ctx := context.Background()
	// dave manages namespaces (creates and edits them) but is no cluster
	// administrator; erin is one (bound to the built-in cluster-admin, not
	// system:masters); frank was granted the tenant permission alone.
	grantCluster(t, kube, "namespace-manager", user("dave"), []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"create", "get", "patch", "update"}}})
	bindCluster(t, kube, "namespace-manager-frank", "namespace-manager", user("frank"))
	bindCluster(t, kube, "erin-cluster-admin", "cluster-admin", user("erin"))
	grantCluster(t, kube, "tenant-setter", user("frank"), []rbacv1.PolicyRule{
		{APIGroups: []string{"k8s.ovn.org"}, Resources: []string{"tenants"}, Verbs: []string{"update"}}})
	dave, erin, frank := impersonate(t, kube, "dave"), impersonate(t, kube, "erin"), impersonate(t, kube, "frank")
	create := func(c kubernetes.Interface, name string, ann map[string]string) func() error {
		return func() error {
			_, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann}}, metav1.CreateOptions{})
			return err
		}
	}
	patch := func(c kubernetes.Interface, name string, body []byte) func() error {
		return func() error {
			_, err := c.CoreV1().Namespaces().Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
			return err
		}
	}
	const tenant, p, refusal = policy.TenantAnnotation, "ovn-k8s-tenant", "is set only by a cluster administrator"
	set := func(v string) []byte { return annotationPatch(map[string]*string{tenant: s(v)}) }
	checkWrites(t, []write{
		{"a namespace manager creating a global namespace", create(dave, "a", map[string]string{tenant: "global"}), p,
			[]string{tenant, refusal, "dave may not set it on namespace a"}},
		{"a namespace manager creating a namespace", create(dave, "a", nil), "", nil},
		{"a namespace manager creating another", create(dave, "b", nil), "", nil},
		{"a namespace manager joining it to another tenant", patch(dave, "a", set("join:b")), p, []string{"dave may not set it"}},
		{"a namespace manager making it global", patch(dave, "a", set("global")), p, nil},
		{"a namespace manager isolating it explicitly", patch(dave, "a", set("isolate")), p, nil},
		{"a namespace manager labelling it", patch(dave, "a", []byte(`{"metadata":{"labels":{"team":"x"},"annotations":{"note":"y"}}}`)), "", nil},
		{"a cluster administrator joining it to b", patch(erin, "a", set("join:b")), "", nil},
		{"a namespace manager changing the join", patch(dave, "a", set("join:kube-system")), p, []string{"dave may not change it"}},
		{"a namespace manager removing the join", patch(dave, "a", annotationPatch(map[string]*string{tenant: nil})), p, []string{"dave may not remove it"}},
		{"a namespace manager relabelling the joined namespace", patch(dave, "a", []byte(`{"metadata":{"labels":{"team":"z"}}}`)), "", nil},
		{"a user granted the tenant permission making b global", patch(frank, "b", set("global")), "", nil},
		{"a user granted the tenant permission creating a joined namespace", create(frank, "c", map[string]string{tenant: "join:b"}), "", nil},
		{"system:masters removing the join", patch(kube.Client, "a", annotationPatch(map[string]*string{tenant: nil})), "", nil},
	})
	for ns, want := range map[string]string{"a": "", "b": "global", "c": "join:b"} {
		got, err := kube.Client.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Annotations[tenant] != want {
			t.Errorf("namespace %s: tenant %q, want %q", ns, got.Annotations[tenant], want)
		}
	}
}

// labelPatch is a merge patch setting each label (nil value: removing it).
func labelPatch(values map[string]*string) []byte {
	b, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": values}})
	return b
}

// k8s.ovn.org/egress-assignable, which makes a Node a candidate to carry
// other tenants' egress traffic (EgressIP), is set, changed or removed only
// by a cluster administrator (whoever holds update on
// egressnodes.k8s.ovn.org, as cluster-admin does): never by the node's own
// identity, its kubelet (system:node:n1, group system:nodes) or its node
// daemon (its DaemonSet pod's token), on its own Node or another, through
// the Node, its status or its registration. Everything else they wrote
// before they still write: the kubelet its Node's other labels and status
// (its updates carrying the label unchanged), the node daemon its labels
// and annotations.
func TestAdmissionEgressAssignable(t *testing.T) {
	kube := harness.StartKubeAPI(t)
	applyDistAccess(t, kube, distObjects(t))
	ctx := context.Background()
	const label = k8sovnv1.EgressAssignableLabel
	for _, n := range []*corev1.Node{
		{ObjectMeta: metav1.ObjectMeta{Name: "n1"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2", Labels: map[string]string{label: ""}}},
	} {
		if _, err := kube.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Kubelets: the test's API server authorizes with RBAC alone, so the
	// group system:nodes is bound to the role system:node, which grants
	// what the Node authorizer grants a kubelet on its Node (and here on
	// every Node: no NodeRestriction either).
	bindCluster(t, kube, "kubelets", "system:node", rbacv1.Subject{Kind: rbacv1.GroupKind, Name: "system:nodes"})
	kubelet := func(node string) kubernetes.Interface {
		return impersonate(t, kube, "system:node:"+node, "system:nodes")
	}
	kubeletN1 := kubelet("n1")
	n1Daemon := tokenClient(t, kube, nodeDaemonToken(t, kube, "n1"))
	// carol may patch Nodes (and nothing of k8s.ovn.org); erin is a cluster
	// administrator (the built-in cluster-admin); frank may patch Nodes and
	// was granted the label alone.
	grantCluster(t, kube, "node-patcher", user("carol"), []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"nodes", "nodes/status"}, Verbs: []string{"get", "patch"}}})
	bindCluster(t, kube, "node-patcher-frank", "node-patcher", user("frank"))
	grantCluster(t, kube, "egress-node-labeller", user("frank"), []rbacv1.PolicyRule{
		{APIGroups: []string{"k8s.ovn.org"}, Resources: []string{"egressnodes"}, Verbs: []string{"update"}}})
	bindCluster(t, kube, "erin-cluster-admin", "cluster-admin", user("erin"))
	carol, erin, frank := impersonate(t, kube, "carol"), impersonate(t, kube, "erin"), impersonate(t, kube, "frank")

	patch := func(c kubernetes.Interface, node string, body []byte, sub ...string) func() error {
		return func() error {
			_, err := c.CoreV1().Nodes().Patch(ctx, node, types.MergePatchType, body, metav1.PatchOptions{}, sub...)
			return err
		}
	}
	setLabel := func(v string) []byte { return labelPatch(map[string]*string{label: s(v)}) }
	removeLabel := labelPatch(map[string]*string{label: nil})
	otherLabels := labelPatch(map[string]*string{"node.kubernetes.io/instance-type": s("m1"), "topology.kubernetes.io/zone": s("a")})
	register := func(c kubernetes.Interface, name string, labels map[string]string) func() error {
		return func() error {
			_, err := c.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}, metav1.CreateOptions{})
			return err
		}
	}
	// The kubelet's full writes of its Node: the object as it is, one
	// label changed (update), or its conditions (status): the egress label,
	// when there, carried unchanged.
	kubeletUpdate := func(status bool) func() error {
		return func() error {
			n, err := kubeletN1.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if status {
				n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady",
					LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
				_, err = kubeletN1.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
				return err
			}
			n.Labels["kubernetes.io/os"] = "linux"
			_, err = kubeletN1.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
			return err
		}
	}
	const (
		p        = "ovn-k8s-egress-assignable"
		refusal  = label + " is set only by a cluster administrator"
		kubelet1 = "system:node:n1"
		daemon   = "system:serviceaccount:ovn-kubernetes:ovnkube-node"
		// the node daemon on another Node: refused by either policy
		both = p + "|ovn-k8s-node-daemon-own-node"
	)
	checkWrites(t, []write{
		// n1 without the label: its identities cannot add it.
		{"the kubelet of n1 labelling n1", patch(kubeletN1, "n1", setLabel("")), p, []string{refusal, kubelet1 + " may not set it on Node n1"}},
		{"the kubelet of n1 labelling n1 through its status", patch(kubeletN1, "n1", setLabel(""), "status"), p, []string{kubelet1 + " may not set it"}},
		{"the node daemon of n1 labelling n1", patch(n1Daemon, "n1", setLabel("")), p, []string{refusal, daemon + " may not set it on Node n1"}},
		{"a kubelet registering its Node with the label", register(kubelet("n3"), "n3", map[string]string{label: "", "kubernetes.io/hostname": "n3"}), p,
			[]string{"system:node:n3 may not set it on Node n3"}},
		{"a user who may patch Nodes labelling n1", patch(carol, "n1", setLabel("")), p, []string{"carol may not set it"}},
		// ... while what they wrote before still goes through.
		{"a kubelet registering its Node with its labels", register(kubelet("n3"), "n3", map[string]string{"kubernetes.io/hostname": "n3", "kubernetes.io/os": "linux"}), "", nil},
		{"the kubelet of n1 writing n1's other labels", patch(kubeletN1, "n1", otherLabels), "", nil},
		{"the kubelet of n1 writing n1's other labels through its status", patch(kubeletN1, "n1", labelPatch(map[string]*string{"topology.kubernetes.io/zone": s("b")}), "status"), "", nil},
		{"the node daemon of n1 writing n1's other labels", patch(n1Daemon, "n1", labelPatch(map[string]*string{"x": s("y")})), "", nil},
		{"a user who may patch Nodes writing n1's other labels", patch(carol, "n1", labelPatch(map[string]*string{"team": s("net")})), "", nil},
		// A cluster administrator labels n1.
		{"a cluster administrator labelling n1", patch(erin, "n1", setLabel("")), "", nil},
		// Labelled, n1's identities cannot change or remove it ...
		{"the kubelet of n1 changing n1's label", patch(kubeletN1, "n1", setLabel("true")), p, []string{kubelet1 + " may not change it on Node n1"}},
		{"the kubelet of n1 removing n1's label", patch(kubeletN1, "n1", removeLabel), p, []string{kubelet1 + " may not remove it on Node n1"}},
		{"the kubelet of n1 removing n1's label through its status", patch(kubeletN1, "n1", removeLabel, "status"), p, []string{"may not remove it"}},
		{"the node daemon of n1 changing n1's label", patch(n1Daemon, "n1", setLabel("true")), p, []string{daemon + " may not change it"}},
		{"the node daemon of n1 removing n1's label", patch(n1Daemon, "n1", removeLabel), p, []string{daemon + " may not remove it"}},
		{"a user who may patch Nodes removing n1's label", patch(carol, "n1", removeLabel), p, []string{"carol may not remove it"}},
		// ... nor n2's.
		{"the kubelet of n1 removing n2's label", patch(kubeletN1, "n2", removeLabel), p, []string{kubelet1 + " may not remove it on Node n2"}},
		{"the kubelet of n1 changing n2's label", patch(kubeletN1, "n2", setLabel("x")), p, nil},
		{"the node daemon of n1 removing n2's label", patch(n1Daemon, "n2", removeLabel), both, nil},
		{"the node daemon of n1 changing n2's label", patch(n1Daemon, "n2", setLabel("x")), both, nil},
		{"the kubelet of n1 labelling n3", patch(kubeletN1, "n3", setLabel("")), p, nil},
		// ... and their other writes, the label carried as it is, go through.
		{"the kubelet of n1 writing n1's other labels, labelled", patch(kubeletN1, "n1", otherLabels), "", nil},
		{"the kubelet of n1 updating n1 whole, labelled", kubeletUpdate(false), "", nil},
		{"the kubelet of n1 updating n1's status whole, labelled", kubeletUpdate(true), "", nil},
		{"the node daemon of n1 writing n1's chassis and labels, labelled", patch(n1Daemon, "n1",
			[]byte(`{"metadata":{"labels":{"x":"z"},"annotations":{"`+annotations.NodeChassisID+`":"c-n1"}}}`)), "", nil},
		// Administrators change and remove it.
		{"a user granted update on egressnodes changing n2's label", patch(frank, "n2", setLabel("true")), "", nil},
		{"a user granted update on egressnodes labelling n3", patch(frank, "n3", setLabel("")), "", nil},
		{"a cluster administrator removing n2's label", patch(erin, "n2", removeLabel), "", nil},
		{"system:masters changing n1's label", patch(kube.Client, "n1", setLabel("yes")), "", nil},
	})
	for node, want := range map[string]string{"n1": "yes", "n2": "-", "n3": ""} {
		n, err := kube.Client.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, ok := n.Labels[label]
		if !ok {
			got = "-"
		}
		if got != want {
			t.Errorf("Node %s: label %q, want %q (- for none)", node, got, want)
		}
	}
	n1, err := kube.Client.CoreV1().Nodes().Get(ctx, "n1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n1.Labels["kubernetes.io/os"] != "linux" || n1.Labels["x"] != "z" || n1.Labels["topology.kubernetes.io/zone"] != "a" || len(n1.Status.Conditions) != 1 {
		t.Errorf("n1 after its kubelet's and node daemon's writes: labels %v, conditions %v", n1.Labels, n1.Status.Conditions)
	}
}
