package cluster

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"
)

// A real run of the v0.2.0 suite's binary against an API server that
// refuses connections: the suite's setup fails (testify's report).
const npapiSetupFailure = `=== RUN   TestConformance
    conformance_test.go:62: Running conformance tests with cleanup: true
         debug: false
         enable all features: false 
         supported features: [ClusterNetworkPolicy,ClusterNetworkPolicyNamedPorts]
         exempt features: []
    suite.go:157: Test Setup: Applying base manifests
    apply.go:144: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/utils/kubernetes/apply.go:144
        	            				/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/utils/suite/suite.go:158
        	            				/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/conformance_test.go:75
        	Error:      	Received unexpected error:
        	            	failed to get server groups: Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused
        	Test:       	TestConformance
        	Messages:   	error getting resource
--- FAIL: TestConformance (0.00s)
FAIL
`

// A real run of the v0.2.0 binary with -exempt-features=ClusterNetworkPolicy
// and the -test.skip of a kernel without SCTP (cut: the admin tier's first
// tests): the tests skip themselves, the SCTP ones are not run at all.
const npapiSkips = `=== RUN   TestConformance
    conformance_test.go:62: Running conformance tests with cleanup: true
         debug: false
         enable all features: false 
         supported features: []
         exempt features: [ClusterNetworkPolicy]
=== RUN   TestConformance/CNPAdminTierEgressNamedPort
    suite.go:210: Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicy
=== RUN   TestConformance/CNPAdminTierEgressNodePeers
    suite.go:210: Skipping CNPAdminTierEgressNodePeers: suite does not support ClusterNetworkPolicy
=== RUN   TestConformance/CNPAdminTierEgressTCP
    suite.go:210: Skipping CNPAdminTierEgressTCP: suite does not support ClusterNetworkPolicy
--- PASS: TestConformance (0.01s)
    --- SKIP: TestConformance/CNPAdminTierEgressNamedPort (0.00s)
    --- SKIP: TestConformance/CNPAdminTierEgressNodePeers (0.00s)
    --- SKIP: TestConformance/CNPAdminTierEgressTCP (0.00s)
PASS
`

// Passes and a failed check in go test -v's format, the failure as the
// suite's PokeServer reports one (its logs, then require.Eventually's and
// assert.True's reports), with a klog line from another goroutine between.
const npapiMixed = `=== RUN   TestConformance
    suite.go:157: Test Setup: Applying base manifests
    suite.go:174: Test Setup: Ensuring Namespaces and Pods from base manifests are ready
=== RUN   TestConformance/CNPAdminTierIngressTCP
    suite.go:237: Applying base/admin_tier/standard-ingress-tcp-rules.yaml
=== RUN   TestConformance/CNPAdminTierIngressTCP/Should_support_an_'allow-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected
=== RUN   TestConformance/CNPAdminTierIngressTCP/Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected
    helper.go:106: FAILED Command was [/agnhost connect --timeout=3s --protocol=tcp 10.244.1.5:80]
    helper.go:108: Expected connection to fail from network-policy-conformance-ravenclaw/luna-lovegood-0 to 10.244.1.5, but instead it successfully connected.
I1126 03:39:02.123456   12345 reflector.go:376] Caches populated for *v1.Pod
    helper.go:70: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/utils/kubernetes/helper.go:70
        	            				/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/tests/admin-network-policy-standard-ingress-tcp-rules.go:84
        	Error:      	Condition never satisfied
        	Test:       	TestConformance/CNPAdminTierIngressTCP/Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected
    helper.go:74: 
        	Error Trace:	/root/go/pkg/mod/sigs.k8s.io/network-policy-api@v0.2.0/conformance/utils/kubernetes/helper.go:74
        	Error:      	Should be true
        	Test:       	TestConformance/CNPAdminTierIngressTCP/Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected
=== RUN   TestConformance/CNPAdminTierIngressUDP
=== RUN   TestConformance/CNPAdminTierIngressUDP/Should_support_an_'allow-ingress'_policy_for_UDP_protocol_at_the_specified_port
--- FAIL: TestConformance (75.21s)
    --- FAIL: TestConformance/CNPAdminTierIngressTCP (21.50s)
        --- PASS: TestConformance/CNPAdminTierIngressTCP/Should_support_an_'allow-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected (1.20s)
        --- FAIL: TestConformance/CNPAdminTierIngressTCP/Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected (13.31s)
    --- PASS: TestConformance/CNPAdminTierIngressUDP (3.40s)
        --- PASS: TestConformance/CNPAdminTierIngressUDP/Should_support_an_'allow-ingress'_policy_for_UDP_protocol_at_the_specified_port (2.02s)
FAIL
`

func parse(t *testing.T, s string) []*goTest {
	t.Helper()
	tests, err := parseGoTestV(strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return tests
}

func TestParseGoTestV(t *testing.T) {
	for _, tc := range []struct {
		name, output string
		want         []string // name=status in the order they started
	}{
		{"setup failure", npapiSetupFailure, []string{"TestConformance=failed"}},
		{"skips", npapiSkips, []string{"TestConformance=passed", "TestConformance/CNPAdminTierEgressNamedPort=skipped",
			"TestConformance/CNPAdminTierEgressNodePeers=skipped", "TestConformance/CNPAdminTierEgressTCP=skipped"}},
		{"mixed", npapiMixed, []string{"TestConformance=failed", "TestConformance/CNPAdminTierIngressTCP=failed",
			"TestConformance/CNPAdminTierIngressTCP/Should_support_an_'allow-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected=passed",
			"TestConformance/CNPAdminTierIngressTCP/Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected=failed",
			"TestConformance/CNPAdminTierIngressUDP=passed",
			"TestConformance/CNPAdminTierIngressUDP/Should_support_an_'allow-ingress'_policy_for_UDP_protocol_at_the_specified_port=passed"}},
		{"cut short", "=== RUN   TestConformance\n=== RUN   TestConformance/CNPAdminTierGress\npanic: test timed out after 2h0m0s\n",
			[]string{"TestConformance=", "TestConformance/CNPAdminTierGress="}},
	} {
		var got []string
		for _, r := range parse(t, tc.output) {
			got = append(got, r.Name+"="+r.Status)
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	mixed := parse(t, npapiMixed)
	if mixed[3].Seconds != 13.31 {
		t.Errorf("seconds %v, want 13.31", mixed[3].Seconds)
	}
}

func TestFailureMessage(t *testing.T) {
	for _, tc := range []struct {
		name, output string
		index        int
		want         string
	}{
		{"setup", npapiSetupFailure, 0, `Test Setup: Applying base manifests: Received unexpected error: failed to get server groups: ` +
			`Get "https://127.0.0.1:1/api": dial tcp 127.0.0.1:1: connect: connection refused (error getting resource)`},
		{"probe", npapiMixed, 3, "Expected connection to fail from network-policy-conformance-ravenclaw/luna-lovegood-0 to 10.244.1.5, " +
			"but instead it successfully connected.: Condition never satisfied"},
		{"skip reason", npapiSkips, 1, "Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicy"},
	} {
		if got := oneLine(failureMessage(parse(t, tc.output)[tc.index].Output)); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestNPAPIReport(t *testing.T) {
	for _, tc := range []struct {
		name, output string
		notRun       []string
		failed       bool
		has          []string
	}{
		{"setup failure", npapiSetupFailure, nil, true, []string{
			"FAILED          -   TestConformance (the suite itself: its setup, or the binary stopped): Test Setup: Applying base manifests: Received unexpected error",
			"0 passed, 0 failed, 0 skipped in 2s; checks: 0 passed, 0 failed, 0 skipped"}},
		{"skips, SCTP not run", npapiSkips, []string{"CNPAdminTierEgressSCTP", "CNPAdminTierEgressNodePeers/Should support a 'deny-egress' rule policy for egress-node-peer"}, false, []string{
			"SKIPPED       0.0s  CNPAdminTierEgressNamedPort\n               Skipping CNPAdminTierEgressNamedPort: suite does not support ClusterNetworkPolicy",
			"SKIPPED         -   CNPAdminTierEgressSCTP (not run: no SCTP)",
			"SKIPPED         -   CNPAdminTierEgressNodePeers/Should_support_a_'deny-egress'_rule_policy_for_egress-node-peer (not run: no SCTP)",
			"0 passed, 0 failed, 4 skipped in 2s; checks: 0 passed, 0 failed, 1 skipped"}},
		{"a failed check", npapiMixed, nil, true, []string{
			"FAILED       21.5s  CNPAdminTierIngressTCP\n               Should_support_an_'deny-ingress'_policy_for_TCP_protocol;_ensure_rule_ordering_is_respected: Expected connection to fail",
			"PASSED        3.4s  CNPAdminTierIngressUDP",
			"1 passed, 1 failed, 0 skipped in 2s; checks: 2 passed, 1 failed, 0 skipped"}},
		{"cut short", "=== RUN   TestConformance\n=== RUN   TestConformance/CNPAdminTierGress\n    suite.go:237: Applying base/admin_tier/standard-gress-rules-combined.yaml\npanic: test timed out after 2h0m0s\n", nil, true, []string{
			"UNFINISHED    0.0s  CNPAdminTierGress\n               Applying base/admin_tier/standard-gress-rules-combined.yaml",
			"0 passed, 0 failed, 0 skipped, 1 unfinished in 2s"}},
	} {
		report, failed := npapiReport(parse(t, tc.output), tc.notRun, "no SCTP", 2*time.Second)
		if failed != tc.failed {
			t.Errorf("%s: failed %v, want %v:\n%s", tc.name, failed, tc.failed, report)
		}
		for _, s := range tc.has {
			if !strings.Contains(report, s) {
				t.Errorf("%s: report lacks %q:\n%s", tc.name, s, report)
			}
		}
	}
}

func TestNPAPIArgs(t *testing.T) {
	s := NPAPISuites[0]
	got := strings.Join(s.Args(true, ""), " ")
	want := "-test.run ^TestConformance$ -test.v -test.timeout 2h -supported-features=ClusterNetworkPolicy,ClusterNetworkPolicyNamedPorts,ClusterNetworkPolicyEgressNodePeers -cleanup-base-resources=true"
	if got != want || s.Binary(true) != "npapi-conformance-v0.2.0" {
		t.Errorf("with SCTP: %s %s\nwant %s", s.Binary(true), got, want)
	}
	args := s.Args(false, "CNPAdminTierIngressTCP")
	if args[1] != "^TestConformance$/CNPAdminTierIngressTCP" || s.Binary(false) != "npapi-conformance-v0.2.0-nosctp" {
		t.Errorf("without SCTP, narrowed: %s %v", s.Binary(false), args)
	}
	i := slices.Index(args, "-test.skip")
	if i < 0 {
		t.Fatalf("without SCTP, no -test.skip: %v", args)
	}
	// Alternatives at the top, levels by slashes (testing's own syntax),
	// each level anchored; a check's name as t.Run reports it.
	alts := strings.Split(args[i+1], "|")
	if len(alts) != len(s.SCTP) || alts[0] != "^TestConformance$/^CNPAdminTierEgressSCTP$" ||
		!slices.Contains(alts, `^TestConformance$/^CNPBaselineTierEgressNodePeers$/^Should_support_a_'deny-egress'_rule_policy_for_egress-node-peer$`) {
		t.Errorf("-test.skip %s", args[i+1])
	}
	for _, s := range NPAPISuites {
		if strings.Contains(strings.Join(s.Features, ","), "DomainName") || len(s.NotClaimed) == 0 {
			t.Errorf("%s: domain names must stay out of the features, named as not claimed: %v %v", s.Version, s.Features, s.NotClaimed)
		}
	}
}

func TestSelectNPAPISuites(t *testing.T) {
	for spec, want := range map[string]string{"all": "v0.2.0 v0.1.7", "none": "", "": "", "v0.1.7": "v0.1.7", "v0.1.7,v0.2.0": "v0.1.7 v0.2.0"} {
		suites, _, err := SelectNPAPISuites(spec)
		var got []string
		for _, s := range suites {
			got = append(got, s.Version)
		}
		if err != nil || strings.Join(got, " ") != want {
			t.Errorf("%q: %v %v, want %s", spec, got, err, want)
		}
	}
	if _, _, err := SelectNPAPISuites("v0.1.8"); err == nil {
		t.Error("an unknown version was accepted")
	}
}

// Each suite's table matches its module (when the module cache holds it):
// the tools module pins that version, every feature claimed is one the
// suite defines, and the SCTP checks are exactly the tests and checks whose
// code probes SCTP (a whole test when all its checks do).
func TestNPAPISuitesMatchModules(t *testing.T) {
	cache, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range NPAPISuites {
		mod, err := os.ReadFile(filepath.Join("..", "tools", "npapi-"+s.Version, "go.mod"))
		if err != nil {
			t.Fatal(err)
		}
		if !regexp.MustCompile(`(?m)^\s*(require\s+)?sigs\.k8s\.io/network-policy-api ` + regexp.QuoteMeta(s.Version) + `\s*$`).Match(mod) {
			t.Errorf("test/tools/npapi-%s/go.mod does not pin network-policy-api %s", s.Version, s.Version)
		}
		dir := filepath.Join(strings.TrimSpace(string(cache)), "sigs.k8s.io", "network-policy-api@"+s.Version, "conformance")
		if _, err := os.Stat(dir); err != nil {
			t.Logf("%s: module not in the module cache (%v); not compared", s.Version, err)
			continue
		}
		features, err := os.ReadFile(filepath.Join(dir, "utils", "suite", "features.go"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range s.Features {
			if !strings.Contains(string(features), `SupportedFeature = "`+f+`"`) {
				t.Errorf("%s: feature %s is not one of the suite's", s.Version, f)
			}
		}
		files, _ := filepath.Glob(filepath.Join(dir, "tests", "*.go"))
		var want []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, sctpProbes(string(b))...)
		}
		got := slices.Clone(s.SCTP)
		sort.Strings(got)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s: SCTP checks\n got %q\nwant %q (from the module's tests)", s.Version, got, want)
		}
	}
}

var (
	shortNameRE = regexp.MustCompile(`ShortName:\s*"([^"]+)"`)
	subtestRE   = regexp.MustCompile(`t\.Run\("([^"]+)"`)
)

// sctpProbes reads a file of the suite's tests: the tests (ShortName) all of
// whose checks probe SCTP, and the checks (ShortName/name) that do in the
// others.
func sctpProbes(src string) []string {
	var out []string
	short, check := "", ""
	var checks, probing []string
	flush := func() {
		if short == "" {
			return
		}
		if len(probing) > 0 && len(probing) == len(checks) {
			out = append(out, short)
		} else {
			for _, c := range probing {
				out = append(out, short+"/"+c)
			}
		}
	}
	for _, line := range strings.Split(src, "\n") {
		if m := shortNameRE.FindStringSubmatch(line); m != nil {
			flush()
			short, check, checks, probing = m[1], "", nil, nil
		}
		if m := subtestRE.FindStringSubmatch(line); m != nil {
			check = m[1]
			checks = append(checks, check)
		}
		if strings.Contains(line, `"sctp"`) && check != "" && !slices.Contains(probing, check) {
			probing = append(probing, check)
		}
	}
	flush()
	return out
}
