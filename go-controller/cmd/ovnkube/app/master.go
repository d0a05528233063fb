package app

import (
	"context"
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/gcbudget"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/hugeheap"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/master"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

func kubeFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "kubeconfig", Usage: "kubeconfig file; empty: the pod's service account", EnvVars: []string{"KUBECONFIG"}},
		&cli.StringFlag{Name: "k8s-apiserver", Usage: "API server URL, e.g. https://10.0.0.10:6443 (overrides the kubeconfig's); without --kubeconfig the pod's service account talks to it. Default in a pod: the kubernetes Service's ClusterIP, which needs the pod network this program builds, so host-network pods set it"},
		&cli.Float64Flag{Name: "kube-api-qps", Value: 2000, Usage: "client-side rate limit of Kubernetes API requests per second (a low limit caps pods/s)"},
		&cli.IntFlag{Name: "kube-api-burst", Value: 4000, Usage: "burst above --kube-api-qps"},
	}
}

func kubeConfig(c *cli.Context) (config.Kube, error) {
	k := config.Kube{Kubeconfig: c.String("kubeconfig"), APIServer: c.String("k8s-apiserver"), QPS: float32(c.Float64("kube-api-qps")), Burst: c.Int("kube-api-burst")}
	if k.APIServer != "" {
		if u, err := url.Parse(k.APIServer); err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			return k, flagError("k8s-apiserver", fmt.Errorf("%q is not a URL such as https://10.0.0.10:6443", k.APIServer))
		}
		if k.Kubeconfig == "" {
			if err := refuseCleartextCredentials(serviceAccountRESTConfig(k.APIServer), k); err != nil {
				return k, err
			}
		}
	}
	if k.QPS <= 0 {
		return k, flagError("kube-api-qps", fmt.Errorf("must be positive"))
	}
	if k.Burst <= 0 {
		return k, flagError("kube-api-burst", fmt.Errorf("must be positive"))
	}
	return k, nil
}

// kubeClient is a client that names itself agent in the API server's logs.
func kubeClient(k config.Kube, agent string) (kubernetes.Interface, error) {
	rc, err := kubeRESTConfig(k, agent)
	if err != nil {
		return nil, err
	}
	return kubernetes.NewForConfig(rc)
}

func kubeRESTConfig(k config.Kube, agent string) (*rest.Config, error) {
	var rc *rest.Config
	var err error
	switch {
	case k.Kubeconfig != "":
		rc, err = clientcmd.BuildConfigFromFlags(k.APIServer, k.Kubeconfig)
	case k.APIServer != "":
		rc, err = serviceAccountConfig(k.APIServer)
	default:
		rc, err = rest.InClusterConfig()
	}
	if err != nil {
		return nil, fmt.Errorf("Kubernetes client config (set --kubeconfig outside a pod): %w", err)
	}
	rc.QPS, rc.Burst = k.QPS, k.Burst
	rc.UserAgent = agent
	rc.ContentType = runtime.ContentTypeProtobuf
	rc.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	return rc, nil
}

// serviceAccountDir is where a pod finds its service account's token and
// the cluster's CA.
const serviceAccountDir = "/var/run/secrets/kubernetes.io/serviceaccount"

// serviceAccountConfig is the pod's service account talking to server: what
// rest.InClusterConfig builds, without its ClusterIP.
func serviceAccountConfig(server string) (*rest.Config, error) {
	rc := serviceAccountRESTConfig(server)
	if _, err := os.Stat(rc.BearerTokenFile); err != nil {
		return nil, fmt.Errorf("no service account token (%w)", err)
	}
	return rc, nil
}

func serviceAccountRESTConfig(server string) *rest.Config {
	return &rest.Config{Host: server, BearerTokenFile: filepath.Join(serviceAccountDir, "token"),
		TLSClientConfig: rest.TLSClientConfig{CAFile: filepath.Join(serviceAccountDir, "ca.crt")}}
}

func masterCommand() *cli.Command {
	return &cli.Command{
		Name:  "master",
		Usage: "watch Nodes, Pods, Services and EndpointSlices and program the OVN Northbound database",
		Description: "Creates ovn_cluster_router and the join switch, gives every node a host subnet\n" +
			"(k8s.ovn.org/node-subnets), a switch and a management port, and every pod an address\n" +
			"(k8s.ovn.org/pod-networks) and a logical switch port, and every Service load balancers\n" +
			"(Service_<ns>/<name>_<PROTO>_cluster in the clusterLBGroup). Restart-safe: state is rebuilt\n" +
			"from annotations and the NB, and only rows ovn-k8s owns are ever deleted.",
		Flags: append(append(append(masterSettingFlags(), leaderFlags(leader.DefaultLeaseName)...), metricsFlags("")...), heapHugePagesFlag(), gcBudgetFlag()),
		Action: func(c *cli.Context) error {
			cfg, err := masterConfig(c)
			if err != nil {
				return err
			}
			lcfg, elect, err := leaderConfig(c)
			if err != nil {
				return err
			}
			if cfg.Zone != "" && !c.IsSet("leader-elect-resource-name") {
				lcfg.Name += "-" + cfg.Zone // a lease per zone
			}
			srv, err := metricsServer(c)
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			log := logger().WithName("master")
			// The master's heap is mostly long-lived caches (informers, the NB
			// client's): collecting at 50% growth instead of 100% keeps RSS near
			// the live heap while collections are cheap; as the heap grows and
			// each byte marked costs more, GOGC rises to hold the collector's
			// share of the CPU (package gcbudget). GOGC in the environment wins.
			if os.Getenv("GOGC") == "" {
				b := gcbudget.Default
				b.Share = float64(c.Int("gc-cpu-budget")) / 100
				if b.Share == 0 {
					debug.SetGCPercent(b.Min)
				} else {
					go gcbudget.Keep(ctx, 10*time.Second, b, log)
				}
			}
			if c.Bool("heap-huge-pages") {
				go hugeheap.Keep(ctx, 10*time.Second, log)
			}
			return runMaster(ctx, cfg, lcfg, elect, srv, log)
		},
	}
}

// gcBudgetFlag: the collector's share of the master's CPU (package gcbudget).
func gcBudgetFlag() cli.Flag {
	return &cli.IntFlag{Name: "gc-cpu-budget", Value: int(math.Round(gcbudget.Default.Share * 100)), Usage: "percent of the master's CPU the Go garbage collector may take: every 10 s once two collections have run, judged over the last four such windows, GOGC moves between 50 and 400 to hold it, spending heap where each byte marked costs more, as in large clusters (docs/performance.md, \"Scale\"); GOMEMLIMIT, when set, still bounds the heap; 0: GOGC fixed at 50; GOGC in the environment overrides both", Action: func(_ *cli.Context, v int) error {
		if v < 0 || v >= 100 {
			return flagError("gc-cpu-budget", fmt.Errorf("%d: want a percent from 0 (GOGC fixed at 50) to 99", v))
		}
		return nil
	}}
}

// heapHugePagesFlag: the master's heap in huge pages (package hugeheap).
func heapHugePagesFlag() cli.Flag {
	return &cli.BoolFlag{Name: "heap-huge-pages", Value: true, Usage: "on a host whose transparent huge pages mode is madvise, put the Go heap's dense parts in huge pages (MADV_COLLAPSE of every 2 MiB range whose pages are all resident, every 10 s; the resident size never grows), as a host in mode always does: the garbage collector's cost per byte then stays flat as the heap grows to gigabytes (docs/performance.md, \"Scale\"); no effect in the other modes"}
}

// runMaster serves metrics and health, then runs the master: at once, or
// while this replica holds the leader lease. Without the lease every write
// to the API and the NB is refused (fenced), and losing it ends the process
// (exit 1) so that a supervisor starts it again as a standby.
// dnsTapFlag is --dns-tap-address, where who takes the stream.
func dnsTapFlag(who string) cli.Flag {
	return &cli.StringFlag{Name: "dns-tap-address", Usage: "HOST:PORT (or unix:PATH, for a DNS server on this host: the file's permissions decide who may send) on which " + who + " takes the cluster DNS's dnstap stream (CoreDNS: dnstap tcp://ADDRESS full): the answers it gives pods give wildcard DNS names (*.example.com) their addresses; only the endpoints of --dns-service may connect, so point CoreDNS at the management address of the taker's node (the .2 of its node subnet), which pods reach with their own addresses; empty: wildcard names match nothing"}
}

// dnsServiceFlag is --dns-service.
func dnsServiceFlag() cli.Flag {
	return &cli.StringFlag{Name: "dns-service", Value: config.DefaultDNSService, Usage: "the cluster DNS's Service, NAMESPACE/NAME: its endpoints may send the dnstap stream (--dns-tap-address)"}
}

// dnsTapConfig reads --dns-tap-address and --dns-service, checked.
func dnsTapConfig(c *cli.Context) (tap, service string, err error) {
	if tap = c.String("dns-tap-address"); tap != "" {
		if path, ok := strings.CutPrefix(tap, "unix:"); ok && !filepath.IsAbs(path) {
			return "", "", flagError("dns-tap-address", fmt.Errorf("%q: the socket path must be absolute", tap))
		} else if _, _, err := net.SplitHostPort(tap); !ok && err != nil {
			return "", "", flagError("dns-tap-address", fmt.Errorf("%q is not HOST:PORT or unix:PATH", tap))
		}
	}
	if service = c.String("dns-service"); strings.Count(service, "/") != 1 || strings.HasPrefix(service, "/") || strings.HasSuffix(service, "/") {
		return "", "", flagError("dns-service", fmt.Errorf("%q is not NAMESPACE/NAME", service))
	}
	return tap, service, nil
}

// masterSettingFlags are the flags masterConfig reads: those of the master
// that decide its rows (ovnkube diff takes them too).
func masterSettingFlags() []cli.Flag {
	return append(append(append(kubeFlags(), tlsFlags("nb")...),
		&cli.StringFlag{Name: "nb-address", Usage: "OVN NB database: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT; comma-separated for a clustered NB"},
		egressIPReachFlag(),
		&cli.StringFlag{Name: "dns-servers", Usage: "comma-separated DNS servers (IP or IP:PORT) resolving egress firewalls' dnsName and admin policies' domainNames; default: the nameservers of /etc/resolv.conf"},
		dnsTapFlag("the master (in zone mode, --zone: the cluster manager, from which this master learns the answers; it listens on nothing)"), dnsServiceFlag(),
		&cli.StringFlag{Name: "sb-address", Usage: "the OVN SB database the nodes use (tcp: or ssl:, comma-separated when clustered): an ACL on every node switch keeps pods from it and from the NB's tcp:/ssl: endpoints; the master never connects to it"},
		&cli.StringSliceFlag{Name: "cluster-subnet", Aliases: []string{"cluster-ip-subnet"}, Value: cli.NewStringSlice(config.DefaultClusterSubnetFlag), Usage: "pod network CIDR/HOSTLEN (repeatable; one per IP family for dual-stack)"},
		&cli.StringSliceFlag{Name: "service-cidr", Value: cli.NewStringSlice(config.DefaultServiceCIDR), Usage: "service ClusterIP range (repeatable)"},
		joinSubnetFlag(),
		&cli.StringFlag{Name: "zone", Usage: "zone mode (OVN interconnection): the zone whose own NB --nb-address is; the master programs only the nodes annotated k8s.ovn.org/zone-name=ZONE (`ovnkube node --zone`) and their pods, reads host subnets from the nodes (`ovnkube cluster-manager` allocates them) and gives each node its transit switch port; empty: central mode, one NB for the cluster"},
		&cli.StringFlag{Name: "ic-db-address", Usage: "zone mode: the interconnection NB's and SB's tcp: or ssl: endpoints (comma-separated), which an ACL on every node switch keeps pods from as it does the NB's and SB's; the master never connects to them"},
		&cli.StringFlag{Name: "transit-subnet", Value: config.DefaultTransitSubnetFlag, Usage: "zone mode: the transit switch's ranges, one per family (comma-separated), alike in every zone; the cluster uses those of its --cluster-subnet families"},
		&cli.IntFlag{Name: "pod-workers", Value: 32, Usage: "pods synced concurrently (their NB writes share transactions)"},
		&cli.IntFlag{Name: "node-workers", Value: 4, Usage: "nodes synced concurrently"},
		&cli.IntFlag{Name: "service-workers", Value: 8, Usage: "services synced concurrently"},
		&cli.BoolFlag{Name: "namespace-isolation", Usage: "make every namespace a tenant of its own, as OpenShift SDN's multitenant mode did (namespace annotation k8s.ovn.org/tenant: isolate, global or join:<namespace>)"},
		&cli.IntFlag{Name: "policy-workers", Value: config.DefaultPolicyWorkers, Usage: "network policies, peer address sets and namespaces synced concurrently"},
		&cli.DurationFlag{Name: "northd-backoff-interval", Value: config.DefaultNorthdBackoff, Usage: "the master keeps NB_Global options:northd-backoff-interval-ms at this (whole milliseconds, at most 5s): after each run ovn-northd waits as long as the run took, at most this, and takes the changes that came meanwhile in one run, so that under churn it recomputes less often and leaves CPU to the NB and the master, while the southbound lags by up to this much more (OVN 23.09 and later; older northds ignore it); 0: northd runs at once"},
		&cli.DurationFlag{Name: "resync-interval", Value: config.DefaultResyncInterval, Usage: "sync every object again this often whatever the events said, logging what it repaired (0 turns it off)"},
	), serviceAddressFlags()...)
}

// egressIPReachFlag and joinSubnetFlag are settings the master and the
// cluster manager share.
func egressIPReachFlag() cli.Flag {
	return &cli.DurationFlag{Name: "egressip-reachability-timeout", Value: time.Second, Usage: "how long the master waits for an egress node to answer its probe (TCP to the node's gateway address, port 9: an answer or a refusal is reachable; two misses in a row, one second apart, move its egress IPs); 0 turns the probes off (the Ready condition and the label alone decide)"}
}

func joinSubnetFlag() cli.Flag {
	return &cli.StringFlag{Name: "join-subnet", Value: config.DefaultJoinSubnetFlag, Usage: "subnets of the join switch between the cluster router and gateway routers, one per family (comma-separated); the cluster uses those of its --cluster-subnet families"}
}

func runMaster(ctx context.Context, cfg config.Master, lcfg leader.Config, elect bool, srv metrics.Server, log logr.Logger) error {
	rc, err := kubeRESTConfig(cfg.Kube, "ovnkube-master")
	if err != nil {
		return err
	}
	// The metrics endpoint's TokenReviews and SubjectAccessReviews are not
	// fenced: a standby answers scrapes too.
	if srv.Kube, err = kubernetes.NewForConfig(rc); err != nil {
		return err
	}
	elector, leading, err := electorFor(elect, lcfg, log)
	if err != nil {
		return err
	}
	if elector != nil {
		rc = rest.CopyConfig(rc)
		rc.Wrap(leader.FenceTransport(elector.Fence))
	}
	kube, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return err
	}
	var running atomic.Pointer[master.Master]
	srv.Ready = leaderReady(leading, &running)
	metrics.RegisterMaster(srv.Registry,
		metrics.GaugeFunc("ovnkube_master_leader", "1 while this replica holds the leader lease (always 1 with --leader-elect=false).", func() float64 { return metrics.Bool(leading()) }),
		metrics.GaugeFunc("ovnkube_master_nb_connected", "1 while the master is connected to the NB (to its leader when clustered).", func() float64 {
			m := running.Load()
			return metrics.Bool(m != nil && m.NBConnected())
		}))
	if err := listenIfAsked(ctx, srv, log); err != nil {
		return err
	}
	run := func(ctx context.Context) error {
		// The API's lists run while the NB client takes its initial monitor.
		informerCtx, stopInformers := context.WithCancel(ctx)
		defer stopInformers()
		factory := master.NewInformers(kube)
		factory.Start(informerCtx.Done())
		nb, err := ovndb.ConnectNB(ctx, cfg.NBAddress, log.WithName("nb"), cfg.NBTLS)
		if err != nil {
			return err
		}
		defer nb.Close()
		log.Info("connected to NB", "address", cfg.NBAddress, "endpoint", nb.CurrentEndpoint())
		m := master.New(cfg, kube, nb, factory, customAPIs(rc, kube, log), log)
		if elector == nil {
			running.Store(m)
			go oneProcAfterSync(ctx, m.Synced(), log)
			return m.Run(ctx)
		}
		m.Committer().SetFence(elector.Fence)
		// The term's first NB write: from now on a deposed leader's late
		// transactions commit nothing (docs/design.md, "Failure model").
		epoch, err := ovndb.ClaimLeaderEpoch(ctx, nb, lcfg.Identity, elector.Fence, log.WithName("leader"))
		if err != nil {
			return err
		}
		m.Committer().SetLeaderEpoch(epoch)
		running.Store(m)
		go oneProcAfterSync(ctx, m.Synced(), log)
		return epoch.Run(ctx, m.Run)
	}
	if elector == nil {
		return run(ctx)
	}
	// The lease is written through its own, unfenced client.
	leaseKube, err := kubeClient(cfg.Kube, "ovnkube-master-leader-election")
	if err != nil {
		return err
	}
	if err := checkLeaseNamespace(ctx, leaseKube, lcfg, log); err != nil {
		return err
	}
	return elector.Run(ctx, leaseKube, run)
}

// oneProcAfterSync runs the master on one P once its startup sync is done,
// unless GOMAXPROCS is set in the environment. The startup lists and the NB
// client's initial monitor decode in parallel and use every core; after it,
// the work is a chain of short hand-offs between goroutines (watch decoder,
// informer, worker, NB committer, OVSDB reader), rarely two at once, and with
// more than one P each hand-off wakes an idle P that spins looking for work
// and sleeps again: 8-22 % of the master's CPU per pod on two
// cores, for no throughput (docs/performance.md).
func oneProcAfterSync(ctx context.Context, synced <-chan struct{}, log logr.Logger) {
	if os.Getenv("GOMAXPROCS") != "" {
		return
	}
	select {
	case <-synced:
		if was := goruntime.GOMAXPROCS(1); was != 1 {
			log.V(1).Info("startup sync done: running on one P from now on (set GOMAXPROCS to choose)", "was", was)
		}
	case <-ctx.Done():
	}
}

func masterConfig(c *cli.Context) (config.Master, error) {
	var cfg config.Master
	var err error
	if cfg.Kube, err = kubeConfig(c); err != nil {
		return cfg, err
	}
	if _, err := required(c, "nb-address"); err != nil {
		return cfg, err
	}
	if cfg.NBAddress, cfg.NBTLS, err = dbConnection(c, "nb"); err != nil {
		return cfg, err
	}
	if cfg.GuardedDBs, err = guardedDBs(c, cfg.NBAddress); err != nil {
		return cfg, err
	}
	if cfg.ExternalIPCIDRs, cfg.NodePortRange, err = serviceAddressSettings(c); err != nil {
		return cfg, err
	}
	if cfg.ClusterSubnets, err = config.ParseClusterSubnets(c.StringSlice("cluster-subnet")); err != nil {
		return cfg, flagError("cluster-subnet", err)
	}
	if cfg.ServiceCIDRs, err = config.ParseServiceCIDRs(c.StringSlice("service-cidr")); err != nil {
		return cfg, flagError("service-cidr", err)
	}
	if cfg.JoinSubnets, err = config.ParseJoinSubnets([]string{c.String("join-subnet")}, cfg.ClusterSubnets); err != nil {
		return cfg, flagError("join-subnet", err)
	}
	if cfg.Zone, err = zoneName(c.String("zone")); err != nil {
		return cfg, flagError("zone", err)
	}
	if cfg.Zone != "" {
		if cfg.TransitSubnets, err = config.PerClusterFamily([]string{c.String("transit-subnet")}, cfg.ClusterSubnets, "transit subnets", config.DefaultTransitSubnetFlag); err != nil {
			return cfg, flagError("transit-subnet", err)
		}
	}
	// Each range the master routes must stay clear of the pod network.
	for _, rs := range []struct {
		flag   string
		ranges []netip.Prefix
	}{{"join-subnet", cfg.JoinSubnets}, {"transit-subnet", cfg.TransitSubnets}, {"service-cidr", cfg.ServiceCIDRs}} {
		for _, cs := range cfg.ClusterSubnets {
			for _, r := range rs.ranges {
				if cs.CIDR.Overlaps(r) {
					return cfg, flagError(rs.flag, fmt.Errorf("%s overlaps cluster subnet %s", r, cs.CIDR))
				}
			}
		}
	}
	if cfg.NorthdBackoff = c.Duration("northd-backoff-interval"); cfg.NorthdBackoff < 0 || cfg.NorthdBackoff > config.MaxNorthdBackoff || cfg.NorthdBackoff%time.Millisecond != 0 {
		return cfg, flagError("northd-backoff-interval", fmt.Errorf("%s: want whole milliseconds from 0 to %s", cfg.NorthdBackoff, config.MaxNorthdBackoff))
	}
	if cfg.PodWorkers = c.Int("pod-workers"); cfg.PodWorkers < 1 {
		return cfg, flagError("pod-workers", fmt.Errorf("must be at least 1"))
	}
	if cfg.NodeWorkers = c.Int("node-workers"); cfg.NodeWorkers < 1 {
		return cfg, flagError("node-workers", fmt.Errorf("must be at least 1"))
	}
	if cfg.ServiceWorkers = c.Int("service-workers"); cfg.ServiceWorkers < 1 {
		return cfg, flagError("service-workers", fmt.Errorf("must be at least 1"))
	}
	cfg.NamespaceIsolation = c.Bool("namespace-isolation")
	if cfg.DNSServers, err = dnsServers(c.String("dns-servers")); err != nil {
		return cfg, flagError("dns-servers", err)
	}
	if cfg.DNSTapAddress, cfg.DNSService, err = dnsTapConfig(c); err != nil {
		return cfg, err
	}
	if cfg.DNSTapAddress != "" && len(cfg.DNSServers) == 0 {
		return cfg, flagError("dns-tap-address", fmt.Errorf("needs DNS servers (--dns-servers, or nameservers in /etc/resolv.conf)"))
	}
	if cfg.EgressIPReachTimeout = c.Duration("egressip-reachability-timeout"); cfg.EgressIPReachTimeout < 0 {
		return cfg, flagError("egressip-reachability-timeout", fmt.Errorf("must not be negative"))
	}
	if cfg.PolicyWorkers = c.Int("policy-workers"); cfg.PolicyWorkers < 1 {
		return cfg, flagError("policy-workers", fmt.Errorf("must be at least 1"))
	}
	cfg.RetryMaxDelay = 30 * time.Second
	if cfg.ResyncInterval = c.Duration("resync-interval"); cfg.ResyncInterval < 0 {
		return cfg, flagError("resync-interval", fmt.Errorf("must not be negative"))
	}
	if cfg.ResyncInterval == 0 {
		cfg.ResyncInterval = -1 // off
	}
	return cfg, nil
}

// zoneName checks --zone: a DNS subdomain, as a node's name (per-node
// zones are named after their nodes), so that it is a valid annotation
// value, Lease name suffix and OVN availability zone name.
func zoneName(v string) (string, error) {
	if v == "" {
		return "", nil
	}
	if errs := validation.IsDNS1123Subdomain(v); len(errs) > 0 {
		return "", fmt.Errorf("%q: %s", v, strings.Join(errs, "; "))
	}
	return v, nil
}

// guardedDBs are the NB's, --sb-address's and --ic-db-address's IP endpoints, which pods may
// not reach. An endpoint named by host name cannot be guarded by an ACL
// (which matches addresses): that is said once at start.
func guardedDBs(c *cli.Context, nb []string) ([]netip.AddrPort, error) {
	remotes := slices.Clone(nb)
	for _, flag := range []string{"sb-address", "ic-db-address"} {
		if s := c.String(flag); s != "" {
			eps, err := config.ParseOVSDBAddress(s)
			if err != nil {
				return nil, flagError(flag, err)
			}
			remotes = append(remotes, eps...)
		}
	}
	eps, names := config.DBEndpoints(remotes)
	if len(names) > 0 {
		logger().Info("database endpoints named by host name are not guarded from pods (only their certificates keep pods out); give IP addresses to guard them",
			"endpoints", names)
	}
	return eps, nil
}

// dnsServers parses --dns-servers into host:port; empty: the nameservers
// of /etc/resolv.conf (none when it cannot be read: DNS names then match
// nothing, which the objects naming them say).
func dnsServers(v string) ([]string, error) {
	if v == "" {
		servers, err := dnsname.ServersFromResolvConf("/etc/resolv.conf")
		if err != nil {
			logger().Info("no DNS servers: DNS names in egress firewalls and admin policies match nothing", "error", err.Error())
		}
		return servers, nil
	}
	var out []string
	for _, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		if ap, err := netip.ParseAddrPort(f); err == nil {
			out = append(out, ap.String())
		} else if a, err := netip.ParseAddr(f); err == nil {
			out = append(out, netip.AddrPortFrom(a, 53).String())
		} else {
			return nil, fmt.Errorf("%q is not an IP address or IP:PORT", f)
		}
	}
	return out, nil
}

// jsonConfig is rc for custom resources, which have no protobuf encoding.
func jsonConfig(rc *rest.Config) *rest.Config {
	json := rest.CopyConfig(rc)
	json.ContentType, json.AcceptContentTypes = "application/json", "application/json"
	return json
}

// customAPIs follows the custom resource kinds the API server serves
// (their CRDs from dist/kubernetes): admin network policies, egress
// firewalls and EgressIPs. A kind installed later is followed from the
// master's next start.
func customAPIs(rc *rest.Config, kube kubernetes.Interface, log logr.Logger) master.APIs {
	json := jsonConfig(rc)
	client, err := npclient.NewForConfig(json)
	if err != nil {
		log.Error(err, "custom resources (admin network policies, egress firewalls, EgressIPs) are not followed")
		return master.APIs{}
	}
	dyn, err := dynamic.NewForConfig(json)
	if err != nil {
		log.Error(err, "custom resources (admin network policies, egress firewalls, EgressIPs) are not followed")
		return master.APIs{}
	}
	var apis master.APIs
	if a := policy.DiscoverAdminAPI(kube.Discovery(), client, dyn); len(a.Kinds()) > 0 {
		log.Info("following admin network policies and egress firewalls", "kinds", a.Kinds())
		apis.Admin = a
	} else {
		log.Info("the API server serves no admin network policy kind nor EgressFirewall (their CRDs are not installed); none is followed")
	}
	if apis.EgressIP = egressip.Discover(kube.Discovery(), dyn); apis.EgressIP != nil {
		log.Info("following EgressIPs")
	} else {
		log.Info("the API server does not serve EgressIPs (their CRD is not installed); none is followed")
	}
	return apis
}
