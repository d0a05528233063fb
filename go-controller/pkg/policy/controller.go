package policy

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
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
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	networkinglisters "k8s.io/client-go/listers/networking/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// CommitFunc sends operations to the NB.
type CommitFunc func(context.Context, []ovsdb.Operation) error

// Keys of the controller's queue: one kind of row set each.
const (
	policyKey    = "policy/"    // a policy's port group and ACLs
	peersKey     = "peers/"     // one peer address set
	domainsKey   = "domains/"   // one DNS name's address set
	namespaceKey = "namespace/" // a namespace's default-deny port groups
	tenantKey    = "tenant/"    // a tenant's rows (namespace isolation)
	adminKey     = "admin/"     // an admin policy's port group and ACLs (admin/<kind>/<name>)
	nodesKey     = "nodes/"     // one node address set
)

// Options are the cluster settings the controller needs.
type Options struct {
	// Isolation turns namespace isolation (multitenant mode) on.
	Isolation bool
	// ClusterSubnets are the pod address ranges (isolation drops other
	// tenants' pods by their addresses within these).
	ClusterSubnets []netip.Prefix
	// InternalRanges are the cluster's own ranges (pods, join, services):
	// node peers never match an address in them, whatever a Node reports
	// (nodepeers.go).
	InternalRanges []netip.Prefix
	// NodeSources match the nodes' management port addresses, which
	// isolation lets reach every tenant (topology.ManagementAddresses).
	NodeSources []string
	// Events records Warning Events on refused policies (nil: none).
	Events record.EventRecorder
	// Admin, when set, is where admin policies and egress firewalls come
	// from (admin.go, egressfirewall.go).
	Admin *AdminAPI
	// DNS, when set, resolves the DNS names rules name (domains.go); without
	// it such rules match nothing and their policies say so.
	DNS DomainResolver
	// DNSTap says whether DNS learns the cluster DNS's answers (dnstap),
	// which wildcard names need; without it they match nothing and their
	// policies say so.
	DNSTap bool
}

// Controller keeps the NB's port groups, address sets and ACLs in line with
// the NetworkPolicies, pods and namespaces. Each key is synced on its own,
// level-triggered: a pod change queues only the keys whose rows it can
// change, and each sync sends only the members that differ.
type Controller struct {
	opts      Options
	fams      topology.Families // of opts.ClusterSubnets
	log       logr.Logger
	nb        libovsdbclient.Client
	commit    CommitFunc
	npLister  networkinglisters.NetworkPolicyLister
	podLister slim.Lister
	nsLister  corelisters.NamespaceLister
	nsIndexer cache.Indexer // namespaces by label (nsLabelIndex); nil: list them all
	queue     *queues
	// started: events before the first full queueing are covered by it.
	started atomic.Bool

	mu sync.RWMutex
	// sets are the peer sets some policy names, by address set name, with
	// the policies naming them.
	sets map[string]*setEntry[PeerSet]
	// policies are what pod events need of each policy: its namespace,
	// selector and the sets it names.
	policies map[string]*policyEntry
	// Indexes for pod events: policy keys and peer sets of one namespace,
	// and the peer sets spanning namespaces (namespace selectors).
	nsPolicies map[string]map[string]bool
	nsSets     map[string]map[string]bool
	crossSets  map[string]bool
	// namedPorts indexes the policies naming a port by its protocol and
	// name (NamedPortKey): a pod declaring or dropping that port can change
	// the numbers they resolve to.
	namedPorts map[string]map[string]bool
	// tenantIdx caches every namespace's tenant (nil: to be rebuilt).
	tenantMu  sync.Mutex
	tenantIdx *tenantIndex
	// refused holds why each refused policy was refused, so that a refusal
	// is reported once, not at every sync.
	refused map[string]string

	// Admin policies (admincontroller.go): their sources, what pod and
	// namespace events need of each (by kind/name), those refused for a
	// priority collision, and the node address sets they name.
	admin      adminSources
	nodeLister corelisters.NodeLister
	// nodeIndexer finds the Nodes reporting an address (nodePeerIndex).
	nodeIndexer cache.Indexer
	admins      map[string]*adminEntry
	collided    map[string]bool
	nodeSets    map[string]*setEntry[NodeSet]
	// domainSets are the DNS names' address sets some policy names, which
	// opts.DNS follows.
	domainSets map[string]*setEntry[DomainSet]
	// ranks holds every admin policy's tier and priority (collisions);
	// wantStatus the condition each one's last sync computed, which
	// statusQueue writes.
	ranks       map[string]tierPriority
	wantStatus  map[string]metav1.Condition
	statusQueue *controller.Queue
	pacer       *statusPacer

	// podPorts indexes the UUIDs of pods' ports by namespace/name, from
	// the NB cache's events: reading a port from the cache copies it, and
	// a port group's sync reads every port it holds.
	podPorts portIndex
	// memo keeps per-namespace answers about pods between syncs (podmemo.go).
	memo *podMemo
	// setLocks hold a mutex per address set name while a transaction
	// creating that set runs (createSet).
	setLocks nameLocks
	// groups serialize each port group's full and members syncs (portgroups.go).
	groups groupLocks
}

// setEntry is a shared address set some policies name: what it holds and
// the keys of the policies naming it.
type setEntry[S sharedSet] struct {
	set   S
	users map[string]bool
}

// sharedSet is what an address set shared between policies is known by.
type sharedSet interface {
	Key() string  // the canonical text of what it holds
	Name() string // its name (a hash of Key)
}

// use records that policy key names set s in m; false when s's name is
// another set's (a hash collision), which is then not recorded.
func use[S sharedSet](m map[string]*setEntry[S], key string, s S) (added, ok bool) {
	name := s.Name()
	e := m[name]
	if e != nil && e.set.Key() != s.Key() {
		return false, false
	}
	if e == nil {
		e = &setEntry[S]{set: s, users: map[string]bool{}}
		m[name] = e
		added = true
	}
	e.users[key] = true
	return added, true
}

// release records that policy key no longer names the set called name in
// m; true when no policy names it any more (it is then forgotten).
func release[S sharedSet](m map[string]*setEntry[S], key, name string) (S, bool) {
	e := m[name]
	if e == nil {
		var zero S
		return zero, false
	}
	delete(e.users, key)
	if len(e.users) > 0 {
		return e.set, false
	}
	delete(m, name)
	return e.set, true
}

type policyEntry struct {
	namespace  string // "" for an admin policy
	pods       labels.Selector
	sets       []string
	nodeSets   []string
	domainSets []string
	namedPorts []string
}

// New wires the controller onto shared informers (pods, namespaces and
// network policies) and the NB client. The pod informer holds slim.Pods
// (master.NewInformers sets its transform).
func New(factory informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, opts Options, log logr.Logger, maxDelay time.Duration) *Controller {
	c := &Controller{
		opts:      opts,
		fams:      topology.FamiliesOf(opts.ClusterSubnets),
		log:       log,
		nb:        nb,
		commit:    commit,
		npLister:  factory.Networking().V1().NetworkPolicies().Lister(),
		podLister: slim.NewLister(factory.Core().V1().Pods().Informer()),
		nsLister:  factory.Core().V1().Namespaces().Lister(),
		sets:      map[string]*setEntry[PeerSet]{},
		policies:  map[string]*policyEntry{},

		nsPolicies: map[string]map[string]bool{},
		nsSets:     map[string]map[string]bool{},
		crossSets:  map[string]bool{},
		refused:    map[string]string{},
		namedPorts: map[string]map[string]bool{},
		admins:     map[string]*adminEntry{},
		collided:   map[string]bool{},
		nodeSets:   map[string]*setEntry[NodeSet]{},
		domainSets: map[string]*setEntry[DomainSet]{},
		ranks:      map[string]tierPriority{},
		memo:       newPodMemo(1 << 16),
		wantStatus: map[string]metav1.Condition{},
	}
	c.queue = &queues{rows: controller.NewQueue("networkpolicies", maxDelay, c.sync, log),
		sets: controller.NewQueue("policyaddresssets", maxDelay, c.sync, log)}
	_, _ = factory.Networking().V1().NetworkPolicies().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.policyChanged,
		UpdateFunc: func(_, cur any) { c.policyChanged(cur) },
		DeleteFunc: c.policyChanged,
	})
	_, _ = factory.Core().V1().Pods().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.podChanged(nil, podOf(obj)) },
		UpdateFunc: func(old, cur any) { c.podChanged(podOf(old), podOf(cur)) },
		DeleteFunc: func(obj any) { c.podChanged(podOf(obj), nil) },
	})
	if err := factory.Core().V1().Namespaces().Informer().AddIndexers(cache.Indexers{nsLabelIndex: indexNamespaceLabels}); err == nil {
		c.nsIndexer = factory.Core().V1().Namespaces().Informer().GetIndexer()
	} // else (an informer already started): namespacesOf matches every namespace
	_, _ = factory.Core().V1().Namespaces().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { c.namespaceChanged(nil, nsOf(obj)) },
		UpdateFunc: func(old, cur any) { c.namespaceChanged(nsOf(old), nsOf(cur)) },
		DeleteFunc: func(obj any) { c.namespaceChanged(nsOf(obj), nil) },
	})
	if opts.Admin != nil {
		c.statusQueue = controller.NewQueue("adminpolicystatus", maxDelay, c.syncAdminStatus, log)
		c.pacer = newStatusPacer(statusQuiet, statusMaxHold, time.Now, func() bool { return !c.queue.rows.Idle() })
		c.watchAdmin(opts.Admin)
		nodes := factory.Core().V1().Nodes()
		c.nodeLister = nodes.Lister()
		_ = nodes.Informer().AddIndexers(cache.Indexers{nodePeerIndex: indexNodePeerAddresses})
		c.nodeIndexer = nodes.Informer().GetIndexer()
		_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { c.nodeChanged(nil, nodeOf(obj)) },
			UpdateFunc: func(old, cur any) { c.nodeChanged(nodeOf(old), nodeOf(cur)) },
			DeleteFunc: func(obj any) { c.nodeChanged(nodeOf(obj), nil) },
		})
	}
	nb.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(_ string, m model.Model) { c.nbRowChanged(m, false) },
		DeleteFunc: func(_ string, m model.Model) { c.nbRowChanged(m, true) },
	})
	return c
}

// Run queues every policy, namespace and row of ours, then follows changes
// until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	c.registerAll()
	c.started.Store(true)
	c.enqueueAll(c.queue.Add)
	if c.statusQueue != nil {
		go c.statusQueue.Run(ctx, 2)
		go c.pacer.run(ctx, c.statusQueue.Add)
	}
	c.queue.Run(ctx, workers)
}

// Idle reports whether nothing is queued or being synced.
func (c *Controller) Idle() bool {
	return c.queue.Idle() && (c.statusQueue == nil || c.statusQueue.Idle() && !c.pacer.pending())
}

// Resync queues everything for a check whose repairs are logged.
func (c *Controller) Resync() int { return c.enqueueAll(c.queue.Resync) }

// registerAll parses every policy before the first sync, so that the peer
// sets they share are known (and not deleted as unused) from the start.
func (c *Controller) registerAll() {
	nps, _ := c.npLister.List(labels.Everything())
	for _, np := range nps {
		rows := Policy(np, c.resolve, Logging{}, c.fams)
		c.register(np.Namespace+"/"+np.Name, np.Namespace, &rows)
	}
	if !ovndb.HasACLTiers(c.nb) {
		return // no admin policy has rows
	}
	for _, a := range c.listAdmin() {
		if w := c.collisionWinner(a); w != nil && w.policy.Key() != a.policy.Key() {
			continue // refused: it has no rows
		}
		rows := AdminRows(a.policy, c.resolve, AdminLogging{}, c.fams)
		if rows.Refused == "" {
			c.register(adminKey+a.policy.Key(), "", &rows)
		}
	}
}

func (c *Controller) enqueueAll(add func(string)) int {
	n := 0
	nps, _ := c.npLister.List(labels.Everything())
	for _, np := range nps {
		add(policyKey + np.Namespace + "/" + np.Name)
		n++
	}
	nss, _ := c.nsLister.List(labels.Everything())
	add(tenantKey + GlobalTenant)
	for _, ns := range nss {
		add(namespaceKey + ns.Name)
		add(tenantKey + c.tenantOf(ns.Name))
	}
	for _, a := range c.listAdmin() {
		add(adminKey + a.policy.Key())
		n++
	}
	c.mu.RLock()
	for name := range c.sets {
		add(peersKey + name)
	}
	for name := range c.nodeSets {
		add(nodesKey + name)
	}
	for name := range c.domainSets {
		add(domainsKey + name)
	}
	c.mu.RUnlock()
	// Rows of ours whose object is gone.
	var pgs []nbdb.PortGroup
	_ = c.nb.WhereCache(func(pg *nbdb.PortGroup) bool { _, ok := ownerKey(pg.ExternalIDs); return ok }).List(context.Background(), &pgs)
	for _, pg := range pgs {
		k, _ := ownerKey(pg.ExternalIDs)
		add(k)
	}
	var ass []nbdb.AddressSet
	_ = c.nb.WhereCache(func(as *nbdb.AddressSet) bool { _, ok := ownerKey(as.ExternalIDs); return ok }).List(context.Background(), &ass)
	for _, as := range ass {
		k, _ := ownerKey(as.ExternalIDs)
		add(k)
	}
	return n
}

// queues route each key to its queue: the members of sets and groups
// (peers/, nodes/, domains/, members/) have their own, so that a pod or
// label change reaches them without waiting behind the full syncs of
// policies.
type queues struct{ rows, sets *controller.Queue }

func (q *queues) pick(key string) *controller.Queue {
	if strings.HasPrefix(key, peersKey) || strings.HasPrefix(key, nodesKey) || strings.HasPrefix(key, domainsKey) ||
		strings.HasPrefix(key, membersKey) {
		return q.sets
	}
	return q.rows
}

func (q *queues) Add(key string)    { q.pick(key).Add(key) }
func (q *queues) Resync(key string) { q.pick(key).Resync(key) }
func (q *queues) Idle() bool        { return q.rows.Idle() && q.sets.Idle() }

// Run runs workers on each queue until ctx ends.
func (q *queues) Run(ctx context.Context, workers int) {
	go q.sets.Run(ctx, workers)
	q.rows.Run(ctx, workers)
}

// ownerKey is the queue key of a row of ours.
func ownerKey(ids map[string]string) (string, bool) {
	o, ok := topology.OwnerOf(ids)
	if !ok {
		return "", false
	}
	switch o.Type {
	case OwnerPolicy:
		return policyKey + o.Name, true
	case OwnerNamespace:
		return namespaceKey + o.Name, true
	case OwnerPeers:
		return peersKey + o.Name, true
	case OwnerTenant:
		return tenantKey + o.Name, true
	case OwnerNodePeers:
		return nodesKey + o.Name, true
	case OwnerDomainPeers:
		return domainsKey + o.Name, true
	case KindCNP, KindANP, KindBANP, KindEF:
		return adminKey + o.Type + "/" + o.Name, true
	}
	return "", false
}

func (c *Controller) sync(ctx context.Context, key string) error {
	switch {
	case strings.HasPrefix(key, membersKey):
		return c.syncMembers(ctx, strings.TrimPrefix(key, membersKey))
	case strings.HasPrefix(key, policyKey):
		return c.syncPolicy(ctx, strings.TrimPrefix(key, policyKey))
	case strings.HasPrefix(key, peersKey):
		return c.syncPeers(ctx, strings.TrimPrefix(key, peersKey))
	case strings.HasPrefix(key, namespaceKey):
		return c.syncNamespace(ctx, strings.TrimPrefix(key, namespaceKey))
	case strings.HasPrefix(key, tenantKey):
		return c.syncTenant(ctx, strings.TrimPrefix(key, tenantKey))
	case strings.HasPrefix(key, adminKey):
		return c.syncAdmin(ctx, strings.TrimPrefix(key, adminKey))
	case strings.HasPrefix(key, nodesKey):
		return c.syncNodeSet(ctx, strings.TrimPrefix(key, nodesKey))
	case strings.HasPrefix(key, domainsKey):
		return c.syncDomainSet(ctx, strings.TrimPrefix(key, domainsKey))
	}
	return nil
}

// register records the address sets and selector of a policy (nil:
// deleted or refused) of a namespace ("" for an admin policy), and returns
// the queue keys of the sets no policy names any more, and the names of
// the policy's peer sets whose name another selector holds already (not
// registered: see Name).
func (c *Controller) register(key, namespace string, rows *Rows) (unused, collisions []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	old := c.policies[key]
	followed := old != nil && len(old.domainSets) > 0 || rows != nil && len(rows.DomainSets) > 0
	if old != nil {
		for _, name := range old.sets {
			if set, gone := release(c.sets, key, name); gone {
				setIndex(set, name, c.nsSets, c.crossSets, false)
				unused = append(unused, peersKey+name)
			}
		}
		for _, name := range old.nodeSets {
			if _, gone := release(c.nodeSets, key, name); gone {
				unused = append(unused, nodesKey+name)
			}
		}
		for _, name := range old.domainSets {
			if _, gone := release(c.domainSets, key, name); gone {
				unused = append(unused, domainsKey+name)
			}
		}
		delete(c.policies, key)
		delete(c.nsPolicies[old.namespace], key)
		delete(c.admins, strings.TrimPrefix(key, adminKey))
		for _, np := range old.namedPorts {
			delete(c.namedPorts[np], key)
			if len(c.namedPorts[np]) == 0 {
				delete(c.namedPorts, np)
			}
		}
	}
	if rows != nil {
		collisions = c.registerRows(key, namespace, rows)
	}
	if followed {
		c.followDomains()
	}
	isUnused := func(k string) bool {
		if n, ok := strings.CutPrefix(k, peersKey); ok {
			return c.sets[n] == nil
		}
		if n, ok := strings.CutPrefix(k, domainsKey); ok {
			return c.domainSets[n] == nil
		}
		return c.nodeSets[strings.TrimPrefix(k, nodesKey)] == nil
	}
	return slices.DeleteFunc(unused, func(k string) bool { return !isUnused(k) }), collisions
}

// registerRows records a policy's rows (c.mu held); see register.
func (c *Controller) registerRows(key, namespace string, rows *Rows) (collisions []string) {
	p := &policyEntry{namespace: namespace, pods: rows.PodSelector, namedPorts: rows.NamedPorts}
	for _, s := range rows.PeerSets {
		added, ok := use(c.sets, key, s)
		if !ok {
			collisions = append(collisions, s.Name())
			continue
		}
		if added {
			setIndex(s, s.Name(), c.nsSets, c.crossSets, true)
		}
		p.sets = append(p.sets, s.Name())
	}
	for _, s := range rows.NodeSets {
		if _, ok := use(c.nodeSets, key, s); !ok {
			collisions = append(collisions, s.Name())
			continue
		}
		p.nodeSets = append(p.nodeSets, s.Name())
	}
	for _, s := range rows.DomainSets {
		if _, ok := use(c.domainSets, key, s); !ok {
			collisions = append(collisions, s.Name())
			continue
		}
		p.domainSets = append(p.domainSets, s.Name())
	}
	c.policies[key] = p
	for _, np := range p.namedPorts {
		if c.namedPorts[np] == nil {
			c.namedPorts[np] = map[string]bool{}
		}
		c.namedPorts[np][key] = true
	}
	if rows.Subject != nil {
		c.admins[strings.TrimPrefix(key, adminKey)] = &adminEntry{subject: *rows.Subject}
	} else {
		if c.nsPolicies[namespace] == nil {
			c.nsPolicies[namespace] = map[string]bool{}
		}
		c.nsPolicies[namespace][key] = true
	}
	return collisions
}

// setIndex adds (or removes) a peer set to the pod-event indexes.
func setIndex(s PeerSet, name string, byNS map[string]map[string]bool, cross map[string]bool, add bool) {
	switch {
	case s.Namespace == "" && add:
		cross[name] = true
	case s.Namespace == "":
		delete(cross, name)
	case add:
		if byNS[s.Namespace] == nil {
			byNS[s.Namespace] = map[string]bool{}
		}
		byNS[s.Namespace][name] = true
	default:
		delete(byNS[s.Namespace], name)
	}
}

// syncPolicy makes a policy's port group (members and ACLs) match it, and
// creates the peer address sets it names that do not exist yet.
func (c *Controller) syncPolicy(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	np, err := c.npLister.NetworkPolicies(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	owner := topology.Owner{Type: OwnerPolicy, Name: key}
	var unused []string
	var build func(t *ovndb.Txn)
	if np == nil {
		c.reportRefusal(&networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, "")
		unused, _ = c.register(key, ns, nil)
		build = func(t *ovndb.Txn) {
			if pg := ovndb.Lookup(t, &nbdb.PortGroup{Name: PolicyPortGroup(ns, name)}); pg != nil && topology.OwnedBy(pg.ExternalIDs, owner) {
				t.Delete(pg) // its ACLs go with it
			}
		}
	} else {
		rows := Policy(np, c.resolve, c.logging(ns), c.fams)
		for _, p := range rows.Problems {
			c.log.Info("ignoring part of a network policy", "policy", key, "problem", p)
		}
		c.reportRefusal(np, rows.Refused)
		var collisions []string
		unused, collisions = c.register(key, ns, &rows)
		if len(collisions) > 0 {
			c.log.Error(nil, "a peer selector's address set name is another selector's; the rules naming it are left out (they allow nothing)",
				"policy", key, "addressSets", collisions)
			rows.dropCollisions(collisions)
		}
		members := memberMemo{}
		build = func(t *ovndb.Txn) {
			for _, s := range rows.PeerSets {
				c.ensurePeerSet(t, s, members)
			}
			c.ensurePortGroup(t, rows.PortGroup, rows.ACLs, c.selectedPorts(t, ns, func(p *slim.Pod) bool {
				return rows.PodSelector.Matches(labels.Set(p.Labels))
			}))
		}
	}
	if err := c.commitGroup(ctx, policyKey+key, build); err != nil {
		return fmt.Errorf("network policy %s: %w", key, err)
	}
	for _, k := range unused {
		c.queue.Add(k)
	}
	c.queue.Add(namespaceKey + ns)
	return nil
}

// reportRefusal logs and records a Warning Event when a policy is refused
// for a new reason (why "" forgets an earlier refusal).
func (c *Controller) reportRefusal(np *networkingv1.NetworkPolicy, why string) {
	key := np.Namespace + "/" + np.Name
	c.mu.Lock()
	old := c.refused[key]
	if why == "" {
		delete(c.refused, key)
	} else {
		c.refused[key] = why
	}
	c.mu.Unlock()
	if why == "" || why == old {
		return
	}
	c.log.Info("network policy refused: its rules allow nothing until it is made smaller", "policy", key, "reason", why)
	if c.opts.Events != nil {
		c.opts.Events.Eventf(np, corev1.EventTypeWarning, "NetworkPolicyTooLarge",
			"policy refused, its rules allow nothing (the pods it selects stay isolated): %s", why)
	}
}

// logging is a namespace's ACL logging, from its k8s.ovn.org/acl-logging
// annotation; a malformed one logs nothing and says why.
func (c *Controller) logging(namespace string) Logging {
	ns, err := c.nsLister.Get(namespace)
	if err != nil {
		return Logging{}
	}
	v, ok := ns.Annotations[annotations.NamespaceACLLogging]
	if !ok {
		return Logging{}
	}
	l, err := annotations.ParseACLLogging(v)
	if err != nil {
		c.log.Info("ignoring the namespace's ACL logging annotation", "namespace", namespace, "error", err.Error())
		return Logging{}
	}
	return Logging{Allow: l.Allow, Deny: l.Deny, Meter: topology.ACLLogMeter}
}
