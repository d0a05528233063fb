package app

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync/atomic"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
)

// leaderFlags are the leader election flags, named as Kubernetes' own
// controllers name them; lease is the Lease's default name (each command
// that elects a leader has its own).
func leaderFlags(lease string) []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "leader-elect", Value: true, Usage: "run as one of several replicas: only the holder of the Lease writes (false: this process always writes; run one only)"},
		&cli.DurationFlag{Name: "leader-elect-lease-duration", Value: leader.DefaultLeaseDuration, Usage: "how long standbys wait after the leader's last renewal before taking over (a killed leader is replaced within this plus the retry period)"},
		&cli.DurationFlag{Name: "leader-elect-renew-deadline", Value: leader.DefaultRenewDeadline, Usage: "the leader stops writing when it has not renewed for this long (shorter than the lease duration)"},
		&cli.DurationFlag{Name: "leader-elect-retry-period", Value: leader.DefaultRetryPeriod, Usage: "how often replicas try to acquire or renew the lease"},
		&cli.StringFlag{Name: "leader-elect-resource-namespace", Value: leader.DefaultNamespace, Usage: "namespace of the Lease (it must exist)"},
		&cli.StringFlag{Name: "leader-elect-resource-name", Value: lease, Usage: "name of the Lease"},
		&cli.StringFlag{Name: "leader-elect-identity", Usage: "this replica's identity in the Lease, unique per replica; default: the host name (a pod's name), so a restarted replica takes its own lease back at once"},
	}
}

func leaderConfig(c *cli.Context) (leader.Config, bool, error) {
	cfg := leader.Config{
		Namespace:     c.String("leader-elect-resource-namespace"),
		Name:          c.String("leader-elect-resource-name"),
		Identity:      c.String("leader-elect-identity"),
		LeaseDuration: c.Duration("leader-elect-lease-duration"),
		RenewDeadline: c.Duration("leader-elect-renew-deadline"),
		RetryPeriod:   c.Duration("leader-elect-retry-period"),
	}
	if !c.Bool("leader-elect") {
		return cfg, false, nil
	}
	if cfg.Identity == "" {
		host, err := os.Hostname()
		if err != nil || host == "" {
			return cfg, true, flagError("leader-elect-identity", fmt.Errorf("no host name to default to (%v); set it", err))
		}
		cfg.Identity = host
	}
	// Check each setting alone first, to name the flag that is wrong.
	for _, f := range []struct {
		flag string
		bad  bool
	}{
		{"leader-elect-resource-namespace", cfg.Namespace == ""},
		{"leader-elect-resource-name", cfg.Name == ""},
		{"leader-elect-retry-period", cfg.RetryPeriod <= 0},
		{"leader-elect-renew-deadline", cfg.RenewDeadline <= cfg.RetryPeriod},
	} {
		if f.bad {
			return cfg, true, flagError(f.flag, cfg.Validate())
		}
	}
	if err := cfg.Validate(); err != nil {
		return cfg, true, flagError("leader-elect-lease-duration", err)
	}
	return cfg, true, nil
}

// checkLeaseNamespace fails at start, saying what is missing and the ways
// out, when the Lease's namespace does not exist: the elector would otherwise
// retry, and log the API's refusal, several times a second forever. When the
// API does not answer (within a lease duration) it logs why once and lets
// the elector retry.
func checkLeaseNamespace(ctx context.Context, kube kubernetes.Interface, cfg leader.Config, log logr.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, cfg.LeaseDuration)
	defer cancel()
	err := leader.CheckNamespace(ctx, kube, cfg.Namespace)
	var missing *leader.NoNamespaceError
	switch {
	case errors.As(err, &missing):
		return flagError("leader-elect-resource-namespace", fmt.Errorf("%w, so no replica can ever lead: create it (kubectl create namespace %s), "+
			"name an existing namespace with --leader-elect-resource-namespace, or run a single replica with --leader-elect=false", err, cfg.Namespace))
	case err != nil:
		log.Info("could not check that the leader Lease's namespace exists; campaigning anyway", "err", err)
	}
	return nil
}

// metricsFlags serve Prometheus metrics, health and (optionally) profiles.
func metricsFlags(defaultAddress string) []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "metrics-address", Value: defaultAddress, Usage: "serve /metrics, /healthz and /readyz on this HOST:PORT; off when empty"},
		&cli.BoolFlag{Name: "enable-pprof", Usage: "also serve Go profiles (/debug/pprof/) on --metrics-address"},
		&cli.StringFlag{Name: "pprof-address", Usage: "old form of --metrics-address ADDR --enable-pprof"},
		&cli.StringFlag{Name: "metrics-auth", Usage: "who may read /metrics and /debug/pprof/ (/healthz and /readyz are open): " +
			"delegated (HTTPS; a bearer token the API server authenticates (TokenReview) and authorizes for the path with verb get (SubjectAccessReview), as the kubelet does) " +
			"or none (plain HTTP, anyone who reaches the address). Default: none on a loopback --metrics-address, delegated on any other"},
		&cli.StringFlag{Name: "metrics-tls-cert-file", Usage: "with --metrics-auth=delegated: the endpoint's serving certificate (PEM; re-read when it changes); default: a self-signed one made at start"},
		&cli.StringFlag{Name: "metrics-tls-private-key-file", Usage: "the private key (PEM) of --metrics-tls-cert-file"},
	}
}

func metricsServer(c *cli.Context) (metrics.Server, error) {
	srv := metrics.Server{Address: c.String("metrics-address"), Registry: prometheus.NewRegistry(), Pprof: c.Bool("enable-pprof")}
	if old := c.String("pprof-address"); old != "" {
		if c.IsSet("metrics-address") && srv.Address != old {
			return srv, flagError("pprof-address", fmt.Errorf("is the old form of --metrics-address, which names another address"))
		}
		srv.Address, srv.Pprof = old, true
	}
	if srv.Pprof && srv.Address == "" {
		return srv, flagError("enable-pprof", fmt.Errorf("needs --metrics-address"))
	}
	return srv, metricsAuth(c, &srv)
}

// metricsAuth reads --metrics-auth and the serving certificate's flags:
// delegated serves HTTPS (a bearer token is a credential); none, plain
// HTTP. The API client is the command's to set (metrics.Server.Kube).
func metricsAuth(c *cli.Context, srv *metrics.Server) error {
	certFile, keyFile := c.String("metrics-tls-cert-file"), c.String("metrics-tls-private-key-file")
	switch mode := c.String("metrics-auth"); mode {
	case "":
		srv.Delegated = srv.Address != "" && !metrics.Loopback(srv.Address)
	case "delegated", "none":
		srv.Delegated = mode == "delegated"
	default:
		return flagError("metrics-auth", fmt.Errorf("%q is neither delegated nor none", mode))
	}
	if (certFile == "") != (keyFile == "") {
		return flagError("metrics-tls-cert-file", fmt.Errorf("--metrics-tls-cert-file and --metrics-tls-private-key-file are given together or not at all"))
	}
	if !srv.Delegated || srv.Address == "" {
		if certFile != "" {
			return flagError("metrics-tls-cert-file", fmt.Errorf("is used only with --metrics-auth=delegated and --metrics-address"))
		}
		return nil
	}
	host, _, _ := net.SplitHostPort(srv.Address)
	tlsConfig, err := metrics.ServingTLS(certFile, keyFile, host)
	if err != nil {
		return flagError("metrics-tls-cert-file", err)
	}
	srv.TLS = tlsConfig
	return nil
}

// leaderReady is /readyz of a leader-elected command whose running part is
// published in running: a standby is ready (to take over); the leader is
// starting until running is set, then as its Ready says.
func leaderReady[T any, PT interface {
	*T
	Ready() error
}](leading func() bool, running *atomic.Pointer[T]) func() error {
	return func() error {
		m := running.Load()
		switch {
		case !leading():
			return nil
		case m == nil:
			return fmt.Errorf("starting")
		}
		return PT(m).Ready()
	}
}

// electorFor makes the Lease's elector when elect (nil otherwise) and what
// says whether this replica leads (always, without election).
func electorFor(elect bool, lcfg leader.Config, log logr.Logger) (*leader.Elector, func() bool, error) {
	if !elect {
		return nil, func() bool { return true }, nil
	}
	elector, err := leader.New(lcfg, log.WithName("leader"))
	if err != nil {
		return nil, nil, err
	}
	return elector, elector.Leading, nil
}

// listenIfAsked serves the metrics and health endpoint when --metrics-address gave one.
func listenIfAsked(ctx context.Context, srv metrics.Server, log logr.Logger) error {
	if srv.Address == "" {
		return nil
	}
	return srv.Listen(ctx, log)
}
