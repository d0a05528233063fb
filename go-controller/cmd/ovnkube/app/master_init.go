package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/netip"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/master"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

func masterInitCommand() *cli.Command {
	return &cli.Command{
		Name:  "master-init",
		Usage: "create the cluster router, the join switch and the master node's switch, then exit",
		Description: "One-shot and idempotent (the seed's `ovn-k8s-overlay master-init`): running it\n" +
			"again changes nothing. `ovnkube master` adopts the rows it creates.",
		Flags: append([]cli.Flag{
			&cli.StringFlag{Name: "nb-address", Usage: "OVN NB database (unix:, tcp: or ssl: address; comma-separated for a cluster)"},
			&cli.StringFlag{Name: "cluster-ip-subnet", Value: config.DefaultClusterSubnet, Usage: "pod network; the master switch subnet must lie inside it"},
			&cli.StringFlag{Name: "master-switch-subnet", Usage: "host subnet of the master node's switch, e.g. 10.244.0.0/24"},
			&cli.StringFlag{Name: "node-name", Usage: "name of the master node (its switch is named after it)"},
			&cli.StringFlag{Name: "join-subnet", Value: config.DefaultJoinSubnet, Usage: "subnet of the join switch"},
			&cli.DurationFlag{Name: "timeout", Value: 30 * time.Second, Usage: "give up if the NB cannot be reached and written in this time"},
		}, tlsFlags("nb")...),
		Action: func(c *cli.Context) error {
			for _, name := range []string{"nb-address", "master-switch-subnet", "node-name"} {
				if _, err := required(c, name); err != nil {
					return err
				}
			}
			nbAddr, nbTLS, err := dbConnection(c, "nb")
			if err != nil {
				return err
			}
			cluster, err := config.ParseCIDR(c.String("cluster-ip-subnet"))
			if err != nil {
				return flagError("cluster-ip-subnet", err)
			}
			sw, err := config.ParseCIDR(c.String("master-switch-subnet"))
			if err != nil {
				return flagError("master-switch-subnet", err)
			}
			if !cluster.Contains(sw.Addr()) || sw.Bits() < cluster.Bits() {
				return flagError("master-switch-subnet", fmt.Errorf("%s is not inside --cluster-ip-subnet %s", sw, cluster))
			}
			join, err := config.ParseCIDR(c.String("join-subnet"))
			if err != nil {
				return flagError("join-subnet", err)
			}
			node := c.String("node-name")
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			ctx, cancelT := context.WithTimeout(ctx, c.Duration("timeout"))
			defer cancelT()
			return masterInit(ctx, nbAddr, nbTLS, cluster, join, node, sw)
		},
	}
}

func masterInit(ctx context.Context, nbAddr []string, nbTLS *tls.Config, cluster, join netip.Prefix, node string, subnet netip.Prefix) error {
	log := logger().WithName("master-init")
	nb, err := ovndb.ConnectNB(ctx, nbAddr, log, nbTLS)
	if err != nil {
		return err
	}
	defer nb.Close()
	committer := ovndb.NewCommitter(nb, log)
	go committer.Run(ctx)
	if err := master.EnsureCluster(ctx, nb, committer.Commit, []netip.Prefix{join}); err != nil {
		return fmt.Errorf("creating cluster router and join switch: %w", err)
	}
	// The internal ranges as the master has them, so that it adopts the
	// node switch's rows unchanged.
	if err := master.EnsureNode(ctx, nb, committer.Commit, node, []netip.Prefix{subnet}, []netip.Prefix{cluster, join}, nil, false, nil, nil); err != nil {
		return fmt.Errorf("creating switch of node %s: %w", node, err)
	}
	log.Info("cluster topology in place", "node", node, "subnet", subnet, "nbTransactions", committer.Transactions())
	return nil
}
