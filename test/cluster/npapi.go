package cluster

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
)

// SIG Network's network-policy-api conformance suites (issue 34), run on the
// cluster in a box after Kubernetes' e2e tests, in the same bring-up. Each
// is upstream's `go test` package sigs.k8s.io/network-policy-api/conformance
// compiled with `go test -c` from a tools module of its own
// (test/tools/npapi-<version>) into _output/bin/npapi-conformance-<version>;
// docs/conformance.md, "Cluster-wide admin policy (issue 34)".

// NPAPISuite is one version of the suite.
type NPAPISuite struct {
	// Version is the module's, and names the tools module and the binary.
	Version string
	// API is what the suite tests.
	API string
	// Features are its -supported-features: what our engine implements.
	Features []string
	// NotClaimed are the API's features left out of Features, each with
	// its reason (repeated in docs/conformance.md).
	NotClaimed map[string]string
	// SCTP are the suite's tests (ShortName) and checks (ShortName/the
	// subtest's name as t.Run has it) that open SCTP connections: skipped
	// on a kernel without SCTP, where the suite runs from a build whose pods
	// serve no SCTP (hack/npapi nosctp).
	SCTP []string
}

// domainNames is the experimental channel's egress peer by DNS name, which
// neither suite tests (the engine implements it: test/integration's
// TestOVNTraceAdminTiersDualStack).
const domainNamesWhy = "the suite has no test of it; ours: TestOVNTraceAdminTiersDualStack"

// NPAPISuites are the suites `ovnk-cluster conformance` runs, in order.
var NPAPISuites = []NPAPISuite{
	{
		Version:    "v0.2.0",
		API:        "ClusterNetworkPolicy (policy.networking.k8s.io/v1alpha2)",
		Features:   []string{"ClusterNetworkPolicy", "ClusterNetworkPolicyNamedPorts", "ClusterNetworkPolicyEgressNodePeers"},
		NotClaimed: map[string]string{"egress domainNames peers (no feature or test in v0.2.0)": domainNamesWhy},
		SCTP:       sctpChecks("CNPAdminTier", "CNPBaselineTier"),
	},
	{
		// The issue names v0.1.8, which the module proxy does not serve;
		// v0.1.7's apis/v1alpha1 is v0.2.0's.
		Version: "v0.1.7",
		API:     "AdminNetworkPolicy and BaselineAdminNetworkPolicy (policy.networking.k8s.io/v1alpha1)",
		Features: []string{"AdminNetworkPolicy", "BaselineAdminNetworkPolicy",
			"AdminNetworkPolicyNamedPorts", "AdminNetworkPolicyEgressNodePeers",
			"BaselineAdminNetworkPolicyNamedPorts", "BaselineAdminNetworkPolicyEgressNodePeers"},
		NotClaimed: map[string]string{"AdminNetworkPolicy egress domainNames peers (no feature or test in v0.1.7)": domainNamesWhy},
		SCTP:       sctpChecks("AdminNetworkPolicy", "BaselineAdminNetworkPolicy"),
	},
}

// sctpChecks are the tests of both tiers that probe SCTP, the same in both
// versions but for the tiers' prefixes: the SCTP tests, the combined
// ("Gress") and inline CIDR tests, every check of which also probes SCTP,
// and the node peers' deny check (npapi_test.go reads them off the
// modules' sources).
func sctpChecks(admin, baseline string) []string {
	var out []string
	for _, tier := range []string{admin, baseline} {
		out = append(out, tier+"EgressSCTP", tier+"IngressSCTP", tier+"Gress", tier+"EgressInlineCIDRPeers",
			tier+"EgressNodePeers/Should support a 'deny-egress' rule policy for egress-node-peer")
	}
	return out
}

// npapiSCTPWhy is why a kernel without SCTP skips s.SCTP.
const npapiSCTPWhy = "the kernel has no SCTP: the suite's pods cannot serve SCTP (left out of this build of the suite) nor the clients connect over it"

// Binary is the suite's test binary in _output/bin: upstream's, or, for a
// kernel without SCTP, the same built with no SCTP servers in its pods
// (their `agnhost porter` exits at once there, so the pods never become
// ready and the suite's setup fails).
func (s NPAPISuite) Binary(kernelSCTP bool) string {
	if kernelSCTP {
		return "npapi-conformance-" + s.Version
	}
	return "npapi-conformance-" + s.Version + "-nosctp"
}

// npapiTimeout bounds one suite's run (its tests run one after another).
const npapiTimeout = "2h"

// Args are the suite binary's flags; run, if set, selects its tests as
// -test.run's part after TestConformance/ does.
func (s NPAPISuite) Args(kernelSCTP bool, run string) []string {
	sel := "^TestConformance$" // not TestConformanceProfiles
	if run != "" {
		sel += "/" + run
	}
	args := []string{"-test.run", sel, "-test.v", "-test.timeout", npapiTimeout}
	if !kernelSCTP {
		args = append(args, "-test.skip", s.skipPattern())
	}
	return append(args, "-supported-features="+strings.Join(s.Features, ","), "-cleanup-base-resources=true")
}

// skipPattern is a -test.skip matching s.SCTP exactly: alternatives (a
// top-level |) of slash-separated per-level patterns.
func (s NPAPISuite) skipPattern() string {
	var alts []string
	for _, t := range s.SCTP {
		parts := []string{"^TestConformance$"}
		for _, p := range strings.SplitN(t, "/", 2) {
			parts = append(parts, "^"+regexp.QuoteMeta(subtestName(p))+"$")
		}
		alts = append(alts, strings.Join(parts, "/"))
	}
	return strings.Join(alts, "|")
}

// subtestName is a t.Run name as the testing package reports it: spaces
// become underscores.
func subtestName(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) {
			return '_'
		}
		return r
	}, s)
}

// NPAPIConfig selects and places the network-policy-api runs.
type NPAPIConfig struct {
	// Suites is "all" (every suite whose binary is built), "none", or
	// versions separated by commas (each must be built).
	Suites string
	// Run narrows each suite's tests (-test.run after TestConformance/).
	Run string
	Out string // the logs, npapi-<version>.log
}

// SelectNPAPISuites reads NPAPIConfig.Suites; explicit says the versions
// were named (a missing binary is then an error).
func SelectNPAPISuites(spec string) (suites []NPAPISuite, explicit bool, err error) {
	switch spec {
	case "", "none":
		return nil, false, nil
	case "all":
		return NPAPISuites, false, nil
	}
	for _, v := range strings.Split(spec, ",") {
		i := slices.IndexFunc(NPAPISuites, func(s NPAPISuite) bool { return s.Version == v })
		if i < 0 {
			var known []string
			for _, s := range NPAPISuites {
				known = append(known, s.Version)
			}
			return nil, true, fmt.Errorf("no network-policy-api suite %q: want all, none or some of %s", v, strings.Join(known, ","))
		}
		suites = append(suites, NPAPISuites[i])
	}
	return suites, true, nil
}

// NPAPI runs the selected network-policy-api suites one after the other
// inside the control-plane node (as the e2e suite runs) and prints a table
// for each; it fails when a suite had a failure or could not run.
func (c *Cluster) NPAPI(ctx context.Context, cfg NPAPIConfig) error {
	suites, explicit, err := SelectNPAPISuites(cfg.Suites)
	if err != nil {
		return err
	}
	if len(suites) == 0 {
		c.Log("npapi: no network-policy-api suite selected (-npapi %q)", cfg.Suites)
		return nil
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	sctp := kernelHasSCTP()
	var errs []error
	for _, s := range suites {
		if ctx.Err() != nil {
			errs = append(errs, ctx.Err())
			break
		}
		bin := c.bin(s.Binary(sctp))
		if _, err := os.Stat(bin); err != nil {
			if explicit {
				errs = append(errs, fmt.Errorf("npapi %s: %s is not built: run `make npapi-tools`", s.Version, bin))
			} else {
				c.Log("npapi %s: %s is not built; suite not run", s.Version, bin)
			}
			continue
		}
		// Each suite deletes its namespaces when it ends; the next one
		// creates the same names, which a namespace still terminating refuses.
		if err := poll(ctx, 5*time.Minute, "the previous suite's namespaces to be gone", c.noConformanceNamespaces); err != nil {
			errs = append(errs, fmt.Errorf("npapi %s: %w", s.Version, err))
			continue
		}
		if err := c.runNPAPI(ctx, s, bin, sctp, cfg); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// noConformanceNamespaces says whether no network-policy-conformance-*
// namespace is left (nil), or which are.
func (c *Cluster) noConformanceNamespaces() error {
	out, err := c.Exec(c.ControlPlane(), c.bin("kubectl"), "--kubeconfig", Kubeconfig, "get", "namespaces", "-o", "name")
	if err != nil {
		return fmt.Errorf("kubectl get namespaces: %w: %s", err, out)
	}
	var left []string
	for _, ns := range strings.Fields(out) {
		if strings.HasPrefix(ns, "namespace/network-policy-conformance-") {
			left = append(left, strings.TrimPrefix(ns, "namespace/"))
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("still there: %s", strings.Join(left, ", "))
	}
	return nil
}

func (c *Cluster) runNPAPI(ctx context.Context, s NPAPISuite, bin string, sctp bool, cfg NPAPIConfig) error {
	args := s.Args(sctp, cfg.Run)
	logPath := filepath.Join(cfg.Out, "npapi-"+s.Version+".log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	c.Log("npapi %s: %s; features %s", s.Version, s.API, strings.Join(s.Features, ","))
	for what, why := range s.NotClaimed {
		c.Log("npapi %s: not claimed: %s: %s", s.Version, what, why)
	}
	if !sctp {
		c.Log("npapi %s: skipping %s: %s", s.Version, strings.Join(s.SCTP, ", "), npapiSCTPWhy)
	}
	line := "KUBECONFIG=" + Kubeconfig + " " + shellJoin(append([]string{bin}, args...))
	c.Log("npapi %s: in %s: %s; log in %s", s.Version, c.ControlPlane().Name, line, logPath)
	fmt.Fprintf(f, "# in %s: %s\n", c.ControlPlane().Name, line)
	cmd := c.Command(c.ControlPlane(), append([]string{bin}, args...)...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+Kubeconfig)
	cmd.Dir = cfg.Out
	cmd.Stdout, cmd.Stderr = f, f
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return err
	}
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-stopped:
			case <-time.After(30 * time.Second):
				_ = cmd.Process.Kill()
			}
		case <-stopped:
		}
	}()
	runErr := cmd.Wait()
	close(stopped)
	took := time.Since(start)
	lf, err := os.Open(logPath)
	if err != nil {
		return err
	}
	defer lf.Close()
	tests, err := parseGoTestV(lf)
	if err != nil {
		return err
	}
	var notRun []string
	if !sctp {
		notRun = s.SCTP
	}
	report, failed := npapiReport(tests, notRun, npapiSCTPWhy, took)
	c.Log("npapi %s:\n%s", s.Version, report)
	switch {
	case failed:
		return fmt.Errorf("npapi %s: tests failed (details in %s)", s.Version, logPath)
	case runErr != nil:
		return fmt.Errorf("npapi %s: %v\n%s", s.Version, runErr, tail(logPath, 30))
	case len(tests) == 0:
		return fmt.Errorf("npapi %s: no test ran\n%s", s.Version, tail(logPath, 30))
	}
	return nil
}

// shellJoin quotes args for a shell, for the logs.
func shellJoin(args []string) string {
	var out []string
	for _, a := range args {
		if a == "" || strings.ContainsAny(a, " '\"$|^*?()[]{}\\;&<>`!#~") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		out = append(out, a)
	}
	return strings.Join(out, " ")
}

// goTest is one test or subtest of a `go test -v` run.
type goTest struct {
	Name    string // as go test reports it: TestConformance/Short/check_name
	Status  string // passed, failed, skipped; "" if it never finished
	Seconds float64
	Output  []string // the lines it printed (t.Log, failures), as printed
}

var (
	goTestMarker = regexp.MustCompile(`^=== (?:RUN|CONT|NAME|PAUSE)\s+(\S+)\s*$`)
	goTestResult = regexp.MustCompile(`^\s*--- (PASS|FAIL|SKIP): (\S+) \(([0-9.]+)s\)\s*$`)
	goTestLog    = regexp.MustCompile(`^\s+\S+\.go:\d+: ?(.*)$`)
	goTestStatus = map[string]string{"PASS": "passed", "FAIL": "failed", "SKIP": "skipped"}
)

// parseGoTestV reads the output of a test binary run with -test.v: every
// test that started, in order, with its outcome and what it printed.
func parseGoTestV(r io.Reader) ([]*goTest, error) {
	var order []*goTest
	byName := map[string]*goTest{}
	get := func(name string) *goTest {
		t, ok := byName[name]
		if !ok {
			t = &goTest{Name: name}
			byName[name] = t
			order = append(order, t)
		}
		return t
	}
	var current *goTest
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		if m := goTestMarker.FindStringSubmatch(line); m != nil {
			current = get(m[1])
			continue
		}
		if m := goTestResult.FindStringSubmatch(line); m != nil {
			t := get(m[2])
			t.Status = goTestStatus[m[1]]
			t.Seconds, _ = strconv.ParseFloat(m[3], 64)
			continue
		}
		if current != nil && strings.TrimSpace(line) != "" {
			current.Output = append(current.Output, line)
		}
	}
	return order, sc.Err()
}

// failureMessage is what a failed test's output says in one line: its
// last log line before the first failure testify reported, then that
// failure's error and message; or else its last log line.
func failureMessage(out []string) string {
	lastLog := ""
	for i, line := range out {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "Error:"); ok {
			parts := []string{strings.TrimSpace(rest)}
			for _, c := range out[i+1:] {
				if goTestLog.MatchString(c) {
					break // the next log line: the block has ended
				}
				c = strings.TrimSpace(c)
				if m, ok := strings.CutPrefix(c, "Messages:"); ok {
					parts = append(parts, "("+strings.TrimSpace(m)+")")
					break
				}
				if !strings.HasPrefix(c, "Test:") {
					parts = append(parts, c)
				}
			}
			msg := strings.Join(parts, " ")
			if lastLog != "" {
				msg = lastLog + ": " + msg
			}
			return msg
		}
		if m := goTestLog.FindStringSubmatch(line); m != nil && strings.TrimSpace(m[1]) != "" {
			lastLog = strings.TrimSpace(m[1])
		}
	}
	return lastLog
}

// npapiReport is the table of a suite's run: a row per test (the suite's
// ShortNames, in the order they ran), the failed checks of each failed
// test with what they said, the tests and checks we skipped (notRun, each
// for why), and the counts. failed says whether anything failed, the suite
// itself included (its setup, or a test binary that stopped early).
func npapiReport(tests []*goTest, notRun []string, why string, took time.Duration) (report string, failed bool) {
	const root = "TestConformance"
	var b strings.Builder
	count := map[int]map[string]int{1: {}, 2: {}}
	children := map[string][]*goTest{}
	var suite *goTest
	var top []*goTest
	for _, t := range tests {
		switch depth := strings.Count(t.Name, "/"); {
		case t.Name == root:
			suite = t
		case depth == 1 && strings.HasPrefix(t.Name, root+"/"):
			top = append(top, t)
			count[1][statusOrUnfinished(t)]++
		case depth == 2 && strings.HasPrefix(t.Name, root+"/"):
			parent := t.Name[:strings.LastIndex(t.Name, "/")]
			children[parent] = append(children[parent], t)
			count[2][statusOrUnfinished(t)]++
		}
	}
	for _, t := range top {
		status := statusOrUnfinished(t)
		fmt.Fprintf(&b, "%-10s %6.1fs  %s\n", strings.ToUpper(status), t.Seconds, strings.TrimPrefix(t.Name, root+"/"))
		if status == "skipped" {
			fmt.Fprintf(&b, "               %s\n", oneLine(failureMessage(t.Output)))
		}
		if status != "failed" && status != "unfinished" {
			continue
		}
		failedChecks := 0
		for _, ch := range children[t.Name] {
			if s := statusOrUnfinished(ch); s == "failed" || s == "unfinished" {
				failedChecks++
				fmt.Fprintf(&b, "               %s: %s\n", strings.TrimPrefix(ch.Name, t.Name+"/"), oneLine(failureMessage(ch.Output)))
			}
		}
		if failedChecks == 0 {
			fmt.Fprintf(&b, "               %s\n", oneLine(failureMessage(t.Output)))
		}
	}
	for _, n := range notRun {
		fmt.Fprintf(&b, "%-10s %6s   %s (not run: %s)\n", "SKIPPED", "-", subtestName(n), why)
		count[strings.Count(n, "/")+1]["skipped"]++
	}
	suiteFailed := suite == nil || statusOrUnfinished(suite) == "failed" || statusOrUnfinished(suite) == "unfinished"
	if suiteFailed && count[1]["failed"] == 0 && count[1]["unfinished"] == 0 {
		msg := "it never started"
		if suite != nil {
			msg = failureMessage(suite.Output)
		}
		fmt.Fprintf(&b, "%-10s %6s   %s (the suite itself: its setup, or the binary stopped): %s\n", "FAILED", "-", root, oneLine(msg))
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped", count[1]["passed"], count[1]["failed"], count[1]["skipped"])
	if n := count[1]["unfinished"]; n > 0 {
		fmt.Fprintf(&b, ", %d unfinished", n)
	}
	fmt.Fprintf(&b, " in %s; checks: %d passed, %d failed, %d skipped", took.Round(time.Second), count[2]["passed"], count[2]["failed"], count[2]["skipped"])
	if n := count[2]["unfinished"]; n > 0 {
		fmt.Fprintf(&b, ", %d unfinished", n)
	}
	return b.String(), suiteFailed || count[1]["failed"] > 0 || count[1]["unfinished"] > 0 || count[2]["failed"] > 0
}

func statusOrUnfinished(t *goTest) string {
	if t.Status == "" {
		return "unfinished"
	}
	return t.Status
}

// oneLine shortens a message to a line of the table.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// policyCRDs are the files of dist/kubernetes holding CustomResourceDefinitions:
// the network-policy-api's (hack/npapi crds writes them) and EgressFirewall's.
func (c *Cluster) policyCRDs() ([]string, error) {
	files, err := filepath.Glob(filepath.Join(c.Repo, "dist", "kubernetes", "05-crd-*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no dist/kubernetes/05-crd-*.yaml in %s (%v): run make generate", c.Repo, err)
	}
	sort.Strings(files)
	return files, nil
}

// installPolicyCRDs applies the CRDs of dist/kubernetes as an operator
// would and waits until the API serves them, before the master starts.
func (c *Cluster) installPolicyCRDs() error {
	files, err := c.policyCRDs()
	if err != nil {
		return err
	}
	for _, f := range files {
		if err := c.kubectlApply(f); err != nil {
			return err
		}
	}
	return c.waitEstablished(files)
}

func (c *Cluster) kubectlApply(file string) error {
	if out, err := c.Exec(c.ControlPlane(), c.bin("kubectl"), "--kubeconfig", Kubeconfig, "apply", "-f", file); err != nil {
		return fmt.Errorf("kubectl apply -f %s: %w: %s", file, err, out)
	}
	return nil
}

// waitEstablished waits until the CRDs of files are served.
func (c *Cluster) waitEstablished(files []string) error {
	for _, f := range files {
		// kubectl wait fails at once instead of waiting while a CRD just
		// created has no conditions yet: asked again until it answers.
		if err := poll(context.Background(), 60*time.Second, "the CRD of "+f+" Established", func() error {
			_, err := c.Exec(c.ControlPlane(), c.bin("kubectl"), "--kubeconfig", Kubeconfig, "wait",
				"--for=condition=Established", "--timeout=20s", "-f", f)
			return err
		}); err != nil {
			return err
		}
	}
	return nil
}
