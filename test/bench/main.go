// Command ovnk-bench measures ovn-k8s against the real components on this
// machine (kube-apiserver + etcd, NB ovsdb-server + ovn-northd) and writes
// each scenario's numbers as JSON under --out. It asserts nothing: targets
// and results are compared in docs/performance.md.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

type options struct {
	nodes, pods              int
	latencyRate              int
	latencyDuration          time.Duration
	services, endpoints      int
	limitPorts, limitPatches int
	limitServices            int
	workers                  int
	serviceWorkers           int
	out                      string
	masterArgs               string
	scenarios                string
	profileAPI               bool
	cpuProfile               string
	stacks                   string
	namespaces               int
	cniPods                  int
	policies, policyRate     int
	labelChanges             int
	adminPolicies            int
	egressIPs, egressNodes   int
	families                 string
	scaleNodes, scalePods    int
	scaleNamespaces          int
	scaleServices            int
	scalePolicies            int
	scaleSteps               string
	scaleProbe, scaleRate    int
	scaleNodeSide            bool
	scaleNodeMaxRSS          int
	scaleMinFree             int
	scaleMonitors            int
	scaleRelays              int
	scaleZones               bool
}

// scenarioNames are the scenarios after limits, in the order they run.
var scenarioNames = []string{"cni", "burst", "latency", "services", "policies", "adminpolicies", "egressips", "memory", "restart", "diff", "cold"}

// scaleScenario grows a cluster of its own in steps (make bench-scale); it
// runs alone, and "all" does not include it.
const scaleScenario = "scale"

// Result is one scenario's output.
type Result struct {
	Scenario string             `json:"scenario"`
	Metrics  map[string]float64 `json:"metrics"`
	Notes    string             `json:"notes,omitempty"`
}

func main() {
	var o options
	flag.IntVar(&o.cniPods, "cni-pods", 100, "pods ADDed at once on one node in the cni scenario")
	flag.IntVar(&o.nodes, "nodes", 100, "Nodes in the burst scenario")
	flag.IntVar(&o.pods, "pods", 10000, "Pods in the burst scenario")
	flag.IntVar(&o.latencyRate, "latency-rate", 100, "pods/s in the latency scenario")
	flag.DurationVar(&o.latencyDuration, "latency-duration", 60*time.Second, "length of the latency scenario")
	flag.IntVar(&o.services, "services", 1000, "Services in the services scenario")
	flag.IntVar(&o.namespaces, "namespaces", 100, "namespaces the burst pods are spread over")
	flag.IntVar(&o.policies, "policies", 1000, "NetworkPolicies in the policies scenario (spread over the namespaces)")
	flag.IntVar(&o.policyRate, "policy-rate", 50, "policies created, and pods relabelled, per second in the policies scenario")
	flag.IntVar(&o.labelChanges, "label-changes", 200, "pods relabelled into a peer set in the policies scenario, and namespaces moved to another team in the adminpolicies scenario")
	flag.IntVar(&o.adminPolicies, "admin-policies", 100, fmt.Sprintf("ClusterNetworkPolicies (10 rules each, distinct priorities: at most %d) in the adminpolicies scenario, created at -policy-rate", maxAdminPolicies))
	flag.IntVar(&o.egressIPs, "egress-ips", 100, "EgressIPs in the egressips scenario, created at -policy-rate, EgressIP k selecting the pods of burst namespace k (at most -namespaces)")
	flag.IntVar(&o.egressNodes, "egress-nodes", 2, fmt.Sprintf("egress-assignable nodes in the egressips scenario (of the %d given a gateway)", eipGatewayNodes))
	flag.IntVar(&o.endpoints, "endpoints", 10, "endpoints per service")
	flag.IntVar(&o.limitPorts, "limit-ports", 10000, "LSPs inserted to measure the raw NB rate")
	flag.IntVar(&o.limitPatches, "limit-patches", 3000, "pod annotation PATCHes to measure the raw API rate")
	flag.IntVar(&o.limitServices, "limit-services", 500, "Services (with an EndpointSlice) created to measure the raw API rate")
	flag.IntVar(&o.workers, "workers", 32, "concurrent API clients (the master's --pod-workers)")
	flag.IntVar(&o.serviceWorkers, "service-workers", 8, "concurrent clients creating Services (the API's ClusterIP allocator takes them fastest from few clients)")
	flag.StringVar(&o.out, "out", "_output/bench", "directory for the JSON results (one ovn-<stack> directory per stack)")
	flag.StringVar(&o.stacks, "stacks", harness.CurrentStack.Name, "comma-separated OVN stacks to run on, one after the other (e.g. 25.03,23.03; default: $OVN, or the current stack)")
	flag.StringVar(&o.masterArgs, "master-args", "", "extra ovnkube master flags, space-separated (e.g. --pprof-address 127.0.0.1:6060)")
	flag.StringVar(&o.scenarios, "scenarios", "all", "comma-separated scenarios to run after limits (cni,burst,latency,services,policies,adminpolicies,egressips,memory,restart,diff,cold), or all; "+
		"or scale alone: a cluster grown in steps to the -scale-* sizes (make bench-scale)")
	flag.BoolVar(&o.profileAPI, "profile-apiserver", false, "also take a 15 s CPU profile of kube-apiserver in the burst, services and restart scenarios")
	flag.StringVar(&o.cpuProfile, "cpuprofile", "", "write the benchmark client's own CPU profile to this file")
	flag.IntVar(&o.scaleNodes, "scale-nodes", 2000, "nodes at the scale scenario's last step")
	flag.IntVar(&o.scalePods, "scale-pods", 150000, "pods at the scale scenario's last step (and -scale-probe per step)")
	flag.IntVar(&o.scaleNamespaces, "scale-namespaces", 10000, "namespaces at the scale scenario's last step")
	flag.IntVar(&o.scaleServices, "scale-services", 10000, "Services (of -endpoints endpoints each) at the scale scenario's last step")
	flag.IntVar(&o.scalePolicies, "scale-policies", 10000, "NetworkPolicies at the scale scenario's last step")
	flag.StringVar(&o.scaleSteps, "scale-steps", "1/15,1/4,1/2,1", "the scale scenario's steps: increasing fractions of the -scale-* sizes")
	flag.IntVar(&o.scaleProbe, "scale-probe", 200, "pods created at -scale-rate at each step of the scale scenario")
	flag.IntVar(&o.scaleRate, "scale-rate", 20, "pods/s of the scale scenario's probes (and the churn its limits are extrapolated at)")
	flag.BoolVar(&o.scaleNodeSide, "scale-node-side", true, "in the scale scenario, run node0000's OVS and ovn-controller for real and register the other nodes' chassis and pods in the SB")
	flag.IntVar(&o.scaleNodeMaxRSS, "scale-node-max-rss", 8192, "MiB of RSS of node0000's ovn-controller and ovs-vswitchd together at which both are stopped (its figures end there): the control plane measured keeps the machine's memory")
	flag.IntVar(&o.scaleMinFree, "scale-min-free", 1536, "MiB of available memory below which the scale scenario stops, as an interrupt would (the steps done are written)")
	flag.IntVar(&o.scaleMonitors, "scale-monitors", 0, "SB clients monitoring every table in the scale scenario (ovsdb-client, updates discarded): the SB server's fan-out to that many more nodes")
	flag.IntVar(&o.scaleRelays, "scale-relays", 0, "SB relays (ovsdb-server relay:OVN_Southbound) the -scale-monitors connect to, spread evenly, instead of the SB server itself: the central SB's fan-out taken by relays")
	flag.BoolVar(&o.scaleZones, "scale-zones", false, "the scale scenario in zone mode (OVN interconnection, a zone per node): the master is node0000's zone's, the cluster manager allocates the subnets, "+
		"and every other node is a simulated zone (its rows in the IC SB as its ovn-ic writes them, its pods' addresses as its master writes them)")
	flag.StringVar(&o.families, "ip-families", "ipv4", "the master's IP families: ipv4, dual (dual-stack: an address of each family per pod), or both comma-separated, "+
		"which runs the stacks as -stacks says, then burst, latency and memory once per family on the first stack, each in a cluster of its own (results in <out>/families), "+
		"and prints them side by side with dual/IPv4 per pod")
	flag.Parse()
	if o.scenarios != scaleScenario {
		quietGC()
	}
	if o.scenarios == scaleScenario {
		if err := o.checkScale(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
	} else if o.scenarios != "all" {
		for _, name := range strings.Split(o.scenarios, ",") {
			if !slices.Contains(scenarioNames, name) {
				fmt.Fprintf(os.Stderr, "unknown scenario %q in -scenarios; choose from %s, or all\n", name, strings.Join(scenarioNames, ","))
				os.Exit(2)
			}
		}
	}
	if o.adminPolicies < 1 || o.adminPolicies > maxAdminPolicies {
		fmt.Fprintf(os.Stderr, "-admin-policies %d: give 1 to %d (each policy takes a priority of its own)\n", o.adminPolicies, maxAdminPolicies)
		os.Exit(2)
	}
	if slices.Contains(o.scenarioList(), "egressips") && (o.egressIPs < 1 || o.egressIPs > o.namespaces || o.egressNodes < 1 || o.egressNodes > eipGatewayNodes) {
		fmt.Fprintf(os.Stderr, "-egress-ips %d, -egress-nodes %d: give 1 to -namespaces (%d) EgressIPs (each selects a namespace of its own) and 1 to %d nodes\n",
			o.egressIPs, o.egressNodes, o.namespaces, eipGatewayNodes)
		os.Exit(2)
	}
	fams, err := parseFamilies(o.families)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if len(fams) > 1 {
		if err := compareFamilies(o, fams, os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	if fams[0].name != "ipv4" { // measured on the scenarios that time pods only
		if o.scenarios = perPodScenarios(o.scenarios); o.scenarios == "" {
			fmt.Fprintf(os.Stderr, "-ip-families %s runs %s only: -scenarios names none of them\n", o.families, strings.Join(familyScenarios, ","))
			os.Exit(2)
		}
	}
	if stacks := strings.Split(o.stacks, ","); len(stacks) > 1 || stacks[0] != harness.CurrentStack.Name {
		if err := runStacks(stacks, os.Args[1:], o.out, fams[0], o.fullSize()); err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		return
	}
	o.out = filepath.Join(o.out, runDir(harness.CurrentStack.Name, fams[0]))
	if o.cpuProfile != "" {
		f, err := os.Create(o.cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
	}
	if err := os.MkdirAll(o.out, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	tmp, _ := filepath.Abs(filepath.Join(o.out, "tmp"))
	s := harness.NewSession(tmp)
	stopOnSignal(s, tmp)
	code := 0
	func() {
		defer func() {
			if r := recover(); r != nil {
				if _, ok := r.(harness.SessionFatal); !ok {
					fmt.Printf("panic: %v\n", r)
				}
				code = 1
			}
		}()
		run(s, o)
	}()
	exit(s, tmp, code)
}

// exit removes what the benchmark created and ends the program; a signal
// during the normal exit waits for the cleanups under way (RunCleanups).
func exit(s *harness.Session, tmp string, code int) {
	s.RunCleanups()
	_ = os.RemoveAll(tmp)
	pprof.StopCPUProfile() // os.Exit skips deferred calls
	os.Exit(code)
}

// stopOnSignal makes an interrupted benchmark remove what it created (network
// namespaces, processes, files) before it exits, as a finished one does.
func stopOnSignal(s *harness.Session, tmp string) {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	surviveClosedStdout()
	go func() {
		sig := <-sigs
		fmt.Fprintf(os.Stderr, "\n%v: stopping the benchmark and removing what it created\n", sig)
		exit(s, tmp, 130)
	}()
}

// surviveClosedStdout keeps a write to a closed stdout from killing the
// benchmark before its cleanups (Go's default for SIGPIPE on fd 1 and 2):
// with SIGPIPE notified, the write fails with EPIPE instead, which say
// turns into a stop. A SIGPIPE of any other descriptor was an EPIPE
// already.
func surviveClosedStdout() {
	pipes := make(chan os.Signal, 1)
	signal.Notify(pipes, syscall.SIGPIPE)
	go func() {
		for range pipes {
		}
	}()
}

// scenarioList is the scenarios -scenarios names, all of them for "all".
func (o options) scenarioList() []string {
	if o.scenarios == "all" {
		return scenarioNames
	}
	return strings.Split(o.scenarios, ",")
}

// checkScale refuses scale sizes the scenario cannot grow to.
func (o options) checkScale() error {
	if _, err := parseFractions(o.scaleSteps); err != nil {
		return err
	}
	if o.scaleNodes < 1 || o.scaleNodes > 2048 || o.scalePods < 1 || o.scaleNamespaces < 1 || o.scaleServices < 1 || o.scalePolicies < 1 || o.scaleProbe < 1 || o.scaleRate < 1 {
		return fmt.Errorf("-scale-nodes %d (1 to 2048: the node subnets of %s), -scale-pods %d, -scale-namespaces %d, -scale-services %d, -scale-policies %d, -scale-probe %d, -scale-rate %d: give at least 1 of each",
			o.scaleNodes, scaleClusterSubnet, o.scalePods, o.scaleNamespaces, o.scaleServices, o.scalePolicies, o.scaleProbe, o.scaleRate)
	}
	steps, _ := parseFractions(o.scaleSteps)
	if perNode := (o.scalePods + len(steps)*o.scaleProbe + o.scaleNodes - 1) / o.scaleNodes; perNode > scaleMaxPodsPerNode {
		return fmt.Errorf("-scale-pods %d and %d probes of -scale-probe %d over -scale-nodes %d: %d pods per node; give at most %d per node",
			o.scalePods, len(steps), o.scaleProbe, o.scaleNodes, perNode, scaleMaxPodsPerNode)
	}
	if o.scaleMonitors < 0 || o.scaleRelays < 0 || o.scaleRelays > 0 && o.scaleMonitors == 0 {
		return fmt.Errorf("-scale-monitors %d, -scale-relays %d: give 0 or more monitors, and relays only with monitors to serve", o.scaleMonitors, o.scaleRelays)
	}
	if o.families != "ipv4" || o.stacks != harness.CurrentStack.Name {
		return fmt.Errorf("-scenarios scale runs on the current stack (%s) in IPv4 only: leave -stacks and -ip-families alone", harness.CurrentStack.Name)
	}
	return nil
}

// fullSize reports whether the sizes are those the targets are stated for.
func (o options) fullSize() bool {
	return o.pods >= 10000 && o.services >= 1000 && o.latencyRate >= 100 && o.latencyDuration >= time.Minute &&
		o.policies >= 1000 && o.namespaces >= 100 && o.adminPolicies >= 100 && o.egressIPs >= 100
}

func run(s *harness.Session, o options) {
	stack := thisStack()
	stack.Family = o.family().name
	fmt.Printf("ovn-k8s benchmarks on %d CPUs (%s), OVN stack %s (%s), %s master; sizes: %d nodes, %d pods, %d pods/s for %s, %d services x %d endpoints\n\n",
		runtime.NumCPU(), runtime.Version(), stack.Stack, stack.Versions, o.family().label,
		o.nodes, o.pods, o.latencyRate, o.latencyDuration, o.services, o.endpoints)
	b := newBench(s, o)
	if o.scenarios == scaleScenario {
		if o.scaleZones {
			b.startZones() // before the master: it runs as node0000's zone's
		}
		b.startMaster()
		r := b.scale()
		data, _ := json.MarshalIndent(r, "", "  ")
		_ = os.WriteFile(filepath.Join(o.out, r.Scenario+".json"), append(data, '\n'), 0o644)
		fmt.Printf("\nresults written to %s\n", o.out)
		return
	}
	var results []Result
	record := func(r Result) {
		results = append(results, r)
		// Pods count only where the master's CPU was read: a master the
		// sampler cannot name gives no figure, not 0 ms per pod.
		cpu, ok := r.Metrics[cpuMetric("ovnkube")]
		if ok && (r.Scenario == "cni" || r.Scenario == "burst" || r.Scenario == "latency") {
			b.podCPU += cpu
			b.podsTimed += int(r.Metrics["pods"])
		}
		data, _ := json.MarshalIndent(r, "", "  ")
		_ = os.WriteFile(filepath.Join(o.out, r.Scenario+".json"), append(data, '\n'), 0o644)
	}
	if slices.Contains(o.scenarioList(), "adminpolicies") || slices.Contains(o.scenarioList(), "egressips") {
		// The master follows the admin policy kinds and EgressIPs the API
		// server serves when it starts; the limits time the first's CREATE.
		b.np = b.kube.InstallCRDs(s)
	}
	limits := b.limits()
	record(limits)
	b.startMaster()
	for _, sc := range []struct {
		name string
		run  func() Result
	}{
		{"cni", b.cni},
		{"burst", func() Result { return b.burst(limits.Metrics["patch_per_s"], limits.Metrics["pod_create_per_s"]) }},
		{"latency", b.latency}, {"services", b.services}, {"policies", b.policies}, {"adminpolicies", b.adminPolicies}, {"egressips", b.egressIPs}, {"memory", b.memory}, {"restart", b.restart}, {"diff", b.diff}, {"cold", b.cold},
	} {
		if slices.Contains(o.scenarioList(), sc.name) {
			if len(results) > 1 { // after the limits and a scenario
				b.settle(sc.name)
			}
			r := sc.run()
			if sc.name == "burst" || sc.name == "latency" { // after the figures: it costs nothing measured
				r.Metrics["addresses_per_pod"] = b.checkAddresses()
			}
			record(r)
		}
	}
	fmt.Print(summary(results, o.fullSize()))
	stack.Results = results
	data, _ := json.MarshalIndent(stack, "", "  ")
	_ = os.WriteFile(filepath.Join(o.out, "summary.json"), append(data, '\n'), 0o644)
	fmt.Printf("\nresults written to %s\n", o.out)
}

// quietGC makes the benchmark's own collector run a quarter as often (GOGC
// 400), its heap bounded by a soft limit of a quarter of the machine's
// memory: the benchmark shares the two cores with what it measures, and its
// collector took a quarter of its CPU over the admin policy moves. Not in
// the scale scenario, whose informers and NB cache grow to gigabytes beside
// the master being measured. GOGC or GOMEMLIMIT in the environment win.
func quietGC() {
	if os.Getenv("GOGC") != "" || os.Getenv("GOMEMLIMIT") != "" {
		return
	}
	debug.SetGCPercent(400)
	if kib := machineMemKiB(); kib > 0 {
		debug.SetMemoryLimit(int64(kib) * 1024 / 4)
	}
}
