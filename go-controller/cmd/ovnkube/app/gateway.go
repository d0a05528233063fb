package app

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func gatewayInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "gateway-init",
		Usage: "build this node's gateway: GR_<node>, ext_<node>, SNAT and routes, then exit",
		Description: "Creates the gateway router GR_<node> (bound to this chassis) on the join switch and on\n" +
			"ext_<node>, whose localnet port reaches --bridge-interface through ovn-bridge-mappings;\n" +
			"SNATs the cluster subnet to --physical-ip, routes the default route to --default-gw and\n" +
			"the cluster subnet back to the cluster router, adds the cluster router's source route for\n" +
			"this node's subnet, and annotates k8s.ovn.org/l3-gateway-config. Idempotent.",
		Flags: append(kubeFlags(),
			&cli.StringFlag{Name: "node-name", Usage: "this node's Kubernetes name (required)"},
			&cli.StringSliceFlag{Name: "cluster-ip-subnet", Value: cli.NewStringSlice("10.244.0.0/16"), Usage: "pod network(s) to SNAT"},
			&cli.StringFlag{Name: "bridge-interface", Usage: "OVS bridge holding the physical NIC, e.g. breth0 (see nics-to-bridge) (required)"},
			&cli.StringFlag{Name: "physical-ip", Usage: "this node's address/length on that network, e.g. 172.18.0.2/24 (required)"},
			&cli.StringFlag{Name: "default-gw", Usage: "next hop of the gateway's default route"},
			&cli.StringFlag{Name: "minion-switch-subnet", Usage: "this node's host subnet; default: its k8s.ovn.org/node-subnets annotation"},
			&cli.StringFlag{Name: "join-subnet", Value: "100.64.0.0/16", Usage: "subnet of the join switch"},
			&cli.StringFlag{Name: "physnet", Value: topology.DefaultPhysNet, Usage: "localnet network name mapped to the bridge"},
			&cli.StringFlag{Name: "nb-address", Usage: "OVN NB database (required)"},
			&cli.StringFlag{Name: "ovs-address", Value: ovs.DefaultAddress, Usage: "local OVS database"},
			&cli.DurationFlag{Name: "timeout", Value: 60 * time.Second, Usage: "give up after this long (unreachable databases, no subnet yet)"},
			tlsFlags("nb")[0], tlsFlags("nb")[1], tlsFlags("nb")[2],
		),
		Action: func(c *cli.Context) error {
			for _, name := range []string{"node-name", "bridge-interface", "physical-ip", "nb-address"} {
				if _, err := required(c, name); err != nil {
					return err
				}
			}
			cfg := node.GatewayConfig{NodeName: c.String("node-name"), Bridge: c.String("bridge-interface"), PhysNet: c.String("physnet")}
			var err error
			if cfg.ClusterSubnets, err = config.ParseCIDRs(c.StringSlice("cluster-ip-subnet")); err != nil {
				return flagError("cluster-ip-subnet", err)
			}
			if cfg.PhysicalIP, err = netip.ParsePrefix(c.String("physical-ip")); err != nil {
				return flagError("physical-ip", fmt.Errorf("%q is not address/length such as 172.18.0.2/24", c.String("physical-ip")))
			}
			if s := c.String("default-gw"); s != "" {
				if cfg.DefaultGW, err = netip.ParseAddr(s); err != nil {
					return flagError("default-gw", fmt.Errorf("%q is not an IP address", s))
				}
			}
			if s := c.String("minion-switch-subnet"); s != "" {
				if cfg.HostSubnet, err = config.ParseCIDR(s); err != nil {
					return flagError("minion-switch-subnet", err)
				}
			}
			if cfg.JoinSubnet, err = config.ParseCIDR(c.String("join-subnet")); err != nil {
				return flagError("join-subnet", err)
			}
			nbAddr, nbTLS, err := dbConnection(c, "nb")
			if err != nil {
				return err
			}
			kcfg, err := kubeConfig(c)
			if err != nil {
				return err
			}
			kube, err := optionalKube(kcfg, !cfg.HostSubnet.IsValid())
			if err != nil {
				return err
			}
			cfg.SubnetTimeout = c.Duration("timeout")
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, c.Duration("timeout"))
			defer cancelT()
			log := logger().WithName("gateway-init")
			nb, err := ovndb.ConnectNB(ctx, nbAddr, log, nbTLS)
			if err != nil {
				return err
			}
			defer nb.Close()
			sw, err := ovs.Connect(ctx, c.String("ovs-address"), log)
			if err != nil {
				return err
			}
			defer sw.Close()
			return node.GatewayInit(ctx, cfg, nb, sw, kube, log)
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
