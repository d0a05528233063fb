package app

import (
	"strings"
	"testing"
	"time"
)

// ovnkube diff takes the master's flags and its own; bad values exit 2
// naming the flag, before anything is read.
func TestDiffFlagsRefusedNamingTheFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		flag string
	}{
		{[]string{"--output", "yaml"}, "--output"},
		{[]string{"--settle", "-1s"}, "--settle"},
		{[]string{"--timeout", "0s"}, "--timeout"},
		{[]string{"--cluster-subnet", "10.244.0.0"}, "--cluster-subnet"},
	} {
		args := append([]string{"diff", "--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent", "--dns-servers", "10.96.0.10"}, tc.args...)
		status, out := runMain(t, 10*time.Second, args...)
		if status != exitUsage || !strings.Contains(out, tc.flag) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %s", tc.args, status, out, tc.flag)
		}
	}
	// An unreachable NB is trouble (2), not a difference (1).
	status, out := runMain(t, 20*time.Second, "diff", "--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent", "--dns-servers", "10.96.0.10", "--timeout", "2s")
	if status != 2 || !strings.Contains(out, "ovnkube diff:") {
		t.Errorf("unreachable: exit %d, output %q; want 2 and the reason", status, out)
	}
}

// ovnkube trace: wrong arguments and flags exit 2 naming what is wrong;
// flags may follow the source and destination.
func TestTraceArgumentsRefused(t *testing.T) {
	base := []string{"--kubeconfig", "/nonexistent", "--nb-address", "unix:/nonexistent", "--sb-address", "unix:/nonexistent"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"ns/a"}, "a source and a destination"},
		{[]string{"ns/a", "ns/b", "--tcp", "70000"}, "--tcp"},
		{[]string{"ns/a", "ns/b", "--tcp", "80", "--udp", "53"}, "one of --tcp, --udp and --icmp"},
		{[]string{"ns/a", "ns/b", "-o", "yaml"}, "--output"},
	} {
		status, out := runMain(t, 10*time.Second, append(append([]string{"trace"}, base...), tc.args...)...)
		if status != exitUsage || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d, output %q; want 2 naming %s", tc.args, status, out, tc.want)
		}
	}
	if got := flagsFirst([]string{"ns/a", "svc/ns/web", "--tcp", "80", "--raw", "-o", "json"}, map[string]bool{"raw": true}); strings.Join(got, " ") != "--tcp 80 --raw -o json ns/a svc/ns/web" {
		t.Errorf("flagsFirst = %q", got)
	}
}
