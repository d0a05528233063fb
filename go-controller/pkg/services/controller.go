package services

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	ovsdbcache "github.com/ovn-org/libovsdb/cache"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const sliceServiceIndex = "service"

var everything = labels.Everything()

// CommitFunc sends operations to the NB.
type CommitFunc func(context.Context, []ovsdb.Operation) error

// Controller keeps one set of load balancers per Service in line with the
// Service, its EndpointSlices and the nodes' gateway routers. It keeps no
// index of its own: load balancers are found in the NB cache by owner, and
// gateway routers by name and owner, so a cache refilled after a reconnect
// can never leave it with stale rows in mind.
type Controller struct {
	log          logr.Logger
	nb           libovsdbclient.Client
	commit       CommitFunc
	svcLister    corelisters.ServiceLister
	nodeLister   corelisters.NodeLister
	sliceIndexer cache.Indexer
	queue        *controller.Queue
	gwDirty      chan struct{}
	opts         Options

	// refused holds, per service, the refusals last reported in Events, so
	// that a resync repeats none.
	refusedMu sync.Mutex
	refused   map[string]string
	// nodeAddrOwners maps every node's own address to its node (nil: to be
	// rebuilt, after a Node change), so that a service sync does not parse
	// every Node's annotations.
	nodeAddrMu     sync.Mutex
	nodeAddrOwners map[netip.Addr]string
	nodeList       []NodeGateway // every node (nil: to be rebuilt)
	// hostBacked are the services last synced with a host-network
	// endpoint: their per-node balancers follow the nodes.
	hostBacked map[string]bool
	groups     groupMemo // the load balancer groups' members
}

// Options are the operator's choices about the addresses outside clients
// may use: Policy without its Nodes, which the controller fills from the
// Node objects (see AddressPolicy).
type Options struct {
	Policy AddressPolicy
	// Recorder receives a Warning Event on the Service for every address or
	// node port refused; nil: refusals are only logged.
	Recorder record.EventRecorder
}

// New wires the controller onto shared informers and the NB client.
func New(factory informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, log logr.Logger, maxDelay time.Duration, opts Options) *Controller {
	c := &Controller{
		log:        log,
		nb:         nb,
		commit:     commit,
		svcLister:  factory.Core().V1().Services().Lister(),
		nodeLister: factory.Core().V1().Nodes().Lister(),
		gwDirty:    make(chan struct{}, 1),
		opts:       opts,
		refused:    map[string]string{},
		hostBacked: map[string]bool{},
	}
	c.queue = controller.NewQueue("services", maxDelay, c.syncService, log)
	sliceInformer := factory.Discovery().V1().EndpointSlices().Informer()
	_ = sliceInformer.AddIndexers(cache.Indexers{sliceServiceIndex: func(obj any) ([]string, error) {
		if key := sliceServiceKey(obj); key != "" {
			return []string{key}, nil
		}
		return nil, nil
	}})
	c.sliceIndexer = sliceInformer.GetIndexer()
	_, _ = factory.Core().V1().Services().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    c.enqueueObj,
		UpdateFunc: func(_, cur any) { c.enqueueObj(cur) },
		DeleteFunc: c.enqueueObj,
	})
	sliceHandler := func(obj any) {
		if key := sliceServiceKey(obj); key != "" {
			c.queue.Add(key)
		}
	}
	_, _ = sliceInformer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: sliceHandler,
		// A slice relabelled to another service leaves the old one too.
		UpdateFunc: func(old, cur any) { sliceHandler(old); sliceHandler(cur) },
		DeleteFunc: sliceHandler,
	})
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		// NodePorts answer on every node's addresses, and no external
		// address may be a node's.
		AddFunc:    func(any) { c.gatewaysChanged() },
		DeleteFunc: func(any) { c.gatewaysChanged() },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if !slices.Equal(nodeIPs(o), nodeIPs(n)) || !slices.Equal(NodeOwnAddresses(o), NodeOwnAddresses(n)) ||
				o.Annotations[annotations.NodeSubnets] != n.Annotations[annotations.NodeSubnets] {
				c.gatewaysChanged()
			}
		},
	})
	nb.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { c.nbRowChanged(m, rowAdded) },
		UpdateFunc: func(table string, _, m model.Model) { c.nbRowChanged(m, rowUpdated) },
		DeleteFunc: func(table string, m model.Model) { c.nbRowChanged(m, rowDeleted) },
	})
	return c
}

type rowEvent int

const (
	rowAdded rowEvent = iota
	rowUpdated
	rowDeleted
)

// nbRowChanged re-syncs a service whose load balancer vanished behind our
// back, every service when a load balancer group comes (one re-created
// holds no balancer), and the services with per-node balancers when a
// gateway router comes, goes or lost the cluster group, or a node switch
// comes.
func (c *Controller) nbRowChanged(m model.Model, ev rowEvent) {
	switch row := m.(type) {
	case *nbdb.LoadBalancerGroup:
		c.groups.changed(ev)
		if ev == rowAdded {
			for k := range c.allKeys() {
				c.queue.Add(k)
			}
		}
	case *nbdb.LoadBalancer:
		if owner, ok := topology.OwnerOf(row.ExternalIDs); ok && owner.Type == topology.OwnerService && ev == rowDeleted {
			c.queue.Add(owner.Name)
		}
	case *nbdb.LogicalRouter:
		if _, ok := gatewayNode(row); ok && (ev != rowUpdated || !slices.Contains(row.LoadBalancerGroup, c.groupUUID())) {
			c.gatewaysChanged()
		}
	case *nbdb.LogicalSwitch:
		// A node switch that comes (or comes back) gets its node's
		// balancers of services with a Local internal policy.
		if ev == rowAdded && topology.OwnedBy(row.ExternalIDs, topology.Owner{Type: topology.OwnerNode, Name: row.Name}) {
			c.gatewaysChanged()
		}
	}
}

// gatewayNode is the node whose gateway router r is, if r is one of ours.
func gatewayNode(r *nbdb.LogicalRouter) (string, bool) {
	node, ok := topology.GatewayRouterNode(r.Name)
	if !ok {
		return "", false
	}
	owner, ours := topology.OwnerOf(r.ExternalIDs)
	return node, ours && owner == topology.Owner{Type: topology.OwnerNode, Name: node}
}

// gatewayRouters lists the gateway routers of ours in the NB cache.
func (c *Controller) gatewayRouters() []nbdb.LogicalRouter {
	var routers []nbdb.LogicalRouter
	_ = c.nb.WhereCache(func(r *nbdb.LogicalRouter) bool {
		_, ok := gatewayNode(r)
		return ok
	}).List(context.Background(), &routers)
	return routers
}

// ownedLBs lists the load balancers the NB cache holds for a service.
func (c *Controller) ownedLBs(key string) []nbdb.LoadBalancer {
	return ovndb.Owned[nbdb.LoadBalancer](c.nb, topology.Owner{Type: topology.OwnerService, Name: key})
}

func (c *Controller) gatewaysChanged() {
	c.nodeAddrMu.Lock()
	c.nodeAddrOwners, c.nodeList = nil, nil
	c.nodeAddrMu.Unlock()
	select {
	case c.gwDirty <- struct{}{}:
	default:
	}
}

// Resync queues every service and every owner of a load balancer of ours
// for a check whose repairs are logged; it returns how many were queued.
func (c *Controller) Resync() int {
	c.groups.forget()
	keys := c.allKeys()
	for k := range keys {
		c.queue.Resync(k)
	}
	c.gatewaysChanged()
	return len(keys)
}

func (c *Controller) allKeys() map[string]bool {
	keys := map[string]bool{}
	svcs, _ := c.svcLister.List(everything)
	for _, s := range svcs {
		keys[s.Namespace+"/"+s.Name] = true
	}
	var lbs []nbdb.LoadBalancer
	_ = c.nb.WhereCache(func(lb *nbdb.LoadBalancer) bool {
		o, ok := topology.OwnerOf(lb.ExternalIDs)
		return ok && o.Type == topology.OwnerService
	}).List(context.Background(), &lbs)
	for _, lb := range lbs {
		keys[lb.ExternalIDs[topology.OwnerNameKey]] = true
	}
	return keys
}

// Run syncs every service once, then follows changes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	for k := range c.allKeys() {
		c.queue.Add(k)
	}
	c.gatewaysChanged()
	done := make(chan struct{})
	go func() { defer close(done); c.queue.Run(ctx, workers) }()
	for {
		select {
		case <-ctx.Done():
			<-done
			return
		case <-c.gwDirty:
			start := time.Now()
			if err := c.syncGateways(ctx); err != nil {
				c.log.Info("attaching the cluster load balancer group to gateway routers failed; retrying", "error", err.Error())
				time.AfterFunc(time.Second, c.gatewaysChanged)
			}
			// Node events come in bursts (a cluster growing by a thousand
			// nodes), and a pass costs as much as there are nodes and
			// services: passes are at least gatewayPassSpacing apart, the
			// events in between served by the next one (make bench-scale:
			// back to back, they took half the master's CPU at 2,000 nodes).
			select {
			case <-ctx.Done():
			case <-time.After(gatewayPassSpacing - time.Since(start)):
			}
		}
	}
}

// gatewayPassSpacing is the least time between two passes of syncGateways.
const gatewayPassSpacing = 500 * time.Millisecond

// Idle reports whether no service is queued or being synced.
func (c *Controller) Idle() bool { return c.queue.Idle() }

// syncService makes the service's load balancers match it, in one transaction.
func (c *Controller) syncService(ctx context.Context, key string) error {
	ns, name, _ := strings.Cut(key, "/")
	svc, err := c.svcLister.Services(ns).Get(name)
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	var d Desired
	if svc != nil {
		var slices []*discovery.EndpointSlice
		objs, _ := c.sliceIndexer.ByIndex(sliceServiceIndex, key)
		for _, o := range objs {
			slices = append(slices, o.(*discovery.EndpointSlice))
		}
		d = LoadBalancers(svc, slices, c.gatewayNodes(svc), c.nodes(), c.policy(svc))
		for _, p := range d.Problems {
			c.log.Info("ignoring bad service input", "service", key, "problem", p)
		}
	}
	c.nodeAddrMu.Lock()
	if d.HostBacked {
		c.hostBacked[key] = true
	} else {
		delete(c.hostBacked, key)
	}
	c.nodeAddrMu.Unlock()
	c.reportRefused(key, svc, d.Refused)
	t := ovndb.NewTxn(c.nb)
	wanted := map[string]bool{}
	c.ensureInGroup(ctx, t, topology.ClusterLBGroup, d.Cluster, wanted)
	c.ensureInGroup(ctx, t, topology.ClusterSwitchLBGroup, d.Switch, wanted)
	for node, lb := range d.PerNode {
		node, _, _ = strings.Cut(node, "/")
		gr := ovndb.Lookup(t, &nbdb.LogicalRouter{Name: topology.GatewayRouter(node)})
		if gr == nil {
			continue // the gateway went away (its deletion re-syncs NodePort services)
		}
		if _, ours := gatewayNode(gr); !ours {
			continue // the gateway went away (its deletion re-syncs NodePort services)
		}
		wanted[lb.Name] = true
		uuid := t.Ensure(lb, lbFields(lb), nil)
		t.AddChildren(gr, &gr.LoadBalancer, uuid)
	}
	for node, lb := range d.PerNodeSwitch {
		node, _, _ = strings.Cut(node, "/")
		ls := ovndb.Lookup(t, &nbdb.LogicalSwitch{Name: node})
		if ls == nil || !topology.OwnedBy(ls.ExternalIDs, topology.Owner{Type: topology.OwnerNode, Name: node}) {
			continue // no switch yet (its creation re-syncs these services)
		}
		wanted[lb.Name] = true
		uuid := t.Ensure(lb, lbFields(lb), nil)
		t.AddChildren(ls, &ls.LoadBalancer, uuid)
	}
	for _, lb := range c.ownedLBs(key) {
		if !wanted[lb.Name] {
			// References from groups, switches and routers are weak: they go with it.
			t.Delete(&lb)
		}
	}
	ops, err := t.Ops()
	if err != nil {
		return fmt.Errorf("service %s: %w", key, err)
	}
	if err := c.commit(ctx, ops); err != nil {
		return fmt.Errorf("service %s: %w", key, err)
	}
	return nil
}

// ensureInGroup makes the load balancers exist as members of the named group
// and marks them wanted. A balancer this transaction writes anyway (new or
// changed) is inserted unasked, as inserting a member again changes
// nothing; only an unchanged one is looked up (groupMemo), so that an idle
// sync writes nothing and a growing cluster's syncs read no group.
func (c *Controller) ensureInGroup(ctx context.Context, t *ovndb.Txn, groupName string, lbs []*nbdb.LoadBalancer, wanted map[string]bool) {
	if len(lbs) == 0 {
		return
	}
	uuid, ok := c.groups.uuid(c.nb, groupName)
	if !ok {
		ovndb.Require(t, &nbdb.LoadBalancerGroup{Name: groupName}) // fails the transaction, naming the group
		return
	}
	group := &nbdb.LoadBalancerGroup{UUID: uuid, Name: groupName}
	for _, lb := range lbs {
		wanted[lb.Name] = true
		written := t.Len()
		lbUUID := t.Ensure(lb, lbFields(lb), nil)
		if t.Err() == nil && (t.Len() > written || !c.groups.has(ctx, c.nb, groupName, lbUUID)) {
			t.InsertMembers(group, &group.LoadBalancer, lbUUID)
		}
	}
}

func lbFields(lb *nbdb.LoadBalancer) []any {
	return []any{&lb.Vips, &lb.Protocol, &lb.Options, &lb.ExternalIDs}
}

// gatewayNodes are the nodes with a gateway router, with the addresses their
// NodePorts answer on; only computed for services that have NodePorts.
func (c *Controller) gatewayNodes(svc *corev1.Service) []NodeGateway {
	if svc.Spec.Type != corev1.ServiceTypeNodePort && svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return nil
	}
	var nodes []string
	for _, gr := range c.gatewayRouters() {
		node, _ := gatewayNode(&gr)
		nodes = append(nodes, node)
	}
	var out []NodeGateway
	for _, n := range nodes {
		node, err := c.nodeLister.Get(n)
		if err != nil {
			continue
		}
		if ips := nodeIPs(node); len(ips) > 0 {
			out = append(out, NodeGateway{Node: n, IPs: ips})
		}
	}
	return out
}

// nodes are every node with its NodePort addresses, own addresses and
// management addresses, sorted by name; rebuilt only after a Node changed
// (the list is not modified once built).
func (c *Controller) nodes() []NodeGateway {
	c.nodeAddrMu.Lock()
	defer c.nodeAddrMu.Unlock()
	if c.nodeList == nil {
		nodes, _ := c.nodeLister.List(everything)
		c.nodeList = make([]NodeGateway, 0, len(nodes))
		for _, n := range nodes {
			c.nodeList = append(c.nodeList, GatewayOf(n))
		}
		slices.SortFunc(c.nodeList, func(a, b NodeGateway) int { return strings.Compare(a.Node, b.Node) })
	}
	return c.nodeList
}

// GatewayOf is node with its NodePort, own and management addresses, as
// the master balances for it (the node daemon computes the same, to know
// which conntrack entries point at a backend the node no longer has).
func GatewayOf(node *corev1.Node) NodeGateway {
	return NodeGateway{Node: node.Name, IPs: nodeIPs(node), Own: NodeOwnAddresses(node), Mgmt: nodeMgmtAddrs(node)}
}

// nodeMgmtAddrs are the addresses of a node's management port, from the
// host subnets the master gave it.
func nodeMgmtAddrs(node *corev1.Node) []netip.Addr {
	subnets, err := annotations.ParseNodeSubnets(node.Annotations[annotations.NodeSubnets])
	if err != nil {
		return nil
	}
	var out []netip.Addr
	for _, s := range subnets {
		out = append(out, topology.ManagementIP(s))
	}
	return out
}

// perNodeService says whether svc has load balancers that follow the nodes:
// NodePorts, or ClusterIPs balanced per node (internalTrafficPolicy Local).
func perNodeService(svc *corev1.Service) bool {
	itp := svc.Spec.InternalTrafficPolicy
	return svc.Spec.Type == corev1.ServiceTypeNodePort || svc.Spec.Type == corev1.ServiceTypeLoadBalancer ||
		(itp != nil && *itp == corev1.ServiceInternalTrafficPolicyLocal)
}

// policy is the AddressPolicy for svc: the operator's ranges and, when svc
// names external or ingress IPs, every node's addresses.
func (c *Controller) policy(svc *corev1.Service) AddressPolicy {
	p := c.opts.Policy
	if hasExternalAddrs(svc) {
		p.Nodes = c.nodeAddresses()
	}
	return p
}

// nodeAddresses maps every node's own address to its node, rebuilt only
// after a Node changed (the map is not modified once built).
func (c *Controller) nodeAddresses() map[netip.Addr]string {
	c.nodeAddrMu.Lock()
	defer c.nodeAddrMu.Unlock()
	if c.nodeAddrOwners == nil {
		c.nodeAddrOwners = map[netip.Addr]string{}
		nodes, _ := c.nodeLister.List(everything)
		for _, n := range nodes {
			for _, ip := range NodeOwnAddresses(n) {
				c.nodeAddrOwners[ip] = n.Name
			}
		}
	}
	return c.nodeAddrOwners
}

// hasExternalAddrs says whether svc names external IPs or (as a
// LoadBalancer) ingress IPs.
func hasExternalAddrs(svc *corev1.Service) bool {
	return len(svc.Spec.ExternalIPs) > 0 || (svc.Spec.Type == corev1.ServiceTypeLoadBalancer && len(svc.Status.LoadBalancer.Ingress) > 0)
}

// reportRefused logs each refusal and puts a Warning Event on the Service,
// once per change of what is refused (a resync repeats nothing).
func (c *Controller) reportRefused(key string, svc *corev1.Service, refused []Refusal) {
	var msgs []string
	for _, r := range refused {
		msgs = append(msgs, string(r.Kind)+": "+r.Message())
	}
	sig := strings.Join(msgs, "\n")
	c.refusedMu.Lock()
	same := c.refused[key] == sig
	if sig == "" {
		delete(c.refused, key)
	} else {
		c.refused[key] = sig
	}
	c.refusedMu.Unlock()
	if same || svc == nil {
		return
	}
	for _, r := range refused {
		c.log.Info("refusing a service address", "service", key, "reason", r.Kind, "message", r.Message())
		if c.opts.Recorder != nil {
			c.opts.Recorder.Event(svc, corev1.EventTypeWarning, string(r.Kind), r.Message())
		}
	}
}

// syncGateways attaches the cluster group to every gateway router and
// re-syncs NodePort services, whose per-node balancers follow the gateways.
func (c *Controller) syncGateways(ctx context.Context) error {
	t := ovndb.NewTxn(c.nb)
	group := ovndb.Require(t, &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup})
	if t.Err() != nil {
		return t.Err()
	}
	routers := c.gatewayRouters()
	for i := range routers {
		t.AddChildren(&routers[i], &routers[i].LoadBalancerGroup, group.UUID)
	}
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	if err := c.commit(ctx, ops); err != nil {
		return err
	}
	c.nodeAddrMu.Lock()
	hostBacked := maps.Clone(c.hostBacked)
	c.nodeAddrMu.Unlock()
	own := c.nodeAddresses()
	svcs, _ := c.svcLister.List(everything)
	for _, s := range svcs {
		key := s.Namespace + "/" + s.Name
		// A host-backed service stops or starts being one as nodes change:
		// those that were at their last sync, and those with an endpoint at
		// a node's address now (the kubernetes Service, synced before its
		// node had a subnet, is host-backed once it has one).
		if perNodeService(s) || hasExternalAddrs(s) || hostBacked[key] || c.endpointAtNode(key, own) {
			c.queue.Add(key)
		}
	}
	return nil
}

// endpointAtNode says whether one of a service's endpoints is at one of
// own's node addresses.
func (c *Controller) endpointAtNode(key string, own map[netip.Addr]string) bool {
	if len(own) == 0 {
		return false
	}
	objs, _ := c.sliceIndexer.ByIndex(sliceServiceIndex, key)
	for _, o := range objs {
		for _, ep := range o.(*discovery.EndpointSlice).Endpoints {
			for _, a := range ep.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil && own[ip.Unmap()] != "" {
					return true
				}
			}
		}
	}
	return false
}

func (c *Controller) groupUUID() string {
	uuid, _ := c.groups.uuid(c.nb, topology.ClusterLBGroup)
	return uuid
}

func (c *Controller) enqueueObj(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(key)
	}
}

// nodeIPs are the addresses a node's NodePorts answer on: its gateway's
// address from k8s.ovn.org/l3-gateway-config, else its InternalIPs.
func nodeIPs(node *corev1.Node) []netip.Addr {
	if gw, err := annotations.ParseL3GatewayConfig(node.Annotations[annotations.NodeL3GatewayConfig]); err == nil && len(gw.IPs) > 0 {
		var out []netip.Addr
		for _, p := range gw.IPs {
			out = append(out, p.Addr())
		}
		return out
	}
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip)
			}
		}
	}
	return out
}

// NodeOwnAddresses are every address the master knows a node by: its
// InternalIPs and ExternalIPs and its gateway's addresses, sorted. No
// external or ingress IP may be one of them.
func NodeOwnAddresses(node *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range node.Status.Addresses {
		if a.Type == corev1.NodeInternalIP || a.Type == corev1.NodeExternalIP {
			if ip, err := netip.ParseAddr(a.Address); err == nil {
				out = append(out, ip.Unmap())
			}
		}
	}
	if gw, err := annotations.ParseL3GatewayConfig(node.Annotations[annotations.NodeL3GatewayConfig]); err == nil {
		for _, p := range gw.IPs {
			out = append(out, p.Addr().Unmap())
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return slices.Compact(out)
}

func sliceServiceKey(obj any) string {
	s := controller.ObjectOf[*discovery.EndpointSlice](obj)
	if s == nil {
		return ""
	}
	name := s.Labels[discovery.LabelServiceName]
	if name == "" {
		return ""
	}
	return s.Namespace + "/" + name
}
