package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// stackResults is one stack's results, as its run wrote them.
type stackResults struct {
	Stack    string   `json:"stack"`
	Versions string   `json:"versions"`
	Family   string   `json:"ip_family,omitempty"` // -ip-families of the run
	Results  []Result `json:"results"`
}

// runStacks runs the whole benchmark once per stack, one after the other
// (each in a child process of this program with OVN=<stack>, so that the
// harness takes that stack's commands), then prints their figures side by
// side and writes them to <out>/stacks.json. Each run's own JSON is under
// <out>/ovn-<stack> (runDir).
func runStacks(stacks []string, args []string, out string, fam ipFamily, fullSize bool) error {
	var all []stackResults
	for _, s := range stacks {
		fmt.Printf("######## OVN stack %s\n", s)
		if err := runChild(s, slices.Concat(args, []string{"-stacks", s})); err != nil {
			return fmt.Errorf("the benchmark on stack %s: %w", s, err)
		}
		r, err := readStack(filepath.Join(out, runDir(s, fam)))
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	fmt.Print(sideBySide(all, fullSize))
	data, _ := json.MarshalIndent(all, "", "  ")
	return os.WriteFile(filepath.Join(out, "stacks.json"), append(data, '\n'), 0o644)
}

// runChild runs this program with args on a stack (OVN=<stack>, so that the
// harness takes that stack's commands) and waits for it.
func runChild(stack string, args []string) error {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "OVN="+stack)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	// An interrupt reaches the child too (same process group, or sent on
	// below): wait for it to clean up instead of dying first.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	err := cmd.Start()
	if err == nil {
		go func() {
			for sig := range sigs {
				_ = cmd.Process.Signal(sig)
			}
		}()
		err = cmd.Wait()
	}
	signal.Stop(sigs)
	close(sigs)
	return err
}

func readStack(dir string) (stackResults, error) {
	var r stackResults
	data, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err == nil {
		err = json.Unmarshal(data, &r)
	}
	if err != nil {
		return r, fmt.Errorf("reading %s: %w", dir, err)
	}
	return r, nil
}

// sideBySide is every target, then every figure, one column per stack.
func sideBySide(all []stackResults, fullSize bool) string {
	var b strings.Builder
	b.WriteString("\n== stacks side by side\n")
	fmt.Fprintf(&b, "  %-62s", "")
	for _, s := range all {
		fmt.Fprintf(&b, " %22s", "OVN "+s.Stack)
	}
	b.WriteString("\n")
	for _, t := range targets {
		fmt.Fprintf(&b, "  %-62s", t.what)
		for _, s := range all {
			cell := "-"
			if tiers, ok := metric(s.Results, t.scenario, "acl_tiers"); ok && tiers == 0 {
				cell = absent(Result{Metrics: map[string]float64{"acl_tiers": 0}})
			}
			if v, ok := metric(s.Results, t.scenario, t.metric); ok {
				cell = t.format(v)
				if t.met != nil && fullSize {
					cell += map[bool]string{true: " met", false: " NOT"}[t.met(v)]
				}
			}
			fmt.Fprintf(&b, " %22s", cell)
		}
		b.WriteString("\n")
	}
	b.WriteString("\n  every figure:\n")
	var keys []string
	seen := map[string]bool{}
	for _, s := range all {
		for _, r := range s.Results {
			for m := range r.Metrics {
				if k := r.Scenario + "." + m; !seen[k] {
					seen[k] = true
					keys = append(keys, k)
				}
			}
		}
	}
	sort.Strings(keys)
	for _, k := range keys {
		scenario, name, _ := strings.Cut(k, ".")
		fmt.Fprintf(&b, "  %-62s", k)
		for _, s := range all {
			cell := "-"
			if v, ok := metric(s.Results, scenario, name); ok {
				cell = fmt.Sprintf("%.4g", v)
			}
			fmt.Fprintf(&b, " %22s", cell)
		}
		b.WriteString("\n")
	}
	for _, s := range all {
		fmt.Fprintf(&b, "  OVN %s: %s\n", s.Stack, s.Versions)
	}
	return b.String()
}

func metric(results []Result, scenario, name string) (float64, bool) {
	for _, r := range results {
		if r.Scenario == scenario {
			v, ok := r.Metrics[name]
			return v, ok
		}
	}
	return 0, false
}

// thisStack is the stack this process runs on.
func thisStack() stackResults {
	return stackResults{Stack: harness.CurrentStack.Name, Versions: harness.CurrentStack.Versions()}
}
