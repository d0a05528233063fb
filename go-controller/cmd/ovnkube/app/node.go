package app

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/cni"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
)

func nodeFlags() []cli.Flag {
	return append(kubeFlags(),
		&cli.StringFlag{Name: "node-name", Usage: "this node's Kubernetes name (required)"},
		clusterSubnetFlag("pod network(s), routed through the management port"),
		&cli.StringSliceFlag{Name: "service-cidr", Value: cli.NewStringSlice(config.DefaultServiceCIDR), Usage: "service range(s), routed through the management port"},
		&cli.StringFlag{Name: "minion-switch-subnet", Usage: "this node's host subnet; default: read from its k8s.ovn.org/node-subnets annotation"},
		&cli.StringFlag{Name: "encap-type", Value: "geneve", Usage: "tunnel encapsulation: geneve or vxlan"},
		&cli.StringFlag{Name: "encap-ip", Usage: "this node's tunnel endpoint address (required)"},
		&cli.StringFlag{Name: "sb-address", Usage: "OVN SB database for ovn-controller (ovn-remote), e.g. tcp:10.0.0.1:6642 (required); in zone mode the node's zone's SB"},
		&cli.StringFlag{Name: "zone", Usage: "zone mode (OVN interconnection): this node's zone, published as its k8s.ovn.org/zone-name annotation (the master run with the same --zone programs it; one zone per node, or one per group of nodes); its chassis becomes an interconnection gateway (ovn-is-interconn); empty: central mode"},
		&cli.StringFlag{Name: "ovs-address", Value: ovs.DefaultAddress, Usage: "local OVS database"},
		&cli.StringFlag{Name: "datapath-type", Usage: `OVS datapath of br-int: "" (kernel) or "netdev" (userspace, for kernels without the OVS module)`},
		&cli.IntFlag{Name: "mtu", Value: 1400, Usage: "MTU of the management port (pod MTU; leave room for Geneve)"},
		&cli.DurationFlag{Name: "subnet-timeout", Value: 60 * time.Second, Usage: "how long to wait for the master to annotate the node's subnet"},
		// ovn-controller dials the SB: with an ssl: --sb-address these files are
		// written to OVS's SSL table, where ovn-controller reads them.
		tlsFlags("sb")[0], tlsFlags("sb")[1], tlsFlags("sb")[2],
	)
}

// clusterSubnetFlag is the master's --cluster-subnet, for the commands that
// need only its ranges: the same value (one ConfigMap key) serves them all.
func clusterSubnetFlag(usage string) cli.Flag {
	return &cli.StringSliceFlag{Name: "cluster-subnet", Aliases: []string{"cluster-ip-subnet"},
		Value: cli.NewStringSlice(config.DefaultClusterSubnetFlag), Usage: usage + ": CIDR[/HOSTLEN], as the master's"}
}

// clusterCIDRs are the ranges of --cluster-subnet (host lengths ignored).
func clusterCIDRs(c *cli.Context) ([]netip.Prefix, error) {
	subnets, err := config.ParseClusterSubnets(c.StringSlice("cluster-subnet"))
	if err != nil {
		return nil, flagError("cluster-subnet", err)
	}
	out := make([]netip.Prefix, len(subnets))
	for i, s := range subnets {
		out[i] = s.CIDR
	}
	return out, nil
}

func nodeConfig(c *cli.Context) (node.Config, config.Kube, error) {
	var cfg node.Config
	var err error
	for _, name := range []string{"node-name", "encap-ip", "sb-address"} {
		if _, err := required(c, name); err != nil {
			return cfg, config.Kube{}, err
		}
	}
	cfg.NodeName = c.String("node-name")
	if cfg.ClusterSubnets, err = clusterCIDRs(c); err != nil {
		return cfg, config.Kube{}, err
	}
	if cfg.ServiceCIDRs, err = config.ParseServiceCIDRs(c.StringSlice("service-cidr")); err != nil {
		return cfg, config.Kube{}, flagError("service-cidr", err)
	}
	if s := c.String("minion-switch-subnet"); s != "" {
		if cfg.HostSubnet, err = config.ParseCIDR(s); err != nil {
			return cfg, config.Kube{}, flagError("minion-switch-subnet", err)
		}
	}
	switch cfg.EncapType = c.String("encap-type"); cfg.EncapType {
	case "geneve", "vxlan":
	default:
		return cfg, config.Kube{}, flagError("encap-type", fmt.Errorf("%q is not geneve or vxlan", cfg.EncapType))
	}
	if _, err := netip.ParseAddr(c.String("encap-ip")); err != nil {
		return cfg, config.Kube{}, flagError("encap-ip", fmt.Errorf("%q is not an IP address", c.String("encap-ip")))
	}
	cfg.EncapIP = c.String("encap-ip")
	sb, err := config.ParseOVSDBAddress(c.String("sb-address"))
	if err != nil {
		return cfg, config.Kube{}, flagError("sb-address", err)
	}
	cfg.SBAddress = c.String("sb-address")
	files, err := dbTLSFiles(c, "sb", sb)
	if err != nil {
		return cfg, config.Kube{}, err
	}
	cfg.SBSSL = node.SSLFiles{PrivateKey: files.Key, Certificate: files.Cert, CACert: files.CA}
	if _, err := config.ParseOVSDBAddress(c.String("ovs-address")); err != nil {
		return cfg, config.Kube{}, flagError("ovs-address", err)
	}
	switch cfg.DatapathType = c.String("datapath-type"); cfg.DatapathType {
	case "", "system", "netdev":
	default:
		return cfg, config.Kube{}, flagError("datapath-type", fmt.Errorf("%q is not system or netdev", cfg.DatapathType))
	}
	if cfg.MTU = c.Int("mtu"); cfg.MTU < 576 || cfg.MTU > 65535 {
		return cfg, config.Kube{}, flagError("mtu", fmt.Errorf("%d is outside 576..65535", cfg.MTU))
	}
	cfg.SubnetTimeout = c.Duration("subnet-timeout")
	if cfg.Zone, err = zoneName(c.String("zone")); err != nil {
		return cfg, config.Kube{}, flagError("zone", err)
	}
	kube, err := kubeConfig(c)
	return cfg, kube, err
}

// optionalKube builds a client when a kubeconfig was given (minion-init can
// run without one if the subnet is on the command line).
func optionalKube(k config.Kube, needed bool) (kubernetes.Interface, error) {
	if k.Kubeconfig == "" && k.APIServer == "" && !needed {
		return nil, nil
	}
	return kubeClient(k, "ovnkube-minion-init")
}

func minionInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "minion-init",
		Usage: "point this node's OVS at OVN and create the management port ovn-k8s-mp0, then exit",
		Description: "Sets Open_vSwitch external_ids (system-id if absent, ovn-remote, ovn-encap-type,\n" +
			"ovn-encap-ip, ovn-bridge), creates br-int (fail-mode secure) and ovn-k8s-mp0 with the host\n" +
			"subnet's .2, routes to the cluster and service ranges via .1, and annotates the node with\n" +
			"its chassis id and management MAC. Idempotent. Run it in the node's network namespace.",
		Flags: nodeFlags(),
		Action: func(c *cli.Context) error {
			cfg, kcfg, err := nodeConfig(c)
			if err != nil {
				return err
			}
			kube, err := optionalKube(kcfg, !cfg.HostSubnet.IsValid())
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			log := logger().WithName("minion-init")
			cctx, cancelConnect := context.WithTimeout(ctx, 30*time.Second)
			defer cancelConnect()
			sw, err := ovs.Connect(cctx, c.String("ovs-address"), log)
			if err != nil {
				return err
			}
			defer sw.Close()
			_, err = node.MinionInit(ctx, cfg, sw, kube, log)
			return err
		},
	}
}

func nodeCommand() *cli.Command {
	return &cli.Command{
		Name:  "node",
		Usage: "the node daemon: minion-init, then keep it true (management port, annotation changes)",
		Description: "Runs minion-init, then re-applies it whenever the node's annotations change or the\n" +
			"management port disappears (checked every --resync-interval). With a gateway it also\n" +
			"announces the IPv6 egress IPs the node takes (unsolicited neighbour advertisements on the\n" +
			"bridge), when the API server serves EgressIPs.",
		Flags: append(append(nodeFlags(),
			&cli.DurationFlag{Name: "resync-interval", Value: 5 * time.Second, Usage: "how often to check that the management port, the gateway bridge's flows and the host NodePort chain are still as wanted"},
			&cli.StringFlag{Name: "cni-server-socket", Usage: "serve CNI requests on this unix socket for ovn_cni shims (conflist key cniServerSocket), answering from a pod informer of this node; off when empty"},
		), append(gatewayFlags(), metricsFlags("")...)...),
		Action: func(c *cli.Context) error {
			cfg, kcfg, err := nodeConfig(c)
			if err != nil {
				return err
			}
			gw, err := gatewayConfig(c, false)
			if err != nil {
				return err
			}
			srv, err := metricsServer(c)
			if err != nil {
				return err
			}
			kube, err := kubeClient(kcfg, "ovnkube-node")
			if err != nil {
				return err
			}
			srv.Kube = kube
			if gw != nil {
				if gw.EgressIPs, err = dynamicClient(kcfg, "ovnkube-node"); err != nil {
					return err
				}
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			log := logger().WithName("node")
			var setupErr atomic.Pointer[error]
			notYet := fmt.Errorf("node setup not done yet")
			setupErr.Store(&notYet)
			var cniReady atomic.Bool
			cniSocket := c.String("cni-server-socket")
			srv.Ready = func() error {
				if cniSocket != "" && !cniReady.Load() {
					return fmt.Errorf("CNI server: pod informer not synced")
				}
				return *setupErr.Load()
			}
			metrics.RegisterNode(srv.Registry, metrics.GaugeFunc("ovnkube_node_ready",
				"1 while the node's last setup pass (minion-init, gateway) succeeded.", func() float64 { return metrics.Bool(srv.Ready() == nil) }))
			if err := listenIfAsked(ctx, srv, log); err != nil {
				return err
			}
			sw, err := ovs.Connect(ctx, c.String("ovs-address"), log)
			if err != nil {
				return err
			}
			defer sw.Close()
			if cniSocket != "" {
				if err := serveCNI(ctx, cniSocket, cfg.NodeName, kube, sw, log, &cniReady); err != nil {
					return err
				}
			}
			return node.Run(ctx, cfg, sw, kube, gw, c.Duration("resync-interval"), log, func(err error) { setupErr.Store(&err) })
		},
	}
}

// dynamicClient is a client of the custom resources (EgressIPs), in JSON:
// they have no protobuf encoding.
func dynamicClient(k config.Kube, agent string) (dynamic.Interface, error) {
	rc, err := kubeRESTConfig(k, agent)
	if err != nil {
		return nil, err
	}
	return dynamic.NewForConfig(jsonConfig(rc))
}

// serveCNI starts the CNI server with a pod informer of this node's pods;
// synced is set once the informer has listed them.
func serveCNI(ctx context.Context, socket, nodeName string, kube kubernetes.Interface, sw *ovs.Client, log logr.Logger, synced *atomic.Bool) error {
	factory := informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", nodeName).String()
	}))
	pods := cni.NewPodWatcher(factory)
	server := &cni.Server{Socket: socket, OVS: sw, PodNetwork: pods.PodNetwork, Log: log.WithName("cni")}
	if err := server.Listen(ctx); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	go func() {
		for _, ok := range factory.WaitForCacheSync(ctx.Done()) {
			if !ok {
				return
			}
		}
		synced.Store(true)
	}()
	return nil
}
