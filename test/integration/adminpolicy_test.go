package integration

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// installAdminCRDs installs the CRDs dist/kubernetes ships (the admin
// policy kinds', EgressFirewall's) and returns a client of the admin
// policy API.
func (c *cluster) installAdminCRDs() npclient.Interface { return c.kube.InstallCRDs(c.t) }

func cnp(name string, tier cnpv1alpha2.Tier, priority int32, subject cnpv1alpha2.ClusterNetworkPolicySubject) *cnpv1alpha2.ClusterNetworkPolicy {
	return &cnpv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: cnpv1alpha2.ClusterNetworkPolicySpec{Tier: tier, Priority: priority, Subject: subject}}
}

func cnpIngress(action cnpv1alpha2.ClusterNetworkPolicyRuleAction, from *metav1.LabelSelector, tcpPort int32) cnpv1alpha2.ClusterNetworkPolicyIngressRule {
	r := cnpv1alpha2.ClusterNetworkPolicyIngressRule{Action: action, From: []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: from}}}
	if tcpPort != 0 {
		r.Protocols = []cnpv1alpha2.ClusterNetworkPolicyProtocol{{TCP: &cnpv1alpha2.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1alpha2.Port{Number: tcpPort}}}}
	}
	return r
}

// cnpCondition waits for a CNP's Ready condition to have this reason.
func (c *cluster) cnpCondition(np npclient.Interface, name, reason string) {
	c.t.Helper()
	harness.Eventually(c.t, 20*time.Second, "CNP "+name+" condition "+reason, func() error {
		o, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Get(c.ctx(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cond := meta.FindStatusCondition(o.Status.Conditions, policy.ConditionReady)
		if cond == nil || cond.Reason != reason || cond.ObservedGeneration != o.Generation {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
}

// leaves says whether a flow leaves its pod's switch for the cluster
// router (its egress ACLs let it out).
func (tr *tracer) leaves(f flow) (bool, string) {
	_, out := tr.trace(f)
	return strings.Contains(out, fmt.Sprintf(`output to "%s"`, topology.NodeSwitchToRouterPort(f.from.node))), out
}

// TestOVNTraceAdminTiers checks the tiers' interplay in the logical flows
// northd generated in the real SB from ClusterNetworkPolicies,
// AdminNetworkPolicies, a BaselineAdminNetworkPolicy and NetworkPolicies:
// an Admin Deny over a NetworkPolicy allow, an Admin Pass handing the
// decision to NetworkPolicy, a Baseline Deny when no NetworkPolicy selects
// the pod, a NetworkPolicy overriding the Baseline, node and CIDR egress
// peers, a priority collision and the status conditions. On an NB without
// ACL tiers the policies are refused with a condition and change nothing.
func TestOVNTraceAdminTiers(t *testing.T) {
	c := newCluster(t)
	np := c.installAdminCRDs()
	c.startMaster()
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", map[string]string{"tenant": "a"})
	c.namespace("b", map[string]string{"tenant": "b"})
	c.createPod("a", "server", "n2", withLabels("app", "server"))
	c.createPod("a", "plain", "n2", withLabels("app", "plain"))
	c.createPod("b", "client", "n1", withLabels("app", "client"))
	pods := c.tracePods([3]string{"a", "server", "n2"}, [3]string{"a", "plain", "n2"}, [3]string{"b", "client", "n1"})
	tr := newTracer(c, pods)
	tcp := corev1.ProtocolTCP
	// NetworkPolicy: a/server takes tenant b on 8080 and 9090.
	c.createPolicy("a", "server", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "server"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("tenant", "b")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(8080))}, {Protocol: &tcp, Port: ptr(intstr.FromInt32(9090))}}}}})
	tr.expect("NetworkPolicy alone: client → server:8080 allowed", tr.to("client", "server", 8080), true)
	tr.expect("NetworkPolicy alone: client → server:7070 dropped", tr.to("client", "server", 7070), false)

	// Admin Deny over the NetworkPolicy's allow.
	aTenant := cnpv1alpha2.ClusterNetworkPolicySubject{Pods: &cnpv1alpha2.NamespacedPod{NamespaceSelector: *sel("tenant", "a"), PodSelector: *sel("app", "server")}}
	deny := cnp("deny-b", cnpv1alpha2.AdminTier, 20, aTenant)
	deny.Spec.Ingress = []cnpv1alpha2.ClusterNetworkPolicyIngressRule{cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, sel("tenant", "b"), 0)}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), deny, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if !ovndb.HasACLTiers(c.nb) {
		// An NB without ACL tiers (OVN 23.03): the policy says so in its
		// status, and nothing else changes.
		c.cnpCondition(np, "deny-b", policy.ReasonNoTiers)
		tr.expect("no tiers: the NetworkPolicy still decides: client → server:8080 allowed", tr.to("client", "server", 8080), true)
		if pgs := c.adminPortGroups(); len(pgs) != 0 {
			t.Errorf("admin port groups on an NB without tiers: %v", pgs)
		}
		return
	}
	tr.expect("Admin Deny over a NetworkPolicy allow: client → server:8080 dropped", tr.to("client", "server", 8080), false)
	c.cnpCondition(np, "deny-b", policy.ReasonProgrammed)
	// A pod relabelled into the subject joins its port group, and leaves
	// it relabelled back (the members alone are synced for a pod change).
	c.relabelPod("a", "plain", "app", "server")
	tr.expect("a pod relabelled into the Admin Deny's subject: client → plain:8080 dropped", tr.to("client", "plain", 8080), false)
	c.relabelPod("a", "plain", "app", "plain")
	tr.expect("relabelled out of it again: client → plain:8080 allowed", tr.to("client", "plain", 8080), true)
	// A namespace relabelled out of the subject takes its pods out of the
	// port group, and relabelled back puts them in again (a namespace move
	// syncs the subject's members alone too).
	c.namespace("a", map[string]string{"tenant": "x"})
	tr.expect("namespace a relabelled out of the Admin Deny's subject: client → server:8080 allowed", tr.to("client", "server", 8080), true)
	c.namespace("a", map[string]string{"tenant": "a"})
	tr.expect("relabelled back into it: client → server:8080 dropped", tr.to("client", "server", 8080), false)

	// ACL logging: the policy's own annotation, a severity per action.
	cur, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Get(c.ctx(), "deny-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cur.Annotations = map[string]string{"k8s.ovn.org/acl-logging": `{"deny": "alert"}`}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Update(c.ctx(), cur, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the admin Deny logged in the SB", func() error {
		flows, err := c.ovn.SBCtl("lflow-list", "n2")
		if err != nil {
			return err
		}
		if !strings.Contains(flows, `name="cnp:deny_b", severity=alert, verdict=drop, meter="acl-logging`) {
			return fmt.Errorf("no logging drop flow of cnp:deny_b")
		}
		return nil
	})

	// Admin Pass (higher precedence) on 8080 hands it to the NetworkPolicy.
	pass := cnp("pass-8080", cnpv1alpha2.AdminTier, 10, aTenant)
	pass.Spec.Ingress = []cnpv1alpha2.ClusterNetworkPolicyIngressRule{cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionPass, sel("tenant", "b"), 8080)}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), pass, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.expect("Admin Pass then NetworkPolicy: client → server:8080 allowed", tr.to("client", "server", 8080), true)
	tr.expect("Admin Deny still below the Pass: client → server:9090 dropped", tr.to("client", "server", 9090), false)

	// The same priority again (an AdminNetworkPolicy): refused with a condition.
	anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "same-priority"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 10, Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("tenant", "a")},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{{Action: anpv1alpha1.AdminNetworkPolicyRuleActionDeny,
			From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("tenant", "b")}}}}}}
	if _, err := np.PolicyV1alpha1().AdminNetworkPolicies().Create(c.ctx(), anp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the colliding ANP's condition", func() error {
		o, err := np.PolicyV1alpha1().AdminNetworkPolicies().Get(c.ctx(), "same-priority", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(o.Status.Conditions, policy.ConditionReady); cond == nil || cond.Reason != policy.ReasonPriorityCollision ||
			!strings.Contains(cond.Message, "ClusterNetworkPolicy/pass-8080") {
			return fmt.Errorf("condition %+v", cond)
		}
		return nil
	})
	if pg := (&nbdb.PortGroup{Name: policy.AdminPortGroup(policy.KindANP, "same-priority")}); c.nb.Get(c.ctx(), pg) == nil {
		t.Errorf("the colliding ANP has a port group: %+v", pg)
	}
	tr.expect("the collision's loser changes nothing: client → server:8080 allowed", tr.to("client", "server", 8080), true)

	// Baseline Deny: a/plain is selected by no NetworkPolicy.
	banp := &anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("tenant", "a")},
		Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: anpv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
			From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}}}}
	tr.expect("no policy yet: client → plain:7070 allowed", tr.to("client", "plain", 7070), true)
	if _, err := np.PolicyV1alpha1().BaselineAdminNetworkPolicies().Create(c.ctx(), banp, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr.expect("Baseline Deny under no NetworkPolicy: client → plain:7070 dropped", tr.to("client", "plain", 7070), false)
	// A NetworkPolicy selecting a/plain overrides the Baseline.
	c.createPolicy("a", "plain", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "plain"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("tenant", "b")}}}}})
	tr.expect("NetworkPolicy over the Baseline: client → plain:7070 allowed", tr.to("client", "plain", 7070), true)

	// Egress peers: a node (by its addresses) and a CIDR.
	node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{"role": "infra"}
	if node, err = c.kube.Client.CoreV1().Nodes().Update(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.0.12"}}
	if _, err := c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	toNode := flow{from: pods["client"], dstIP: "172.30.0.12", dport: 10250, ct: "new"}
	toNet := flow{from: pods["client"], dstIP: "198.51.100.7", dport: 443, ct: "new"}
	for name, f := range map[string]flow{"client → node n2": toNode, "client → 198.51.100.7": toNet} {
		if ok, out := tr.leaves(f); !ok {
			t.Fatalf("%s does not leave the switch before any egress policy:\n%s", name, out)
		}
	}
	egress := cnp("egress", cnpv1alpha2.AdminTier, 30, cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "b")})
	egress.Spec.Egress = []cnpv1alpha2.ClusterNetworkPolicyEgressRule{
		{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "infra")}}},
		{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1alpha2.CIDR{"198.51.100.0/24"}}}},
	}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), egress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, f := range map[string]flow{"node peer: client → node n2 dropped": toNode, "CIDR peer: client → 198.51.100.7 dropped": toNet} {
		harness.Eventually(t, 20*time.Second, name, func() error {
			if ok, out := tr.leaves(f); ok {
				return fmt.Errorf("it leaves the switch:\n%s", out)
			}
			return nil
		})
	}
	// What a node reports is its own kubelet's word: n2 claiming a pod's
	// address, a ClusterIP, a join address or n1's (older) address puts
	// none of them in the node peer set.
	c.nodeAddresses("n1", "172.30.0.11")
	c.nodeAddresses("n2", "172.30.0.12", pods["server"].ip, "10.96.0.10", "100.64.0.2", "172.30.0.11", "203.0.113.12")
	nodePeers := func(what string, want ...string) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, what, func() error {
			if got := c.nodePeerAddresses(); !slices.Equal(got, want) {
				return fmt.Errorf("node peer set addresses %v, want %v", got, want)
			}
			return nil
		})
	}
	nodePeers("the node peer set holds only n2's own addresses", "172.30.0.12", "203.0.113.12")
	// n1, older and selected by no policy, reports n2's external address
	// too: it is n1's now, and n2's again once n1 lets it go.
	c.nodeAddresses("n1", "172.30.0.11", "203.0.113.12")
	nodePeers("an address an older node reports leaves the younger's set", "172.30.0.12")
	c.nodeAddresses("n1", "172.30.0.11")
	nodePeers("the younger node's address back once the older lets it go", "172.30.0.12", "203.0.113.12")
	// The node leaves the selector: its address leaves the set.
	node, _ = c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n2", metav1.GetOptions{})
	node.Labels = nil
	if _, err := c.kube.Client.CoreV1().Nodes().Update(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "client → node n2 leaves again", func() error {
		if ok, out := tr.leaves(toNode); !ok {
			return fmt.Errorf("still dropped:\n%s", out)
		}
		return nil
	})

	// A union of namespaces ("tenant in (b, c)") is matched through the
	// sets of its values, those of "tenant=b" and "tenant=c": a namespace
	// moving from one value to the other stays a peer, and moving out
	// leaves. a/plain takes tenant b through its NetworkPolicy, and anyone
	// else falls to the Baseline Deny: tenant c is let in by the Accept only.
	union := cnp("union", cnpv1alpha2.AdminTier, 40, cnpv1alpha2.ClusterNetworkPolicySubject{
		Pods: &cnpv1alpha2.NamespacedPod{NamespaceSelector: *sel("tenant", "a"), PodSelector: *sel("app", "plain")}})
	union.Spec.Ingress = []cnpv1alpha2.ClusterNetworkPolicyIngressRule{cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept,
		&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tenant", Operator: metav1.LabelSelectorOpIn, Values: []string{"b", "c"}}}}, 6060)}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), union, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	c.cnpCondition(np, "union", policy.ReasonProgrammed)
	c.namespace("b", map[string]string{"tenant": "c"})
	tr.expect("namespace b moved to tenant c, the union's other value: client → plain:6060 accepted", tr.to("client", "plain", 6060), true)
	tr.expect("and on another port the Baseline Deny: client → plain:7070 dropped", tr.to("client", "plain", 7070), false)
	c.namespace("b", map[string]string{"tenant": "d"})
	tr.expect("namespace b moved out of the union: client → plain:6060 dropped", tr.to("client", "plain", 6060), false)
	c.namespace("b", map[string]string{"tenant": "b"})
	tr.expect("namespace b back: client → plain:6060 allowed", tr.to("client", "plain", 6060), true)
	if keys := c.peerSetKeys(); slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(k, " in (") }) {
		t.Errorf("a peer set of the union itself: %q", keys)
	}

	// The tiers are ACL tiers in the NB: 1 for Admin, 2 for NetworkPolicy, 3 for Baseline.
	tiers := c.aclTiers()
	for pg, want := range map[string]int{"cnp.deny_b": 1, "np.a.server": 2, "banp.default": 3} {
		if got, ok := tiers[pg]; !ok || got != want {
			t.Errorf("ACLs of %s: tier %d (found %v), want %d", pg, got, ok, want)
		}
	}
	// An idle restart writes nothing: no ACL, port group or address set,
	// and no policy status.
	cnpBefore, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Get(c.ctx(), "deny-b", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.idleRestartWritesNothing()
	after, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Get(c.ctx(), "deny-b", metav1.GetOptions{})
	if err != nil || after.ResourceVersion != cnpBefore.ResourceVersion {
		t.Errorf("an idle restart rewrote a CNP (resourceVersion %s → %s, %v)", cnpBefore.ResourceVersion, after.ResourceVersion, err)
	}
}

// nodeAddresses sets a Node's reported addresses (InternalIP, then
// ExternalIP for the rest), as its kubelet would.
func (c *cluster) nodeAddresses(name string, addrs ...string) {
	c.t.Helper()
	node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	node.Status.Addresses = nil
	for i, a := range addrs {
		typ := corev1.NodeExternalIP
		if i == 0 {
			typ = corev1.NodeInternalIP
		}
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: typ, Address: a})
	}
	if _, err := c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// addressSets lists the NB's address sets.
func (c *cluster) addressSets() []nbdb.AddressSet {
	c.t.Helper()
	var sets []nbdb.AddressSet
	if err := c.nb.List(c.ctx(), &sets); err != nil {
		c.t.Fatal(err)
	}
	return sets
}

// nodePeerAddresses are the addresses of every node peer address set in
// the NB, sorted.
func (c *cluster) nodePeerAddresses() []string {
	c.t.Helper()
	var out []string
	for _, s := range c.addressSets() {
		if o, ok := topology.OwnerOf(s.ExternalIDs); ok && o.Type == policy.OwnerNodePeers {
			out = append(out, s.Addresses...)
		}
	}
	sort.Strings(out)
	return out
}

// peerSetKeys are the selectors (PeersKey) of the peer address sets in
// the NB.
func (c *cluster) peerSetKeys() []string {
	c.t.Helper()
	var out []string
	for _, s := range c.addressSets() {
		if k, ok := s.ExternalIDs[policy.PeersKey]; ok {
			out = append(out, k)
		}
	}
	return out
}

// aclTiers reads, with ovn-nbctl, the tier of the ACLs of each port group
// (the models have no tier column: it is not in the oldest schema).
func (c *cluster) aclTiers() map[string]int {
	c.t.Helper()
	var pgs []nbdb.PortGroup
	if err := c.nb.List(c.ctx(), &pgs); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, pg := range pgs {
		for _, uuid := range pg.ACLs {
			v, err := c.ovn.NBCtl("get", "ACL", uuid, "tier")
			if err != nil {
				c.t.Fatalf("ovn-nbctl get ACL %s tier: %v", uuid, err)
			}
			var tier int
			fmt.Sscan(strings.TrimSpace(v), &tier)
			out[pg.Name] = tier
		}
	}
	if !ovndb.HasACLTiers(c.nb) {
		c.t.Fatal("the NB has no ACL tiers")
	}
	return out
}

// adminPortGroups lists the admin policies' port groups in the NB with
// their ACL counts.
func (c *cluster) adminPortGroups() map[string]int {
	var pgs []nbdb.PortGroup
	if err := c.nb.List(c.ctx(), &pgs); err != nil {
		c.t.Fatal(err)
	}
	out := map[string]int{}
	for _, pg := range pgs {
		if o, ok := topology.OwnerOf(pg.ExternalIDs); ok && (o.Type == policy.KindCNP || o.Type == policy.KindANP || o.Type == policy.KindBANP) {
			out[pg.Name] = len(pg.ACLs)
		}
	}
	return out
}

func (c *cluster) waitAdminPortGroups(what string, want map[string]int) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, what, func() error {
		if got := c.adminPortGroups(); fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("admin port groups (ACLs) %v, want %v", got, want)
		}
		return nil
	})
}

// TestAdminPolicyFaults: the admin policies' rows converge after the NB is
// replaced by an empty one, the master is killed while policies come and
// go, a policy is deleted while the master is down (its rows are stale at
// the next start), and a policy is deleted and re-created with the same
// name and another tier.
func TestAdminPolicyFaults(t *testing.T) {
	c := newCluster(t)
	np := c.installAdminCRDs()
	c.startMaster()
	c.createNode("n1", nil)
	c.namespace("a", map[string]string{"tenant": "a"})
	c.createPod("a", "server", "n1", withLabels("app", "server"))
	c.tracePods([3]string{"a", "server", "n1"})
	create := func(name string, tier cnpv1alpha2.Tier, priority int32, rules int) {
		t.Helper()
		p := cnp(name, tier, priority, cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "a")})
		for i := 0; i < rules; i++ {
			p.Spec.Ingress = append(p.Spec.Ingress, cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, sel("tenant", fmt.Sprint(i)), 0))
		}
		if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	del := func(name string) {
		t.Helper()
		if err := np.PolicyV1alpha2().ClusterNetworkPolicies().Delete(c.ctx(), name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	create("one", cnpv1alpha2.AdminTier, 1, 1)
	create("two", cnpv1alpha2.BaselineTier, 2, 2)
	c.waitAdminPortGroups("both policies programmed", map[string]int{"cnp.one": 1, "cnp.two": 2})

	c.ovn.ResetNB() // an empty database (a restore, a new central)
	c.waitAdminPortGroups("rows back after the NB was replaced", map[string]int{"cnp.one": 1, "cnp.two": 2})

	// Killed while policies come and go.
	for i := 3; i < 9; i++ {
		create(fmt.Sprintf("p%d", i), cnpv1alpha2.AdminTier, int32(i), 3)
		if i%2 == 0 {
			c.master.Kill()
			c.startMaster()
		}
		if i%3 == 0 {
			del(fmt.Sprintf("p%d", i))
		}
	}
	c.waitAdminPortGroups("converged after kills", map[string]int{"cnp.one": 1, "cnp.two": 2, "cnp.p4": 3, "cnp.p5": 3, "cnp.p7": 3, "cnp.p8": 3})

	// Deleted while the master is down: stale at the next start.
	c.waitSynced()
	c.master.Stop()
	del("p4")
	del("p5")
	c.startMaster()
	c.waitAdminPortGroups("stale rows removed at start", map[string]int{"cnp.one": 1, "cnp.two": 2, "cnp.p7": 3, "cnp.p8": 3})

	// Deleted and re-created with the same name in the other tier.
	del("one")
	create("one", cnpv1alpha2.BaselineTier, 1, 2)
	c.waitAdminPortGroups("re-created with two rules", map[string]int{"cnp.one": 2, "cnp.two": 2, "cnp.p7": 3, "cnp.p8": 3})
	harness.Eventually(t, 20*time.Second, "the re-created policy's ACLs in the Baseline tier", func() error {
		if tier := c.aclTiers()["cnp.one"]; tier != policy.TierBaseline {
			return fmt.Errorf("tier %d", tier)
		}
		return nil
	})
	c.cnpCondition(np, "one", policy.ReasonProgrammed)
}

// TestOVNTraceAdminTiersDualStack: on a dual-stack cluster the tiers decide
// the same over IPv6 as over IPv4 — an Admin Deny over a NetworkPolicy
// allow, an Admin Pass handing the decision to the NetworkPolicy, and egress
// to an IPv6 network, to a node's IPv6 address and to a DNS name's IPv6
// address (domainNames) — with the policies' sets and matches in both
// families.
func TestOVNTraceAdminTiersDualStack(t *testing.T) {
	c := newCluster(t)
	np := c.installAdminCRDs()
	dns := harness.StartDNS(t, 30)
	dns.Set("db.example.com", "203.0.113.9", "2001:db8:9::9")
	c.startMaster("--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--dns-servers", dns.Addr)
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", map[string]string{"tenant": "a"})
	c.namespace("b", map[string]string{"tenant": "b"})
	c.createPod("a", "server", "n2", withLabels("app", "server"))
	c.createPod("b", "client", "n1", withLabels("app", "client"))
	pods := c.tracePods([3]string{"a", "server", "n2"}, [3]string{"b", "client", "n1"})
	for name, p := range pods {
		if p.ip6 == "" {
			t.Fatalf("pod %s has no IPv6 address: %+v", name, p)
		}
	}
	tr := newTracer(c, pods)
	tcp := corev1.ProtocolTCP
	c.createPolicy("a", "server", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "server"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("tenant", "b")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(8080))}, {Protocol: &tcp, Port: ptr(intstr.FromInt32(9090))}}}}})
	tr.expect("NetworkPolicy alone over IPv6: client → server:8080 allowed", tr.to6("client", "server", 8080), true)

	aTenant := cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "a")}
	deny := cnp("deny-b", cnpv1alpha2.AdminTier, 20, aTenant)
	deny.Spec.Ingress = []cnpv1alpha2.ClusterNetworkPolicyIngressRule{cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, sel("tenant", "b"), 0)}
	pass := cnp("pass-8080", cnpv1alpha2.AdminTier, 10, aTenant)
	pass.Spec.Ingress = []cnpv1alpha2.ClusterNetworkPolicyIngressRule{cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionPass, sel("tenant", "b"), 8080)}
	for _, p := range []*cnpv1alpha2.ClusterNetworkPolicy{deny, pass} {
		if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if !ovndb.HasACLTiers(c.nb) { // OVN 23.03: refused, nothing changes
		c.cnpCondition(np, "deny-b", policy.ReasonNoTiers)
		tr.expect("no tiers: the NetworkPolicy still decides over IPv6: client → server:9090 allowed", tr.to6("client", "server", 9090), true)
		return
	}
	tr.expect("Admin Deny over a NetworkPolicy allow, IPv6: client → server:9090 dropped", tr.to6("client", "server", 9090), false)
	tr.expect("Admin Pass then NetworkPolicy, IPv6: client → server:8080 allowed", tr.to6("client", "server", 8080), true)
	tr.expect("the same over IPv4: client → server:9090 dropped", tr.to("client", "server", 9090), false)

	// Egress from tenant b: a node's IPv6 address, an IPv6 network, and a
	// DNS name: denied, then the name accepted above a deny-all.
	node, err := c.kube.Client.CoreV1().Nodes().Get(c.ctx(), "n2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	node.Labels = map[string]string{"role": "infra"}
	if node, err = c.kube.Client.CoreV1().Nodes().Update(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "172.30.0.12"}, {Type: corev1.NodeInternalIP, Address: "fd00:30::12"}}
	if _, err := c.kube.Client.CoreV1().Nodes().UpdateStatus(c.ctx(), node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	out := func(ip string, port int) flow { return flow{from: pods["client"], dstIP: ip, dport: port, ct: "new"} }
	leaves := func(name string, f flow, want bool) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, name, func() error {
			if ok, trace := tr.leaves(f); ok != want {
				return fmt.Errorf("leaves the switch: %v, want %v:\n%s", ok, want, trace)
			}
			return nil
		})
	}
	leaves("before: client → [fd00:30::12]:10250 leaves", out("fd00:30::12", 10250), true)
	egress := cnp("egress", cnpv1alpha2.AdminTier, 30, cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "b")})
	egress.Spec.Egress = []cnpv1alpha2.ClusterNetworkPolicyEgressRule{
		{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "infra")}}},
		{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1alpha2.DomainName{"db.example.com"}}}},
		{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1alpha2.CIDR{"2001:db8::/32", "203.0.113.0/24"}}}},
	}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), egress, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		f    flow
		want bool
	}{
		{"node peer over IPv6: client → [fd00:30::12]:10250 dropped", out("fd00:30::12", 10250), false},
		{"node peer over IPv4: client → 172.30.0.12:10250 dropped", out("172.30.0.12", 10250), false},
		{"domain name over IPv6, above the network's deny: client → [2001:db8:9::9]:5432 leaves", out("2001:db8:9::9", 5432), true},
		{"domain name over IPv4: client → 203.0.113.9:5432 leaves", out("203.0.113.9", 5432), true},
		{"the IPv6 network's deny: client → [2001:db8:7::7]:5432 dropped", out("2001:db8:7::7", 5432), false},
	} {
		leaves(tc.name, tc.f, tc.want)
	}
	c.cnpCondition(np, "egress", policy.ReasonProgrammed)
}

// TestAdminPolicyLostReplyAndBadLogging: an admin policy's transaction
// committed while its reply is lost is not sent again from a stale cache
// (one port group, its ACLs once); a malformed ACL logging annotation
// leaves the rules programmed, logs nothing, and says so in the condition;
// corrected, the ACLs log.
func TestAdminPolicyLostReplyAndBadLogging(t *testing.T) {
	c := newCluster(t)
	np := c.installAdminCRDs()
	proxy := ovndbtest.NewProxy(t, c.ovn.NBSock)
	c.startMaster("--nb-address", "unix:"+proxy.Sock)
	c.createNode("n1", nil)
	c.namespace("a", map[string]string{"tenant": "a"})
	c.createPod("a", "server", "n1", withLabels("app", "server"))
	c.tracePods([3]string{"a", "server", "n1"})
	c.waitSynced()

	lost := proxy.LoseNextReply()
	p := cnp("lost", cnpv1alpha2.AdminTier, 1, cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "a")})
	for i := range 3 {
		p.Spec.Ingress = append(p.Spec.Ingress, cnpIngress(cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, sel("tenant", fmt.Sprint(i)), 0))
	}
	p.Annotations = map[string]string{annotations.NamespaceACLLogging: `{"deny": "loud"}`}
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Create(c.ctx(), p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-lost:
	case <-time.After(20 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	c.waitAdminPortGroups("one port group with its 3 ACLs, once", map[string]int{"cnp.lost": 3})
	c.cnpCondition(np, "lost", policy.ReasonPartlyProgrammed)
	o, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Get(c.ctx(), "lost", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cond := meta.FindStatusCondition(o.Status.Conditions, policy.ConditionReady); cond == nil || !strings.Contains(cond.Message, annotations.NamespaceACLLogging) {
		t.Errorf("the condition does not name the malformed annotation: %+v", cond)
	}
	if logged := c.loggedACLs("cnp.lost"); logged != 0 {
		t.Errorf("%d ACLs log with a malformed annotation, want none", logged)
	}

	o.Annotations[annotations.NamespaceACLLogging] = `{"deny": "alert"}`
	if _, err := np.PolicyV1alpha2().ClusterNetworkPolicies().Update(c.ctx(), o, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "the Deny ACLs logging once the annotation is right", func() error {
		if logged := c.loggedACLs("cnp.lost"); logged != 3 {
			return fmt.Errorf("%d of 3 ACLs log", logged)
		}
		return nil
	})
	c.cnpCondition(np, "lost", policy.ReasonProgrammed)
	c.waitAdminPortGroups("still one port group with 3 ACLs", map[string]int{"cnp.lost": 3})
}

// loggedACLs counts a port group's ACLs that log.
func (c *cluster) loggedACLs(pgName string) int {
	pg := &nbdb.PortGroup{Name: pgName}
	if err := c.nb.Get(c.ctx(), pg); err != nil {
		return -1
	}
	n := 0
	for _, uuid := range pg.ACLs {
		a := &nbdb.ACL{UUID: uuid}
		if c.nb.Get(c.ctx(), a) == nil && a.Log {
			n++
		}
	}
	return n
}
