package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"time"

	"github.com/urfave/cli/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

// gatewayFlags are the gateway's settings, the same for gateway-init and
// the node daemon; the node daemon's older names stay as aliases.
func gatewayFlags() []cli.Flag {
	return append([]cli.Flag{
		&cli.StringFlag{Name: "bridge-interface", Aliases: []string{"gateway-bridge"}, Usage: "OVS bridge holding the physical NIC, e.g. breth0 (see nics-to-bridge); gives the node a shared gateway"},
		&cli.StringFlag{Name: "physical-ip", Aliases: []string{"gateway-ip"}, Usage: "this node's address/length on that network, one per family, e.g. 172.18.0.2/24,fc00::2/64; default: the bridge's global address of each family"},
		&cli.StringFlag{Name: "default-gw", Aliases: []string{"gateway-nexthop"}, Usage: "next hops of the gateway router's default routes, one per family; default: those of the host's default routes through the bridge (none: no default route)"},
	}, serviceAddressFlags()...)
}

// serviceAddressFlags say which external addresses and node ports Services
// may use: the master programs only those, and a node's gateway bridge
// forwards only those (the same values on both, from one ConfigMap).
func serviceAddressFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "external-ip-cidrs", Usage: "comma-separated CIDRs (IPv4 and IPv6) a Service's externalIPs and LoadBalancer ingress IPs may come from; any other, and any node, cluster-subnet, join-subnet or service-CIDR address, is not programmed (Warning Event on the Service). Empty (the default): none is"},
		&cli.StringFlag{Name: "service-node-port-range", Value: config.DefaultNodePortRange.String(), Usage: "the API server's --service-node-port-range: node ports outside it are not programmed (Warning Event on the Service)"},
	}
}

// serviceAddressSettings reads serviceAddressFlags.
func serviceAddressSettings(c *cli.Context) (allowed []netip.Prefix, nodePorts config.PortRange, err error) {
	if allowed, err = config.ParseCIDRs([]string{c.String("external-ip-cidrs")}); err != nil {
		return nil, nodePorts, flagError("external-ip-cidrs", err)
	}
	if nodePorts, err = config.ParsePortRange(c.String("service-node-port-range")); err != nil {
		return nil, nodePorts, flagError("service-node-port-range", err)
	}
	return allowed, nodePorts, nil
}

// gatewayConfig reads the gateway flags; nil when no gateway was asked for
// (unless required).
func gatewayConfig(c *cli.Context, require bool) (*node.GatewayConfig, error) {
	if c.String("bridge-interface") == "" && !require {
		return nil, nil
	}
	for _, name := range []string{"node-name", "bridge-interface"} {
		if _, err := required(c, name); err != nil {
			return nil, err
		}
	}
	cfg := &node.GatewayConfig{NodeName: c.String("node-name"), Bridge: c.String("bridge-interface"), OVSAddress: c.String("ovs-address")}
	var err error
	if c.String("physical-ip") == "" || c.String("default-gw") == "" {
		// A DaemonSet says the same for every node: the rest is the bridge's.
		ips, gws, err := node.BridgeAddresses(cfg.Bridge)
		if err != nil && c.String("physical-ip") == "" {
			return nil, flagError("physical-ip", err)
		}
		cfg.PhysicalIPs, cfg.DefaultGWs = ips, gws
	}
	if s := c.String("physical-ip"); s != "" {
		if cfg.PhysicalIPs, err = config.ParseHostAddresses(s); err != nil {
			return nil, flagError("physical-ip", err)
		}
	}
	if s := c.String("default-gw"); s != "" {
		if cfg.DefaultGWs, err = config.ParseAddrs(s); err != nil {
			return nil, flagError("default-gw", err)
		}
	}
	cidrs, err := clusterCIDRs(c)
	if err != nil {
		return nil, err
	}
	if cfg.Services, err = gatewayServicePolicy(c, cfg, cidrs); err != nil {
		return nil, err
	}
	return cfg, nil
}

// gatewayServicePolicy is what the bridge forwards to the gateway router:
// the master's policy, with the node's own address never an external one.
func gatewayServicePolicy(c *cli.Context, cfg *node.GatewayConfig, clusterCIDRs []netip.Prefix) (services.AddressPolicy, error) {
	allowed, nodePorts, err := serviceAddressSettings(c)
	var serviceCIDRs []netip.Prefix
	for _, s := range c.StringSlice("service-cidr") {
		if cidr, perr := netip.ParsePrefix(s); perr == nil {
			serviceCIDRs = append(serviceCIDRs, cidr)
		}
	}
	p := services.AddressPolicy{Allowed: allowed, NodePorts: nodePorts,
		Nodes:    map[netip.Addr]string{},
		Reserved: services.ReservedRanges(clusterCIDRs, nil, serviceCIDRs)}
	for _, ip := range cfg.PhysicalIPs {
		p.Nodes[ip.Addr()] = cfg.NodeName
	}
	return p, err
}

func gatewayInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "gateway-init",
		Usage: "give this node a shared gateway on --bridge-interface, then exit",
		Description: "Maps the physical network to --bridge-interface (ovn-bridge-mappings), annotates the node\n" +
			"with k8s.ovn.org/l3-gateway-config (the master builds GR_<node>, ext_<node>, the SNAT of the\n" +
			"cluster to --physical-ip and the routes from it) and replaces the bridge's flows so the host\n" +
			"and the gateway router share the NIC's address. `ovnkube node` with the same flags keeps it\n" +
			"so; --remove takes it all away again. Idempotent.",
		Flags: append(append(kubeFlags(),
			&cli.StringFlag{Name: "node-name", Usage: "this node's Kubernetes name (required)"},
			clusterSubnetFlag("pod network(s); checked only, the master's --cluster-subnet is what is SNATed"),
			&cli.StringFlag{Name: "ovs-address", Value: ovs.DefaultAddress, Usage: "local OVS database (the bridge's management socket is in the same directory)"},
			&cli.StringFlag{Name: "nb-address", Usage: "OVN NB database: if given, wait until the master has built GR_<node>"},
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long (unreachable databases, no gateway router yet)"},
			&cli.BoolFlag{Name: "remove", Usage: "remove the node's gateway instead: annotation, bridge mapping, flows"},
			tlsFlags("nb")[0], tlsFlags("nb")[1], tlsFlags("nb")[2],
		), gatewayFlags()...),
		Action: func(c *cli.Context) error {
			cfg, err := gatewayConfig(c, true)
			if err != nil {
				return err
			}
			var nbAddr []string
			var nbTLS *tls.Config
			if c.String("nb-address") != "" {
				if nbAddr, nbTLS, err = dbConnection(c, "nb"); err != nil {
					return err
				}
			}
			kcfg, err := kubeConfig(c)
			if err != nil {
				return err
			}
			kube, err := kubeClient(kcfg, "ovnkube-gateway-init")
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, c.Duration("timeout"))
			defer cancelT()
			log := logger().WithName("gateway-init")
			sw, err := ovs.Connect(ctx, c.String("ovs-address"), log)
			if err != nil {
				return err
			}
			defer sw.Close()
			if c.Bool("remove") {
				return node.RemoveGateway(ctx, *cfg, sw, kube, log)
			}
			svcs, err := kube.CoreV1().Services("").List(ctx, metav1.ListOptions{})
			if err != nil {
				return fmt.Errorf("listing services for the gateway's flows: %w", err)
			}
			var list []*corev1.Service
			for i := range svcs.Items {
				list = append(list, &svcs.Items[i])
			}
			if err := node.GatewayInit(ctx, *cfg, sw, kube, node.ServiceFlows(list, cfg.Services), log); err != nil {
				return err
			}
			if nbAddr == nil {
				return nil
			}
			nb, err := ovndb.ConnectNB(ctx, nbAddr, log, nbTLS)
			if err != nil {
				return err
			}
			defer nb.Close()
			return node.WaitForGatewayRouter(ctx, nb, cfg.NodeName)
		},
	}
}

func nicsToBridgeCommand() *cli.Command {
	return &cli.Command{
		Name:      "nics-to-bridge",
		Usage:     "move a NIC, its addresses and routes onto a new OVS bridge br<NIC>",
		ArgsUsage: "NIC",
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "ovs-address", Value: ovs.DefaultAddress, Usage: "local OVS database"},
			&cli.StringFlag{Name: "datapath-type", Usage: `OVS datapath of the bridge: "" (kernel) or "netdev" (userspace)`},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return usageError{fmt.Errorf("nics-to-bridge takes exactly one NIC name")}
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			log := logger().WithName("nics-to-bridge")
			cctx, cancelC := context.WithTimeout(ctx, 30*time.Second)
			defer cancelC()
			sw, err := ovs.Connect(cctx, c.String("ovs-address"), log)
			if err != nil {
				return err
			}
			defer sw.Close()
			bridge, err := node.NICToBridge(ctx, c.Args().First(), c.String("datapath-type"), sw, log)
			if err != nil {
				return err
			}
			fmt.Fprintln(c.App.Writer, bridge)
			return nil
		},
	}
}
