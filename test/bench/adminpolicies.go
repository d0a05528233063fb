package main

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// maxAdminPolicies: each benchmark policy has a priority of its own (the
// APIs allow 0–1000), so that none is refused for a priority collision.
const maxAdminPolicies = policy.MaxAdminPriority + 1

// adminRules is the number of rules of each benchmark policy.
const adminRules = 10

// adminTracker follows, from the benchmark's NB watcher, when each admin
// policy's port group appears with all its ACLs (created in one
// transaction), and when a relabelled namespace's pod addresses reach every
// peer address set its new labels put them in, and its pods' ports every
// subject port group they enter or leave.
type adminTracker struct {
	mu    sync.Mutex
	want  map[string]int        // ClusterNetworkPolicy name → the ACLs its port group carries
	seen  map[string]time.Time  // name → its port group first seen with all of them
	waits map[rowKey][]*rowWait // an address set or port group → namespace moves waiting for it
	moves map[*nsMove]struct{}  // moves not done yet
	byNS  map[string]*nsMove    // namespace → its latest move
}

// rowKey names an address set or a port group (table, name).
type rowKey struct{ table, name string }

// nsMove is one namespace's label change: its sets done when every peer set
// its new labels put it in holds its pods' addresses, its groups when every
// subject port group it enters holds its pods' ports and every one it
// leaves holds none.
type nsMove struct {
	ns          string
	team        string // its new team label
	sets        int    // address sets still to receive the addresses
	groups      int    // port groups still to change
	start, done time.Time
	groupsDone  time.Time
	watched     time.Time // the benchmark's namespace informer told of the new label
}

// rowWait is a move waiting for a row's column (an address set's
// addresses, a port group's ports) to hold all of items (in) or none.
type rowWait struct {
	move  *nsMove
	items []string
	in    bool
}

func newAdminTracker() *adminTracker {
	return &adminTracker{want: map[string]int{}, seen: map[string]time.Time{}, waits: map[rowKey][]*rowWait{},
		moves: map[*nsMove]struct{}{}, byNS: map[string]*nsMove{}}
}

func (a *adminTracker) row(row model.Model) {
	r, ok := row.(*nbdb.PortGroup)
	if !ok {
		return
	}
	o, ok := topology.OwnerOf(r.ExternalIDs)
	if !ok || o.Type != policy.KindCNP {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if want, ok := a.want[o.Name]; ok && len(r.ACLs) >= want {
		if _, seen := a.seen[o.Name]; !seen {
			a.seen[o.Name] = now
		}
	}
}

// setChanged takes setWatch's changes of address sets and port groups: a
// move waiting for the row is done with it once the row's members hold its
// items (or none of them); a move's sets (or groups) are done with the last.
func (a *adminTracker) setChanged(r *setRow, _ bool, now time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	k := rowKey{r.table, r.name}
	waits := a.waits[k]
	if len(waits) == 0 {
		return
	}
	var left []*rowWait
	for _, w := range waits {
		if !r.has(w.items, w.in) {
			left = append(left, w)
			continue
		}
		mv := w.move
		if k.table == nbdb.AddressSetTable {
			if mv.sets--; mv.sets == 0 {
				mv.done = now
			}
		} else if mv.groups--; mv.groups == 0 {
			mv.groupsDone = now
		}
		if mv.sets == 0 && mv.groups == 0 {
			delete(a.moves, mv)
		}
	}
	if len(left) == 0 {
		delete(a.waits, k)
	} else {
		a.waits[k] = left
	}
}

// expect starts a namespace move: the addresses each named set must
// receive, the ports each named port group must gain or lose.
func (a *adminTracker) expect(mv *nsMove, sets map[string][]string, groups map[string]*rowWait) {
	a.mu.Lock()
	defer a.mu.Unlock()
	mv.start, mv.sets, mv.groups = time.Now(), len(sets), len(groups)
	a.moves[mv] = struct{}{}
	a.byNS[mv.ns] = mv
	for name, addrs := range sets {
		k := rowKey{nbdb.AddressSetTable, name}
		a.waits[k] = append(a.waits[k], &rowWait{move: mv, items: addrs, in: true})
	}
	for name, w := range groups {
		w.move = mv
		k := rowKey{nbdb.PortGroupTable, name}
		a.waits[k] = append(a.waits[k], w)
	}
}

// namespaceSeen records when the benchmark's informer is first told of a
// moved namespace's new team.
func (a *adminTracker) namespaceSeen(obj any) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok {
		return
	}
	now := time.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if mv := a.byNS[ns.Name]; mv != nil && mv.watched.IsZero() && ns.Labels["team"] == mv.team {
		mv.watched = now
	}
}

func (a *adminTracker) programmed() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.seen)
}

func (a *adminTracker) reset() {
	a.mu.Lock()
	a.seen = map[string]time.Time{}
	a.mu.Unlock()
}

// conditionTracker follows, from the benchmark's own informer, when each
// admin policy's status first carries the Ready condition the stack should
// give it: True with ACL tiers, False for ACLTiersNotSupported without.
type conditionTracker struct {
	tiers   bool
	mu      sync.Mutex
	seen    map[string]time.Time // policy name → the expected condition first seen
	watched map[string]time.Time // policy name → first seen at all (the API's share)
	reasons map[string]string    // policy name → its latest Ready status and reason
}

func (b *bench) watchAdminStatus(tiers bool) *conditionTracker {
	c := &conditionTracker{tiers: tiers, seen: map[string]time.Time{}, watched: map[string]time.Time{}, reasons: map[string]string{}}
	f := npinformers.NewSharedInformerFactory(b.np, 0)
	inf := f.Policy().V1alpha2().ClusterNetworkPolicies().Informer()
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    c.update,
		UpdateFunc: func(_, obj any) { c.update(obj) },
	})
	stop := make(chan struct{})
	b.s.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return c
}

func (c *conditionTracker) update(obj any) {
	cnp, ok := obj.(*cnpv1alpha2.ClusterNetworkPolicy)
	if !ok {
		return
	}
	now := time.Now()
	c.mu.Lock()
	if _, ok := c.watched[cnp.Name]; !ok {
		c.watched[cnp.Name] = now
	}
	c.mu.Unlock()
	cond := meta.FindStatusCondition(cnp.Status.Conditions, policy.ConditionReady)
	if cond == nil || cond.ObservedGeneration != cnp.Generation {
		return
	}
	expected := cond.Status == metav1.ConditionTrue
	if !c.tiers {
		expected = cond.Status == metav1.ConditionFalse && cond.Reason == policy.ReasonNoTiers
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.reasons[cnp.Name] = string(cond.Status) + "/" + cond.Reason
	if _, seen := c.seen[cnp.Name]; expected && !seen {
		c.seen[cnp.Name] = now
	}
}

// tally counts the policies by Ready status and reason.
func (c *conditionTracker) tally() map[string]int {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := map[string]int{}
	for _, r := range c.reasons {
		out[r]++
	}
	return out
}

// benchCNP is ClusterNetworkPolicy k: every fifth in the Baseline tier, the
// others in the Admin tier, each with priority k (distinct within its
// tier). Its subject is the app=a<k/10> pods of the namespaces of team
// t<k>; its 10 rules take peers from teams further on (namespace selectors,
// pods by label in a team's namespaces, a set of teams by expression), from
// CIDRs and from nodes by label, on TCP ports, TCP ranges and UDP ports, or
// every port.
func benchCNP(k int) *cnpv1alpha2.ClusterNetworkPolicy {
	team := func(j int) string { return fmt.Sprintf("t%d", (k+j)%10) }
	sel := func(key, value string) metav1.LabelSelector {
		return metav1.LabelSelector{MatchLabels: map[string]string{key: value}}
	}
	nsSel := func(j int) *metav1.LabelSelector { s := sel("team", team(j)); return &s }
	pods := func(j int, key, value string) *cnpv1alpha2.NamespacedPod {
		return &cnpv1alpha2.NamespacedPod{NamespaceSelector: sel("team", team(j)), PodSelector: sel(key, value)}
	}
	port := func(n int32) *cnpv1alpha2.Port { return &cnpv1alpha2.Port{Number: n} }
	span := func(start, end int32) *cnpv1alpha2.Port {
		return &cnpv1alpha2.Port{Range: &cnpv1alpha2.PortRange{Start: start, End: end}}
	}
	tcp := func(p *cnpv1alpha2.Port) cnpv1alpha2.ClusterNetworkPolicyProtocol {
		return cnpv1alpha2.ClusterNetworkPolicyProtocol{TCP: &cnpv1alpha2.ClusterNetworkPolicyProtocolTCP{DestinationPort: p}}
	}
	udp := func(p *cnpv1alpha2.Port) cnpv1alpha2.ClusterNetworkPolicyProtocol {
		return cnpv1alpha2.ClusterNetworkPolicyProtocol{UDP: &cnpv1alpha2.ClusterNetworkPolicyProtocolUDP{DestinationPort: p}}
	}
	protos := func(ps ...cnpv1alpha2.ClusterNetworkPolicyProtocol) []cnpv1alpha2.ClusterNetworkPolicyProtocol {
		return ps
	}
	accept, deny, pass := cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept, cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, cnpv1alpha2.ClusterNetworkPolicyRuleActionPass
	tier := cnpv1alpha2.AdminTier
	if k%5 == 4 {
		tier, pass = cnpv1alpha2.BaselineTier, accept // Pass hands over to the tier below; Baseline is the last
	}
	type in = cnpv1alpha2.ClusterNetworkPolicyIngressPeer
	type out = cnpv1alpha2.ClusterNetworkPolicyEgressPeer
	teams := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{team(5), team(6)}}}}
	return &cnpv1alpha2.ClusterNetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", k)},
		Spec: cnpv1alpha2.ClusterNetworkPolicySpec{
			Tier:     tier,
			Priority: int32(k),
			Subject:  cnpv1alpha2.ClusterNetworkPolicySubject{Pods: pods(0, "app", fmt.Sprintf("a%d", (k/10)%10))},
			Ingress: []cnpv1alpha2.ClusterNetworkPolicyIngressRule{
				{Name: "team-web", Action: accept, From: []in{{Namespaces: nsSel(1)}}, Protocols: protos(tcp(port(80)))},
				{Name: "app-range", Action: deny, From: []in{{Pods: pods(2, "app", fmt.Sprintf("a%d", k%10))}}, Protocols: protos(tcp(span(8000, 8100)))},
				{Name: "team-dns", Action: pass, From: []in{{Namespaces: nsSel(3)}}, Protocols: protos(udp(port(53)))},
				{Name: "clients", Action: accept, From: []in{{Pods: pods(4, "role", "client")}}, Protocols: protos(tcp(port(443)), tcp(span(9000, 9100)))},
				{Name: "teams-all", Action: deny, From: []in{{Namespaces: teams}}},
			},
			Egress: []cnpv1alpha2.ClusterNetworkPolicyEgressRule{
				{Name: "team-web", Action: accept, To: []out{{Namespaces: nsSel(5)}}, Protocols: protos(tcp(port(80)), tcp(port(8080)))},
				{Name: "app-dns", Action: accept, To: []out{{Pods: pods(6, "app", fmt.Sprintf("a%d", (k+1)%10))}}, Protocols: protos(udp(port(53)), tcp(port(53)))},
				{Name: "networks", Action: accept, To: []out{{Networks: []cnpv1alpha2.CIDR{cnpv1alpha2.CIDR(fmt.Sprintf("192.168.%d.0/24", k%256)), "172.16.0.0/12"}}},
					Protocols: protos(tcp(port(443)))},
				{Name: "nodes", Action: pass, To: []out{{Nodes: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": fmt.Sprintf("z%d", k%4)}}}},
					Protocols: protos(tcp(port(6443)), tcp(span(10250, 10260)))},
				{Name: "internet", Action: deny, To: []out{{Networks: []cnpv1alpha2.CIDR{"0.0.0.0/0"}}}},
			},
		},
	}
}

func noResolve(policy.PeerSet, string, corev1.Protocol) []int32 { return nil }

// adminPolicies: ClusterNetworkPolicies over the pods in place at a steady
// rate (creation → port group with all its ACLs committed, creation →
// Ready condition), NB rows per rule, then namespaces moved to another team
// at the same rate (label change → every peer set the new team puts the
// namespace's pods in holds their addresses). Without ACL tiers (OVN 23.03)
// every policy must get Ready=False ACLTiersNotSupported and no rows.
func (b *bench) adminPolicies() Result {
	n := b.o.adminPolicies
	if b.np == nil {
		b.s.Fatal("adminpolicies: the admin policy CRDs were not installed before the master started")
	}
	if b.podCount == 0 {
		b.s.Fatal("adminpolicies selects the burst scenario's pods and namespaces: run burst too")
	}
	b.adminRan = true
	b.adminTiers = ovndb.HasACLTiers(b.nb)
	baseline := (n + 1) / 5
	say("== adminpolicies: %d ClusterNetworkPolicies of %d rules (%d Admin tier, %d Baseline) at %d/s over %d pods in %d namespaces, then %d namespaces moved to another team at %d/s",
		n, adminRules, n-baseline, baseline, b.o.policyRate, b.podCount, b.o.namespaces, b.o.labelChanges, b.o.policyRate)
	if !b.adminTiers {
		say("  the NB has no ACL tiers (OVN %s): every policy must be refused (Ready=False, %s) and get no rows", harness.CurrentStack.Name, policy.ReasonNoTiers)
	}
	cnps := make([]*cnpv1alpha2.ClusterNetworkPolicy, n)
	sets := map[string]policy.PeerSet{}
	nodeSets := map[string]bool{}
	b.adminTrack.mu.Lock()
	for k := range cnps {
		cnps[k] = benchCNP(k)
		rows := policy.AdminRows(policy.FromCNP(cnps[k]), noResolve, policy.AdminLogging{}, topology.IPv4Only)
		if rows.Refused != "" || len(rows.Problems) > 0 || len(rows.ACLs) != adminRules {
			b.s.Fatalf("benchmark policy %s: %d ACLs, refused %q, problems %v", cnps[k].Name, len(rows.ACLs), rows.Refused, rows.Problems)
		}
		b.adminTrack.want[cnps[k].Name] = len(rows.ACLs)
		for _, s := range rows.PeerSets {
			sets[s.Name()] = s
		}
		for _, s := range rows.NodeSets {
			nodeSets[s.Name()] = true
		}
	}
	b.adminTrack.mu.Unlock()
	conds := b.watchAdminStatus(b.adminTiers)

	ctx := context.Background()
	rssBefore := procStatus(b.master.Cmd.Process.Pid, "VmRSS")
	stopProfile := b.profile("adminpolicies")
	scraped, apiBefore := b.scrapeMaster(), b.apiSample()
	stopProbe := b.probeNB(20 * time.Millisecond)
	b.northdStats(true)
	created := map[string]time.Time{}
	var createCall []float64
	returned := map[string]time.Time{} // the CREATE call's return, per policy
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(b.o.policyRate)
	start, cpu := time.Now(), cpuSnapshot()
	for k, cnp := range cnps {
		time.Sleep(time.Until(start.Add(time.Duration(k) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if _, err := b.np.PolicyV1alpha2().ClusterNetworkPolicies().Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
			mu.Lock()
			created[cnp.Name] = t0
			returned[cnp.Name] = time.Now()
			createCall = append(createCall, float64(returned[cnp.Name].Sub(t0).Microseconds())/1000)
			mu.Unlock()
		}()
	}
	wg.Wait()
	if b.adminTiers {
		harness.Eventually(b.s, 120*time.Second, "every admin policy's port group with all its ACLs in the NB", func() error {
			if got := b.adminTrack.programmed(); got < n {
				return fmt.Errorf("%d of %d", got, n)
			}
			return nil
		})
	}
	harness.Eventually(b.s, 120*time.Second, "every admin policy's expected Ready condition", func() error {
		conds.mu.Lock()
		got := len(conds.seen)
		conds.mu.Unlock()
		if got < n {
			return fmt.Errorf("%d of %d; Ready conditions seen by status/reason: %v", got, n, conds.tally())
		}
		return nil
	})
	used, wall := cpuSnapshot().since(cpu), time.Since(start).Seconds()
	stopProfile()
	m0 := map[string]float64{}
	probe := describeProbe(m0, "create_", stopProbe())
	northd := describeNorthd(m0, "create_", b.northdStats(false))
	breakdown := masterBreakdown(m0, "create_", scraped, b.scrapeMaster(), "networkpolicies", "policyaddresssets", "policyportgroups", "adminpolicystatus")
	api := describeAPI(m0, "create_", apiBefore, b.apiSample())
	sort.Float64s(createCall)
	m := map[string]float64{"admin_policies": float64(n), "rules": float64(n * adminRules), "pods": float64(b.podCount), "rate_per_s": float64(b.o.policyRate),
		"admin_tier": float64(n - baseline), "baseline_tier": float64(baseline),
		"api_create_call_p50_ms": pct(createCall, 0.5), "api_create_call_p99_ms": pct(createCall, 0.99), "acl_tiers": 0}
	latencies := func(seen map[string]time.Time) []float64 { return between(created, seen) }
	conds.mu.Lock()
	lat := latencies(conds.seen)
	m["expected_conditions"] = float64(len(conds.seen)) // Ready=True, or ACLTiersNotSupported without tiers
	watched := maps.Clone(conds.watched)
	conds.mu.Unlock()
	// The limit in the same run: the API server's share, creation → the
	// benchmark's own informer told of the policy (the master's is told at
	// the same time by the same server).
	apiLat := latencies(watched)
	m["create_to_watch_p50_ms"], m["create_to_watch_p99_ms"] = pct(apiLat, 0.5), pct(apiLat, 0.99)
	m["create_to_condition_p50_ms"], m["create_to_condition_p99_ms"], m["create_to_condition_max_ms"] = pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1]
	if b.adminTiers {
		m["acl_tiers"] = 1
		b.adminTrack.mu.Lock()
		lat = latencies(b.adminTrack.seen)
		m["create_to_acls_p50_ms"], m["create_to_acls_p99_ms"], m["create_to_acls_max_ms"] = pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1]
		ours := between(watched, b.adminTrack.seen)
		slowest := slowestOf(created, b.adminTrack.seen, 5)
		b.adminTrack.mu.Unlock()
		m["create_to_acls_p99_ratio_to_target"] = m["create_to_acls_p99_ms"] / 100
		m["watch_to_acls_p50_ms"], m["watch_to_acls_p99_ms"] = pct(ours, 0.5), pct(ours, 0.99)
		say("  creation → port group with its %d ACLs committed: p50 %.0f ms, p99 %.0f ms (%.2f × the 100 ms target), max %.0f ms",
			adminRules, m["create_to_acls_p50_ms"], m["create_to_acls_p99_ms"], m["create_to_acls_p99_ratio_to_target"], m["create_to_acls_max_ms"])
		floor := ""
		if b.cnpCreateP99 > 0 {
			floor = fmt.Sprintf(", against p99 %.0f ms at this rate with nothing else running (limits)", b.cnpCreateP99)
		}
		say("    of which the API server's (creation → the benchmark's informer told): p50 %.0f ms, p99 %.0f ms (the CREATE call alone: p50 %.0f ms, p99 %.0f ms%s; the slowest: %s);",
			m["create_to_watch_p50_ms"], m["create_to_watch_p99_ms"], m["api_create_call_p50_ms"], m["api_create_call_p99_ms"], floor, slowestOf(created, returned, 5))
		say("    informer told → ACLs committed, per policy (the master and the NB): p50 %.0f ms, p99 %.0f ms%s; the slowest: %s",
			m["watch_to_acls_p50_ms"], m["watch_to_acls_p99_ms"], informerLag(ours), slowest)
	}
	maps.Copy(m, m0)
	if breakdown != "" {
		say("    inside the master meanwhile: %s", breakdown)
	}
	say("    the API server meanwhile: %s", api)
	say("    the NB's limit meanwhile: %s", probe)
	say("    ovn-northd meanwhile: %s", northd)
	say("  creation → Ready condition in the policy's status (%v): p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		conds.tally(), m["create_to_condition_p50_ms"], m["create_to_condition_p99_ms"], m["create_to_condition_max_ms"])
	used.metrics(m, wall)
	say("  CPU: %s", used.describe(wall))

	r := b.adminRows(sets, nodeSets)
	if b.adminTiers {
		maps.Copy(m, r)
	} else { // the sets are NetworkPolicy's, if any: only the policies' own rows count
		m["port_groups"], m["acls"] = r["port_groups"], r["acls"]
	}
	time.Sleep(2 * time.Second) // let the Go runtime settle before reading RSS
	b.adminRSS = procStatus(b.master.Cmd.Process.Pid, "VmRSS") - rssBefore
	m["kib_per_admin_policy"] = b.adminRSS / float64(n)
	if !b.adminTiers {
		if rows := r["port_groups"] + r["acls"]; rows > 0 {
			say("  WRONG: %.0f port groups and ACLs of admin policies in an NB without ACL tiers", rows)
		} else {
			say("  all %d refused (%s); no port group or ACL of theirs in the NB; master RSS +%.1f KiB per policy", n, policy.ReasonNoTiers, m["kib_per_admin_policy"])
		}
		return Result{Scenario: "adminpolicies", Metrics: m,
			Notes: "no ACL tiers in this NB: every policy refused with " + policy.ReasonNoTiers + ", nothing programmed, no namespace moves"}
	}
	m["rows_per_rule"] = (r["port_groups"] + r["acls"] + r["peer_sets"] + r["node_sets"]) / float64(n*adminRules)
	m["acls_per_rule"] = r["acls"] / float64(n*adminRules)
	say("  NB rows: %.0f port groups, %.0f ACLs, %.0f peer address sets (shared with NetworkPolicy), %.0f node address sets = %.2f rows and %.2f ACLs per rule,",
		r["port_groups"], r["acls"], r["peer_sets"], r["node_sets"], m["rows_per_rule"], m["acls_per_rule"])
	say("    while the port groups hold %.0f pod ports and the sets %.0f addresses (none is a row); master RSS +%.1f KiB per policy",
		r["subject_ports"], r["set_addresses"], m["kib_per_admin_policy"])

	stopProfile = b.profile("adminpolicies-moves")
	b.moveNamespaces(m, sets)
	stopProfile()
	b.adminCount = n
	return Result{Scenario: "adminpolicies", Metrics: m,
		Notes: "latencies from the client sending CREATE/PATCH to the benchmark's NB watcher (rows) or CNP informer (status) seeing them"}
}

// between is, for each name in from, the milliseconds from its time in from
// to its time in to, sorted (a name missing from to counts from the zero time:
// the caller waits for all of them first).
func between(from, to map[string]time.Time) []float64 {
	lat := make([]float64, 0, len(from))
	for name, t0 := range from {
		lat = append(lat, float64(to[name].Sub(t0).Microseconds())/1000)
	}
	sort.Float64s(lat)
	return lat
}

// informerLag says how many of the sorted splits are negative: the NB had
// the rows before the benchmark's own informer was told of the object, so
// its informer lagged the master's (a starved benchmark) and the split
// under-counts the master's and the NB's share. Empty when none is.
func informerLag(sorted []float64) string {
	n, _ := slices.BinarySearch(sorted, 0)
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(" (%d of %d done before the benchmark's informer was told: it lagged, so this split under-counts the master's and the NB's share)", n, len(sorted))
}

// slowestOf names the n names slowest from from to to, with their
// latencies and the order they started in (#1 first).
func slowestOf(from, to map[string]time.Time, n int) string {
	names := slices.Collect(maps.Keys(from))
	slices.SortFunc(names, func(a, b string) int { return from[a].Compare(from[b]) })
	order := map[string]int{}
	for i, name := range names {
		order[name] = i + 1
	}
	slices.SortFunc(names, func(a, b string) int { return cmp.Compare(to[b].Sub(from[b]), to[a].Sub(from[a])) })
	var parts []string
	for _, name := range names[:min(n, len(names))] {
		parts = append(parts, fmt.Sprintf("%s (#%d) %.0f ms", name, order[name], float64(to[name].Sub(from[name]).Microseconds())/1000))
	}
	return strings.Join(parts, ", ")
}

// adminRows counts the NB rows of the admin policies: their port groups and
// ACLs, and the peer and node address sets they name, with the pod ports
// and addresses those hold.
func (b *bench) adminRows(sets map[string]policy.PeerSet, nodeSets map[string]bool) map[string]float64 {
	ours := func(ids map[string]string) bool {
		o, ok := topology.OwnerOf(ids)
		return ok && o.Type == policy.KindCNP
	}
	var pgs []nbdb.PortGroup
	var acls []nbdb.ACL
	var ass []nbdb.AddressSet
	ctx := context.Background()
	_ = b.nb.WhereCache(func(r *nbdb.PortGroup) bool { return ours(r.ExternalIDs) }).List(ctx, &pgs)
	_ = b.nb.WhereCache(func(r *nbdb.ACL) bool { return ours(r.ExternalIDs) }).List(ctx, &acls)
	_ = b.nb.WhereCache(func(r *nbdb.AddressSet) bool { _, ok := sets[r.Name]; return ok || nodeSets[r.Name] }).List(ctx, &ass)
	m := map[string]float64{"port_groups": float64(len(pgs)), "acls": float64(len(acls))}
	for _, pg := range pgs {
		m["subject_ports"] += float64(b.sets.size(nbdb.PortGroupTable, pg.Name))
	}
	for _, as := range ass {
		if nodeSets[as.Name] {
			m["node_sets"]++
		} else {
			m["peer_sets"]++
		}
		m["set_addresses"] += float64(b.sets.size(nbdb.AddressSetTable, as.Name))
	}
	return m
}

// moveNamespaces moves namespaces to the next team (team=t<i> →
// t<i+1 mod 10>) at the policy rate, -label-changes of them in rounds of at
// most one move per namespace; each round is waited for before the next
// moves a namespace again. A move is timed from its PATCH until every peer
// set its new team puts the namespace's pods in (and its old team did not)
// holds their addresses.
func (b *bench) moveNamespaces(m map[string]float64, sets map[string]policy.PeerSet) {
	ctx := context.Background()
	cl := b.kube.Client.CoreV1().Namespaces()
	// The API server's share of a move: PATCH → the benchmark's own
	// namespace informer told (the master's is told by the same server).
	f := informers.NewSharedInformerFactory(b.kube.Client, 0)
	_, _ = f.Core().V1().Namespaces().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		UpdateFunc: func(_, obj any) { b.adminTrack.namespaceSeen(obj) },
	})
	stop := make(chan struct{})
	defer close(stop)
	f.Start(stop)
	f.WaitForCacheSync(stop)
	nsLabels := make([]labels.Set, b.o.namespaces)
	for i := range nsLabels {
		ns, err := cl.Get(ctx, burstNamespace(i), metav1.GetOptions{})
		if err != nil {
			b.s.Fatal(err)
		}
		nsLabels[i] = labels.Set(ns.Labels)
	}
	// Every move's expectations (the addresses and ports its pods bring,
	// from the benchmark's informer and NB cache) are worked out before the
	// moves start, so that the benchmark's own bookkeeping takes no CPU from
	// the master while it is timed: pods and ports do not change meanwhile.
	var rounds [][]plannedMove
	var moves, groupMoves []*nsMove
	setsMoved, groupsMoved := 0, 0
	subjects := b.benchSubjects()
	for planned := 0; planned < b.o.labelChanges; {
		var round []plannedMove
		for i := 0; i < min(b.o.namespaces, b.o.labelChanges-planned); i++ {
			pm := b.planMove(i, nsLabels, sets, subjects)
			if len(pm.want) > 0 {
				moves = append(moves, pm.mv)
				setsMoved += len(pm.want)
			}
			if len(pm.groups) > 0 {
				groupMoves = append(groupMoves, pm.mv)
				groupsMoved += len(pm.groups)
			}
			round = append(round, pm)
		}
		rounds = append(rounds, round)
		planned += len(round)
	}
	scraped, apiBefore := b.scrapeMaster(), b.apiSample()
	stopProbe := b.probeNB(20 * time.Millisecond)
	b.northdStats(true)
	movesStart, movesCPU := time.Now(), cpuSnapshot()
	interval := time.Second / time.Duration(b.o.policyRate)
	for _, round := range rounds {
		var wg sync.WaitGroup
		start := time.Now()
		for i, pm := range round {
			time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
			wg.Add(1)
			go func() {
				defer wg.Done()
				if len(pm.want) > 0 || len(pm.groups) > 0 {
					b.adminTrack.expect(pm.mv, pm.want, pm.groups)
				}
				if _, err := cl.Patch(ctx, pm.mv.ns, types.MergePatchType, pm.patch, metav1.PatchOptions{}); err != nil {
					b.s.Fatal(err)
				}
			}()
		}
		wg.Wait()
		harness.Eventually(b.s, 60*time.Second, "every moved namespace's pods in the peer sets of its new team", func() error {
			b.adminTrack.mu.Lock()
			defer b.adminTrack.mu.Unlock()
			if left := len(b.adminTrack.moves); left > 0 {
				return fmt.Errorf("%d namespaces not yet in all their sets and port groups", left)
			}
			return nil
		})
	}
	movesUsed, movesWall := cpuSnapshot().since(movesCPU), time.Since(movesStart).Seconds()
	probe := describeProbe(m, "moves_", stopProbe())
	northd := describeNorthd(m, "moves_", b.northdStats(false))
	breakdown := masterBreakdown(m, "moves_", scraped, b.scrapeMaster(), "networkpolicies", "policyaddresssets", "policyportgroups")
	api := describeAPI(m, "moves_", apiBefore, b.apiSample())
	if len(moves) == 0 {
		say("  namespace moves: none changed the members of a peer set (no pods with addresses?)")
		return
	}
	var lat, apiLat, ours []float64
	b.adminTrack.mu.Lock()
	for _, mv := range moves {
		lat = append(lat, float64(mv.done.Sub(mv.start).Microseconds())/1000)
		if !mv.watched.IsZero() { // the informer may coalesce two updates of one namespace
			apiLat = append(apiLat, float64(mv.watched.Sub(mv.start).Microseconds())/1000)
			ours = append(ours, float64(mv.done.Sub(mv.watched).Microseconds())/1000)
		}
	}
	writeMoves(filepath.Join(b.o.out, "adminpolicies-moves.tsv"), movesStart, moves)
	b.adminTrack.mu.Unlock()
	sort.Float64s(lat)
	sort.Float64s(apiLat)
	sort.Float64s(ours)
	m["namespace_moves"] = float64(len(lat))
	m["sets_per_move"] = float64(setsMoved) / float64(len(lat))
	m["ns_label_to_address_sets_p50_ms"], m["ns_label_to_address_sets_p99_ms"], m["ns_label_to_address_sets_max_ms"] = pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1]
	m["ns_label_to_address_sets_p99_ratio_to_target"] = m["ns_label_to_address_sets_p99_ms"] / 100
	say("  namespace label change → every peer set of its new team updated (%.1f sets per move): p50 %.0f ms, p99 %.0f ms (%.2f × the 100 ms target), max %.0f ms (%d moves)",
		m["sets_per_move"], m["ns_label_to_address_sets_p50_ms"], m["ns_label_to_address_sets_p99_ms"], m["ns_label_to_address_sets_p99_ratio_to_target"],
		m["ns_label_to_address_sets_max_ms"], len(lat))
	if len(ours) > 0 {
		m["ns_label_to_watch_p50_ms"], m["ns_label_to_watch_p99_ms"] = pct(apiLat, 0.5), pct(apiLat, 0.99)
		m["ns_watch_to_address_sets_p50_ms"], m["ns_watch_to_address_sets_p99_ms"] = pct(ours, 0.5), pct(ours, 0.99)
		say("    of which the API server's (PATCH → the benchmark's namespace informer told): p50 %.0f ms, p99 %.0f ms; informer told → sets updated (the master and the NB): p50 %.0f ms, p99 %.0f ms%s",
			m["ns_label_to_watch_p50_ms"], m["ns_label_to_watch_p99_ms"], m["ns_watch_to_address_sets_p50_ms"], m["ns_watch_to_address_sets_p99_ms"], informerLag(ours))
	}
	if len(groupMoves) > 0 {
		var glat []float64
		b.adminTrack.mu.Lock()
		for _, mv := range groupMoves {
			glat = append(glat, float64(mv.groupsDone.Sub(mv.start).Microseconds())/1000)
		}
		b.adminTrack.mu.Unlock()
		sort.Float64s(glat)
		m["groups_per_move"] = float64(groupsMoved) / float64(len(glat))
		m["ns_label_to_subject_groups_p50_ms"], m["ns_label_to_subject_groups_p99_ms"], m["ns_label_to_subject_groups_max_ms"] = pct(glat, 0.5), pct(glat, 0.99), glat[len(glat)-1]
		say("  namespace label change → every subject port group its pods enter or leave updated (%.1f groups per move; reported): p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d moves)",
			m["groups_per_move"], m["ns_label_to_subject_groups_p50_ms"], m["ns_label_to_subject_groups_p99_ms"], m["ns_label_to_subject_groups_max_ms"], len(glat))
	}
	if breakdown != "" {
		say("    inside the master meanwhile: %s", breakdown)
	}
	say("    the API server meanwhile: %s", api)
	say("    the NB's limit meanwhile: %s", probe)
	say("    ovn-northd meanwhile: %s", northd)
	say("    CPU over the moves: %s", movesUsed.describe(movesWall))
	for name, v := range movesUsed {
		m["moves_"+cpuMetric(name)] = v
	}
	m["moves_wall_s"] = movesWall
}

// writeMoves records each timed move in the order sent (sent, peer sets
// done and subject groups done, in ms from the first move), so that a
// run's latencies can be read against time: a backlog that builds and
// drains, or one that only grows.
func writeMoves(path string, start time.Time, moves []*nsMove) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	var sb strings.Builder
	sb.WriteString("namespace\tsent_ms\tpeer_sets_ms\tsubject_groups_ms\n")
	for _, mv := range moves {
		groups := "-"
		if !mv.groupsDone.IsZero() {
			groups = fmt.Sprintf("%.1f", ms(mv.groupsDone.Sub(mv.start)))
		}
		fmt.Fprintf(&sb, "%s\t%.1f\t%.1f\t%s\n", mv.ns, ms(mv.start.Sub(start)), ms(mv.done.Sub(mv.start)), groups)
	}
	_ = os.WriteFile(path, []byte(sb.String()), 0o644)
}

// plannedMove is a namespace move worked out ahead: its PATCH and what it
// must change in the NB.
type plannedMove struct {
	mv     *nsMove
	patch  []byte
	want   map[string][]string // peer set → the addresses it must gain
	groups map[string]*rowWait // subject port group → the ports it must gain or lose
}

// planMove moves burst namespace i to the next team in nsLabels and says
// what that move must change.
func (b *bench) planMove(i int, nsLabels []labels.Set, sets map[string]policy.PeerSet, subjects []adminSubject) plannedMove {
	old := nsLabels[i]
	cur := maps.Clone(old)
	t, _ := strconv.Atoi(strings.TrimPrefix(old["team"], "t"))
	cur["team"] = fmt.Sprintf("t%d", (t+1)%10)
	nsLabels[i] = cur
	ns := burstNamespace(i)
	want := map[string][]string{}
	for name, s := range sets {
		if s.Namespaces.Matches(cur) && !s.Namespaces.Matches(old) {
			if addrs := b.addressesIn(ns, s.Pods); len(addrs) > 0 {
				want[name] = addrs
			}
		}
	}
	return plannedMove{mv: &nsMove{ns: ns, team: cur["team"]}, want: want, groups: b.subjectMoves(ns, old, cur, subjects),
		patch: []byte(fmt.Sprintf(`{"metadata":{"labels":{"team":%q}}}`, cur["team"]))}
}

// adminSubject is a benchmark policy's subject and its port group.
type adminSubject struct {
	group      string
	namespaces labels.Selector
	pods       labels.Selector
}

// benchSubjects are the subjects of the -admin-policies benchmark policies.
func (b *bench) benchSubjects() []adminSubject {
	var out []adminSubject
	for k := range b.o.adminPolicies {
		p := benchCNP(k)
		ns, err := metav1.LabelSelectorAsSelector(&p.Spec.Subject.Pods.NamespaceSelector)
		if err != nil {
			b.s.Fatal(err)
		}
		pods, err := metav1.LabelSelectorAsSelector(&p.Spec.Subject.Pods.PodSelector)
		if err != nil {
			b.s.Fatal(err)
		}
		out = append(out, adminSubject{group: policy.AdminPortGroup(policy.KindCNP, p.Name), namespaces: ns, pods: pods})
	}
	return out
}

// subjectMoves are the port groups a namespace's move from old to cur
// labels makes its pods' ports enter or leave.
func (b *bench) subjectMoves(ns string, old, cur labels.Set, subjects []adminSubject) map[string]*rowWait {
	out := map[string]*rowWait{}
	for _, s := range subjects {
		was, is := s.namespaces.Matches(old), s.namespaces.Matches(cur)
		if was == is {
			continue
		}
		if ports := b.portsIn(ns, s.pods); len(ports) > 0 {
			out[s.group] = &rowWait{items: ports, in: is}
		}
	}
	return out
}

// portsIn are the UUIDs of the ports of a namespace's pods that match a
// selector, from the benchmark's NB cache.
func (b *bench) portsIn(ns string, sel labels.Selector) []string {
	pods, err := b.pods.Pods(ns).List(sel)
	if err != nil {
		b.s.Fatal(err)
	}
	var out []string
	for _, p := range pods {
		lsp := &nbdb.LogicalSwitchPort{Name: topology.PodPort(ns, p.Name)}
		if err := b.nb.Get(context.Background(), lsp); err == nil {
			out = append(out, lsp.UUID)
		}
	}
	return out
}

// addressesIn are the IPv4 addresses of a namespace's annotated pods that
// match a selector, from the benchmark's pod informer.
func (b *bench) addressesIn(ns string, sel labels.Selector) []string {
	pods, err := b.pods.Pods(ns).List(sel)
	if err != nil {
		b.s.Fatal(err)
	}
	var out []string
	for _, p := range pods {
		pn, err := annotations.ParsePodNetworks(p.Annotations[annotations.PodNetworks])
		if err != nil {
			continue
		}
		for _, ip := range pn.IPs {
			if ip.Addr().Is4() {
				out = append(out, ip.Addr().String())
			}
		}
	}
	return out
}
