package app

import (
	"context"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestOneProcAfterSync(t *testing.T) {
	was := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })

	synced := make(chan struct{})
	done := make(chan struct{})
	go func() { oneProcAfterSync(context.Background(), synced, logr.Discard()); close(done) }()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d before the startup sync, want 2 (unchanged)", got)
	}
	close(synced)
	<-done
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after the startup sync, want 1", got)
	}

	runtime.GOMAXPROCS(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	oneProcAfterSync(ctx, make(chan struct{}), logr.Discard())
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d after a stop before the sync, want 2 (unchanged)", got)
	}

	t.Setenv("GOMAXPROCS", "2")
	oneProcAfterSync(context.Background(), synced, logr.Discard())
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d with GOMAXPROCS=2 in the environment, want 2 (the environment wins)", got)
	}
}

// Bad --dns-tap-address and --dns-service values exit 2 naming the flag.
func TestDNSTapFlagsRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--dns-servers", "10.96.0.10", "--dns-tap-address", "6053"}, "--dns-tap-address"},
		{[]string{"--dns-servers", "10.96.0.10", "--dns-tap-address", "unix:relative.sock"}, "--dns-tap-address"},
		{[]string{"--dns-servers", "10.96.0.10", "--dns-service", "kube-dns"}, "--dns-service"},
		{[]string{"--dns-servers", "10.96.0.10", "--dns-service", "kube-system/"}, "--dns-service"},
	} {
		args := append([]string{"master", "--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent"}, tc.args...)
		status, out := runMain(t, 10*time.Second, args...)
		if status != exitUsage || !strings.Contains(out, tc.flag) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %s", tc.args, status, out, tc.flag)
		}
	}
}

// A --gc-cpu-budget outside 0–99 exits 2 naming the flag.
func TestGCBudgetFlagRefusedNamingTheFlag(t *testing.T) {
	for _, v := range []string{"-1", "100", "x"} {
		status, out := runMain(t, 10*time.Second, "master", "--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent", "--gc-cpu-budget", v)
		if status != exitUsage || !strings.Contains(out, "gc-cpu-budget") {
			t.Errorf("--gc-cpu-budget %s: exit %d, output %q; want 2 naming the flag", v, status, out)
		}
	}
}

// A --northd-backoff-interval below 0, above 5 s, not in whole milliseconds
// or not a duration exits 2 naming the flag.
func TestNorthdBackoffFlagRefusedNamingTheFlag(t *testing.T) {
	for _, v := range []string{"-1ms", "6s", "1500us", "300"} {
		status, out := runMain(t, 10*time.Second, "master", "--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent", "--northd-backoff-interval", v)
		if status != exitUsage || !strings.Contains(out, "northd-backoff-interval") {
			t.Errorf("--northd-backoff-interval %s: exit %d, output %q; want 2 naming the flag", v, status, out)
		}
	}
}

// Bad zone mode flags exit 2 naming the flag.
func TestZoneFlagsRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		cmd  string
		args []string
		flag string
	}{
		{"master", []string{"--zone", "Zone_A"}, "--zone"},
		{"master", []string{"--zone", "a", "--transit-subnet", "100.88.0.0/16,100.89.0.0/16"}, "--transit-subnet"},
		{"master", []string{"--zone", "a", "--transit-subnet", "10.244.0.0/24"}, "--transit-subnet"},
		{"master", []string{"--zone", "a", "--transit-subnet", "fd97::/64"}, "--transit-subnet"},
		{"master", []string{"--ic-db-address", "ptcp:6645"}, "--ic-db-address"},
		{"node", []string{"--node-name", "n1", "--encap-ip", "10.0.0.1", "--sb-address", "unix:/nonexistent", "--zone", "-a"}, "--zone"},
		{"cluster-manager", []string{"--cluster-subnet", "10.244.0.0/33"}, "--cluster-subnet"},
		{"cluster-manager", []string{"--node-workers", "0"}, "--node-workers"},
		{"cluster-manager", []string{"--ic-nb-address", "nowhere"}, "--ic-nb-address"},
	} {
		args := append([]string{tc.cmd, "--kubeconfig", "/nonexistent"}, tc.args...)
		if tc.cmd == "master" {
			args = append(args, "--nb-address", "unix:/nonexistent")
		}
		status, out := runMain(t, 10*time.Second, args...)
		if status != exitUsage || !strings.Contains(out, tc.flag) {
			t.Errorf("%s %v: exit %d, output %q; want 2 naming %s", tc.cmd, tc.args, status, out, tc.flag)
		}
	}
}
