package cluster

import (
	"context"
	"encoding/xml"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConformanceFocus selects the [sig-network] conformance tests.
const ConformanceFocus = `\[sig-network\].*\[Conformance\]`

// Skips are the tests skipped for a reason that is not ours; each entry's
// reason is repeated in docs/conformance.md. A skip that depends on the
// machine is added only on a machine where the reason holds.
func Skips() map[string]string {
	skips := map[string]string{}
	if !kernelHasSCTP() {
		skips[`\[Feature:SCTPConnectivity\]`] = "the kernel has no SCTP: the test pods cannot open SCTP sockets to serve or probe"
	}
	return skips
}

// kernelHasSCTP says whether this kernel can open an SCTP socket.
func kernelHasSCTP() bool {
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, syscall.IPPROTO_SCTP)
	if err != nil {
		return false
	}
	_ = syscall.Close(fd)
	return true
}

// E2EConfig selects and places an e2e run.
type E2EConfig struct {
	Focus, Skip string
	Parallel    int
	Out         string // JUnit, per-test reports and the e2e log
}

// E2E runs Kubernetes' network e2e suite inside the control-plane node and
// prints a pass/fail table; it fails when any selected test failed.
func (c *Cluster) E2E(ctx context.Context, cfg E2EConfig) error {
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return err
	}
	skips := []string{}
	if cfg.Skip != "" {
		skips = append(skips, cfg.Skip)
	}
	for re, why := range Skips() {
		skips = append(skips, re)
		c.Log("e2e: skipping %s: %s", re, why)
	}
	junit := filepath.Join(cfg.Out, "junit.xml")
	_ = os.Remove(junit)
	// A failed test runs once more; one that passes only then is named
	// (flaky) in the output and the log, never passed over in silence.
	args := []string{c.bin("ginkgo"), "--procs", fmt.Sprint(max(cfg.Parallel, 1)), "--timeout", "2h",
		"--focus", cfg.Focus, "--junit-report", junit, "--no-color", "--silence-skips", "--flake-attempts", "2"}
	if len(skips) > 0 {
		args = append(args, "--skip", strings.Join(skips, "|"))
	}
	args = append(args, c.bin("e2e.test"), "--",
		"--kubeconfig="+Kubeconfig, "--provider=skeleton", "--kubectl-path="+c.bin("kubectl"),
		"--disable-log-dump=true", "--report-dir="+cfg.Out, "--allowed-not-ready-nodes=0",
		// The schedulable nodes (the control plane is tainted), which the
		// granular service checks require to be at least 2.
		fmt.Sprintf("--num-nodes=%d", c.schedulableNodes(ctx)),
		"--dns-domain="+clusterDomain)
	logPath := filepath.Join(cfg.Out, "e2e.log")
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	cmd := c.Command(c.ControlPlane(), args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // ginkgo and its e2e.test processes: one group
	if err := cmd.Start(); err != nil {
		return err
	}
	// On interrupt ginkgo gets SIGINT (it reports and cleans up), then its
	// whole group SIGKILL: no e2e.test process outlives the run.
	stopped := make(chan struct{})
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(os.Interrupt)
			select {
			case <-stopped:
			case <-time.After(60 * time.Second):
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			}
		case <-stopped:
		}
	}()
	cmd.Dir = cfg.Out
	c.Log("e2e: focus %q, skip %q, %d processes; log in %s", cfg.Focus, strings.Join(skips, "|"), cfg.Parallel, logPath)
	start := time.Now()
	runErr := cmd.Wait()
	close(stopped)
	results, err := readJUnit(junit)
	if err != nil {
		return fmt.Errorf("e2e run (%v) left no readable report: %w\n%s", runErr, err, tail(logPath, 30))
	}
	c.Log("%s", resultTable(results, time.Since(start)))
	for _, flaky := range flakyTests(logPath) {
		c.Log("e2e: FLAKY, passed only on its second attempt: %s", flaky)
	}
	for _, r := range results {
		if r.Status == "failed" {
			return fmt.Errorf("e2e: tests failed (details in %s)", logPath)
		}
	}
	if runErr != nil {
		return fmt.Errorf("e2e: %v\n%s", runErr, tail(logPath, 30))
	}
	return nil
}

// Result is one test's outcome.
type Result struct {
	Name, Status string
	Seconds      float64
	Message      string
}

func readJUnit(path string) ([]Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		Suites []struct {
			Cases []struct {
				Name    string  `xml:"name,attr"`
				Status  string  `xml:"status,attr"`
				Time    float64 `xml:"time,attr"`
				Failure *struct {
					Message string `xml:"message,attr"`
				} `xml:"failure"`
				Skipped *struct {
					Message string `xml:"message,attr"`
				} `xml:"skipped"`
			} `xml:"testcase"`
		} `xml:"testsuite"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, err
	}
	var out []Result
	for _, s := range doc.Suites {
		for _, tc := range s.Cases {
			if !strings.HasPrefix(tc.Name, "[It]") {
				continue // suite setup and teardown nodes
			}
			r := Result{Name: strings.TrimSpace(strings.TrimPrefix(tc.Name, "[It]")), Status: tc.Status, Seconds: tc.Time}
			if tc.Failure != nil {
				r.Message = tc.Failure.Message
			}
			if tc.Status == "skipped" && (tc.Skipped == nil || tc.Skipped.Message == "skipped") {
				continue // not selected by focus and skip (a test that skips itself says why)
			}
			out = append(out, r)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func resultTable(results []Result, took time.Duration) string {
	var b strings.Builder
	count := map[string]int{}
	for _, r := range results {
		count[r.Status]++
		fmt.Fprintf(&b, "%-7s %6.1fs  %s\n", strings.ToUpper(r.Status), r.Seconds, r.Name)
		if r.Status == "failed" && r.Message != "" {
			msg := strings.ReplaceAll(r.Message, "\n", " ")
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			fmt.Fprintf(&b, "               %s\n", msg)
		}
	}
	fmt.Fprintf(&b, "%d passed, %d failed, %d skipped in %s", count["passed"], count["failed"], count["skipped"], took.Round(time.Second))
	return b.String()
}

// Kubectl runs kubectl inside the control-plane node, for people.
func (c *Cluster) Kubectl(args ...string) int {
	cmd := c.Command(c.ControlPlane(), append([]string{c.bin("kubectl"), "--kubeconfig", Kubeconfig}, args...)...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode()
		}
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// schedulableNodes counts the Nodes without a NoSchedule taint (the
// workers), as the suite's --num-nodes wants them; -1 (unknown) if the API
// cannot say.
func (c *Cluster) schedulableNodes(ctx context.Context) int {
	nodes, err := c.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return -1
	}
	n := 0
	for _, node := range nodes.Items {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.Effect == corev1.TaintEffectNoSchedule }) {
			n++
		}
	}
	return n
}

// flakyTests are the tests ginkgo reports as passing only on a retry
// (--flake-attempts), each as its header line and the two lines after it
// (the test's name), from the e2e log.
func flakyTests(logPath string) []string {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(b), "\n")
	var out []string
	for i, l := range lines {
		if strings.Contains(l, "[FLAKEY TEST - TOOK") {
			out = append(out, strings.Join(lines[i:min(i+3, len(lines))], " / "))
		}
	}
	return out
}
