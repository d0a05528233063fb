package node

import (
	"context"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/vishvananda/netlink"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Gateway asks the node daemon to run gateway-init too.
type Gateway struct {
	Config GatewayConfig
	NB     libovsdbclient.Client
}

// Run is the node daemon: MinionInit (and GatewayInit when gw is set), then
// again whenever the node's annotations change or the management port (OVS
// port or link) is gone.
func Run(ctx context.Context, cfg Config, sw *ovs.Client, kube kubernetes.Interface, gw *Gateway, interval time.Duration, log logr.Logger) error {
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", cfg.NodeName).String()
		}))
	_, _ = factory.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { poke() },
		UpdateFunc: func(old, cur any) {
			o, n := old.(*corev1.Node), cur.(*corev1.Node)
			if o.Annotations[annotations.NodeSubnets] != n.Annotations[annotations.NodeSubnets] ||
				o.Annotations[annotations.NodeChassisID] != n.Annotations[annotations.NodeChassisID] ||
				o.Annotations[annotations.NodeMgmtPortMAC] != n.Annotations[annotations.NodeMgmtPortMAC] {
				poke()
			}
		},
	})
	factory.Start(ctx.Done())
	if gw != nil {
		// A reconnect may mean a new, empty NB: build the gateway again.
		go ovndb.WatchReconnects(ctx, gw.NB, 100*time.Millisecond, log.WithName("nb"), poke)
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-ticker.C:
			missing := missingParts(ctx, cfg.NodeName, sw, gw)
			if missing == "" {
				continue
			}
			log.Info("node setup incomplete; repairing it", "missing", missing)
		}
		res, err := MinionInit(ctx, cfg, sw, kube, log)
		if err == nil && gw != nil {
			gcfg := gw.Config
			gcfg.HostSubnet = res.Subnet
			err = GatewayInit(ctx, gcfg, gw.NB, sw, kube, log)
		}
		if err != nil {
			log.Error(err, "node setup failed; retrying")
			time.AfterFunc(time.Second, poke)
		}
	}
}

// missingParts names what of the node's setup is gone (deleted by hand, or
// a restored NB), or is empty.
func missingParts(ctx context.Context, node string, sw *ovs.Client, gw *Gateway) string {
	if !managementPortPresent(ctx, sw) {
		return "management port " + ManagementPortName
	}
	if gw == nil {
		return ""
	}
	gr := &nbdb.LogicalRouter{Name: topology.GatewayRouter(node)}
	var found []nbdb.LogicalRouter
	_ = gw.NB.WhereCache(func(r *nbdb.LogicalRouter) bool { return r.Name == gr.Name }).List(ctx, &found)
	if len(found) == 0 && gw.NB.CurrentEndpoint() != "" {
		return "gateway router " + gr.Name
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
