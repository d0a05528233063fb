package app

import (
	"context"
	"crypto/tls"
	"fmt"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/clustermanager"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// clusterManagerLease is the cluster manager's default Lease name.
const clusterManagerLease = "ovnkube-cluster-manager"

func clusterManagerCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster-manager",
		Usage: "zone mode's cluster-wide part: host subnets for every node, the interconnection NB's transit switch, EgressIP assignment",
		Description: "In zone mode (`ovnkube master --zone`) each zone's master programs its own NB and\n" +
			"allocates nothing cluster-wide: this command gives every node its host subnets\n" +
			"(k8s.ovn.org/node-subnets; existing annotations are kept, the first node in name order\n" +
			"keeping a subnet two claim) and keeps the transit switch in the interconnection NB, which\n" +
			"ovn-ic copies into every zone, and assigns EgressIPs' addresses to nodes (their status,\n" +
			"which every zone's master programs). Run one (or several with --leader-elect) per cluster.",
		Flags: append(append(append(kubeFlags(), tlsFlags("ic-nb")...),
			&cli.StringFlag{Name: "ic-nb-address", Usage: "OVN interconnection NB database (unix:, tcp: or ssl:; comma-separated when clustered): where the transit switch is kept; empty: not kept here"},
			&cli.StringSliceFlag{Name: "cluster-subnet", Aliases: []string{"cluster-ip-subnet"}, Value: cli.NewStringSlice(config.DefaultClusterSubnetFlag), Usage: "pod network CIDR/HOSTLEN (repeatable; one per IP family for dual-stack), as every zone's master has it"},
			&cli.IntFlag{Name: "node-workers", Value: 4, Usage: "nodes synced concurrently"},
			joinSubnetFlag(), egressIPReachFlag(),
		), leaderFlags(clusterManagerLease)...),
		Action: func(c *cli.Context) error {
			kcfg, err := kubeConfig(c)
			if err != nil {
				return err
			}
			subnets, err := config.ParseClusterSubnets(c.StringSlice("cluster-subnet"))
			if err != nil {
				return flagError("cluster-subnet", err)
			}
			joins, err := config.ParseJoinSubnets([]string{c.String("join-subnet")}, subnets)
			if err != nil {
				return flagError("join-subnet", err)
			}
			reach := c.Duration("egressip-reachability-timeout")
			if reach < 0 {
				return flagError("egressip-reachability-timeout", fmt.Errorf("must not be negative"))
			}
			workers := c.Int("node-workers")
			if workers < 1 {
				return flagError("node-workers", fmt.Errorf("must be at least 1"))
			}
			var icAddr []string
			var icTLS *tls.Config
			if c.String("ic-nb-address") != "" {
				if icAddr, icTLS, err = dbConnection(c, "ic-nb"); err != nil {
					return err
				}
			}
			lcfg, elect, err := leaderConfig(c)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			log := logger().WithName("cluster-manager")
			rc, err := kubeRESTConfig(kcfg, "ovnkube-cluster-manager")
			if err != nil {
				return err
			}
			run := func(ctx context.Context, rc *rest.Config) error {
				kube, err := kubernetes.NewForConfig(rc)
				if err != nil {
					return err
				}
				factory := informers.NewSharedInformerFactory(kube, 0)
				var ic libovsdbclient.Client
				if icAddr != nil {
					icModel, err := clustermanager.ICModel()
					if err != nil {
						return err
					}
					if ic, err = ovndb.Connect(ctx, icAddr, icModel, nil, log.WithName("ic-nb"), icTLS); err != nil {
						return err
					}
					defer ic.Close()
				}
				eips := clustermanager.EgressIPs{JoinSubnets: joins, ReachTimeout: reach}
				if dyn, err := dynamic.NewForConfig(jsonConfig(rc)); err != nil {
					log.Error(err, "EgressIPs are not assigned")
				} else if eips.API = egressip.Discover(kube.Discovery(), dyn); eips.API == nil {
					log.Info("the API server does not serve EgressIPs (their CRD is not installed); none is assigned")
				}
				m := clustermanager.New(subnets, kube, factory, ic, eips, log)
				factory.Start(ctx.Done())
				return m.Run(ctx, workers)
			}
			if !elect {
				return run(ctx, rc)
			}
			elector, err := leader.New(lcfg, log.WithName("leader"))
			if err != nil {
				return err
			}
			fenced := rest.CopyConfig(rc)
			fenced.Wrap(leader.FenceTransport(elector.Fence))
			leaseKube, err := kubeClient(kcfg, "ovnkube-cluster-manager-leader-election")
			if err != nil {
				return err
			}
			if err := checkLeaseNamespace(ctx, leaseKube, lcfg, log); err != nil {
				return err
			}
			return elector.Run(ctx, leaseKube, func(ctx context.Context) error { return run(ctx, fenced) })
		},
	}
}
