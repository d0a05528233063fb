package app

import (
	"context"
	"crypto/tls"
	"fmt"
	"sync/atomic"

	"github.com/go-logr/logr"
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
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// clusterManagerLease is the cluster manager's default Lease name.
const clusterManagerLease = "ovnkube-cluster-manager"

func clusterManagerCommand() *cli.Command {
	return &cli.Command{
		Name:  "cluster-manager",
		Usage: "zone mode's cluster-wide part: host subnets for every node, the interconnection NB's transit switch, EgressIP assignment, the cluster DNS's answers relayed to the zones",
		Description: "In zone mode (`ovnkube master --zone`) each zone's master programs its own NB and\n" +
			"allocates nothing cluster-wide: this command gives every node its host subnets\n" +
			"(k8s.ovn.org/node-subnets; existing annotations are kept, the first node in name order\n" +
			"keeping a subnet two claim) and keeps the transit switch in the interconnection NB, which\n" +
			"ovn-ic copies into every zone, and assigns EgressIPs' addresses to nodes (their status,\n" +
			"which every zone's master programs). With --dns-tap-address it takes the cluster DNS's\n" +
			"dnstap stream and writes what pods were answered for every DNS name a policy names as\n" +
			"DNSNameResolvers, which every zone's master reads (wildcard DNS names). Run one (or several\n" +
			"with --leader-elect) per cluster.",
		Flags: append(append(append(kubeFlags(), tlsFlags("ic-nb")...),
			&cli.StringFlag{Name: "ic-nb-address", Usage: "OVN interconnection NB database (unix:, tcp: or ssl:; comma-separated when clustered): where the transit switch is kept; empty: not kept here"},
			clusterSubnetFlag("the pod network whose host subnets it hands out"),
			&cli.IntFlag{Name: "node-workers", Value: 4, Usage: "nodes synced concurrently"},
			joinSubnetFlag(), egressIPReachFlag(),
			dnsTapFlag("the cluster manager, relaying the answers to every zone's master (DNSNameResolvers),"), dnsServiceFlag(),
		), append(leaderFlags(clusterManagerLease), metricsFlags("")...)...),
		Action: func(c *cli.Context) error {
			cfg, err := clusterManagerConfig(c)
			if err != nil {
				return err
			}
			lcfg, elect, err := leaderConfig(c)
			if err != nil {
				return err
			}
			srv, err := metricsServer(c)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			return runClusterManager(ctx, cfg, lcfg, elect, srv, logger().WithName("cluster-manager"))
		},
	}
}

// clusterManagerSettings are the cluster manager's flags, checked.
type clusterManagerSettings struct {
	kube    config.Kube
	subnets []config.ClusterSubnet
	eips    clustermanager.EgressIPs // API filled in once connected
	workers int
	icAddr  []string // empty: the transit switch is not kept here
	icTLS   *tls.Config
	dns     clustermanager.DNSOptions // API filled in once connected
}

func clusterManagerConfig(c *cli.Context) (clusterManagerSettings, error) {
	var cfg clusterManagerSettings
	var err error
	if cfg.kube, err = kubeConfig(c); err != nil {
		return cfg, err
	}
	if cfg.subnets, err = config.ParseClusterSubnets(c.StringSlice("cluster-subnet")); err != nil {
		return cfg, flagError("cluster-subnet", err)
	}
	if cfg.eips.JoinSubnets, err = config.ParseJoinSubnets([]string{c.String("join-subnet")}, cfg.subnets); err != nil {
		return cfg, flagError("join-subnet", err)
	}
	if cfg.eips.ReachTimeout = c.Duration("egressip-reachability-timeout"); cfg.eips.ReachTimeout < 0 {
		return cfg, flagError("egressip-reachability-timeout", fmt.Errorf("must not be negative"))
	}
	if cfg.workers = c.Int("node-workers"); cfg.workers < 1 {
		return cfg, flagError("node-workers", fmt.Errorf("must be at least 1"))
	}
	if cfg.dns.TapAddress, cfg.dns.Service, err = dnsTapConfig(c); err != nil {
		return cfg, err
	}
	if c.String("ic-nb-address") != "" {
		if cfg.icAddr, cfg.icTLS, err = dbConnection(c, "ic-nb"); err != nil {
			return cfg, err
		}
	}
	return cfg, nil
}

// runClusterManager serves metrics and health, then runs the cluster
// manager: at once, or while this replica holds the Lease (its API writes
// fenced by it).
func runClusterManager(ctx context.Context, cfg clusterManagerSettings, lcfg leader.Config, elect bool, srv metrics.Server, log logr.Logger) error {
	rc, err := kubeRESTConfig(cfg.kube, "ovnkube-cluster-manager")
	if err != nil {
		return err
	}
	// The endpoint's reviews are not fenced: a standby answers scrapes too.
	if srv.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	elector, leading, err := electorFor(elect, lcfg, log)
	if err != nil {
		return err
	}
	var running atomic.Pointer[clustermanager.Manager]
	srv.Ready = leaderReady(leading, &running)
	metrics.RegisterClusterManager(srv.Registry,
		metrics.GaugeFunc("ovnkube_cluster_manager_leader", "1 while this replica holds the leader lease (always 1 with --leader-elect=false).", func() float64 { return metrics.Bool(leading()) }),
		metrics.GaugeFunc("ovnkube_cluster_manager_ic_nb_connected", "1 while the cluster manager is connected to the interconnection NB (0 without --ic-nb-address).", func() float64 {
			m := running.Load()
			return metrics.Bool(m != nil && m.ICConnected())
		}))
	if err := listenIfAsked(ctx, srv, log); err != nil {
		return err
	}
	if elector == nil {
		return runClusterManagerWith(ctx, cfg, rc, &running, log)
	}
	fenced := rest.CopyConfig(rc)
	fenced.Wrap(leader.FenceTransport(elector.Fence))
	leaseKube, err := kubeClient(cfg.kube, "ovnkube-cluster-manager-leader-election")
	if err != nil {
		return err
	}
	if err := checkLeaseNamespace(ctx, leaseKube, lcfg, log); err != nil {
		return err
	}
	return elector.Run(ctx, leaseKube, func(ctx context.Context) error { return runClusterManagerWith(ctx, cfg, fenced, &running, log) })
}

// runClusterManagerWith connects and runs the manager, published in running
// for the health endpoint.
func runClusterManagerWith(ctx context.Context, cfg clusterManagerSettings, rc *rest.Config, running *atomic.Pointer[clustermanager.Manager], log logr.Logger) error {
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	var ic libovsdbclient.Client
	if len(cfg.icAddr) > 0 {
		icModel, err := clustermanager.ICModel()
		if err != nil {
			return err
		}
		if ic, err = ovndb.Connect(ctx, cfg.icAddr, icModel, nil, log.WithName("ic-nb"), cfg.icTLS); err != nil {
			return err
		}
		defer ic.Close()
	}
	eips := cfg.eips
	if dyn, err := dynamic.NewForConfig(jsonConfig(rc)); err != nil {
		log.Error(err, "EgressIPs are not assigned")
	} else if eips.API = egressip.Discover(kube.Discovery(), dyn); eips.API == nil {
		log.Info("the API server does not serve EgressIPs (their CRD is not installed); none is assigned")
	}
	dns := cfg.dns
	if dns.TapAddress != "" { // the policies naming DNS names, and where their answers go
		dns.API = customAPIs(rc, kube, log).Admin
	}
	factory := informers.NewSharedInformerFactory(kube, 0)
	m := clustermanager.New(cfg.subnets, kube, factory, ic, eips, log)
	m.RelayDNS(dns)
	running.Store(m)
	factory.Start(ctx.Done())
	return m.Run(ctx, cfg.workers)
}
