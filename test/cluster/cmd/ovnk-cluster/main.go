// Command ovnk-cluster runs a real Kubernetes cluster in a box on ovn-k8s
// (package test/cluster) and Kubernetes' own network e2e tests against it.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/ovn-k8s/ovn-k8s/test/cluster"
)

const usage = `usage: ovnk-cluster [flags] up|down|kubectl ARGS...|e2e|npapi|conformance|demo|northsouth|install

  up           build the cluster (control plane + workers) and wait until it is Ready
  down         stop everything the cluster started and undo every host change
  kubectl ...  run kubectl inside the control-plane node
  e2e          run the e2e tests (-focus, -skip) against the running cluster
  npapi        run the network-policy-api conformance suites (-npapi, -npapi-run)
               against the running cluster
  conformance  up, e2e, the network-policy-api suites (-npapi), the north-south
               paths (-northsouth), down (down also on failure or interrupt)
  demo         up (unless running), a Deployment, a Service and a client pod, and a report
  northsouth   up, the demo's paths, a node's gateway removed and restored, down
  install      up with ovn-k8s installed from dist/kubernetes/ and the ovnkube image
               (-dist), the demo's paths, the leading master pod deleted, down

flags:
`

func main() {
	fs := flag.NewFlagSet("ovnk-cluster", flag.ContinueOnError)
	fs.Usage = func() { fmt.Fprint(os.Stderr, usage); fs.PrintDefaults() }
	workers := fs.Int("workers", 2, "worker nodes")
	dist := fs.Bool("dist", false, "up: install ovn-k8s from dist/kubernetes/ and the ovnkube image instead of starting its daemons")
	family := fs.String("ip-family", cluster.IPv4, "the cluster's IP families: "+strings.Join(cluster.Families, ", "))
	zones := fs.String("zones", "", "zone mode (OVN interconnection): "+cluster.ZonesPerNode+" for a zone per node; empty: central mode (one NB and SB)")
	e2eCfg := cluster.E2EConfig{}
	fs.StringVar(&e2eCfg.Focus, "focus", cluster.ConformanceFocus, "ginkgo focus regexp")
	fs.StringVar(&e2eCfg.Skip, "skip", "", "ginkgo skip regexp (added to the documented skips)")
	fs.IntVar(&e2eCfg.Parallel, "parallel", 4, "ginkgo processes")
	npapiCfg := cluster.NPAPIConfig{}
	fs.StringVar(&npapiCfg.Suites, "npapi", "all", "network-policy-api conformance suites to run after the e2e tests: all (every one built), none, or versions separated by commas")
	fs.StringVar(&npapiCfg.Run, "npapi-run", "", "narrow the network-policy-api suites' tests: a -test.run pattern after TestConformance/")
	northSouth := fs.Bool("northsouth", false, "conformance: the northsouth command's checks last, on the same cluster")
	if err := fs.Parse(os.Args[1:]); err != nil {
		os.Exit(2)
	}
	if fs.NArg() < 1 {
		fs.Usage()
		os.Exit(2)
	}
	if _, _, err := cluster.SelectNPAPISuites(npapiCfg.Suites); err != nil {
		fmt.Fprintln(os.Stderr, "ovnk-cluster: -npapi:", err)
		os.Exit(2)
	}
	if !slices.Contains(cluster.Families, *family) {
		fmt.Fprintf(os.Stderr, "ovnk-cluster: -ip-family %q: want one of %s\n", *family, strings.Join(cluster.Families, ", "))
		os.Exit(2)
	}
	if !slices.Contains(cluster.ZoneModes, *zones) {
		fmt.Fprintf(os.Stderr, "ovnk-cluster: -zones %q: want %q or nothing\n", *zones, cluster.ZonesPerNode)
		os.Exit(2)
	}
	repo, err := repoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ovnk-cluster:", err)
		os.Exit(1)
	}
	c := cluster.New(cluster.Config{Repo: repo, Dir: filepath.Join(repo, "_output", "cluster"), Workers: *workers, Dist: *dist, IPFamily: *family, Zones: *zones})
	e2eCfg.Out = filepath.Join(repo, "_output", "conformance")
	npapiCfg.Out = e2eCfg.Out
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	code := 0
	switch fs.Arg(0) {
	case "up":
		if err := c.Up(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster up:", err)
			fmt.Fprintln(os.Stderr, "logs are in", filepath.Join(c.Dir, "logs"), "; run `ovnk-cluster down` to clean up")
			code = 1
		}
	case "down":
		if err := cluster.Down(c.Dir, c.Log); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster down:", err)
			code = 1
		}
	case "kubectl":
		code = c.Kubectl(fs.Args()[1:]...)
	case "e2e":
		if err := c.Attach(); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster e2e:", err)
			os.Exit(1)
		}
		if err := c.E2E(ctx, e2eCfg); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster e2e:", err)
			code = 1
		}
	case "npapi":
		if err := c.Attach(); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster npapi:", err)
			os.Exit(1)
		}
		if err := c.NPAPI(ctx, npapiCfg); err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster npapi:", err)
			code = 1
		}
	case "demo":
		err := c.Attach()
		if err != nil {
			err = c.Up(ctx)
		}
		var report string
		if err == nil {
			report, err = c.Demo(ctx)
		}
		fmt.Print(report)
		if err != nil {
			fmt.Fprintln(os.Stderr, "ovnk-cluster demo:", err)
			code = 1
		}
	case "northsouth":
		code = upRunDown(ctx, c, "northsouth", func() error { return printed(c.NorthSouth(ctx)) })
	case "install":
		c.Dist = true
		code = upRunDown(ctx, c, "install", func() error { return printed(c.Install(ctx)) })
	case "conformance":
		// The network-policy-api suites, then the north-south paths, run
		// on the same cluster after the e2e tests, whatever those gave.
		code = upRunDown(ctx, c, "conformance", func() error {
			err := c.E2E(ctx, e2eCfg)
			if ctx.Err() != nil {
				return err
			}
			err = errors.Join(err, c.NPAPI(ctx, npapiCfg))
			if !*northSouth || ctx.Err() != nil {
				return err
			}
			return errors.Join(err, printed(c.NorthSouth(ctx)))
		})
	default:
		fs.Usage()
		code = 2
	}
	os.Exit(code)
}

// upRunDown brings the cluster up, runs f on it and tears it down, also
// when up or f failed; it returns the exit code.
func upRunDown(ctx context.Context, c *cluster.Cluster, name string, f func() error) int {
	code := 0
	err := c.Up(ctx)
	if err == nil {
		err = f()
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "ovnk-cluster %s: %v\n", name, err)
		code = 1
	}
	if derr := cluster.Down(c.Dir, c.Log); derr != nil {
		fmt.Fprintln(os.Stderr, "ovnk-cluster down:", derr)
		code = 1
	}
	return code
}

// printed prints a check's report, whatever it gave, and passes on its
// error.
func printed(report string, err error) error {
	fmt.Print(report)
	return err
}

func repoRoot() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go-controller")); err == nil {
			return d, nil
		}
	}
	return "", fmt.Errorf("run me from the ovn-k8s checkout")
}
