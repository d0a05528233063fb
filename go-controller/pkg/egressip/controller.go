package egressip

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-org/libovsdb/cache"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// API is where EgressIPs come from and where their status goes.
type API struct {
	Dynamic  dynamic.Interface
	Informer cache.SharedIndexInformer // of *k8sovnv1.EgressIP
}

// Discover follows EgressIPs when the API server serves them (nil: not).
func Discover(d discovery.DiscoveryInterface, dyn dynamic.Interface) *API {
	if dyn == nil || !k8sovnv1.ServesEgressIP(d) {
		return nil
	}
	return &API{Dynamic: dyn, Informer: k8sovnv1.NewEgressIPInformer(dyn, 0)}
}

// Start runs the informer and waits for its cache.
func (a *API) Start(ctx context.Context) error {
	go a.Informer.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), a.Informer.HasSynced) {
		return fmt.Errorf("informer cache for egressips did not sync")
	}
	return nil
}

// CommitFunc sends one transaction's operations to the NB.
type CommitFunc func(context.Context, []ovsdb.Operation) error

// Options are the cluster settings the controller needs.
type Options struct {
	ClusterSubnets, JoinSubnets []netip.Prefix
	// ReachTimeout bounds each reachability probe of an egress node (TCP to
	// its address, port 9: an answer, even a refusal, means reachable); 0
	// turns the probes off (Ready and the label alone decide).
	ReachTimeout time.Duration
	// Events records Warning Events on EgressIPs (nil: none).
	Events record.EventRecorder
	// Role splits the work in zone mode (zero: RoleAll, central mode).
	Role Role
	// Zone mode, RoleProgram: InZone says whether a node is this zone's
	// (its gateway router is in this NB); Transit gives another zone's
	// node's transit addresses, where this zone sends the traffic that
	// node is the egress node of (its zone reroutes it to its gateway).
	InZone  func(*corev1.Node) bool
	Transit func(*corev1.Node) ([]netip.Addr, error)
}

// Role is which part of the work a controller does.
type Role int

const (
	// RoleAll assigns, writes the status and programs the NB (central mode).
	RoleAll Role = iota
	// RoleAssign assigns and writes the status only, with no NB (zone
	// mode's cluster manager: one decision for every zone).
	RoleAssign
	// RoleProgram programs one zone's NB from the status the cluster
	// manager wrote, and writes no status.
	RoleProgram
)

// Queue keys.
const (
	keyAssign  = "assign"  // every EgressIP's node assignment
	keyCluster = "cluster" // the shared no-reroute policies and node set
	keyEIP     = "eip/"    // one EgressIP's rows
)

// Controller keeps the EgressIPs' assignments, status and NB rows.
type Controller struct {
	api      *API
	opts     Options
	fams     topology.Families
	log      logr.Logger
	nb       libovsdbclient.Client
	commit   CommitFunc
	pods     slim.Lister
	nsLister corelisters.NamespaceLister
	nodes    corelisters.NodeLister
	queue    *controller.Queue
	status   *controller.Queue
	reach    *prober
	started  atomic.Bool
	mu       sync.Mutex
	assigned map[string][]Assignment    // by EgressIP, as the last assignment decided
	problems map[string]string          // by EgressIP: what it could not assign ("" none)
	reported map[string]string          // by EgressIP: the problem last reported in an Event
	wanted   map[string]map[string]bool // by EgressIP: the row ids of its last sync (setWanted)
}

// New wires the controller onto the shared informers and the NB client.
func New(api *API, factory informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, opts Options, log logr.Logger, maxDelay time.Duration) *Controller {
	var cidrs []netip.Prefix
	cidrs = append(cidrs, opts.ClusterSubnets...)
	c := &Controller{api: api, opts: opts, fams: topology.FamiliesOf(cidrs), log: log, nb: nb, commit: commit,
		nodes: factory.Core().V1().Nodes().Lister(), assigned: map[string][]Assignment{}, problems: map[string]string{},
		reported: map[string]string{}, wanted: map[string]map[string]bool{}}
	c.queue = controller.NewQueue("egressips", maxDelay, c.sync, log)
	c.status = controller.NewQueue("egressipstatus", maxDelay, c.syncStatus, log)
	c.reach = newProber(opts.ReachTimeout, func() { c.queue.Add(keyAssign) })
	_, _ = api.Informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { c.eipChanged(obj) },
		UpdateFunc: func(old, cur any) {
			switch o, n := controller.ObjectOf[*k8sovnv1.EgressIP](old), controller.ObjectOf[*k8sovnv1.EgressIP](cur); {
			case o == nil || n == nil || o.Generation != n.Generation || !labels.Equals(o.Labels, n.Labels):
				c.eipChanged(cur)
			case c.opts.Role == RoleProgram:
				c.queue.Add(keyAssign) // the status is the assignment
			default:
				c.status.Add(n.Name) // a status written by someone else is put back
			}
		},
		DeleteFunc: func(obj any) { c.eipChanged(obj) },
	})
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.nodeChanged(nil, nodeOf(obj)) },
		UpdateFunc: func(old, cur any) { c.nodeChanged(nodeOf(old), nodeOf(cur)) },
		DeleteFunc: func(obj any) { c.nodeChanged(nodeOf(obj), nil) },
	})
	if opts.Role == RoleAssign {
		return c // no pods, namespaces or NB: nothing is programmed here
	}
	c.pods, c.nsLister = slim.NewLister(factory.Core().V1().Pods().Informer()), factory.Core().V1().Namespaces().Lister()
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, podOf(obj)) },
		UpdateFunc: func(old, cur any) { c.podChanged(podOf(old), podOf(cur)) },
		DeleteFunc: func(obj any) { c.podChanged(podOf(obj), nil) },
	})
	_, _ = factory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			if o, n := old.(*corev1.Namespace), cur.(*corev1.Namespace); !labels.Equals(o.Labels, n.Labels) {
				c.enqueueAllEIPs()
			}
		},
		AddFunc:    func(any) { c.enqueueAllEIPs() },
		DeleteFunc: func(any) { c.enqueueAllEIPs() },
	})
	nb.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc: func(_ string, m model.Model) {
			if r, ok := m.(*nbdb.LogicalRouter); ok && c.started.Load() && strings.HasPrefix(r.Name, "GR_") {
				c.enqueueAllEIPs() // a gateway router (re)built: its egress SNATs
			}
		},
		DeleteFunc: func(_ string, m model.Model) { c.nbRowDeleted(m) },
	})
	return c
}

// Run syncs everything once, then follows changes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.started.Store(true)
	// The assignment first: an EgressIP's rows synced before it would be
	// computed with no node and removed (a worker takes eip/<name> while
	// another computes "assign"), then made again, as a new leader's first
	// act (TestEgressIPAcrossLeaderFailover, under load).
	_ = c.syncAssign()
	c.Resync()
	if c.opts.Role != RoleProgram {
		go c.reach.run(ctx, c.probeTargets)
		go c.status.Run(ctx, 1)
	}
	c.queue.Run(ctx, workers)
}

// Resync queues everything.
func (c *Controller) Resync() int {
	c.queue.Add(keyAssign)
	if c.opts.Role == RoleAssign {
		return 0
	}
	c.queue.Add(keyCluster)
	n := c.enqueueAllEIPs()
	for _, name := range c.ownedNames() { // rows of EgressIPs that are gone
		c.queue.Add(keyEIP + name)
	}
	return n
}

// Idle reports whether nothing is queued or being synced.
func (c *Controller) Idle() bool { return c.queue.Idle() && c.status.Idle() }

func (c *Controller) sync(ctx context.Context, key string) error {
	switch {
	case c.opts.Role == RoleAssign && key != keyAssign:
		return nil // the zones program
	case key == keyAssign:
		return c.syncAssign()
	case key == keyCluster:
		return c.syncCluster(ctx)
	case strings.HasPrefix(key, keyEIP):
		return c.syncEIP(ctx, strings.TrimPrefix(key, keyEIP))
	}
	return nil
}

// list is every EgressIP, oldest first.
func (c *Controller) list() []*k8sovnv1.EgressIP {
	var out []*k8sovnv1.EgressIP
	for _, o := range c.api.Informer.GetStore().List() {
		if e, ok := o.(*k8sovnv1.EgressIP); ok {
			out = append(out, e)
		}
	}
	sort.Slice(out, func(i, j int) bool { return older(out[i], out[j]) })
	return out
}

func older(a, b *k8sovnv1.EgressIP) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.Before(&b.CreationTimestamp)
	}
	return a.Name < b.Name
}

func (c *Controller) get(name string) *k8sovnv1.EgressIP {
	o, ok, _ := c.api.Informer.GetStore().GetByKey(name)
	if !ok {
		return nil
	}
	e, _ := o.(*k8sovnv1.EgressIP)
	return e
}

// syncAssign assigns every EgressIP's addresses to nodes (assign.go),
// keeping what the status says where it still holds, and queues the
// EgressIPs whose assignment changed.
func (c *Controller) syncAssign() error {
	eips := c.list()
	if c.opts.Role == RoleProgram {
		c.takeStatus(eips)
		return nil
	}
	nodes := c.assignableNodes()
	var reqs []Request
	parseProblems := map[string][]string{}
	for _, e := range eips {
		r := Request{Name: e.Name, Created: e.CreationTimestamp.Time, Current: map[netip.Addr]string{}}
		for _, s := range e.Spec.EgressIPs {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil {
				parseProblems[e.Name] = append(parseProblems[e.Name], fmt.Sprintf("%q is not an IP address", s))
				continue
			}
			if why := c.reserved(ip.Unmap()); why != "" {
				parseProblems[e.Name] = append(parseProblems[e.Name], fmt.Sprintf("egress IP %s is %s", ip, why))
				continue
			}
			r.IPs = append(r.IPs, ip.Unmap())
		}
		for _, it := range e.Status.Items {
			if ip, err := netip.ParseAddr(it.EgressIP); err == nil {
				r.Current[ip.Unmap()] = it.Node
			}
		}
		reqs = append(reqs, r)
	}
	res := Assign(reqs, nodes)
	c.mu.Lock()
	var changed []string
	seen := map[string]bool{}
	for _, e := range eips {
		seen[e.Name] = true
		got := res.Assigned[e.Name]
		if !slices.Equal(c.assigned[e.Name], got) {
			changed = append(changed, e.Name)
			c.assigned[e.Name] = got
		}
		c.problems[e.Name] = strings.Join(append(parseProblems[e.Name], res.Problems[e.Name]...), "; ")
	}
	for name := range c.assigned {
		if !seen[name] {
			delete(c.assigned, name)
			delete(c.problems, name)
			changed = append(changed, name)
		}
	}
	c.mu.Unlock()
	for _, name := range changed {
		c.queue.Add(keyEIP + name)
	}
	for _, e := range eips {
		c.status.Add(e.Name)
	}
	return nil
}

// takeStatus makes the EgressIPs' status items their assignment (a zone's
// master, RoleProgram: the cluster manager decided) and queues those whose
// assignment changed. Only an address the spec asks for and outside the
// cluster's ranges is taken: a status never adds an address.
func (c *Controller) takeStatus(eips []*k8sovnv1.EgressIP) {
	c.mu.Lock()
	var changed []string
	seen := map[string]bool{}
	for _, e := range eips {
		seen[e.Name] = true
		asked := map[netip.Addr]bool{}
		for _, s := range e.Spec.EgressIPs {
			if ip, err := netip.ParseAddr(strings.TrimSpace(s)); err == nil {
				asked[ip.Unmap()] = true
			}
		}
		var got []Assignment
		for _, it := range e.Status.Items {
			ip, err := netip.ParseAddr(it.EgressIP)
			if err == nil && it.Node != "" && asked[ip.Unmap()] && c.reserved(ip.Unmap()) == "" {
				got = append(got, Assignment{IP: ip.Unmap(), Node: it.Node})
			}
		}
		if !slices.Equal(c.assigned[e.Name], got) {
			changed = append(changed, e.Name)
			c.assigned[e.Name] = got
		}
	}
	for name := range c.assigned {
		if !seen[name] {
			delete(c.assigned, name)
			changed = append(changed, name)
		}
	}
	c.mu.Unlock()
	for _, name := range changed {
		c.queue.Add(keyEIP + name)
	}
}

// reserved says why an address cannot be an egress IP ("" when it can):
// the cluster's own ranges.
func (c *Controller) reserved(ip netip.Addr) string {
	for _, p := range append(append([]netip.Prefix{}, c.opts.ClusterSubnets...), c.opts.JoinSubnets...) {
		if p.Contains(ip) {
			return "inside the cluster's range " + p.String()
		}
	}
	return ""
}

// assignableNodes are the nodes as assignment sees them: eligible when
// labelled egress-assignable, Ready, reachable (when probed) and with a
// gateway (its networks and its gateway router's join address).
func (c *Controller) assignableNodes() []Node {
	list, _ := c.nodes.List(labels.Everything())
	var out []Node
	for _, n := range list {
		_, labelled := n.Labels[k8sovnv1.EgressAssignableLabel]
		if !labelled {
			continue
		}
		gw, err := annotations.ParseL3GatewayConfig(n.Annotations[annotations.NodeL3GatewayConfig])
		if err != nil || len(gw.IPs) == 0 {
			continue
		}
		if _, err := annotations.ParseGatewayJoinIPs(n.Annotations[annotations.NodeGatewayJoinIP]); err != nil {
			continue
		}
		out = append(out, Node{Name: n.Name, Networks: gw.IPs, Eligible: ready(n) && c.reach.reachable(n.Name)})
	}
	return out
}

func ready(n *corev1.Node) bool {
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// probeTargets are the labelled nodes' addresses the prober checks.
func (c *Controller) probeTargets() map[string]netip.Addr {
	list, _ := c.nodes.List(labels.Everything())
	out := map[string]netip.Addr{}
	for _, n := range list {
		if _, ok := n.Labels[k8sovnv1.EgressAssignableLabel]; !ok {
			continue
		}
		if gw, err := annotations.ParseL3GatewayConfig(n.Annotations[annotations.NodeL3GatewayConfig]); err == nil && len(gw.IPs) > 0 {
			out[n.Name] = gw.IPs[0].Addr()
		}
	}
	return out
}

// selected are the networked pods an EgressIP selects that no older
// EgressIP selects (a pod leaves through one EgressIP, the oldest).
func (c *Controller) selected(e *k8sovnv1.EgressIP, eips []*k8sovnv1.EgressIP) []Pod {
	mine, ok := selectorsOf(e)
	if !ok {
		return nil
	}
	var before []selectors
	for _, o := range eips {
		if sel, ok := selectorsOf(o); ok && older(o, e) {
			before = append(before, sel)
		}
	}
	nss, _ := c.nsLister.List(mine.ns)
	var out []Pod
	for _, ns := range nss {
		var claimed []selectors // the older EgressIPs selecting this namespace
		for _, b := range before {
			if b.ns.Matches(labels.Set(ns.Labels)) {
				claimed = append(claimed, b)
			}
		}
		for _, p := range c.pods.List(ns.Name, mine.pods) {
			addrs := policy.PodAddresses(p)
			if len(addrs) == 0 || slices.ContainsFunc(claimed, func(b selectors) bool { return b.pods.Matches(labels.Set(p.Labels)) }) {
				continue
			}
			out = append(out, Pod{Namespace: p.Namespace, Name: p.Name, IPs: addrs})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name })
	return out
}

// selectors are an EgressIP's namespace and pod selectors.
type selectors struct{ ns, pods labels.Selector }

// selectorsOf converts an EgressIP's selectors (false: malformed, which the
// API server's validation should refuse; it selects nothing).
func selectorsOf(e *k8sovnv1.EgressIP) (selectors, bool) {
	ns, err1 := metav1.LabelSelectorAsSelector(&e.Spec.NamespaceSelector)
	pods, err2 := metav1.LabelSelectorAsSelector(&e.Spec.PodSelector)
	return selectors{ns, pods}, err1 == nil && err2 == nil
}

// syncEIP makes one EgressIP's rows match its assignment and pods, or
// removes them when it is gone.
func (c *Controller) syncEIP(ctx context.Context, name string) error {
	e := c.get(name)
	c.mu.Lock()
	assigned := c.assigned[name]
	c.mu.Unlock()
	var want Rows
	if e != nil {
		plan := Plan{Name: name, Assignments: assigned, Pods: c.selected(e, c.list()), NextHops: map[string][]netip.Addr{}}
		remote := map[string]bool{}
		for _, a := range assigned {
			n, err := c.nodes.Get(a.Node)
			if err != nil {
				continue
			}
			if hops, isRemote, err := c.nextHops(n); err != nil {
				c.log.V(1).Info("egress node not usable yet", "egressIP", name, "node", a.Node, "reason", err.Error())
			} else {
				plan.NextHops[a.Node], remote[a.Node] = hops, isRemote
			}
		}
		want = Compute(plan, c.fams)
		for node := range want.SNATs {
			if remote[node] {
				delete(want.SNATs, node) // on its gateway router, in its own zone's NB
			}
		}
	}
	t := ovndb.NewTxn(c.nb)
	owner := topology.Owner{Type: OwnerEgressIP, Name: name}
	for _, v6 := range []bool{false, true} {
		cached := ovndb.Lookup(t, &nbdb.AddressSet{Name: topology.FamilySetName(SetName(name), v6)})
		var row *nbdb.AddressSet
		for _, s := range want.Sets {
			if s.Name == topology.FamilySetName(SetName(name), v6) {
				row = s
			}
		}
		switch {
		case row != nil && cached == nil:
			t.Ensure(row, []any{&row.ExternalIDs}, nil)
		case row != nil:
			t.Ensure(row, []any{&row.ExternalIDs}, nil)
			t.SetMembers(cached, &cached.Addresses, row.Addresses)
		case cached != nil && topology.OwnedBy(cached.ExternalIDs, owner):
			t.Delete(cached)
		}
	}
	cluster := ovndb.Require(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if t.Err() != nil {
		return t.Err()
	}
	c.setWanted(name, want)
	keep := map[string]bool{}
	for _, p := range want.Reroutes {
		keep[p.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(cluster, &cluster.Policies, topology.RowIDKey, p, topology.PolicyColumns(p))
	}
	var stale []string
	for _, p := range ovndb.Owned[nbdb.LogicalRouterPolicy](c.nb, topology.Owner{Type: OwnerEgressIP, Name: name}) {
		if !keep[p.ExternalIDs[topology.RowIDKey]] {
			stale = append(stale, p.UUID)
		}
	}
	t.RemoveChildren(cluster, &cluster.Policies, stale...)
	if err := c.syncSNATs(t, name, want.SNATs); err != nil {
		return err
	}
	ops, err := t.Ops()
	if err != nil {
		return fmt.Errorf("EgressIP %s: %w", name, err)
	}
	if len(ops) == 0 {
		return nil
	}
	if err := t.Committed(c.commit(ctx, ops)); err != nil {
		return fmt.Errorf("EgressIP %s: %w", name, err)
	}
	return nil
}

// nextHops are where this NB's cluster router sends the traffic an egress
// node hosts the address of: its gateway router's join addresses, or in
// zone mode for a node of another zone its transit addresses (that zone's
// router sends it on to the gateway router, remote true).
func (c *Controller) nextHops(n *corev1.Node) (hops []netip.Addr, remote bool, err error) {
	if c.opts.InZone != nil && !c.opts.InZone(n) {
		hops, err = c.opts.Transit(n)
		return hops, true, err
	}
	joins, err := annotations.ParseGatewayJoinIPs(n.Annotations[annotations.NodeGatewayJoinIP])
	for _, j := range joins {
		hops = append(hops, j.Addr())
	}
	return hops, false, err
}

// syncSNATs makes an EgressIP's NATs on the gateway routers those of
// want (by node): its NATs are found through the NB cache's owner index and
// their routers by name, so that a sync touches only its own rows, however
// many NATs the gateway routers hold.
func (c *Controller) syncSNATs(t *ovndb.Txn, name string, want map[string][]*nbdb.NAT) error {
	have := map[string]nbdb.NAT{}
	for _, n := range ovndb.Owned[nbdb.NAT](c.nb, topology.Owner{Type: OwnerEgressIP, Name: name}) {
		have[n.ExternalIDs[topology.RowIDKey]] = n
	}
	routers := map[string]*nbdb.LogicalRouter{}
	router := func(node string) *nbdb.LogicalRouter {
		if _, ok := routers[node]; !ok {
			routers[node] = ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.GatewayRouter(node)})
		}
		return routers[node]
	}
	for node, nats := range want {
		gr := router(node)
		if gr == nil {
			return fmt.Errorf("EgressIP %s: node %s's gateway router is not in the NB yet", name, node) // retried
		}
		var created []string
		for _, n := range nats {
			id := n.ExternalIDs[topology.RowIDKey]
			if h, ok := have[id]; ok {
				delete(have, id)
				t.UpdateChanged(&h, n, topology.NATColumns(n))
				continue
			}
			created = append(created, t.Create(n))
		}
		t.AddChildren(gr, &gr.Nat, created...)
	}
	stale := map[string][]string{} // by node
	for _, n := range have {
		stale[n.ExternalIDs[NodeKey]] = append(stale[n.ExternalIDs[NodeKey]], n.UUID)
	}
	for node, uuids := range stale {
		var elsewhere []string // held by a router the row does not name
		if gr := router(node); gr != nil {
			elsewhere = slices.DeleteFunc(slices.Clone(uuids), func(u string) bool { return slices.Contains(gr.Nat, u) })
			t.RemoveChildren(gr, &gr.Nat, uuids...)
		} else {
			elsewhere = uuids
		}
		probe := &nbdb.LogicalRouter{}
		t.Detach(probe, &probe.Nat, elsewhere...)
	}
	return t.Err()
}

// syncCluster keeps the rows every EgressIP shares: the no-reroute
// policies and the nodes' address set.
func (c *Controller) syncCluster(ctx context.Context) error {
	t := ovndb.NewTxn(c.nb)
	var addrs []netip.Addr
	list, _ := c.nodes.List(labels.Everything())
	for _, n := range list {
		addrs = append(addrs, services.NodeOwnAddresses(n)...)
	}
	for _, s := range NodesSetRows(addrs, c.fams) {
		cached := ovndb.Lookup(t, &nbdb.AddressSet{Name: s.Name})
		t.Ensure(s, []any{&s.ExternalIDs}, nil)
		if cached != nil {
			t.SetMembers(cached, &cached.Addresses, s.Addresses)
		}
	}
	cluster := ovndb.Require(t, &nbdb.LogicalRouter{Name: topology.ClusterRouter})
	if t.Err() != nil {
		return t.Err()
	}
	owner := topology.Owner{Type: OwnerCluster, Name: "default"}
	keep := map[string]bool{}
	for _, p := range NoReroutes(c.opts.ClusterSubnets, c.opts.JoinSubnets) {
		keep[p.ExternalIDs[topology.RowIDKey]] = true
		t.EnsureChild(cluster, &cluster.Policies, topology.RowIDKey, p, topology.PolicyColumns(p))
	}
	t.RemoveChildren(cluster, &cluster.Policies, t.ChildrenWhere(cluster.Policies, func(ids map[string]string) bool {
		return topology.OwnedBy(ids, owner) && !keep[ids[topology.RowIDKey]]
	}, &nbdb.LogicalRouterPolicy{})...)
	ops, err := t.Ops()
	if err != nil || len(ops) == 0 {
		return err
	}
	return t.Committed(c.commit(ctx, ops))
}

// syncStatus writes an EgressIP's status items (its assignment) when they
// differ, and reports what could not be assigned with one Warning Event
// per change.
func (c *Controller) syncStatus(ctx context.Context, name string) error {
	e := c.get(name)
	c.mu.Lock()
	assigned, problem := c.assigned[name], c.problems[name]
	c.mu.Unlock()
	if e == nil {
		return nil
	}
	want := k8sovnv1.EgressIPStatus{Items: []k8sovnv1.EgressIPStatusItem{}}
	for _, a := range assigned {
		want.Items = append(want.Items, k8sovnv1.EgressIPStatusItem{Node: a.Node, EgressIP: a.IP.String()})
	}
	if !slices.Equal(e.Status.Items, want.Items) && !(len(e.Status.Items) == 0 && len(want.Items) == 0) {
		if err := k8sovnv1.WriteEgressIPStatus(ctx, c.api.Dynamic, name, want); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("EgressIP %s: writing its status: %w", name, err)
		}
	}
	c.mu.Lock()
	already := c.reported[name] == problem
	c.reported[name] = problem
	c.mu.Unlock()
	if problem != "" && !already {
		c.log.Info("egress IP not assigned", "egressIP", name, "problem", problem)
		if c.opts.Events != nil {
			c.opts.Events.Eventf(e, corev1.EventTypeWarning, "EgressIPNotAssigned", "%s", problem)
		}
	}
	return nil
}

func (c *Controller) eipChanged(obj any) {
	e := controller.ObjectOf[*k8sovnv1.EgressIP](obj)
	if e == nil || !c.started.Load() {
		return
	}
	c.queue.Add(keyAssign)
	c.queue.Add(keyEIP + e.Name)
	// A pod leaves through the oldest EgressIP selecting it: the younger
	// ones may gain or lose pods by this one's change.
	for _, o := range c.list() {
		if older(e, o) {
			c.queue.Add(keyEIP + o.Name)
		}
	}
}

func (c *Controller) enqueueAllEIPs() int {
	if !c.started.Load() {
		return 0
	}
	eips := c.list()
	for _, e := range eips {
		c.queue.Add(keyEIP + e.Name)
	}
	return len(eips)
}

// podChanged queues the EgressIPs that select the pod before or after.
func (c *Controller) podChanged(old, cur *slim.Pod) {
	if !c.started.Load() {
		return
	}
	if old != nil && cur != nil && labels.Equals(old.Labels, cur.Labels) && old.Networks == cur.Networks && old.UID == cur.UID {
		return
	}
	eips := c.list()
	if len(eips) == 0 {
		return
	}
	p := cur
	if p == nil {
		p = old
	}
	ns, err := c.nsLister.Get(p.Namespace)
	if err != nil {
		return
	}
	for _, e := range eips {
		sel, ok := selectorsOf(e)
		if !ok || !sel.ns.Matches(labels.Set(ns.Labels)) {
			continue
		}
		for _, q := range []*slim.Pod{old, cur} {
			if q != nil && sel.pods.Matches(labels.Set(q.Labels)) {
				c.queue.Add(keyEIP + e.Name)
				break
			}
		}
	}
}

// nodeChanged queues what a node's change can change: the assignment when
// what makes it eligible changed (the label, Ready, its gateway), the
// EgressIPs using it as an egress node when its gateway did, the shared
// rows when its addresses did; a heartbeat queues nothing.
func (c *Controller) nodeChanged(old, cur *corev1.Node) {
	if !c.started.Load() {
		return
	}
	oldElig, oldAddrs := nodeView(old)
	curElig, curAddrs := nodeView(cur)
	if oldAddrs != curAddrs {
		c.queue.Add(keyCluster)
	}
	if oldElig == curElig {
		return
	}
	c.queue.Add(keyAssign)
	name := ""
	for _, n := range []*corev1.Node{old, cur} {
		if n != nil {
			name = n.Name
		}
	}
	c.mu.Lock()
	var users []string
	for eip, as := range c.assigned {
		if slices.ContainsFunc(as, func(a Assignment) bool { return a.Node == name }) {
			users = append(users, eip)
		}
	}
	c.mu.Unlock()
	for _, eip := range users {
		c.queue.Add(keyEIP + eip)
	}
}

// nodeView is what of a node assignment and the shared rows depend on, as
// text to compare: its eligibility (label, Ready, gateway annotations) and
// its addresses.
func nodeView(n *corev1.Node) (eligibility, addrs string) {
	if n == nil {
		return "", ""
	}
	_, labelled := n.Labels[k8sovnv1.EgressAssignableLabel]
	eligibility = fmt.Sprintf("%v %v %s %s", labelled, ready(n), n.Annotations[annotations.NodeL3GatewayConfig], n.Annotations[annotations.NodeGatewayJoinIP])
	return eligibility, fmt.Sprint(n.Status.Addresses) + n.Annotations[annotations.NodeL3GatewayConfig]
}

func nodeOf(obj any) *corev1.Node { return controller.ObjectOf[*corev1.Node](obj) }

// nbRowDeleted re-syncs the owner of a row of ours that left the NB.
func (c *Controller) nbRowDeleted(m model.Model) {
	if !c.started.Load() {
		return
	}
	var ids map[string]string
	switch r := m.(type) {
	case *nbdb.AddressSet:
		ids = r.ExternalIDs
	case *nbdb.LogicalRouterPolicy:
		ids = r.ExternalIDs
	case *nbdb.NAT:
		ids = r.ExternalIDs
	case *nbdb.LogicalRouter:
		c.queue.Add(keyCluster)
		c.enqueueAllEIPs()
		return
	default:
		return
	}
	switch o, _ := topology.OwnerOf(ids); o.Type {
	case OwnerEgressIP:
		if c.stillWanted(o.Name, ids) {
			c.queue.Add(keyEIP + o.Name)
		}
	case OwnerCluster:
		c.queue.Add(keyCluster)
	}
}

// setWanted records the ids of the NATs and policies an EgressIP's sync is
// about to write, before it writes them: a deletion of one of its rows is
// news (someone removed it: put it back) only while the row is still wanted,
// not when the sync deleted it itself (a NAT that moved to another node).
func (c *Controller) setWanted(name string, want Rows) {
	ids := map[string]bool{}
	for _, p := range want.Reroutes {
		ids[p.ExternalIDs[topology.RowIDKey]] = true
	}
	for _, nats := range want.SNATs {
		for _, n := range nats {
			ids[n.ExternalIDs[topology.RowIDKey]] = true
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(ids) == 0 {
		delete(c.wanted, name)
		return
	}
	c.wanted[name] = ids
}

// stillWanted says whether a deleted row of an EgressIP is one its last
// sync wanted (rows without an id, address sets, always are).
func (c *Controller) stillWanted(name string, ids map[string]string) bool {
	id, ok := ids[topology.RowIDKey]
	if !ok {
		return true
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.wanted[name][id]
}

// ownedNames are the EgressIPs some NB row belongs to.
func (c *Controller) ownedNames() []string {
	names := map[string]bool{}
	var sets []nbdb.AddressSet
	_ = c.nb.WhereCache(func(s *nbdb.AddressSet) bool { o, _ := topology.OwnerOf(s.ExternalIDs); return o.Type == OwnerEgressIP }).List(context.Background(), &sets)
	for _, s := range sets {
		names[s.ExternalIDs[topology.OwnerNameKey]] = true
	}
	var nats []nbdb.NAT
	_ = c.nb.WhereCache(func(n *nbdb.NAT) bool { o, _ := topology.OwnerOf(n.ExternalIDs); return o.Type == OwnerEgressIP }).List(context.Background(), &nats)
	for _, n := range nats {
		names[n.ExternalIDs[topology.OwnerNameKey]] = true
	}
	var lrps []nbdb.LogicalRouterPolicy
	_ = c.nb.WhereCache(func(p *nbdb.LogicalRouterPolicy) bool {
		o, _ := topology.OwnerOf(p.ExternalIDs)
		return o.Type == OwnerEgressIP
	}).List(context.Background(), &lrps)
	for _, p := range lrps {
		names[p.ExternalIDs[topology.OwnerNameKey]] = true
	}
	var out []string
	for n := range names {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func podOf(obj any) *slim.Pod { return controller.ObjectOf[*slim.Pod](obj) }
