package services

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
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const sliceServiceIndex = "service"

var everything = labels.Everything()

// CommitFunc sends operations to the NB.
type CommitFunc func(context.Context, []ovsdb.Operation) error

// Controller keeps one set of load balancers per Service in line with the
// Service, its EndpointSlices and the nodes' gateway routers.
type Controller struct {
	log          logr.Logger
	nb           libovsdbclient.Client
	commit       CommitFunc
	svcLister    corelisters.ServiceLister
	nodeLister   corelisters.NodeLister
	sliceIndexer cache.Indexer
	queue        workqueue.TypedRateLimitingInterface[string]
	busy         atomic.Int64

	// lbs indexes our load balancers by owning service, from NB cache events,
	// so a sync finds stale ones without scanning the table.
	mu       sync.Mutex
	lbs      map[string]map[string]string // service key → LB UUID → name
	gateways map[string]bool              // nodes whose GR_<node> exists
	gwDirty  chan struct{}
}

// New wires the controller onto shared informers and the NB client.
func New(factory informers.SharedInformerFactory, nb libovsdbclient.Client, commit CommitFunc, log logr.Logger, maxDelay time.Duration) *Controller {
	c := &Controller{
		log:        log,
		nb:         nb,
		commit:     commit,
		svcLister:  factory.Core().V1().Services().Lister(),
		nodeLister: factory.Core().V1().Nodes().Lister(),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[string](50*time.Millisecond, maxDelay),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "services"}),
		lbs:      map[string]map[string]string{},
		gateways: map[string]bool{},
		gwDirty:  make(chan struct{}, 1),
	}
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
		AddFunc:    sliceHandler,
		UpdateFunc: func(_, cur any) { sliceHandler(cur) },
		DeleteFunc: sliceHandler,
	})
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if c.hasGateway(n.Name) && !slices.Equal(nodeIPs(o), nodeIPs(n)) {
				c.gatewaysChanged()
			}
		},
	})
	nb.Cache().AddEventHandler(&ovsdbcache.EventHandlerFuncs{
		AddFunc:    func(table string, m model.Model) { c.nbRowChanged(m, false) },
		UpdateFunc: func(table string, _, m model.Model) { c.nbRowChanged(m, false) },
		DeleteFunc: func(table string, m model.Model) { c.nbRowChanged(m, true) },
	})
	// Rows already in the cache when the handler was added.
	var lbs []nbdb.LoadBalancer
	_ = nb.List(context.Background(), &lbs)
	for i := range lbs {
		c.nbRowChanged(&lbs[i], false)
	}
	var routers []nbdb.LogicalRouter
	_ = nb.List(context.Background(), &routers)
	for i := range routers {
		c.nbRowChanged(&routers[i], false)
	}
	return c
}

// nbRowChanged maintains the LB index and the gateway router set.
func (c *Controller) nbRowChanged(m model.Model, deleted bool) {
	switch row := m.(type) {
	case *nbdb.LoadBalancer:
		owner, ok := topology.OwnerOf(row.ExternalIDs)
		if !ok || owner.Type != topology.OwnerService {
			return
		}
		c.mu.Lock()
		known := c.lbs[owner.Name][row.UUID] != ""
		if deleted {
			delete(c.lbs[owner.Name], row.UUID)
			if len(c.lbs[owner.Name]) == 0 {
				delete(c.lbs, owner.Name)
			}
		} else {
			if c.lbs[owner.Name] == nil {
				c.lbs[owner.Name] = map[string]string{}
			}
			c.lbs[owner.Name][row.UUID] = row.Name
		}
		c.mu.Unlock()
		// A row appearing or vanishing behind our back (or ahead of this
		// index) gets its service looked at again.
		if deleted || !known {
			c.queue.Add(owner.Name)
		}
	case *nbdb.LogicalRouter:
		node, ok := topology.GatewayRouterNode(row.Name)
		if !ok {
			return
		}
		c.mu.Lock()
		changed := c.gateways[node] == deleted
		if deleted {
			delete(c.gateways, node)
		} else {
			c.gateways[node] = true
		}
		c.mu.Unlock()
		if changed || !deleted && !slices.Contains(row.LoadBalancerGroup, c.groupUUID()) {
			c.gatewaysChanged()
		}
	}
}

func (c *Controller) gatewaysChanged() {
	select {
	case c.gwDirty <- struct{}{}:
	default:
	}
}

func (c *Controller) hasGateway(node string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.gateways[node]
}

// Run syncs every service once, then follows changes until ctx ends.
func (c *Controller) Run(ctx context.Context, workers int) {
	defer c.queue.ShutDown()
	svcs, _ := c.svcLister.List(everything)
	for _, s := range svcs {
		c.queue.Add(s.Namespace + "/" + s.Name)
	}
	c.mu.Lock()
	for key := range c.lbs {
		c.queue.Add(key)
	}
	c.mu.Unlock()
	c.gatewaysChanged()
	var wg sync.WaitGroup
	for i := 0; i < workers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.processNext(ctx) {
			}
		}()
	}
	for {
		select {
		case <-ctx.Done():
			c.queue.ShutDown()
			wg.Wait()
			return
		case <-c.gwDirty:
			if err := c.syncGateways(ctx); err != nil {
				c.log.Info("attaching the cluster load balancer group to gateway routers failed; retrying", "error", err.Error())
				time.AfterFunc(time.Second, c.gatewaysChanged)
			}
		}
	}
}

// Idle reports whether no service is queued or being synced.
func (c *Controller) Idle() bool { return c.queue.Len() == 0 && c.busy.Load() == 0 }

func (c *Controller) processNext(ctx context.Context) bool {
	key, quit := c.queue.Get()
	if quit {
		return false
	}
	defer c.queue.Done(key)
	c.busy.Add(1)
	defer c.busy.Add(-1)
	if err := c.syncService(ctx, key); err != nil {
		if ctx.Err() != nil {
			return false
		}
		c.log.Info("service sync failed; will retry", "service", key, "error", err.Error())
		c.queue.AddRateLimited(key)
		return true
	}
	c.queue.Forget(key)
	return true
}

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
		d = LoadBalancers(svc, slices, c.gatewayNodes(svc))
		for _, p := range d.Problems {
			c.log.Info("ignoring bad service input", "service", key, "problem", p)
		}
	}
	t := ovndb.NewTxn(c.nb)
	wanted := map[string]bool{}
	if len(d.Cluster) > 0 {
		group, _ := t.Lookup(&nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}).(*nbdb.LoadBalancerGroup)
		if t.Err() == nil && group == nil {
			return fmt.Errorf("load balancer group %s does not exist yet", topology.ClusterLBGroup)
		}
		for _, lb := range d.Cluster {
			wanted[lb.Name] = true
			uuid := t.Ensure(lb, lbFields(lb), nil)
			if group != nil {
				t.AddChildren(group, &group.LoadBalancer, uuid)
			}
		}
	}
	for _, lb := range d.PerNode {
		node := strings.TrimPrefix(lb.Name[strings.LastIndex(lb.Name, "_node_router_"):], "_node_router_")
		gr, _ := t.Lookup(&nbdb.LogicalRouter{Name: topology.GatewayRouter(node)}).(*nbdb.LogicalRouter)
		if gr == nil {
			continue // the gateway went away; its set of nodes is refreshed by events
		}
		wanted[lb.Name] = true
		uuid := t.Ensure(lb, lbFields(lb), nil)
		t.AddChildren(gr, &gr.LoadBalancer, uuid)
	}
	c.mu.Lock()
	for uuid, lbName := range c.lbs[key] {
		if !wanted[lbName] {
			// References from groups, switches and routers are weak: they go with it.
			t.Delete(&nbdb.LoadBalancer{UUID: uuid})
		}
	}
	c.mu.Unlock()
	ops, err := t.Ops()
	if err != nil {
		return fmt.Errorf("service %s: %w", key, err)
	}
	if err := c.commit(ctx, ops); err != nil {
		return fmt.Errorf("service %s: %w", key, err)
	}
	return nil
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
	c.mu.Lock()
	nodes := make([]string, 0, len(c.gateways))
	for n := range c.gateways {
		nodes = append(nodes, n)
	}
	c.mu.Unlock()
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

// syncGateways attaches the cluster group to every gateway router and
// re-syncs NodePort services, whose per-node balancers follow the gateways.
func (c *Controller) syncGateways(ctx context.Context) error {
	t := ovndb.NewTxn(c.nb)
	group, _ := t.Lookup(&nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}).(*nbdb.LoadBalancerGroup)
	if group == nil {
		return fmt.Errorf("load balancer group %s does not exist yet", topology.ClusterLBGroup)
	}
	var routers []nbdb.LogicalRouter
	_ = c.nb.WhereCache(func(r *nbdb.LogicalRouter) bool {
		_, ok := topology.GatewayRouterNode(r.Name)
		return ok
	}).List(ctx, &routers)
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
	svcs, _ := c.svcLister.List(everything)
	for _, s := range svcs {
		if s.Spec.Type == corev1.ServiceTypeNodePort || s.Spec.Type == corev1.ServiceTypeLoadBalancer {
			c.queue.Add(s.Namespace + "/" + s.Name)
		}
	}
	return nil
}

func (c *Controller) groupUUID() string {
	g := &nbdb.LoadBalancerGroup{Name: topology.ClusterLBGroup}
	if err := c.nb.Get(context.Background(), g); err != nil {
		return ""
	}
	return g.UUID
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

func sliceServiceKey(obj any) string {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = t.Obj
	}
	s, ok := obj.(*discovery.EndpointSlice)
	if !ok {
		return ""
	}
	name := s.Labels[discovery.LabelServiceName]
	if name == "" {
		return ""
	}
	return s.Namespace + "/" + name
}
