// Package master is `ovnkube master`: it watches Nodes and Pods and keeps the
// OVN Northbound database in line with them. Each object is synced by key,
// level-triggered (sample-controller style): a sync reads the informer caches
// and the NB client cache, computes the desired rows with the pure topology
// package and commits only the difference.
package master

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-org/libovsdb/cache"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const podNodeIndex = "spec.nodeName"

// Master is the running controller.
type Master struct {
	cfg       config.Master
	log       logr.Logger
	kube      kubernetes.Interface
	nb        libovsdbclient.Client
	committer *ovndb.Committer
	ipam      *ipam
	recorder  record.EventRecorder

	factory    informers.SharedInformerFactory
	admin      *policy.AdminAPI
	dns        *dnsname.Resolver         // nil: no DNS servers configured
	relayed    cache.SharedIndexInformer // DNSNameResolvers (zone mode; nil: none)
	eipAPI     *egressip.API
	eips       *egressip.Controller // nil: EgressIPs not served
	nodeLister corelisters.NodeLister
	podLister  slim.Lister
	nodeQueue  *controller.Queue
	podQueue   *controller.Queue
	podsListed atomic.Bool // the start has queued the pods: their events queue them from now on (zone mode)
	services   *services.Controller
	policies   *policy.Controller

	// synced is closed once startup (rebuild + first full sync) is done.
	synced     chan struct{}
	syncedOnce sync.Once
	// clusterDirty asks for the cluster-wide rows to be checked again;
	// globalDirty for NB_Global's options only.
	clusterDirty chan struct{}
	globalDirty  chan struct{}
	// globalOptions are the NB_Global options this master keeps
	// (topology.GlobalOptions of its settings).
	globalOptions map[string]string
	// nodesReady holds the nodes whose last sync succeeded; a node entering
	// it queues its pods (which wait, retrying, for their node's subnet).
	nodesReady sync.Map
	// nodeIndexer finds Nodes by InternalIP; dupAddrReported holds the
	// duplicate-address conflicts already reported (nodeaddr.go).
	nodeIndexer     cache.Indexer
	dupAddrReported sync.Map
	// reported holds, per object and annotation, the problem last reported
	// (an IP family drop, families.go; a malformed gateway, gateway.go), so
	// that a retry or a resync does not repeat it.
	reported sync.Map
	latency  podLatency
}

// NewInformers is the informer factory a master reads the cluster through,
// its pod informer holding slim.Pods (what the controllers read) indexed by
// node.
// Started before the NB connection is up, the API's lists overlap the NB's
// initial monitor, the two longest steps of a restart.
//
// Against an API server, the pod informer reads its protobuf straight into
// slim.Pods (slim.NewListWatch): decoding whole pods was the largest part of
// a lone pod's cost to the master after the NB and HTTP/2 (docs/performance.md).
func NewInformers(kube kubernetes.Interface) informers.SharedInformerFactory {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(slim.DropManagedFields))
	if rc, ok := kube.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		factory.InformerFor(&corev1.Pod{}, func(_ kubernetes.Interface, resync time.Duration) cache.SharedIndexInformer {
			return cache.NewSharedIndexInformer(slim.NewListWatch(rc), &slim.Pod{}, resync,
				cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
		})
	}
	// Fake clientsets (unit tests) have no REST client: their pods are trimmed
	// by the transform. The other kinds are kept whole, less their
	// managedFields (slim.DropManagedFields).
	pods := factory.Core().V1().Pods().Informer()
	_ = pods.SetTransform(slim.Transform)
	_ = pods.AddIndexers(cache.Indexers{podNodeIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*slim.Pod); ok && pod.NodeName != "" {
			return []string{pod.NodeName}, nil
		}
		return nil, nil
	}})
	_ = factory.Core().V1().Nodes().Informer().AddIndexers(cache.Indexers{nodeAddrIndex: indexNodeAddresses, nodeChassisIndex: indexNodeChassis})
	return factory
}

// APIs are the custom resources the master follows (a nil field: its kinds
// are not served).
type APIs struct {
	// Admin: admin network policies and egress firewalls.
	Admin *policy.AdminAPI
	// EgressIP: EgressIPs.
	EgressIP *egressip.API
}

// New wires a master reading through factory (from NewInformers, started or
// not), and through apis for custom resources; Run starts it.
func New(cfg config.Master, kube kubernetes.Interface, nb libovsdbclient.Client, factory informers.SharedInformerFactory, apis APIs, log logr.Logger) *Master {
	admin := apis.Admin
	if cfg.PodWorkers <= 0 {
		cfg.PodWorkers = 32
	}
	if cfg.ServiceWorkers <= 0 {
		cfg.ServiceWorkers = 8
	}
	if cfg.PolicyWorkers <= 0 {
		cfg.PolicyWorkers = config.DefaultPolicyWorkers
	}
	if cfg.NodeWorkers <= 0 {
		cfg.NodeWorkers = 4
	}
	if cfg.RetryMaxDelay <= 0 {
		cfg.RetryMaxDelay = 30 * time.Second
	}
	if cfg.Zone != "" && len(cfg.TransitSubnets) == 0 {
		cfg.TransitSubnets = config.DefaultTransitSubnets
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = config.DefaultResyncInterval
	}
	podInformer := factory.Core().V1().Pods()
	nodeInformer := factory.Core().V1().Nodes()
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	m := &Master{
		cfg:         cfg,
		log:         log,
		kube:        kube,
		nb:          nb,
		committer:   ovndb.NewCommitter(nb, log.WithName("nb")),
		ipam:        newIPAM(cfg.ClusterSubnets, cfg.JoinSubnets),
		recorder:    broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ovnkube-master"}),
		factory:     factory,
		admin:       admin,
		nodeLister:  nodeInformer.Lister(),
		nodeIndexer: nodeInformer.Informer().GetIndexer(),
		podLister:   slim.NewLister(podInformer.Informer()),
		synced:      make(chan struct{}),

		clusterDirty:  make(chan struct{}, 1),
		globalDirty:   make(chan struct{}, 1),
		globalOptions: topology.GlobalOptions(cfg.Zone, cfg.JoinSubnets, cfg.NorthdBackoff),
	}
	m.nodeQueue = controller.NewQueue("nodes", cfg.RetryMaxDelay, m.syncNode, log)
	m.podQueue = controller.NewQueue("pods", cfg.RetryMaxDelay, m.syncPod, log)
	_, _ = nodeInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { m.enqueue(m.nodeQueue, obj); m.enqueueClaimPeers(obj) },
		UpdateFunc: func(old, cur any) { m.nodeUpdated(old, cur) },
		DeleteFunc: func(obj any) { m.enqueue(m.nodeQueue, obj); m.enqueueClaimPeers(obj) },
	})
	_, _ = podInformer.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if m.wantPod(obj) {
				m.latency.saw(obj)
				m.enqueue(m.podQueue, obj)
			}
		},
		UpdateFunc: func(old, cur any) {
			if m.wantPod(cur) {
				m.latency.saw(cur)
			}
			m.podUpdated(old, cur)
		},
		DeleteFunc: func(obj any) { m.latency.forget(obj); m.enqueuePod(obj) },
	})
	nb.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{DeleteFunc: m.nbRowDeleted, UpdateFunc: m.nbRowUpdated,
		AddFunc: func(table string, row model.Model) { m.nbRowUpdated(table, nil, row) }})
	m.services = services.New(factory, nb, m.committer.Commit, log.WithName("services"), cfg.RetryMaxDelay, serviceOptions(cfg, m.recorder))
	var podRanges []netip.Prefix
	var nodeSources []string
	for _, s := range cfg.ClusterSubnets {
		podRanges = append(podRanges, s.CIDR)
		nodeSources = append(nodeSources, topology.ManagementAddresses(s.CIDR, s.HostSubnetLength))
	}
	popts := policy.Options{Isolation: cfg.NamespaceIsolation, ClusterSubnets: podRanges,
		InternalRanges: append(m.internalRanges(), cfg.ServiceCIDRs...), NodeSources: nodeSources, Events: m.recorder, Admin: admin}
	if len(cfg.DNSServers) > 0 {
		dopts := dnsname.Options{Servers: cfg.DNSServers}
		if m.relayed = dnsRelay(cfg, admin, log); m.relayed != nil {
			dopts.Known = k8sovnv1.KnownAddresses(m.relayed.GetStore())
		}
		m.dns = dnsname.New(dopts, func(name string) { m.policies.DomainChanged(name) }, log.WithName("dns"))
		if m.relayed != nil {
			m.learnRelayed(m.relayed)
		}
		popts.DNS = m.dns
		popts.DNSTap = cfg.DNSTapAddress != "" && (cfg.Zone == "" || m.relayed != nil)
	}
	m.policies = policy.New(factory, nb, m.committer.Commit, popts, log.WithName("policy"), cfg.RetryMaxDelay)
	if apis.EgressIP != nil {
		m.eipAPI = apis.EgressIP
		eopts := egressip.Options{ClusterSubnets: podRanges, JoinSubnets: cfg.JoinSubnets, ReachTimeout: cfg.EgressIPReachTimeout, Events: m.recorder}
		if cfg.Zone != "" { // the cluster manager assigns
			eopts.Role, eopts.InZone, eopts.Transit = egressip.RoleProgram, m.inZone, m.transitAddrs
		}
		m.eips = egressip.New(apis.EgressIP, factory, nb, m.committer.Commit, eopts, log.WithName("egressip"), cfg.RetryMaxDelay)
	}
	return m
}

// serviceOptions is the services controller's address policy: the operator's
// external ranges and node port range, and the cluster's own ranges (never
// an external address). Refusals are Events of the master's recorder.
func serviceOptions(cfg config.Master, events record.EventRecorder) services.Options {
	var pods []netip.Prefix
	for _, cs := range cfg.ClusterSubnets {
		pods = append(pods, cs.CIDR)
	}
	return services.Options{Recorder: events, Policy: services.AddressPolicy{Allowed: cfg.ExternalIPCIDRs, NodePorts: cfg.NodePortRange,
		Reserved: services.ReservedRanges(pods, cfg.JoinSubnets, cfg.ServiceCIDRs)}}
}

// nbRowDeleted re-syncs the owner of a row of ours that disappeared from the
// NB (deleted by hand, or the database was restored): the owner's sync puts
// it back. Only deletions are followed; our own writes produce updates.
func (m *Master) nbRowDeleted(table string, row model.Model) {
	var ids map[string]string
	switch r := row.(type) {
	case *nbdb.LogicalSwitch:
		ids = r.ExternalIDs
	case *nbdb.LogicalSwitchPort:
		ids = r.ExternalIDs
	case *nbdb.LogicalRouter:
		ids = r.ExternalIDs
	case *nbdb.LogicalRouterPort:
		ids = r.ExternalIDs
	default:
		return
	}
	owner, ok := topology.OwnerOf(ids)
	if !ok {
		return
	}
	switch owner.Type {
	case topology.OwnerNode:
		m.nodeQueue.Add(owner.Name)
	case topology.OwnerPod:
		m.podQueue.Add(owner.Name)
	case topology.OwnerCluster:
		signal(m.clusterDirty)
	}
}

// nbRowUpdated puts back the NB_Global options the master keeps when
// another writer changes or removes one, or replaces the row (ovn-northd's
// own writes to the row leave them alone, and cost a map lookup per key).
// Only the options: nodes are queued again by a reconnect's resync, which
// counts what it repairs.
func (m *Master) nbRowUpdated(_ string, _, cur model.Model) {
	g, ok := cur.(*nbdb.NBGlobal)
	if !ok {
		return
	}
	for k, v := range m.globalOptions {
		if g.Options[k] != v {
			signal(m.globalDirty)
			return
		}
	}
}

// signal leaves a mark on a channel of capacity 1 unless one is there.
func signal(ch chan<- struct{}) {
	select {
	case ch <- struct{}{}:
	default:
	}
}

// Committer exposes NB transaction counts (for tests and benchmarks).
func (m *Master) Committer() *ovndb.Committer { return m.committer }

// Idle says no node, pod, service, policy or egress IP is queued or being
// synced (keys waiting to be retried are not queued yet).
func (m *Master) Idle() bool {
	return m.nodeQueue.Idle() && m.podQueue.Idle() && m.services.Idle() && m.policies.Idle() && (m.eips == nil || m.eips.Idle())
}

// Synced is closed when the startup sync has finished.
func (m *Master) Synced() <-chan struct{} { return m.synced }

// NBConnected says whether the NB connection is up (to the leader of a
// clustered NB).
func (m *Master) NBConnected() bool { return m.nb.CurrentEndpoint() != "" }

// Ready is nil once the startup sync is done while the NB is reachable.
func (m *Master) Ready() error {
	if !m.NBConnected() {
		return fmt.Errorf("NB unreachable (reconnecting)")
	}
	select {
	case <-m.synced:
		return nil
	default:
		return fmt.Errorf("initial sync not done")
	}
}

// Run starts informers, rebuilds address state, syncs everything once and
// then follows changes until ctx ends.
func (m *Master) Run(ctx context.Context) error {
	go m.committer.Run(ctx)

	m.factory.Start(ctx.Done())
	for typ, ok := range m.factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}
	if m.admin != nil {
		if err := m.admin.Start(ctx); err != nil {
			return err
		}
	}
	if m.eipAPI != nil {
		if err := m.eipAPI.Start(ctx); err != nil {
			return err
		}
	}
	tap, err := m.listenDNSTap()
	if err != nil {
		return err
	}
	if m.relayed != nil {
		go m.relayed.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), m.relayed.HasSynced) {
			return fmt.Errorf("informer cache for dnsnameresolvers did not sync")
		}
	}
	if m.dns != nil {
		go m.dns.Run(ctx)
	}
	if tap != nil {
		go m.serveDNSTap(ctx, tap)
	}
	if err := m.ensureClusterWithRetry(ctx); err != nil {
		return err
	}
	m.rebuild()
	m.podsListed.Store(true)
	m.enqueueAll(false)

	var wg sync.WaitGroup
	spawn := func(f func()) {
		wg.Add(1)
		go func() { defer wg.Done(); f() }()
	}
	spawn(func() { m.nodeQueue.Run(ctx, m.cfg.NodeWorkers) })
	spawn(func() {
		// A pod's port hangs off its node's switch: at start the nodes go
		// first, so that pods are not synced, failed and retried with
		// backoff before their switch exists (an empty NB). Idle counts a
		// failed node waiting for its retry as done: its pods wait as before.
		_ = wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
			return m.nodeQueue.Idle(), nil
		})
		m.podQueue.Run(ctx, m.cfg.PodWorkers)
	})
	spawn(func() { m.services.Run(ctx, m.cfg.ServiceWorkers) })
	spawn(func() { m.policies.Run(ctx, m.cfg.PolicyWorkers) })
	if m.eips != nil {
		spawn(func() { m.eips.Run(ctx, 2) })
	}
	spawn(func() {
		ovndb.WatchReconnects(ctx, m.nb, 100*time.Millisecond, m.log.WithName("nb"), func() { m.resync(ctx, "nb_reconnect") })
	})
	spawn(func() { m.watchCluster(ctx) })
	spawn(func() { m.resyncPeriodically(ctx) })
	go m.signalSynced(ctx)
	go m.logCommitStats(ctx, 10*time.Second)
	wg.Wait()
	return nil
}

func (m *Master) enqueue(q *controller.Queue, obj any) {
	key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj)
	if err != nil {
		m.log.Error(err, "cannot key object")
		return
	}
	q.Add(key)
}

// enqueueAll queues every object the API has and every object the NB has
// rows for, so deletions that happened while we were down are seen too.
// check logs what the syncs repair.
func (m *Master) enqueueAll(check bool) (nodes, pods int) {
	addNode, addPod := m.nodeQueue.Add, m.podQueue.Add
	if check {
		addNode, addPod = m.nodeQueue.Resync, m.podQueue.Resync
	}
	nodeObjs, _ := m.nodeLister.List(everything)
	for _, n := range nodeObjs {
		addNode(n.Name)
	}
	podObjs := m.podLister.List("", everything)
	for _, p := range podObjs {
		if m.podMayBeOurs(p) {
			addPod(p.Namespace + "/" + p.Name)
		}
	}
	nodeKeys, podKeys := m.ownedKeysInNB()
	for _, k := range nodeKeys {
		addNode(k)
	}
	for _, k := range podKeys {
		addPod(k)
	}
	return len(nodeObjs), len(podObjs)
}

// resync checks everything again from the current caches: after a
// reconnect (the NB may have been replaced) and periodically as a safety net.
func (m *Master) resync(ctx context.Context, reason string) {
	if err := m.ensureClusterWithRetry(ctx); err != nil {
		return
	}
	metrics.Resyncs.WithLabelValues(reason).Inc()
	// The address sets' members are read from the NB again, so that what
	// someone else changed in them is repaired too (they are not monitored).
	ovndb.ForgetMembers(m.nb)
	nodes, pods := m.enqueueAll(true)
	services := m.services.Resync()
	policies := m.policies.Resync()
	if m.eips != nil {
		m.eips.Resync()
	}
	m.log.Info("full resync queued; repairs are logged per object", "reason", reason, "nodes", nodes, "pods", pods, "services", services, "networkPolicies", policies)
}

func (m *Master) resyncPeriodically(ctx context.Context) {
	if m.cfg.ResyncInterval < 0 {
		return
	}
	_ = wait.PollUntilContextCancel(ctx, m.cfg.ResyncInterval, false, func(ctx context.Context) (bool, error) {
		m.resync(ctx, "periodic")
		return false, nil
	})
}

// signalSynced closes m.synced once the first full pass has drained.
func (m *Master) signalSynced(ctx context.Context) {
	_ = wait.PollUntilContextCancel(ctx, 20*time.Millisecond, true, func(context.Context) (bool, error) { return m.Idle(), nil })
	if ctx.Err() == nil {
		m.syncedOnce.Do(func() {
			m.log.Info("initial sync done", "nbTransactions", m.committer.Transactions())
			close(m.synced)
		})
	}
}

// logCommitStats reports, when they moved, how many NB transactions and
// operations were sent: the batching at work.
func (m *Master) logCommitStats(ctx context.Context, every time.Duration) {
	var lastTxns, lastOps uint64
	_ = wait.PollUntilContextCancel(ctx, every, false, func(context.Context) (bool, error) {
		txns, ops := m.committer.Transactions(), m.committer.Operations()
		if txns == lastTxns {
			return false, nil
		}
		m.log.V(2).Info("NB commits", "transactions", txns-lastTxns, "operations", ops-lastOps,
			"opsPerTransaction", float64(ops-lastOps)/float64(txns-lastTxns), "interval", every)
		lastTxns, lastOps = txns, ops
		return false, nil
	})
}

// watchCluster repairs the cluster-wide rows when one of them is deleted,
// and NB_Global's options when another writer changed them.
func (m *Master) watchCluster(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.globalDirty:
			if err := m.ensureClusterWithRetry(ctx); err != nil {
				return
			}
			continue
		case <-m.clusterDirty:
		}
		if err := m.ensureClusterWithRetry(ctx); err != nil {
			return
		}
		nodes, _ := m.nodeLister.List(everything)
		for _, n := range nodes {
			m.nodeQueue.Add(n.Name) // their router ports hang off the cluster router
		}
	}
}

func (m *Master) ensureClusterWithRetry(ctx context.Context) error {
	backoff := 200 * time.Millisecond
	for {
		err := EnsureCluster(ctx, m.nb, m.committer.Commit, m.cfg.JoinSubnets)
		if err == nil {
			err = EnsureGlobal(ctx, m.nb, m.committer.Commit, m.cfg.Zone, m.globalOptions)
		}
		if err == nil {
			return nil
		}
		m.log.Info("cannot create cluster router and join switch yet; retrying", "error", err.Error())
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(backoff):
		}
		if backoff < 5*time.Second {
			backoff *= 2
		}
	}
}
