package master

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func (e *env) createNamespace(name string, lbls map[string]string) {
	e.t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls}}
	if _, err := e.kube.CoreV1().Namespaces().Create(context.Background(), ns, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) createPolicy(ns, name string, spec networkingv1.NetworkPolicySpec) {
	e.t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := e.kube.NetworkingV1().NetworkPolicies(ns).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) deletePolicy(ns, name string) {
	e.t.Helper()
	if err := e.kube.NetworkingV1().NetworkPolicies(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) labelPod(ns, name string, lbls map[string]string) {
	e.t.Helper()
	p, err := e.kube.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	p.Labels = lbls
	if _, err := e.kube.CoreV1().Pods(ns).Update(context.Background(), p, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func labelled(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// portGroupPorts waits until a port group holds exactly the named pods' ports.
func (e *env) waitPortGroup(name string, pods ...string) *nbdb.PortGroup {
	e.t.Helper()
	var pg *nbdb.PortGroup
	harness.Eventually(e.t, 10*time.Second, "port group "+name, func() error {
		pg = &nbdb.PortGroup{Name: name}
		if err := e.nb.Get(context.Background(), pg); err != nil {
			return err
		}
		var got []string
		for _, uuid := range pg.Ports {
			lsp := &nbdb.LogicalSwitchPort{UUID: uuid}
			if err := e.nb.Get(context.Background(), lsp); err != nil {
				return err
			}
			got = append(got, lsp.Name)
		}
		sort.Strings(got)
		if !slices.Equal(got, pods) {
			return fmt.Errorf("ports %v, want %v", got, pods)
		}
		return nil
	})
	return pg
}

// waitAddressSet waits until the one IPv4 address set of ours whose peers
// key is key holds exactly addrs.
func (e *env) waitAddressSet(key string, addrs ...string) {
	e.t.Helper()
	e.waitFamilySet(key, false, addrs...)
}

// waitFamilySet waits until the one address set of ours of a family whose
// peers key is key holds exactly addrs.
func (e *env) waitFamilySet(key string, v6 bool, addrs ...string) {
	e.t.Helper()
	sort.Strings(addrs)
	fam := map[bool]string{false: "v4", true: "v6"}[v6]
	harness.Eventually(e.t, 10*time.Second, "address set "+key+" ("+fam+")", func() error {
		var sets []nbdb.AddressSet
		_ = e.nb.WhereCache(func(a *nbdb.AddressSet) bool {
			return a.ExternalIDs[policy.PeersKey] == key && a.ExternalIDs[policy.FamilyKey] == fam
		}).List(context.Background(), &sets)
		if len(sets) != 1 {
			return fmt.Errorf("%d address sets for %s", len(sets), key)
		}
		got := append([]string(nil), sets[0].Addresses...)
		sort.Strings(got)
		if !slices.Equal(got, addrs) {
			return fmt.Errorf("addresses %v, want %v", got, addrs)
		}
		return nil
	})
}

func (e *env) waitGone(what string, exists func() bool) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, what+" gone", func() error {
		if exists() {
			return fmt.Errorf("still there")
		}
		return nil
	})
}

func (e *env) podIP(ns, name string) string {
	return e.podNetwork(ns, name).IPs[0].Addr().String()
}

func (e *env) countRows() (pgs, sets, acls int) {
	var p []nbdb.PortGroup
	var s []nbdb.AddressSet
	var a []nbdb.ACL
	_ = e.nb.List(context.Background(), &p)
	_ = e.nb.List(context.Background(), &s)
	_ = e.nb.List(context.Background(), &a)
	return len(p), len(s), len(a)
}

var fromTeamA = networkingv1.NetworkPolicySpec{
	PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
	Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}},
		PodSelector:       &metav1.LabelSelector{MatchLabels: map[string]string{"role": "client"}},
	}}}},
}

const fromTeamAKey = "namespaces=[team=a] pods=[role=client]"

// A policy's rows follow its pods, their labels and their namespaces'
// labels, and go with it.
// startDBFrontEnv is a master running with node n1, namespace db and
// namespace front labelled team=a (the peers of fromTeamA).
func startDBFrontEnv(t *testing.T) *env {
	e := newEnv(t)
	e.createNode("n1")
	e.createNamespace("db", nil)
	e.createNamespace("front", map[string]string{"team": "a"})
	e.start()
	return e
}

func TestNetworkPolicyRowsFollowPods(t *testing.T) {
	e := newEnv(t)
	e.createNode("n1")
	e.createNamespace("db", nil)
	e.createNamespace("front", map[string]string{"team": "a"})
	e.createNamespace("other", map[string]string{"team": "b"})
	e.start()
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	e.createPod("db", "web", "n1", labelled("app", "web"))
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	e.createPod("front", "c2", "n1", labelled("role", "server"))
	e.createPod("other", "c3", "n1", labelled("role", "client"))
	e.createPolicy("db", "from-team-a", fromTeamA)

	e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1")
	e.waitPortGroup(policy.DefaultDenyPortGroup("db", policy.Ingress), "db_db1")
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"))

	// A pod relabelled into the peers, and one into the selected pods: a
	// handful of mutations, not a rewrite.
	before := e.m.Committer().Operations()
	e.labelPod("front", "c2", map[string]string{"role": "client"})
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"), e.podIP("front", "c2"))
	e.labelPod("db", "web", map[string]string{"app": "db"})
	e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1", "db_web")
	e.waitPortGroup(policy.DefaultDenyPortGroup("db", policy.Ingress), "db_db1", "db_web")
	if ops := e.m.Committer().Operations() - before; ops > 6 {
		t.Errorf("two label changes sent %d operations; want at most 6 (one mutation per changed set)", ops)
	}

	// A namespace relabelled into the selector brings its pods.
	ns, _ := e.kube.CoreV1().Namespaces().Get(context.Background(), "other", metav1.GetOptions{})
	ns.Labels["team"] = "a"
	if _, err := e.kube.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"), e.podIP("front", "c2"), e.podIP("other", "c3"))

	// A deleted pod leaves the sets (its port leaves port groups by itself).
	e.deletePod("front", "c1")
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c2"), e.podIP("other", "c3"))

	e.deletePolicy("db", "from-team-a")
	e.waitGone("policy rows", func() bool { pgs, sets, acls := e.countRows(); return pgs+sets+acls > 1 })
	if _, _, acls := e.countRows(); acls != 1 {
		t.Errorf("%d ACLs left; want only the node's management-port ACL", acls)
	}
}

// Policies naming the same selector share its address set, which lives
// as long as one of them does.
func TestPeerAddressSetShared(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	e.createPolicy("db", "one", fromTeamA)
	e.createPolicy("db", "two", fromTeamA)
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"))
	e.deletePolicy("db", "one")
	e.waitGone("policy one's port group", func() bool {
		return e.nb.Get(context.Background(), &nbdb.PortGroup{Name: policy.PolicyPortGroup("db", "one")}) == nil
	})
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"))
	e.deletePolicy("db", "two")
	e.waitGone("shared address set", func() bool { _, sets, _ := e.countRows(); return sets > 0 })
}

// A peer address set row of that name recording another selector (a
// collision, or a row rewritten by hand) is never reused as it is: the
// policy's sync rewrites its selector and members.
func TestPeerAddressSetRecordingAnotherSelectorIsRewritten(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	c1 := e.podIP("front", "c1")
	nsSel, _ := labels.Parse("team=a")
	podSel, _ := labels.Parse("role=client")
	name := policy.PeerSet{Namespaces: nsSel, Pods: podSel}.Name()
	ids := topology.Owner{Type: policy.OwnerPeers, Name: name}.ExternalIDs()
	ids[policy.PeersKey] = "namespaces=[team=b] pods=[]"
	ops, err := e.nb.Create(&nbdb.AddressSet{Name: name, Addresses: []string{"10.244.9.9"}, ExternalIDs: ids})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	e.createPolicy("db", "from-team-a", fromTeamA)
	e.waitAddressSet(fromTeamAKey, c1)
}

// An idle restart writes nothing; rows deleted or wiped come back.
func TestNetworkPolicyRestartAndRepair(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	e.createPolicy("db", "from-team-a", fromTeamA)
	e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1")
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"))
	pgs, sets, acls := e.countRows()

	if n := e.restartIdle(); n != 0 {
		t.Errorf("idle restart sent %d transactions; want 0", n)
	}

	// Someone deletes the policy's port group and the address set.
	var ops []ovsdb.Operation
	pg := &nbdb.PortGroup{Name: policy.PolicyPortGroup("db", "from-team-a")}
	del, err := e.nb.Where(pg).Delete()
	if err != nil {
		t.Fatal(err)
	}
	ops = append(ops, del...)
	var all []nbdb.AddressSet
	_ = e.nb.List(context.Background(), &all)
	for i := range all {
		d, err := e.nb.Where(&all[i]).Delete()
		if err != nil {
			t.Fatal(err)
		}
		ops = append(ops, d...)
	}
	if _, err := e.nb.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1")
	e.waitAddressSet(fromTeamAKey, e.podIP("front", "c1"))
	harness.Eventually(t, 5*time.Second, "rows restored", func() error {
		p, s, a := e.countRows()
		if p != pgs || s != sets || a != acls {
			return fmt.Errorf("port groups/sets/ACLs %d/%d/%d, want %d/%d/%d", p, s, a, pgs, sets, acls)
		}
		return nil
	})
}

// A pod moving into a policy's selection changes the members of the
// policy's and the namespace's port groups and nothing else: an ACL edited
// by hand stays as it is (the policy's rows are not built again for a pod),
// until a resync's full sync repairs it.
func TestPodChangeSetsOnlyPortGroupMembers(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	e.createPod("db", "web", "n1", labelled("app", "web"))
	e.createPolicy("db", "from-team-a", fromTeamA)
	pg := e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1")
	e.waitPortGroup(policy.DefaultDenyPortGroup("db", policy.Ingress), "db_db1")
	if len(pg.ACLs) == 0 {
		t.Fatal("the policy's port group has no ACLs")
	}
	acl := &nbdb.ACL{UUID: pg.ACLs[0]}
	if err := e.nb.Get(context.Background(), acl); err != nil {
		t.Fatal(err)
	}
	want := acl.Match
	acl.Match = "1 == 0 && " + want
	ops, err := e.nb.Where(acl).Update(acl, &acl.Match)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.nb.Transact(context.Background(), ops...); err != nil {
		t.Fatal(err)
	}
	match := func() string {
		a := &nbdb.ACL{UUID: acl.UUID}
		if err := e.nb.Get(context.Background(), a); err != nil {
			return err.Error()
		}
		return a.Match
	}

	before := e.m.Committer().Operations()
	e.labelPod("db", "web", map[string]string{"app": "db"})
	e.waitPortGroup(policy.PolicyPortGroup("db", "from-team-a"), "db_db1", "db_web")
	e.waitPortGroup(policy.DefaultDenyPortGroup("db", policy.Ingress), "db_db1", "db_web")
	harness.Eventually(t, 5*time.Second, "policy queues idle", func() error {
		if !e.m.Idle() {
			return fmt.Errorf("busy")
		}
		return nil
	})
	if got := match(); got != "1 == 0 && "+want {
		t.Errorf("after a pod's label change the edited ACL's match is %q; want it left as edited (only members set)", got)
	}
	if ops := e.m.Committer().Operations() - before; ops != 2 {
		t.Errorf("a pod's label change sent %d operations; want 2 (a mutation of each of its two port groups)", ops)
	}

	e.m.resync(context.Background(), "test")
	harness.Eventually(t, 10*time.Second, "the edited ACL repaired by the resync", func() error {
		if got := match(); got != want {
			return fmt.Errorf("match %q, want %q", got, want)
		}
		return nil
	})
}

// A namespace's k8s.ovn.org/acl-logging annotation turns logging on for its
// policies' allow ACLs and its default deny, through the cluster's meter;
// changing it re-writes them, a malformed one logs nothing.
func TestACLLoggingFollowsNamespaceAnnotation(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPolicy("db", "from-team-a", fromTeamA)
	setAnnotation := func(v string) {
		ns, err := e.kube.CoreV1().Namespaces().Get(context.Background(), "db", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		ns.Annotations = map[string]string{annotations.NamespaceACLLogging: v}
		if _, err := e.kube.CoreV1().Namespaces().Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// waitLogging waits until every ACL of the namespace's rows logs at the
	// wanted severity ("" for not at all).
	waitLogging := func(allow, deny string) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, fmt.Sprintf("ACL logging allow=%q deny=%q", allow, deny), func() error {
			var acls []nbdb.ACL
			_ = e.nb.WhereCache(func(a *nbdb.ACL) bool {
				o, ok := topology.OwnerOf(a.ExternalIDs)
				return ok && (o.Type == policy.OwnerPolicy || o.Type == policy.OwnerNamespace)
			}).List(context.Background(), &acls)
			if len(acls) < 2 {
				return fmt.Errorf("%d ACLs", len(acls))
			}
			for _, a := range acls {
				want := ""
				switch {
				case a.Action == nbdb.ACLActionDrop:
					want = deny
				case a.Priority == policy.PriorityAllow:
					want = allow
				}
				got := ""
				if a.Log && a.Severity != nil {
					got = *a.Severity
				}
				if got != want || (want != "" && (a.Meter == nil || *a.Meter != topology.ACLLogMeter)) {
					return fmt.Errorf("ACL %q logs %q (meter %v), want %q", a.Match, got, a.Meter, want)
				}
			}
			return nil
		})
	}
	waitLogging("", "")
	setAnnotation(`{"deny": "alert", "allow": "notice"}`)
	waitLogging("notice", "alert")
	setAnnotation(`{"deny": "loud"}`)
	waitLogging("", "")
	meter := &nbdb.Meter{Name: topology.ACLLogMeter}
	if err := e.nb.Get(context.Background(), meter); err != nil || len(meter.Bands) != 1 {
		t.Fatalf("meter %s: %+v, %v", topology.ACLLogMeter, meter, err)
	}
}

// With namespace isolation, each tenant's address set and port group follow
// its namespaces' pods and the namespaces' tenant annotations.
func TestNamespaceIsolationRows(t *testing.T) {
	e := newEnv(t)
	e.cfg.NamespaceIsolation = true
	e.createNode("n1")
	e.createNamespace("a", nil)
	e.createNamespace("b", nil)
	e.createNamespace("g", nil)
	setTenant := func(ns, v string) {
		n, err := e.kube.CoreV1().Namespaces().Get(context.Background(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{policy.TenantAnnotation: v}
		if _, err := e.kube.CoreV1().Namespaces().Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	setTenant("g", "global")
	e.start()
	e.createPod("a", "a1", "n1")
	e.createPod("b", "b1", "n1")
	e.createPod("g", "g1", "n1")
	tenantSet := func(tenant string, addrs ...string) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, "tenant "+tenant+" addresses", func() error {
			as := &nbdb.AddressSet{Name: policy.TenantAddressSet(tenant)}
			if err := e.nb.Get(context.Background(), as); err != nil {
				return err
			}
			got := append([]string(nil), as.Addresses...)
			sort.Strings(got)
			want := append([]string(nil), addrs...)
			sort.Strings(want)
			if !slices.Equal(got, want) {
				return fmt.Errorf("addresses %v, want %v", got, want)
			}
			return nil
		})
	}
	a1, b1, g1 := e.podIP("a", "a1"), e.podIP("b", "b1"), e.podIP("g", "g1")
	tenantSet("a", a1)
	tenantSet("b", b1)
	tenantSet(policy.GlobalTenant, g1)
	e.waitPortGroup(policy.TenantPortGroup("a"), "a_a1")
	e.waitGone("a port group for the global tenant", func() bool {
		return e.nb.Get(context.Background(), &nbdb.PortGroup{Name: policy.TenantPortGroup(policy.GlobalTenant)}) == nil
	})

	// b joins a: one tenant, b's rows go.
	setTenant("b", "join:a")
	tenantSet("a", a1, b1)
	e.waitPortGroup(policy.TenantPortGroup("a"), "a_a1", "b_b1")
	e.waitGone("tenant b's rows", func() bool {
		return e.nb.Get(context.Background(), &nbdb.AddressSet{Name: policy.TenantAddressSet("b")}) == nil ||
			e.nb.Get(context.Background(), &nbdb.PortGroup{Name: policy.TenantPortGroup("b")}) == nil
	})
	// A malformed annotation isolates (the safe reading).
	setTenant("b", "merge:a")
	tenantSet("b", b1)
	tenantSet("a", a1)

	// Isolation turned off: every tenant row goes.
	e.stop()
	e.cfg.NamespaceIsolation = false
	e.start()
	e.waitGone("tenant rows", func() bool {
		var sets []nbdb.AddressSet
		_ = e.nb.WhereCache(func(a *nbdb.AddressSet) bool { return strings.HasPrefix(a.Name, "mt") }).List(context.Background(), &sets)
		return len(sets) > 0
	})
}

// Without any global namespace, the global tenant's address set still
// exists (empty) while isolation is on: every isolation ACL names it, and
// OVN ignores an ACL naming a missing set, which would let tenants in.
func TestNamespaceIsolationWithoutGlobalNamespace(t *testing.T) {
	e := newEnv(t)
	e.cfg.NamespaceIsolation = true
	e.createNode("n1")
	e.createNamespace("a", nil)
	e.createNamespace("b", nil)
	e.start()
	e.createPod("a", "a1", "n1")
	e.createPod("b", "b1", "n1")
	e.podIP("a", "a1")
	e.waitPortGroup(policy.TenantPortGroup("a"), "a_a1")
	e.waitPortGroup(policy.TenantPortGroup("b"), "b_b1")
	harness.Eventually(t, 10*time.Second, "the global tenant's address set, empty", func() error {
		as := &nbdb.AddressSet{Name: policy.TenantAddressSet(policy.GlobalTenant)}
		if err := e.nb.Get(context.Background(), as); err != nil {
			return err
		}
		if len(as.Addresses) != 0 {
			return fmt.Errorf("addresses %v, want none", as.Addresses)
		}
		return nil
	})
	if d := ovndbtest.DanglingReferences(e.nb); len(d) > 0 {
		t.Fatalf("ACLs name missing rows: %v", d)
	}
}

// Faults: a policy whose transaction loses its reply, the NB replaced by an
// empty database, and a policy deleted and re-created with the same name
// all end with exactly the rows the policies want, once each.
func TestNetworkPolicyFaults(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	e.podIP("db", "db1")
	c1 := e.podIP("front", "c1")
	pgName := policy.PolicyPortGroup("db", "from-team-a")
	exactlyOnce := func() {
		t.Helper()
		e.waitPortGroup(pgName, "db_db1")
		e.waitAddressSet(fromTeamAKey, c1)
		harness.Eventually(t, 10*time.Second, "one row of each", func() error {
			pgs, sets, acls := e.countRows()
			// Port groups: the policy's and the namespace's ingress default deny;
			// ACLs: the policy's rule, the deny trio and the node's management ACL.
			if pgs != 2 || sets != 1 || acls != 5 {
				return fmt.Errorf("port groups/sets/ACLs %d/%d/%d, want 2/1/5", pgs, sets, acls)
			}
			return nil
		})
	}

	lost := e.proxy.LoseNextReply()
	e.createPolicy("db", "from-team-a", fromTeamA)
	select {
	case <-lost:
	case <-time.After(10 * time.Second):
		t.Fatal("no transaction lost its reply")
	}
	exactlyOnce()

	e.replaceNB()
	exactlyOnce()

	e.deletePolicy("db", "from-team-a")
	e.createPolicy("db", "from-team-a", fromTeamA)
	exactlyOnce()
}

// Issue 31 item 4: one policy with more peers than a policy may have is
// refused whole: a Warning Event says why, no address set is made for its
// peers, its port group carries no ACL, and the pods it selects stay
// isolated by the namespace's default deny (it fails closed).
func TestPolicyOverALimitIsRefusedWithAnEvent(t *testing.T) {
	e := startDBFrontEnv(t)
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	var peers []networkingv1.NetworkPolicyPeer
	for i := 0; i <= policy.MaxPeersPerPolicy; i++ {
		peers = append(peers, networkingv1.NetworkPolicyPeer{NamespaceSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: fmt.Sprintf("k%d", i), Operator: metav1.LabelSelectorOpDoesNotExist}}}})
	}
	e.createPolicy("db", "huge", networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}},
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: peers}},
	})
	harness.Eventually(t, 10*time.Second, "a NetworkPolicyTooLarge Warning", func() error {
		if evs := e.warningEvents("NetworkPolicy", "huge", "NetworkPolicyTooLarge"); len(evs) != 1 {
			return fmt.Errorf("events %v, want one", evs)
		}
		return nil
	})
	pg := e.waitPortGroup(policy.PolicyPortGroup("db", "huge"), "db_db1")
	if len(pg.ACLs) != 0 {
		t.Errorf("the refused policy's port group carries %d ACLs", len(pg.ACLs))
	}
	e.waitPortGroup(policy.DefaultDenyPortGroup("db", policy.Ingress), "db_db1")
	if _, sets, _ := e.countRows(); sets != 0 {
		t.Errorf("%d address sets for a refused policy", sets)
	}
}

// dualStack makes e's cluster dual-stack (IPv4 primary).
func (e *env) dualStack() {
	e.t.Helper()
	cs, err := config.ParseClusterSubnets([]string{"10.244.0.0/16/24", "fd00:10:244::/48/64"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.cfg.ClusterSubnets = cs
}

// podIPOf is a pod's address of one family.
func (e *env) podIPOf(ns, name string, v6 bool) string {
	e.t.Helper()
	for _, ip := range e.podNetwork(ns, name).IPs {
		if ip.Addr().Is6() == v6 {
			return ip.Addr().String()
		}
	}
	e.t.Fatalf("pod %s/%s has no address of the family (IPv6 %v)", ns, name, v6)
	return ""
}

// aclMatching waits for one ACL of ours whose match has every part.
func (e *env) aclMatching(what string, parts ...string) {
	e.t.Helper()
	harness.Eventually(e.t, 10*time.Second, what, func() error {
		var acls []nbdb.ACL
		_ = e.nb.WhereCache(func(a *nbdb.ACL) bool {
			for _, p := range parts {
				if !strings.Contains(a.Match, p) {
					return false
				}
			}
			return true
		}).List(context.Background(), &acls)
		if len(acls) != 1 {
			return fmt.Errorf("%d ACLs match %q", len(acls), parts)
		}
		return nil
	})
}

// On a dual-stack cluster a policy's peers are an address set per family,
// holding the peers' addresses of that family, and its rules match both
// (IPv6 from allowed peers is let in, not dropped); the default deny lets
// hairpin traffic in from both hairpin addresses; namespace isolation
// drops other tenants in both families (IPv6 between tenants does not
// pass). Every ACL names only rows that exist (checkReferences).
func TestNetworkPolicyAndIsolationDualStack(t *testing.T) {
	e := newEnv(t)
	e.dualStack()
	e.cfg.NamespaceIsolation = true
	e.createNode("n1")
	e.createNamespace("db", nil)
	e.createNamespace("front", map[string]string{"team": "a"})
	e.start()
	e.createPod("db", "db1", "n1", labelled("app", "db"))
	e.createPod("front", "c1", "n1", labelled("role", "client"))
	e.createPolicy("db", "from-team-a", fromTeamA)

	e.waitFamilySet(fromTeamAKey, false, e.podIPOf("front", "c1", false))
	e.waitFamilySet(fromTeamAKey, true, e.podIPOf("front", "c1", true))
	set := policy.PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"team": "a"}), Pods: labels.SelectorFromSet(labels.Set{"role": "client"})}.Name()
	e.aclMatching("the policy's rule in both families", "@"+policy.PolicyPortGroup("db", "from-team-a"),
		"ip4.src == $"+set+" ", "ip6.src == $"+set+topology.V6SetSuffix)
	e.aclMatching("hairpin in both families", "@"+policy.DefaultDenyPortGroup("db", policy.Ingress),
		"ip4.src == "+topology.HairpinSNATIP, "ip6.src == "+topology.HairpinSNATIPv6)

	tenantSet := func(tenant string, v6 bool, addrs ...string) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, "tenant "+tenant+" addresses", func() error {
			as := &nbdb.AddressSet{Name: topology.FamilySetName(policy.TenantAddressSet(tenant), v6)}
			if err := e.nb.Get(context.Background(), as); err != nil {
				return err
			}
			if !slices.Equal(as.Addresses, addrs) {
				return fmt.Errorf("addresses %v, want %v", as.Addresses, addrs)
			}
			return nil
		})
	}
	tenantSet("db", false, e.podIPOf("db", "db1", false))
	tenantSet("db", true, e.podIPOf("db", "db1", true))
	tenantSet(policy.GlobalTenant, true) // named by the isolation ACL: exists, empty
	e.aclMatching("isolation in both families", "@"+policy.TenantPortGroup("db"),
		"ip4.src == 10.244.0.0/16", "ip4.src != {$mt.db, $mt_global, 10.244.0.2/255.255.0.255}",
		"ip6.src == fd00:10:244::/48", "ip6.src != {$mt.db_v6, $mt_global_v6, fd00:10:244::2/ffff:ffff:ffff:0:ffff:ffff:ffff:ffff}")
}
