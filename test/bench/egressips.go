package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// eipGatewayNodes is how many of the burst's nodes get a shared gateway in
// the egressips scenario (at least -egress-nodes): node000, node001, ...
const eipGatewayNodes = 4

// eipWatch is what the benchmark expects of one EgressIP and when it first
// saw it.
type eipWatch struct {
	ip    string          // its egress IP
	pods  map[string]bool // the IPv4 addresses of the pods it selects
	avoid string          // a node it must not be on (failover; "" none)
	start time.Time       // CREATE sent, or the failover's node update sent
	// assigned: the status first put the IP on a node (not avoid);
	// programmed: the NB first held its rows complete on such a node.
	assigned, programmed time.Time
	node                 string // the node its status names now
}

// eipNAT is an SNAT row of an EgressIP.
type eipNAT struct{ eip, logical, external string }

// eipTracker follows, from the benchmark's NB watcher and its own EgressIP
// informer, when each EgressIP is assigned in its status and when its rows
// are complete in the NB: the reroute policy with the egress node's join
// address as its only next hop, the address set holding exactly its pods'
// addresses, and an SNAT of each pod address to the egress IP on that
// node's gateway router and on no other.
type eipTracker struct {
	mu       sync.Mutex
	want     map[string]*eipWatch       // EgressIP name → expected
	joinNode map[string]string          // gateway join address → node
	nats     map[string]eipNAT          // NAT UUID → its EgressIP's SNAT (EgressIP-owned rows only)
	byEIP    map[string]map[string]bool // EgressIP → its NAT UUIDs
	routerOf map[string]string          // NAT UUID → the gateway router holding it
	hops     map[string][]string        // EgressIP → its reroute's next hops
	setExact map[string]bool            // EgressIP → its address set holds exactly its pods' addresses
	writes   eipWrites                  // the EgressIPs' row writes seen so far
}

// eipWrites counts the row changes of the EgressIPs' rows the NB watcher
// sees: what the master wrote, whatever it was asked to.
type eipWrites struct {
	natInserts, natDeletes, natUpdates float64 // EgressIP SNAT rows
	routerNATChanges                   float64 // gateway router updates that changed its NAT column
	setWrites, policyWrites            float64 // EgressIP address sets and reroute policies inserted, updated or deleted
}

func (w eipWrites) since(e eipWrites) eipWrites {
	return eipWrites{w.natInserts - e.natInserts, w.natDeletes - e.natDeletes, w.natUpdates - e.natUpdates,
		w.routerNATChanges - e.routerNATChanges, w.setWrites - e.setWrites, w.policyWrites - e.policyWrites}
}

func (w eipWrites) metrics(m map[string]float64, prefix string) {
	m[prefix+"snat_inserts"], m[prefix+"snat_deletes"], m[prefix+"snat_updates"] = w.natInserts, w.natDeletes, w.natUpdates
	m[prefix+"router_nat_updates"], m[prefix+"set_writes"], m[prefix+"policy_writes"] = w.routerNATChanges, w.setWrites, w.policyWrites
}

func (w eipWrites) String() string {
	return fmt.Sprintf("%.0f SNAT inserts, %.0f deletes, %.0f updates; %.0f gateway router NAT column updates; %.0f set and %.0f reroute writes",
		w.natInserts, w.natDeletes, w.natUpdates, w.routerNATChanges, w.setWrites, w.policyWrites)
}

func (t *eipTracker) counts() eipWrites {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.writes
}

func newEIPTracker() *eipTracker {
	return &eipTracker{want: map[string]*eipWatch{}, joinNode: map[string]string{}, nats: map[string]eipNAT{},
		byEIP: map[string]map[string]bool{}, routerOf: map[string]string{}, hops: map[string][]string{}, setExact: map[string]bool{}}
}

func eipOwner(ids map[string]string) (string, bool) {
	o, ok := topology.OwnerOf(ids)
	if !ok || o.Type != egressip.OwnerEgressIP {
		return "", false
	}
	return o.Name, true
}

// added, updated and deleted take the NB watcher's events.
func (t *eipTracker) added(row model.Model) { t.event(nil, row, false) }

func (t *eipTracker) updated(old, cur model.Model) { t.event(old, cur, false) }

func (t *eipTracker) deleted(row model.Model) { t.event(nil, row, true) }

// setChanged takes setWatch's changes: an EgressIP's address set holding
// exactly its pods' addresses or not.
func (t *eipTracker) setChanged(r *setRow, deleted bool, now time.Time) {
	name, ok := eipOwner(r.ids)
	if r.table != nbdb.AddressSetTable || !ok || strings.HasSuffix(r.name, topology.V6SetSuffix) {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.writes.setWrites++
	w := t.want[name]
	exact := !deleted && w != nil && len(r.members) == len(w.pods)
	for a := range r.members {
		exact = exact && w.pods[a]
	}
	t.setExact[name] = exact
	t.check(name, now)
}

func (t *eipTracker) event(old, row model.Model, deleted bool) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	touched := map[string]bool{}
	switch r := row.(type) {
	case *nbdb.NAT:
		name, ok := eipOwner(r.ExternalIDs)
		if !ok {
			return
		}
		touched[name] = true
		switch _, known := t.nats[r.UUID]; {
		case deleted:
			t.writes.natDeletes++
		case known:
			t.writes.natUpdates++
		default:
			t.writes.natInserts++
		}
		if deleted {
			delete(t.nats, r.UUID)
			delete(t.byEIP[name], r.UUID)
			delete(t.routerOf, r.UUID)
			break
		}
		t.nats[r.UUID] = eipNAT{eip: name, logical: r.LogicalIP, external: r.ExternalIP}
		if t.byEIP[name] == nil {
			t.byEIP[name] = map[string]bool{}
		}
		t.byEIP[name][r.UUID] = true
	case *nbdb.LogicalRouterPolicy:
		name, ok := eipOwner(r.ExternalIDs)
		if !ok {
			return
		}
		touched[name] = true
		t.writes.policyWrites++
		if deleted {
			delete(t.hops, name)
		} else {
			t.hops[name] = slices.Clone(r.Nexthops)
		}
	case *nbdb.LogicalRouter:
		if _, ok := topology.GatewayRouterNode(r.Name); !ok {
			return
		}
		var before []string
		if o, ok := old.(*nbdb.LogicalRouter); ok {
			before = o.Nat
		}
		after := r.Nat
		if deleted {
			before, after = r.Nat, nil
		}
		if !slices.Equal(before, after) {
			t.writes.routerNATChanges++
		}
		in := make(map[string]bool, len(after))
		for _, u := range after {
			in[u] = true
		}
		for _, u := range before {
			if !in[u] && t.routerOf[u] == r.Name {
				delete(t.routerOf, u)
				if n, ok := t.nats[u]; ok {
					touched[n.eip] = true
				}
			}
		}
		was := make(map[string]bool, len(before))
		for _, u := range before {
			was[u] = true
		}
		for _, u := range after {
			if !was[u] || t.routerOf[u] != r.Name {
				t.routerOf[u] = r.Name
				if n, ok := t.nats[u]; ok {
					touched[n.eip] = true
				}
			}
		}
	}
	for name := range touched {
		t.check(name, now)
	}
}

// check records when an EgressIP's rows are first complete on a node
// (other than the one it must leave). Called with t.mu held.
func (t *eipTracker) check(name string, now time.Time) {
	w := t.want[name]
	if w == nil || !w.programmed.IsZero() {
		return
	}
	if node, ok := t.complete(name, w); ok && node != w.avoid {
		w.programmed = now
	}
}

// complete says whether an EgressIP's rows are complete, and on which node.
func (t *eipTracker) complete(name string, w *eipWatch) (string, bool) {
	hops := t.hops[name]
	if len(hops) != 1 || !t.setExact[name] {
		return "", false
	}
	node, ok := t.joinNode[hops[0]]
	if !ok {
		return "", false
	}
	gr := topology.GatewayRouter(node)
	seen := map[string]bool{}
	for u := range t.byEIP[name] {
		n, r := t.nats[u], t.routerOf[u]
		switch {
		case r == "": // not (yet) held by a router: ignored
		case r != gr || n.external != w.ip || !w.pods[n.logical]:
			return "", false // still on another router, or not what is wanted
		default:
			seen[n.logical] = true
		}
	}
	return node, len(seen) == len(w.pods)
}

// status takes the benchmark's EgressIP informer's events.
func (t *eipTracker) status(obj any) {
	e, ok := obj.(*k8sovnv1.EgressIP)
	if !ok {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.want[e.Name]
	if w == nil {
		return
	}
	w.node = ""
	for _, it := range e.Status.Items {
		if it.EgressIP == w.ip {
			w.node = it.Node
		}
	}
	if w.node != "" && w.node != w.avoid && w.assigned.IsZero() {
		w.assigned = now
	}
}

// expect registers EgressIPs before they are created, or before their
// node fails (avoid): their times start afresh.
func (t *eipTracker) expect(name string, w *eipWatch) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.want[name] = w
}

// restart makes the named EgressIPs wait again, to leave the node avoid;
// started at start.
func (t *eipTracker) restart(names []string, avoid string, start time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		w := t.want[name]
		w.avoid, w.start, w.assigned, w.programmed = avoid, start, time.Time{}, time.Time{}
	}
}

// resetRows forgets the NB rows (the watcher reconnected to an empty NB: a
// reconnect empties its cache without delete events) and when the
// EgressIPs were programmed, and returns their names.
func (t *eipTracker) resetRows() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.nats, t.byEIP, t.routerOf, t.hops, t.setExact = map[string]eipNAT{}, map[string]map[string]bool{}, map[string]string{}, map[string][]string{}, map[string]bool{}
	var names []string
	for name, w := range t.want {
		w.avoid, w.programmed = "", time.Time{}
		names = append(names, name)
	}
	return names
}

// progress counts the EgressIPs among names assigned and programmed.
func (t *eipTracker) progress(names []string) (assigned, programmed int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		w := t.want[name]
		if !w.assigned.IsZero() {
			assigned++
		}
		if !w.programmed.IsZero() {
			programmed++
		}
	}
	return assigned, programmed
}

// latencies are, over names sorted, start → assigned and start → programmed
// in ms, and the last of each.
func (t *eipTracker) latencies(names []string) (assigned, programmed []float64, lastAssigned, lastProgrammed time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, name := range names {
		w := t.want[name]
		assigned = append(assigned, float64(w.assigned.Sub(w.start).Microseconds())/1000)
		programmed = append(programmed, float64(w.programmed.Sub(w.start).Microseconds())/1000)
		lastAssigned, lastProgrammed = maxDur(lastAssigned, w.assigned), maxDur(lastProgrammed, w.programmed)
	}
	sort.Float64s(assigned)
	sort.Float64s(programmed)
	return assigned, programmed, lastAssigned, lastProgrammed
}

// nodes is each EgressIP's node as its status names it now.
func (t *eipTracker) nodes() map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]string{}
	for name, w := range t.want {
		out[name] = w.node
	}
	return out
}

func (b *bench) eipClient() dynamic.Interface {
	d, err := dynamic.NewForConfig(b.kube.Config)
	if err != nil {
		b.s.Fatal(err)
	}
	return d
}

// watchEIPStatus runs the benchmark's own EgressIP informer into the tracker.
func (b *bench) watchEIPStatus(d dynamic.Interface) {
	inf := k8sovnv1.NewEgressIPInformer(d, 0)
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    b.eipTrack.status,
		UpdateFunc: func(_, obj any) { b.eipTrack.status(obj) },
	})
	stop := make(chan struct{})
	b.s.Cleanup(func() { close(stop) })
	go inf.Run(stop)
	if !toolscache.WaitForCacheSync(stop, inf.HasSynced) {
		b.s.Fatal("the benchmark's EgressIP informer did not sync")
	}
}

// eipNodeName is the i-th gateway node of the egressips scenario.
func eipNodeName(i int) string { return fmt.Sprintf("node%03d", i) }

// eipNodeAddress is its address on the external network (172.18.0.0/16).
func eipNodeAddress(i int) string { return fmt.Sprintf("172.18.0.%d", 2+i) }

// eipAddress is the egress IP of EgressIP k, in the gateways' /16.
func eipAddress(k int) string { return fmt.Sprintf("172.18.%d.%d", 1+k/250, 1+k%250) }

// setNodeReady sets a node's address (ip "": kept) and its Ready condition
// with a new heartbeat time, as its kubelet would (the master's probes are
// off: --egressip-reachability-timeout 0).
func (b *bench) setNodeReady(name, ip string, ready bool) {
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	ctx := context.Background()
	cl := b.kube.Client.CoreV1().Nodes()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, err := cl.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ip != "" {
			node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}}
		_, err = cl.UpdateStatus(ctx, node, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		b.s.Fatal(err)
	}
}

// eipGateways gives the first eipGatewayNodes nodes a shared gateway on
// 172.18.0.0/16, as their node daemons would (l3-gateway-config, chassis id,
// a Ready condition, an address), labels the first -egress-nodes of them
// egress-assignable, waits for the master to build their gateway routers
// and annotate their join addresses, and returns the nodes by join address.
func (b *bench) eipGateways(assignable int) map[string]string {
	ctx := context.Background()
	mac, _ := net.ParseMAC("0a:58:ac:12:00:02")
	for i := 0; i < eipGatewayNodes; i++ {
		name := eipNodeName(i)
		gw := annotations.FormatL3GatewayConfig(annotations.L3GatewayConfig{Mode: "shared", InterfaceID: topology.LocalnetPort("breth0", name),
			MAC: mac, IPs: []netip.Prefix{netip.MustParsePrefix(eipNodeAddress(i) + "/16")}, NextHops: []netip.Addr{netip.MustParseAddr("172.18.0.1")},
			NodePortEnable: true})
		meta := map[string]any{"annotations": map[string]string{annotations.NodeL3GatewayConfig: gw, annotations.NodeChassisID: "chassis-" + name}}
		if i < assignable {
			meta["labels"] = map[string]string{k8sovnv1.EgressAssignableLabel: ""}
		}
		patch, _ := json.Marshal(map[string]any{"metadata": meta})
		if _, err := b.kube.Client.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.s.Fatal(err)
		}
		b.setNodeReady(name, eipNodeAddress(i), true)
	}
	joins := map[string]string{}
	harness.Eventually(b.s, 60*time.Second, fmt.Sprintf("%d gateway routers built and their join addresses annotated", eipGatewayNodes), func() error {
		for i := 0; i < eipGatewayNodes; i++ {
			name := eipNodeName(i)
			var grs []nbdb.LogicalRouter
			if err := b.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == topology.GatewayRouter(name) }).List(ctx, &grs); err != nil || len(grs) == 0 {
				return fmt.Errorf("no %s in the NB", topology.GatewayRouter(name))
			}
			n, err := b.kube.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			ps, err := annotations.ParseGatewayJoinIPs(n.Annotations[annotations.NodeGatewayJoinIP])
			if err != nil {
				return fmt.Errorf("%s: %v", name, err)
			}
			for _, p := range ps {
				joins[p.Addr().String()] = name
			}
		}
		return nil
	})
	return joins
}

// benchEIP is EgressIP k: egress IP eipAddress(k), the pods of the burst
// namespace k (by its name label) that have an app label.
func benchEIP(k int) *unstructured.Unstructured {
	e := &k8sovnv1.EgressIP{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressIP"},
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%04d", k)},
		Spec: k8sovnv1.EgressIPSpec{EgressIPs: []string{eipAddress(k)},
			NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{corev1.LabelMetadataName: burstNamespace(k)}},
			PodSelector: metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "app", Operator: metav1.LabelSelectorOpExists}}}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
	if err != nil {
		panic(err)
	}
	return &unstructured.Unstructured{Object: obj}
}

// egressIPs: -egress-ips EgressIPs created at -policy-rate, EgressIP k
// selecting the pods of burst namespace k (100 at full size), its egress
// IP hosted by one of -egress-nodes assignable gateway nodes → creation →
// assigned in its status, creation → rows complete in the NB; NB rows per
// selected pod; then the node holding the most egress IPs is made NotReady
// → every one of its IPs on another node in the status and in the NB; the
// master's CPU after each phase, for that node Ready again and for a
// heartbeat of another node; then an idle restart of the master, which must
// write nothing.
func (b *bench) egressIPs() Result {
	n, assignable := b.o.egressIPs, b.o.egressNodes
	if b.np == nil {
		b.s.Fatal("egressips: the CRDs were not installed before the master started")
	}
	if b.podCount == 0 {
		b.s.Fatal("egressips selects the burst scenario's pods: run burst too")
	}
	if n > b.o.namespaces || b.o.nodes <= eipGatewayNodes {
		b.s.Fatalf("egressips: -egress-ips %d needs as many burst namespaces (-namespaces %d), and more than %d nodes (-nodes %d)", n, b.o.namespaces, eipGatewayNodes, b.o.nodes)
	}
	say("== egressips: %d EgressIPs at %d/s, each selecting one burst namespace's pods, over %d egress-assignable nodes (of %d with a gateway); then the busiest egress node NotReady; then an idle restart",
		n, b.o.policyRate, assignable, eipGatewayNodes)
	ctx := context.Background()
	joins := b.eipGateways(assignable)
	b.eipTrack.mu.Lock()
	for ip, node := range joins {
		b.eipTrack.joinNode[ip] = node
	}
	b.eipTrack.mu.Unlock()
	d := b.eipClient()
	b.watchEIPStatus(d)
	// A node without a gateway posts heartbeats; the first gives it its
	// Ready condition, the second, timed, changes nothing but its time.
	beating := eipNodeName(b.o.nodes - 1)
	b.setNodeReady(beating, "", true)
	b.waitNBQuiet()
	m := map[string]float64{}
	m["heartbeat_before_master_cpu_s"], m["heartbeat_before_busy_s"], m["heartbeat_before_periodic_resyncs"] = b.heartbeat(beating)
	say("  a heartbeat of %s before any EgressIP: master busy %.2fs, %.2f CPU s%s", beating, m["heartbeat_before_busy_s"], m["heartbeat_before_master_cpu_s"],
		resyncNote(m["heartbeat_before_periodic_resyncs"]))

	withApp, err := labels.Parse("app") // the EgressIPs' pod selector
	if err != nil {
		b.s.Fatal(err)
	}
	names := make([]string, n)
	objs := make([]*unstructured.Unstructured, n)
	podCount := 0
	for k := range objs {
		objs[k] = benchEIP(k)
		names[k] = objs[k].GetName()
		addrs := b.addressesIn(burstNamespace(k), withApp)
		if len(addrs) == 0 {
			b.s.Fatalf("namespace %s has no pod with an address", burstNamespace(k))
		}
		pods := map[string]bool{}
		for _, a := range addrs {
			pods[a] = true
		}
		podCount += len(pods)
		b.eipTrack.expect(names[k], &eipWatch{ip: eipAddress(k), pods: pods})
	}

	res := d.Resource(k8sovnv1.EgressIPResource)
	rssBefore := procStatus(b.master.Cmd.Process.Pid, "VmRSS")
	stopProfile := b.profile("egressips")
	var createCall []float64
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(b.o.policyRate)
	writesBefore := b.eipTrack.counts()
	start, cpu := time.Now(), cpuSnapshot()
	for k, obj := range objs {
		time.Sleep(time.Until(start.Add(time.Duration(k) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			b.eipTrack.mu.Lock()
			b.eipTrack.want[names[k]].start = t0
			b.eipTrack.mu.Unlock()
			if _, err := res.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
			mu.Lock()
			createCall = append(createCall, float64(time.Since(t0).Microseconds())/1000)
			mu.Unlock()
		}()
	}
	wg.Wait()
	b.waitEIPs(names, 300*time.Second, "every EgressIP assigned and its rows complete in the NB")
	used, wall := cpuSnapshot().since(cpu), time.Since(start).Seconds()
	stopProfile()
	sort.Float64s(createCall)
	for k, v := range map[string]float64{"egress_ips": float64(n), "selected_pods": float64(podCount), "pods_per_egress_ip": float64(podCount) / float64(n),
		"rate_per_s": float64(b.o.policyRate), "egress_nodes": float64(assignable), "gateway_nodes": eipGatewayNodes,
		"api_create_call_p50_ms": pct(createCall, 0.5), "api_create_call_p99_ms": pct(createCall, 0.99)} {
		m[k] = v
	}
	assigned, programmed, lastAssigned, lastProgrammed := b.eipTrack.latencies(names)
	m["create_to_status_p50_ms"], m["create_to_status_p99_ms"], m["create_to_status_max_ms"] = pct(assigned, 0.5), pct(assigned, 0.99), assigned[len(assigned)-1]
	m["create_to_rows_p50_ms"], m["create_to_rows_p99_ms"], m["create_to_rows_max_ms"] = pct(programmed, 0.5), pct(programmed, 0.99), programmed[len(programmed)-1]
	m["all_assigned_s"], m["programmed_s"] = lastAssigned.Sub(start).Seconds(), lastProgrammed.Sub(start).Seconds()
	say("  creation → assigned in its status: p50 %.0f ms, p99 %.0f ms, max %.0f ms (the API's CREATE call alone: p50 %.0f ms, p99 %.0f ms)",
		m["create_to_status_p50_ms"], m["create_to_status_p99_ms"], m["create_to_status_max_ms"], m["api_create_call_p50_ms"], m["api_create_call_p99_ms"])
	say("  creation → reroute, set and every pod's SNAT in the NB: p50 %.0f ms, p99 %.0f ms, max %.0f ms",
		m["create_to_rows_p50_ms"], m["create_to_rows_p99_ms"], m["create_to_rows_max_ms"])
	say("  all %d assigned %.2fs and programmed %.2fs after the first CREATE (the last CREATE was sent at %.2fs)",
		n, m["all_assigned_s"], m["programmed_s"], float64(n-1)*interval.Seconds())
	used.metrics(m, wall)
	say("  CPU: %s", used.describe(wall))
	writes := b.eipTrack.counts().since(writesBefore)
	writes.metrics(m, "")
	say("  NB writes of the EgressIPs' rows seen: %s", writes)

	nodes := b.eipTrack.nodes()
	r := b.eipRows(names, nodes)
	for k, v := range r {
		m[k] = v
	}
	m["rows_per_pod"] = (r["snats"] + r["set_addresses"] + r["reroutes"] + r["no_reroutes"]) / float64(podCount)
	say("  NB rows: %.0f SNATs, %.0f addresses in %.0f sets, %.0f reroute and %.0f no-reroute policies for %d pods = %.2f per selected pod (the nodes' set holds %.0f addresses)",
		r["snats"], r["set_addresses"], r["sets"], r["reroutes"], r["no_reroutes"], podCount, m["rows_per_pod"], r["nodes_set_addresses"])
	time.Sleep(2 * time.Second) // let the Go runtime settle before reading RSS
	b.eipRSS = procStatus(b.master.Cmd.Process.Pid, "VmRSS") - rssBefore
	m["kib_per_egress_ip"] = b.eipRSS / float64(n)
	byNode := map[string]int{}
	for _, node := range nodes {
		byNode[node]++
	}
	say("  egress IPs by node: %v; master RSS +%.1f KiB per EgressIP", byNode, m["kib_per_egress_ip"])
	// What the master still does once every row is in place (syncs queued
	// meanwhile that find nothing to change), waited for so that the
	// failover starts from an idle master.
	m["after_programmed_master_cpu_s"], m["after_programmed_busy_s"], m["after_programmed_periodic_resyncs"] = b.masterBusy(func() {})
	say("  after the last EgressIP was complete: master busy %.2fs more, %.2f CPU s%s", m["after_programmed_busy_s"], m["after_programmed_master_cpu_s"],
		resyncNote(m["after_programmed_periodic_resyncs"]))

	b.eipCount = n
	b.eipFailover(m, names, nodes)
	m["heartbeat_master_cpu_s"], m["heartbeat_busy_s"], m["heartbeat_periodic_resyncs"] = b.heartbeat(beating)
	say("  a heartbeat of %s with the EgressIPs in place: master busy %.2fs, %.2f CPU s%s (before any EgressIP: %.2fs, %.2f CPU s%s)",
		beating, m["heartbeat_busy_s"], m["heartbeat_master_cpu_s"], resyncNote(m["heartbeat_periodic_resyncs"]),
		m["heartbeat_before_busy_s"], m["heartbeat_before_master_cpu_s"], resyncNote(m["heartbeat_before_periodic_resyncs"]))
	b.eipRestart(m, names, d)
	return Result{Scenario: "egressips", Metrics: m,
		Notes: "latencies from the client sending CREATE (or the node's status UPDATE) to the benchmark's NB watcher (rows) or EgressIP informer (status) seeing them"}
}

// waitEIPs waits until every named EgressIP is assigned and programmed.
func (b *bench) waitEIPs(names []string, timeout time.Duration, what string) {
	harness.Eventually(b.s, timeout, what, func() error {
		if a, p := b.eipTrack.progress(names); a < len(names) || p < len(names) {
			return fmt.Errorf("%d of %d assigned, %d programmed", a, len(names), p)
		}
		return nil
	})
}

// eipRows checks, in the NB (the benchmark's cache, not the tracker), that
// every EgressIP's rows are exactly what its status says: the reroute to
// its node's join address, the set of its pods' addresses, an SNAT of each
// of them on its node's gateway router and on no other; a row missing or
// wrong fails the run. It counts the rows.
func (b *bench) eipRows(names []string, nodes map[string]string) map[string]float64 {
	ctx := context.Background()
	var nats []nbdb.NAT
	var lrps []nbdb.LogicalRouterPolicy
	var sets []nbdb.AddressSet
	var routers []nbdb.LogicalRouter
	owned := func(ids map[string]string) bool { _, ok := eipOwner(ids); return ok }
	cluster := func(ids map[string]string) bool {
		o, ok := topology.OwnerOf(ids)
		return ok && o.Type == egressip.OwnerCluster
	}
	_ = b.nb.WhereCache(func(r *nbdb.NAT) bool { return owned(r.ExternalIDs) }).List(ctx, &nats)
	_ = b.nb.WhereCache(func(r *nbdb.LogicalRouterPolicy) bool { return owned(r.ExternalIDs) || cluster(r.ExternalIDs) }).List(ctx, &lrps)
	_ = b.nb.WhereCache(func(r *nbdb.AddressSet) bool { return owned(r.ExternalIDs) || cluster(r.ExternalIDs) }).List(ctx, &sets)
	_ = b.nb.WhereCache(func(r *nbdb.LogicalRouter) bool { _, ok := topology.GatewayRouterNode(r.Name); return ok }).List(ctx, &routers)
	m := map[string]float64{"snats": float64(len(nats))}
	routerOf := map[string]string{}
	for _, r := range routers {
		for _, u := range r.Nat {
			routerOf[u] = r.Name
		}
	}
	// The sets' members from the set watch, before the tracker's lock (the
	// watch calls the tracker under its own).
	members := make(map[string][]string, len(sets))
	for _, s := range sets {
		members[s.Name] = b.sets.members(nbdb.AddressSetTable, s.Name)
	}
	b.eipTrack.mu.Lock()
	defer b.eipTrack.mu.Unlock()
	var wrong []string
	bad := func(format string, args ...any) {
		if len(wrong) < 10 {
			wrong = append(wrong, fmt.Sprintf(format, args...))
		}
	}
	byEIP := map[string][]nbdb.NAT{}
	for _, nat := range nats {
		name, _ := eipOwner(nat.ExternalIDs)
		byEIP[name] = append(byEIP[name], nat)
	}
	hops, setOf := map[string][]string{}, map[string][]string{}
	for _, p := range lrps {
		if cluster(p.ExternalIDs) {
			m["no_reroutes"]++
			continue
		}
		m["reroutes"]++
		name, _ := eipOwner(p.ExternalIDs)
		if _, dup := hops[name]; dup {
			bad("EgressIP %s has two reroute policies", name)
		}
		hops[name] = p.Nexthops
	}
	for _, s := range sets {
		if cluster(s.ExternalIDs) {
			m["nodes_set_addresses"] += float64(len(members[s.Name]))
			continue
		}
		m["sets"]++
		m["set_addresses"] += float64(len(members[s.Name]))
		if name, _ := eipOwner(s.ExternalIDs); s.Name == topology.FamilySetName(egressip.SetName(name), false) {
			setOf[name] = members[s.Name]
		}
	}
	joinOf := map[string]string{}
	for ip, node := range b.eipTrack.joinNode {
		joinOf[node] = ip
	}
	for _, name := range names {
		w, node := b.eipTrack.want[name], nodes[name]
		if node == "" {
			bad("EgressIP %s is not assigned", name)
			continue
		}
		if h := hops[name]; len(h) != 1 || h[0] != joinOf[node] {
			bad("EgressIP %s on %s: reroute next hops %v, want [%s]", name, node, h, joinOf[node])
		}
		if got := setOf[name]; len(got) != len(w.pods) || slices.ContainsFunc(got, func(a string) bool { return !w.pods[a] }) {
			bad("EgressIP %s: its set holds %d addresses, want its %d pods'", name, len(got), len(w.pods))
		}
		seen := map[string]bool{}
		for _, nat := range byEIP[name] {
			switch gr := routerOf[nat.UUID]; {
			case gr != topology.GatewayRouter(node):
				bad("EgressIP %s on %s: an SNAT of %s on %q", name, node, nat.LogicalIP, gr)
			case nat.ExternalIP != w.ip || nat.Type != nbdb.NATTypeSNAT || !w.pods[nat.LogicalIP]:
				bad("EgressIP %s: SNAT %s %s → %s is not one of its pods' to %s", name, nat.Type, nat.LogicalIP, nat.ExternalIP, w.ip)
			default:
				seen[nat.LogicalIP] = true
			}
		}
		if len(seen) != len(w.pods) {
			bad("EgressIP %s on %s: %d of its %d pods have their SNAT", name, node, len(seen), len(w.pods))
		}
	}
	if len(wrong) > 0 {
		b.s.Fatalf("egressips: wrong NB rows:\n  %s", strings.Join(wrong, "\n  "))
	}
	return m
}

// eipFailover makes the node holding the most egress IPs NotReady (its
// Ready condition False, as a kubelet that stopped posting would leave it
// once the node controller marks it) and times, from that status UPDATE,
// every one of its IPs reassigned in the status and its rows complete on
// the new node; the others must not move. The node is Ready again after.
func (b *bench) eipFailover(m map[string]float64, names []string, nodes map[string]string) {
	byNode := map[string][]string{}
	for _, name := range names {
		byNode[nodes[name]] = append(byNode[nodes[name]], name)
	}
	failed := ""
	for node, list := range byNode {
		if failed == "" || len(list) > len(byNode[failed]) || len(list) == len(byNode[failed]) && node < failed {
			failed = node
		}
	}
	moving := byNode[failed]
	idx := -1
	for i := 0; i < eipGatewayNodes; i++ {
		if eipNodeName(i) == failed {
			idx = i
		}
	}
	say("  failover: %s, holding %d of the %d egress IPs, made NotReady", failed, len(moving), len(names))
	stopProfile := b.profile("egressips-failover")
	writesBefore := b.eipTrack.counts()
	start, cpu := time.Now(), cpuSnapshot()
	b.eipTrack.restart(moving, failed, start)
	b.setNodeReady(failed, eipNodeAddress(idx), false)
	b.waitEIPs(moving, 300*time.Second, fmt.Sprintf("the %d egress IPs of %s on other nodes in the status and the NB", len(moving), failed))
	used, wall := cpuSnapshot().since(cpu), time.Since(start).Seconds()
	stopProfile()
	assigned, programmed, lastAssigned, lastProgrammed := b.eipTrack.latencies(moving)
	m["failover_egress_ips"] = float64(len(moving))
	m["failover_status_s"], m["failover_rows_s"] = lastAssigned.Sub(start).Seconds(), lastProgrammed.Sub(start).Seconds()
	m["failover_status_p50_ms"], m["failover_rows_p50_ms"] = pct(assigned, 0.5), pct(programmed, 0.5)
	m["failover_master_cpu_s"] = used["ovnkube"]
	say("  node NotReady → all %d of its IPs on other nodes: in the status after %.2fs (p50 %.0f ms), their rows complete in the NB after %.2fs (p50 %.0f ms)",
		len(moving), m["failover_status_s"], m["failover_status_p50_ms"], m["failover_rows_s"], m["failover_rows_p50_ms"])
	say("  CPU: %s", used.describe(wall))
	writes := b.eipTrack.counts().since(writesBefore)
	writes.metrics(m, "failover_")
	say("  NB writes of the EgressIPs' rows seen: %s", writes)
	after := b.eipTrack.nodes()
	for _, name := range names {
		if nodes[name] != failed && after[name] != nodes[name] {
			b.s.Fatalf("failover: EgressIP %s moved from %s to %s, though its node stayed Ready", name, nodes[name], after[name])
		}
	}
	b.eipRows(names, after)
	moved := map[string]int{}
	for _, name := range moving {
		moved[after[name]]++
	}
	say("  moved to: %v; rows checked", moved)
	m["after_failover_master_cpu_s"], m["after_failover_busy_s"], m["after_failover_periodic_resyncs"] = b.masterBusy(func() {})
	say("  after the last IP's rows were complete: master busy %.2fs more, %.2f CPU s%s", m["after_failover_busy_s"], m["after_failover_master_cpu_s"],
		resyncNote(m["after_failover_periodic_resyncs"]))
	m["ready_again_master_cpu_s"], m["ready_again_busy_s"], m["ready_again_periodic_resyncs"] = b.masterBusy(func() { b.setNodeReady(failed, eipNodeAddress(idx), true) })
	again := b.eipTrack.nodes()
	for _, name := range names {
		if again[name] != after[name] {
			b.s.Fatalf("EgressIP %s moved from %s to %s when %s was Ready again", name, after[name], again[name], failed)
		}
	}
	say("  %s Ready again: nothing moved; master busy %.2fs, %.2f CPU s%s", failed, m["ready_again_busy_s"], m["ready_again_master_cpu_s"],
		resyncNote(m["ready_again_periodic_resyncs"]))
}

// eipRestart restarts the master, idle, with the EgressIPs in place: it must
// send no NB transaction and rewrite no EgressIP status.
func (b *bench) eipRestart(m map[string]float64, names []string, d dynamic.Interface) {
	ctx := context.Background()
	b.waitNBQuiet()
	before := map[string]string{}
	list, err := d.Resource(k8sovnv1.EgressIPResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.s.Fatal(err)
	}
	for _, o := range list.Items {
		before[o.GetName()] = o.GetResourceVersion()
	}
	synced, txns, changes, _ := b.restartMaster("egressips-restart")
	time.Sleep(time.Second)
	list, err = d.Resource(k8sovnv1.EgressIPResource).List(ctx, metav1.ListOptions{})
	if err != nil {
		b.s.Fatal(err)
	}
	rewritten := 0
	for _, o := range list.Items {
		if before[o.GetName()] != o.GetResourceVersion() {
			rewritten++
		}
	}
	b.eipRows(names, b.eipTrack.nodes())
	m["restart_synced_s"], m["restart_nb_transactions"], m["restart_nb_row_changes"], m["restart_status_writes"] = synced.Seconds(), txns, changes, float64(rewritten)
	say("  idle restart with them in place: synced %.2fs after start; %.0f NB transactions sent, %.0f NB row changes seen, %d EgressIP statuses rewritten; rows checked",
		synced.Seconds(), txns, changes, rewritten)
	if txns != 0 || rewritten != 0 {
		say("  WRONG: an idle restart wrote (the target is nothing)")
	}
}

// heartbeat posts a kubelet heartbeat for a node without a gateway (its
// Ready condition's LastHeartbeatTime moved on, nothing else changed) and
// returns the master's CPU seconds and the wall time from the UPDATE until
// the master has been idle for a second: what the master does for an
// event that changes nothing for the EgressIPs.
func (b *bench) heartbeat(node string) (cpu, wall, resyncs float64) {
	return b.masterBusy(func() { b.setNodeReady(node, "", true) })
}

// masterBusy runs f, then polls (every 50 ms, deadline 300 s) the master's
// CPU until it used at most 20 ms in the last second, and returns its CPU
// seconds and the wall time from f until the last CPU it used before that,
// and how many of its periodic full resyncs (--resync-interval, 5 min by
// default) it queued meanwhile: work that is not f's.
func (b *bench) masterBusy(f func()) (float64, float64, float64) {
	pid := b.master.Cmd.Process.Pid
	resyncs := func() int { return strings.Count(b.master.Tail(1000000), `"full resync queued`) }
	before := resyncs()
	type sample struct {
		t   time.Time
		cpu float64
	}
	start := sample{time.Now(), procCPU(pid)}
	f()
	samples := []sample{start}
	busyEnd := start
	harness.Eventually(b.s, 300*time.Second, "the master idle for a second", func() error {
		now := sample{time.Now(), procCPU(pid)}
		if now.cpu > samples[len(samples)-1].cpu {
			busyEnd = now
		}
		samples = append(samples, now)
		i := len(samples) - 1
		for i > 0 && now.t.Sub(samples[i].t) < time.Second {
			i--
		}
		if now.t.Sub(samples[i].t) < time.Second || now.cpu-samples[i].cpu > 0.02 {
			return fmt.Errorf("%.2f CPU s since %s", now.cpu-start.cpu, now.t.Sub(start.t).Round(time.Millisecond))
		}
		return nil
	})
	return busyEnd.cpu - start.cpu, busyEnd.t.Sub(start.t).Seconds(), float64(resyncs() - before)
}

// resyncNote says that a periodic full resync of the master fell into a
// measurement.
func resyncNote(n float64) string {
	if n == 0 {
		return ""
	}
	return fmt.Sprintf(", a periodic full resync (%.0f) included", n)
}
