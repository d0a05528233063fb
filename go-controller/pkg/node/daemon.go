package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Run is the node daemon: MinionInit (and GatewayInit when gw is set), then
// again whenever the node's annotations change or the management port (OVS
// port or link) is gone. With a gateway it also keeps the gateway bridge's
// flows and the host's NodePort chain exactly as the services want them,
// replacing them whole when services change or they drift, and serves the
// health check node ports of its services (HealthServer), and announces the
// IPv6 egress IPs the node takes (gw.EgressIPs; egressip.go).
// report is told after each setup pass whether it succeeded (nil: not told).
func Run(ctx context.Context, cfg Config, sw *ovs.Client, kube kubernetes.Interface, gw *GatewayConfig, interval time.Duration, log logr.Logger, report func(error)) error {
	if report == nil {
		report = func(error) {}
	}
	nodeKick, gwKick, ctKick, chainKick := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(slim.DropManagedFields),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}))
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke(nodeKick); poke(ctKick) },
		UpdateFunc: func(old, cur any) {
			poke(ctKick) // the sweep compares its plan: an unchanged node costs no sweep
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			for _, k := range []string{annotations.NodeSubnets, annotations.NodeChassisID, annotations.NodeMgmtPortMAC, annotations.NodeL3GatewayConfig} {
				if o.Annotations[k] != n.Annotations[k] {
					poke(nodeKick)
				}
			}
		},
	})
	nodes := factory.Core().V1().Nodes().Lister()
	factory.Start(ctx.Done())
	var view *serviceView
	if gw != nil {
		// Services drive the bridge's flows and the host's NodePort chain;
		// services and their EndpointSlices drive the health checks.
		hcKick := make(chan struct{}, 1)
		svcFactory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTransform(slim.DropManagedFields))
		inf := svcFactory.Core().V1().Services()
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke(gwKick); poke(hcKick); poke(ctKick) },
			UpdateFunc: func(any, any) { poke(gwKick); poke(hcKick); poke(ctKick) },
			DeleteFunc: func(any) { poke(gwKick); poke(hcKick); poke(ctKick) },
		})
		sliceInf := svcFactory.Discovery().V1().EndpointSlices()
		_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke(hcKick); poke(ctKick); poke(chainKick) },
			UpdateFunc: func(any, any) { poke(hcKick); poke(ctKick); poke(chainKick) },
			DeleteFunc: func(any) { poke(hcKick); poke(ctKick); poke(chainKick) },
		})
		// Every node's gateway addresses: the host's chain sends its own
		// NodePorts of Local services to the nodes with endpoints (Peers).
		allNodes := svcFactory.Core().V1().Nodes()
		_, _ = allNodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc: func(any) { poke(chainKick); poke(ctKick) },
			UpdateFunc: func(old, cur any) {
				if !slices.Equal(services.GatewayOf(old.(*corev1.Node)).IPs, services.GatewayOf(cur.(*corev1.Node)).IPs) {
					poke(chainKick)
					poke(ctKick)
				}
			},
			DeleteFunc: func(any) { poke(chainKick); poke(ctKick) },
		})
		view = &serviceView{self: cfg.NodeName, svcs: inf.Lister(), slices: sliceInf.Lister(), nodes: allNodes.Lister()}
		svcFactory.Start(ctx.Done())
		svcFactory.WaitForCacheSync(ctx.Done())
		list := func() ([]*corev1.Service, []*discovery.EndpointSlice, error) {
			s, err := view.svcs.List(labels.Everything())
			if err != nil {
				return nil, nil, err
			}
			sl, err := view.slices.List(labels.Everything())
			return s, sl, err
		}
		go runHealthChecks(ctx, &HealthServer{Log: log.WithName("healthcheck")}, cfg.NodeName, gw.Services, list, hcKick)
		plan := func() (ConntrackPlan, error) {
			node, err := nodes.Get(cfg.NodeName)
			if err != nil {
				return ConntrackPlan{}, err
			}
			s, peers, err := view.read()
			if err != nil {
				return ConntrackPlan{}, err
			}
			return NewConntrackPlan(s, services.GatewayOf(node), gw.Services, peers), nil
		}
		if h, err := netlink.NewHandle(); err != nil {
			log.Error(err, "no netlink handle: stale UDP conntrack entries are left to ovn-controller's ct_flush")
		} else {
			go runConntrack(ctx, h, plan, ctKick, log.WithName("conntrack"))
		}
		if gw.EgressIPs != nil {
			go followEgressIPs(ctx, gw.EgressIPs, kube.Discovery(), cfg.NodeName, ndpRound(ctx, sw, gw.Bridge),
				log.WithName("egressip").WithValues("interface", gw.Bridge))
		}
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	poke(nodeKick)
	ready := false        // minion-init succeeded
	var mgmt []netip.Addr // the management port's addresses, once known
	chains := hostChainState{}
	for {
		full := false
		select {
		case <-ctx.Done():
			return nil
		case <-nodeKick:
			full = true
		case <-gwKick:
		case <-chainKick:
			if !ready || gw == nil {
				continue
			}
			// Only the host's chains follow endpoints and other nodes:
			// rewritten when what they want changed, not on every event.
			if err := chains.sync(ctx, *gw, view, mgmt, false); err != nil {
				log.Error(err, "host chains not written; retrying")
				time.AfterFunc(time.Second, func() { poke(chainKick) })
			}
			continue
		case <-ticker.C:
			missing := missingParts(ctx, cfg, sw, gw, view, mgmt)
			if missing == "" {
				continue
			}
			log.Info("node setup incomplete; repairing it", "missing", missing)
			metrics.NodeRepairs.Inc()
			full = true
		}
		var err error
		if full {
			var res Result
			res, err = MinionInit(ctx, cfg, sw, kube, log)
			ready = err == nil
			if ready {
				mgmt = nil
				for _, s := range res.Subnets {
					mgmt = append(mgmt, topology.ManagementIP(s))
				}
			}
		}
		// The gateway needs minion-init's chassis: it waits for a success.
		// A service change only touches the bridge's flows and the chain.
		if err == nil && ready && gw != nil {
			err = syncGateway(ctx, *gw, full, sw, kube, view, mgmt, log)
			if err == nil {
				err = chains.sync(ctx, *gw, view, mgmt, full)
			}
		}
		if err == nil && !ready {
			err = fmt.Errorf("minion-init has not succeeded yet")
		}
		report(err)
		if err != nil {
			log.Error(err, "node setup failed; retrying")
			time.AfterFunc(time.Second, func() { poke(nodeKick) })
		}
	}
}

// syncGateway replaces the gateway bridge's flows from the current
// services; full runs all of GatewayInit first (bridge mapping, annotation).
func syncGateway(ctx context.Context, gw GatewayConfig, full bool, sw *ovs.Client, kube kubernetes.Interface, view *serviceView, mgmt []netip.Addr, log logr.Logger) error {
	list, err := view.svcs.List(labels.Everything())
	if err != nil {
		return err
	}
	if full {
		return GatewayInit(ctx, gw, sw, kube, ServiceFlows(list, gw.Services), log)
	}
	mac, err := bridgeMAC(ctx, sw, gw.Bridge)
	if err != nil {
		return err
	}
	return replaceBridgeFlows(ctx, gw, sw, mac, ServiceFlows(list, gw.Services), log)
}

// hostChainState remembers the rules last written to each of the host's
// chains.
type hostChainState map[hostNAT]string

// sync writes the host's NodePort and host-endpoint chains: every one when
// force, else those whose wanted rules changed since last written.
func (st hostChainState) sync(ctx context.Context, gw GatewayConfig, view *serviceView, mgmt []netip.Addr, force bool) error {
	svcs, peers, err := view.read()
	if err != nil {
		return err
	}
	for _, c := range gw.hostChains(svcs, peers, mgmt) {
		text := strings.Join(c.rules, "\n")
		if old, ok := st[c.h]; ok && old == text && !force {
			continue
		}
		delete(st, c.h)
		if err := c.h.replace(ctx, c.rules); err != nil {
			return err
		}
		st[c.h] = text
	}
	return nil
}

// serviceView reads what the gateway's flows and the host's chains follow.
type serviceView struct {
	self   string
	svcs   corelisters.ServiceLister
	slices discoverylisters.EndpointSliceLister
	nodes  corelisters.NodeLister // every node
}

// read lists the services and the Peers (every node's gateway, every slice).
func (v *serviceView) read() ([]*corev1.Service, Peers, error) {
	svcs, err := v.svcs.List(labels.Everything())
	if err != nil {
		return nil, Peers{}, err
	}
	sl, err := v.slices.List(labels.Everything())
	if err != nil {
		return nil, Peers{}, err
	}
	nodes, err := v.nodes.List(labels.Everything())
	if err != nil {
		return nil, Peers{}, err
	}
	gws := make([]services.NodeGateway, 0, len(nodes))
	for _, n := range nodes {
		gws = append(gws, services.GatewayOf(n))
	}
	return svcs, NewPeers(v.self, gws, sl), nil
}

// missingParts names what of the node's setup is gone or has drifted
// (deleted by hand, flows changed behind our back), or is empty.
func missingParts(ctx context.Context, cfg Config, sw *ovs.Client, gw *GatewayConfig, view *serviceView, mgmt []netip.Addr) string {
	if !managementPortPresent(ctx, sw) {
		return "management port " + ManagementPortName
	}
	if gw == nil {
		return ""
	}
	list, peers, err := view.read()
	if err != nil {
		return err.Error()
	}
	mac, err := bridgeMAC(ctx, sw, gw.Bridge)
	if err != nil {
		return err.Error()
	}
	flows, err := bridgeFlows(ctx, *gw, sw, mac, ServiceFlows(list, gw.Services))
	if err != nil {
		return err.Error()
	}
	if d, err := NewFlowTable(gw.Bridge, gw.OVSAddress).Drift(ctx, flows); err != nil {
		return err.Error()
	} else if d != "" {
		return fmt.Sprintf("flows of %s differ: %s", gw.Bridge, d)
	}
	for _, c := range gw.hostChains(list, peers, mgmt) {
		if d := c.h.drift(ctx, c.rules); d != "" {
			return "host chain " + c.h.chain + ": " + d
		}
	}
	return ""
}

func managementPortPresent(ctx context.Context, sw *ovs.Client) bool {
	if _, err := sw.Interface(ctx, ManagementPortName); err != nil {
		return false
	}
	_, err := netlink.LinkByName(ManagementPortName)
	return err == nil
}
