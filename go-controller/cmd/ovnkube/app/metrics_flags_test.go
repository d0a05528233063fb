package app

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
)

// parseMetricsFlags runs metricsServer on args.
func parseMetricsFlags(t *testing.T, args ...string) (metrics.Server, error) {
	t.Helper()
	var srv metrics.Server
	var err error
	app := &cli.App{Flags: metricsFlags(""), Action: func(c *cli.Context) error {
		srv, err = metricsServer(c)
		return nil
	}}
	if runErr := app.Run(append([]string{"ovnkube"}, args...)); runErr != nil {
		t.Fatal(runErr)
	}
	return srv, err
}

// The endpoint is authenticated, over HTTPS, wherever it can be reached
// from another host, unless --metrics-auth=none says otherwise; on loopback
// it is open by default (the host's own scraper or an authenticating proxy).
func TestMetricsAuthDefaultsToDelegatedBeyondLoopback(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		delegated bool
	}{
		{[]string{"--metrics-address", "127.0.0.1:9409"}, false},
		{[]string{"--metrics-address", "[::1]:9409"}, false},
		{[]string{"--metrics-address", "localhost:9409"}, false},
		{[]string{"--metrics-address", "0.0.0.0:9409"}, true},
		{[]string{"--metrics-address", ":9409"}, true},
		{[]string{"--metrics-address", "10.0.0.5:9409"}, true},
		{[]string{"--metrics-address", "127.0.0.1:9409", "--metrics-auth", "delegated"}, true},
		{[]string{"--metrics-address", "0.0.0.0:9409", "--metrics-auth", "none"}, false},
		{[]string{"--pprof-address", "0.0.0.0:6060"}, true},
		{nil, false},
	} {
		srv, err := parseMetricsFlags(t, tc.args...)
		if err != nil {
			t.Errorf("%v: %v", tc.args, err)
			continue
		}
		if srv.Delegated != tc.delegated || (srv.TLS != nil) != tc.delegated {
			t.Errorf("%v: delegated %v, HTTPS %v; want both %v", tc.args, srv.Delegated, srv.TLS != nil, tc.delegated)
		}
	}
}

func TestMetricsAuthFlagsRefusedNamingTheFlag(t *testing.T) {
	dir := t.TempDir()
	crt := filepath.Join(dir, "tls.crt")
	if err := os.WriteFile(crt, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--metrics-address", "0.0.0.0:9409", "--metrics-auth", "token"}, "--metrics-auth"},
		{[]string{"--metrics-address", "0.0.0.0:9409", "--metrics-tls-cert-file", crt}, "--metrics-tls-cert-file"},
		{[]string{"--metrics-address", "0.0.0.0:9409", "--metrics-tls-cert-file", crt, "--metrics-tls-private-key-file", crt}, "--metrics-tls-cert-file"},
		{[]string{"--metrics-address", "0.0.0.0:9409", "--metrics-auth", "none", "--metrics-tls-cert-file", crt, "--metrics-tls-private-key-file", crt}, "--metrics-tls-cert-file"},
	} {
		_, err := parseMetricsFlags(t, tc.args...)
		if err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("%v: %v, want an error naming %s", tc.args, err, tc.flag)
		}
	}
}
