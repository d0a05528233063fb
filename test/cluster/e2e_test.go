package cluster

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A ginkgo JUnit report: a pass, a failure, a test that skipped itself, a
// spec not selected by focus, and a suite node.
const junitSample = `<?xml version="1.0" encoding="UTF-8"?>
<testsuites tests="5">
  <testsuite name="Kubernetes e2e suite" tests="5">
    <testcase name="[SynchronizedBeforeSuite]" classname="Kubernetes e2e suite" status="passed" time="1"></testcase>
    <testcase name="[It] [sig-network] DNS should provide DNS for services [Conformance]" status="passed" time="12.5"></testcase>
    <testcase name="[It] [sig-network] Proxy should proxy [Conformance]" status="failed" time="16.6">
      <failure message="503 from /proxy" type="failed">details</failure>
    </testcase>
    <testcase name="[It] [sig-network] HostPort works [Conformance]" status="skipped" time="0.1">
      <skipped message="skipped - no two nodes"></skipped>
    </testcase>
    <testcase name="[It] [sig-apps] Deployment scales" status="skipped" time="0">
      <skipped message="skipped"></skipped>
    </testcase>
  </testsuite>
</testsuites>`

func TestReadJUnit(t *testing.T) {
	p := filepath.Join(t.TempDir(), "junit.xml")
	if err := os.WriteFile(p, []byte(junitSample), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := readJUnit(p)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, r := range got {
		names = append(names, r.Status+": "+r.Name)
	}
	want := []string{
		"passed: [sig-network] DNS should provide DNS for services [Conformance]",
		"skipped: [sig-network] HostPort works [Conformance]",
		"failed: [sig-network] Proxy should proxy [Conformance]",
	}
	if strings.Join(names, "\n") != strings.Join(want, "\n") {
		t.Fatalf("results:\n%s\nwant:\n%s", strings.Join(names, "\n"), strings.Join(want, "\n"))
	}
	table := resultTable(got, 90*time.Second)
	for _, s := range []string{"FAILED", "503 from /proxy", "1 passed, 1 failed, 1 skipped in 1m30s"} {
		if !strings.Contains(table, s) {
			t.Errorf("table lacks %q:\n%s", s, table)
		}
	}
}

func TestReadJUnitMissing(t *testing.T) {
	if _, err := readJUnit(filepath.Join(t.TempDir(), "none.xml")); err == nil {
		t.Fatal("a missing report read without error")
	}
}

func TestNodesAndAddresses(t *testing.T) {
	c := New(Config{Dir: "/x", Workers: 2})
	var got []string
	for _, n := range c.Nodes {
		got = append(got, n.Name+"="+n.IP)
	}
	want := "ovnkc-control-plane=172.18.0.2 ovnkc-worker=172.18.0.3 ovnkc-worker2=172.18.0.4"
	if strings.Join(got, " ") != want || !c.ControlPlane().ControlPlane || c.APIServer() != "https://172.18.0.2:6443" {
		t.Fatalf("nodes %v, API %s", got, c.APIServer())
	}
}

// Each -ip-family gives the Kubernetes components and ovnkube the ranges and
// node addresses of its families, the primary first.
func TestFamilies(t *testing.T) {
	for _, tc := range []struct {
		family, subnets, services, nodeIPs, physical, dns string
	}{
		{IPv4, "10.244.0.0/16/24", "10.96.0.0/16", "172.18.0.3", "172.18.0.3/16", "10.96.0.10"},
		{IPv6, "fd00:10:244::/48/64", "fd00:10:96::/112", "fc00:f853:ccd:e793::3", "fc00:f853:ccd:e793::3/64", "fd00:10:96::a"},
		{Dual, "10.244.0.0/16/24,fd00:10:244::/48/64", "10.96.0.0/16,fd00:10:96::/112", "172.18.0.3,fc00:f853:ccd:e793::3",
			"172.18.0.3/16,fc00:f853:ccd:e793::3/64", "10.96.0.10"},
	} {
		c := New(Config{Dir: "/x", Workers: 1, IPFamily: tc.family})
		n := c.Nodes[1]
		got := []string{c.clusterSubnetFlag(), c.serviceCIDRFlag(), strings.Join(c.nodeIPs(n), ","), c.physicalIPs(n), c.dnsIP()}
		want := []string{tc.subnets, tc.services, tc.nodeIPs, tc.physical, tc.dns}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Errorf("%s: got %v, want %v", tc.family, got, want)
		}
		var fams []string
		for _, f := range c.families() {
			fams = append(fams, f.node(n)+"/"+f.external)
		}
		if len(fams) != len(strings.Split(tc.nodeIPs, ",")) {
			t.Errorf("%s: families %v", tc.family, fams)
		}
	}
}

// Up refuses a host that holds another cluster's namespace or cgroup, and
// names what it found.
func TestHostFree(t *testing.T) {
	netns, cgroups := t.TempDir(), t.TempDir()
	if err := os.MkdirAll(filepath.Join(cgroups, "pids", "other"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(netns, "someone-else"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hostFree(netns, cgroups); err != nil {
		t.Fatalf("a host without %s names: %v", prefix, err)
	}
	ul := filepath.Join(netns, prefix+"-underlay")
	if err := os.WriteFile(ul, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := hostFree(netns, cgroups); err == nil || !strings.Contains(err.Error(), ul) {
		t.Fatalf("a left-behind %s: got %v, want an error naming it", ul, err)
	}
	if err := os.Remove(ul); err != nil {
		t.Fatal(err)
	}
	cg := filepath.Join(cgroups, "pids", prefix)
	if err := os.MkdirAll(cg, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := hostFree(netns, cgroups); err == nil || !strings.Contains(err.Error(), cg) {
		t.Fatalf("a left-behind cgroup %s: got %v, want an error naming it", cg, err)
	}
}

// A test that passed only on its retry is found in the e2e log by ginkgo's
// header, with its name.
func TestFlakyTestsNamed(t *testing.T) {
	log := filepath.Join(t.TempDir(), "e2e.log")
	text := "ok line\n• [FLAKEY TEST - TOOK 2 ATTEMPTS TO PASS] [49.5 seconds]\n[sig-network] Conntrack\nproxy implementation should not be vulnerable\nlast\n"
	if err := os.WriteFile(log, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	got := flakyTests(log)
	if len(got) != 1 || !strings.Contains(got[0], "[sig-network] Conntrack / proxy implementation") {
		t.Errorf("flaky tests %q, want the conntrack test named", got)
	}
	if got := flakyTests(filepath.Join(t.TempDir(), "none.log")); got != nil {
		t.Errorf("no log: %q", got)
	}
}
