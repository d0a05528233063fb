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
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
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
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	poke()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-kick:
		case <-ticker.C:
			if managementPortPresent(ctx, sw) {
				continue
			}
			log.Info("management port missing; recreating it", "port", ManagementPortName)
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

func managementPortPresent(ctx context.Context, sw *ovs.Client) bool {
	if _, err := sw.Interface(ctx, ManagementPortName); err != nil {
		return false
	}
	_, err := netlink.LinkByName(ManagementPortName)
	return err == nil
}
