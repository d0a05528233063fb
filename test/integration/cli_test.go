package integration

import (
	"context"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func TestBadFlagsExitTwoNamingTheFlag(t *testing.T) {
	bin := harness.Binary(t, "ovnkube")
	tests := []struct {
		args []string
		flag string
	}{
		{[]string{"master"}, "--nb-address"},
		{[]string{"master", "--nb-address", "http://x"}, "--nb-address"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.1.0/16"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/16/33"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--join-subnet", "10.244.0.0/24"}, "--join-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--service-cidr", "nope"}, "--service-cidr"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/16/24,10.245.0.0/16/24"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/56"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/24/24"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "unix:/x", "--service-cidr", "10.96.0.0/16,10.97.0.0/16"}, "--service-cidr"},
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--join-subnet", "100.64.0.0/16"}, "--join-subnet"},
		{[]string{"node", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "unix:/x", "--kubeconfig", "/x",
			"--service-cidr", "fd00:10:96::/112,fd00:10:97::/112"}, "--service-cidr"},
		{[]string{"master", "--nb-address", "unix:/x", "--kube-api-qps", "0"}, "--kube-api-qps"},
		{[]string{"master", "--nb-address", "unix:/x", "--pod-workers", "0"}, "--pod-workers"},
		{[]string{"master", "--bogus"}, "bogus"},
		{[]string{"master", "--nb-address", "unix:/x", "--k8s-apiserver", "10.0.0.10:6443"}, "--k8s-apiserver"},
		{[]string{"master", "--nb-address", "unix:/x", "--k8s-apiserver", "http://10.0.0.10:6443"}, "--k8s-apiserver"}, // the service account token in clear
		{[]string{"master", "--nb-address", "unix:/x", "--cluster-subnet", "10.244.0.0/16/-1"}, "--cluster-subnet"},
		{[]string{"master", "--nb-address", "tcp:127.0.0.1:http"}, "--nb-address"},
		{[]string{"minion-init", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "tcp:127.0.0.1:66420"}, "--sb-address"},
		{[]string{"master", "--nb-address", "ssl:127.0.0.1:6641"}, "--nb-client-cert"},
		{[]string{"master-init", "--nb-address", "ssl:127.0.0.1:6641", "--node-name", "m", "--master-switch-subnet", "10.244.0.0/24"}, "--nb-client-cert"},
		{[]string{"gateway-init", "--nb-address", "ssl:127.0.0.1:6641", "--node-name", "n", "--bridge-interface", "breth0", "--physical-ip", "172.18.0.2/24",
			"--nb-client-cert", "/nonexistent", "--nb-client-privkey", "/nonexistent", "--nb-client-cacert", "/nonexistent"}, "--nb-client-cert"},
		{[]string{"minion-init", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "ssl:127.0.0.1:6642"}, "--sb-client-cert"},
		{[]string{"node", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "unix:/x", "--kubeconfig", "/x",
			"--gateway-bridge", "breth0"}, "--physical-ip"},
		{[]string{"node", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "unix:/x", "--kubeconfig", "/x",
			"--bridge-interface", "breth0", "--physical-ip", "172.18.0.2"}, "--physical-ip"},
		{[]string{"gateway-init", "--node-name", "n", "--bridge-interface", "breth0", "--physical-ip", "172.18.0.2/24", "--default-gw", "x"}, "--default-gw"},
		{[]string{"master-init", "--nb-address", "unix:/x", "--node-name", "m"}, "--master-switch-subnet"},
		{[]string{"master-init", "--nb-address", "unix:/x", "--node-name", "m", "--master-switch-subnet", "10.99.0.0/24"}, "--master-switch-subnet"},
		{[]string{"--loglevel", "-1", "master"}, "--loglevel"},
		{[]string{"master", "--loglevel", "-3"}, "--loglevel"},
		{[]string{"master", "--nb-address", "unix:/x", "--leader-elect-lease-duration", "5s"}, "--leader-elect-lease-duration"},
		{[]string{"master", "--nb-address", "unix:/x", "--leader-elect-retry-period", "0s"}, "--leader-elect-retry-period"},
		{[]string{"master", "--nb-address", "unix:/x", "--leader-elect-renew-deadline", "1s"}, "--leader-elect-renew-deadline"},
		{[]string{"master", "--nb-address", "unix:/x", "--leader-elect-resource-namespace", ""}, "--leader-elect-resource-namespace"},
		{[]string{"master", "--nb-address", "unix:/x", "--enable-pprof"}, "--enable-pprof"},
		{[]string{"master", "--nb-address", "unix:/x", "--metrics-address", "127.0.0.1:1", "--pprof-address", "127.0.0.1:2"}, "--pprof-address"},
		{[]string{"node", "--node-name", "n", "--encap-ip", "10.0.0.1", "--sb-address", "unix:/x", "--kubeconfig", "/x", "--enable-pprof"}, "--enable-pprof"},
	}
	for _, tt := range tests {
		out, err := exec.Command(bin, tt.args...).CombinedOutput()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("ovnkube %v: exit %v, want status 2; output:\n%s", tt.args, err, out)
			continue
		}
		if !strings.Contains(string(out), tt.flag) {
			t.Errorf("ovnkube %v: message does not name %s:\n%s", tt.args, tt.flag, out)
		}
	}
}

// The README's Quick start on a cluster without the leader Lease's
// namespace: the master exits 2 at once, saying once what is missing and the
// ways out, instead of retrying (and logging) four times a second forever.
func TestMasterWithoutLeaseNamespaceSaysWhyAndExits(t *testing.T) {
	bin := harness.Binary(t, "ovnkube")
	kube := harness.StartKubeAPI(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "master", "--kubeconfig", kube.Kubeconfig, "--nb-address", "unix:/nonexistent",
		"--leader-elect-resource-namespace", "not-created").CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 2 {
		t.Fatalf("exit %v, want status 2; output:\n%s", err, out)
	}
	if n := strings.Count(string(out), `namespace "not-created" does not exist`); n != 1 {
		t.Errorf("what is missing said %d times, want once; output:\n%s", n, out)
	}
	for _, way := range []string{"kubectl create namespace not-created", "an existing namespace with --leader-elect-resource-namespace", "--leader-elect=false"} {
		if !strings.Contains(string(out), way) {
			t.Errorf("the way out %q not said; output:\n%s", way, out)
		}
	}
}

func TestHelpDocumentsEveryCommand(t *testing.T) {
	bin := harness.Binary(t, "ovnkube")
	out, err := exec.Command(bin, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("--help: %v\n%s", err, out)
	}
	for _, cmd := range []string{"master", "master-init"} {
		if !strings.Contains(string(out), cmd) {
			t.Errorf("--help does not list %s", cmd)
		}
		sub, err := exec.Command(bin, cmd, "--help").CombinedOutput()
		if err != nil || !strings.Contains(string(sub), "--nb-address") {
			t.Errorf("%s --help: %v\n%s", cmd, err, sub)
		}
	}
}
