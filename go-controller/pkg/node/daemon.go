package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
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
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
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
	nodeKick, gwKick, ctKick := make(chan struct{}, 1), make(chan struct{}, 1), make(chan struct{}, 1)
	poke := func(ch chan struct{}) {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
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
	var svcs corelisters.ServiceLister
	if gw != nil {
		// Services drive the bridge's flows and the host's NodePort chain;
		// services and their EndpointSlices drive the health checks.
		hcKick := make(chan struct{}, 1)
		svcFactory := informers.NewSharedInformerFactory(kube, 0)
		inf := svcFactory.Core().V1().Services()
		_, _ = inf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke(gwKick); poke(hcKick); poke(ctKick) },
			UpdateFunc: func(any, any) { poke(gwKick); poke(hcKick); poke(ctKick) },
			DeleteFunc: func(any) { poke(gwKick); poke(hcKick); poke(ctKick) },
		})
		sliceInf := svcFactory.Discovery().V1().EndpointSlices()
		_, _ = sliceInf.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { poke(hcKick); poke(ctKick) },
			UpdateFunc: func(any, any) { poke(hcKick); poke(ctKick) },
			DeleteFunc: func(any) { poke(hcKick); poke(ctKick) },
		})
		svcs = inf.Lister()
		svcFactory.Start(ctx.Done())
		svcFactory.WaitForCacheSync(ctx.Done())
		list := func() ([]*corev1.Service, []*discovery.EndpointSlice, error) {
			s, err := svcs.List(labels.Everything())
			if err != nil {
				return nil, nil, err
			}
			sl, err := sliceInf.Lister().List(labels.Everything())
			return s, sl, err
		}
		go runHealthChecks(ctx, &HealthServer{Log: log.WithName("healthcheck")}, cfg.NodeName, gw.Services, list, hcKick)
		plan := func() (ConntrackPlan, error) {
			node, err := nodes.Get(cfg.NodeName)
			if err != nil {
				return ConntrackPlan{}, err
			}
			s, sl, err := list()
			return NewConntrackPlan(s, sl, services.GatewayOf(node), gw.Services), err
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
	for {
		full := false
		select {
		case <-ctx.Done():
			return nil
		case <-nodeKick:
			full = true
		case <-gwKick:
		case <-ticker.C:
			missing := missingParts(ctx, cfg, sw, gw, svcs, mgmt)
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
			err = syncGateway(ctx, *gw, full, sw, kube, svcs, mgmt, log)
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

// syncGateway replaces the gateway bridge's flows and the host's NodePort
// and host-endpoint chains from the current services; full runs all of
// GatewayInit first (bridge mapping, annotation).
func syncGateway(ctx context.Context, gw GatewayConfig, full bool, sw *ovs.Client, kube kubernetes.Interface, svcs corelisters.ServiceLister, mgmt []netip.Addr, log logr.Logger) error {
	list, err := svcs.List(labels.Everything())
	if err != nil {
		return err
	}
	if full {
		err = GatewayInit(ctx, gw, sw, kube, ServiceFlows(list, gw.Services), log)
	} else {
		var mac net.HardwareAddr
		if mac, err = bridgeMAC(ctx, sw, gw.Bridge); err == nil {
			err = replaceBridgeFlows(ctx, gw, sw, mac, ServiceFlows(list, gw.Services), log)
		}
	}
	if err != nil {
		return err
	}
	for _, c := range gw.hostChains(list, mgmt) {
		if err := c.h.replace(ctx, c.rules); err != nil {
			return err
		}
	}
	return nil
}

// missingParts names what of the node's setup is gone or has drifted
// (deleted by hand, flows changed behind our back), or is empty.
func missingParts(ctx context.Context, cfg Config, sw *ovs.Client, gw *GatewayConfig, svcs corelisters.ServiceLister, mgmt []netip.Addr) string {
	if !managementPortPresent(ctx, sw) {
		return "management port " + ManagementPortName
	}
	if gw == nil {
		return ""
	}
	list, err := svcs.List(labels.Everything())
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
	for _, c := range gw.hostChains(list, mgmt) {
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
