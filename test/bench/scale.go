package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// scaleSize is a cluster's size in the scale scenario.
type scaleSize struct {
	Nodes      int `json:"nodes"`
	Pods       int `json:"pods"`
	Namespaces int `json:"namespaces"`
	Services   int `json:"services"`
	Policies   int `json:"policies"`
}

// times is the size at fraction f of s (at least one of each).
func (s scaleSize) times(f float64) scaleSize {
	r := func(n int) int { return max(1, int(math.Round(f*float64(n)))) }
	return scaleSize{r(s.Nodes), r(s.Pods), r(s.Namespaces), r(s.Services), r(s.Policies)}
}

func (s scaleSize) String() string {
	return fmt.Sprintf("%d nodes, %d pods, %d namespaces, %d services, %d policies", s.Nodes, s.Pods, s.Namespaces, s.Services, s.Policies)
}

// scaleClusterSubnet holds 2,048 node subnets of 253 pods: the 2,000
// nodes of 75 pods each, and room for other sizes (checkScale).
const scaleClusterSubnet = "10.128.0.0/13/24"

// scaleMaxPodsPerNode is what checkScale lets a node hold, below the 253
// addresses of its subnet.
const scaleMaxPodsPerNode = 240

// parseFractions parses -scale-steps: increasing fractions of the largest
// size, each a number or a ratio ("1/15,1/4,1/2,1").
func parseFractions(s string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(s, ",") {
		num, den, isRatio := strings.Cut(strings.TrimSpace(f), "/")
		v, err := strconv.ParseFloat(num, 64)
		if err == nil && isRatio {
			var d float64
			if d, err = strconv.ParseFloat(den, 64); err == nil {
				v /= d
			}
		}
		if err != nil || !(v > 0 && v <= 1) || (len(out) > 0 && v <= out[len(out)-1]) {
			return nil, fmt.Errorf("-scale-steps %q: give increasing fractions of the largest size in (0, 1], e.g. 1/15,1/4,1/2,1", s)
		}
		out = append(out, v)
	}
	return out, nil
}

// scaleStep is what one step of the scale scenario measured.
type scaleStep struct {
	Size scaleSize `json:"size"`
	// Growth to this size: wall time and each process's CPU seconds.
	GrowS   float64            `json:"grow_s"`
	GrowCPU map[string]float64 `json:"grow_cpu_s"`
	// The master's CPU per pod added (everything grows in proportion) and
	// its RSS above idle per pod held.
	MasterCPUMsPerPod float64 `json:"master_cpu_ms_per_pod"`
	MasterKiBPerPod   float64 `json:"master_kib_per_pod"`
	// MasterPeakKiBPerPod is its peak RSS (VmHWM) above idle per pod held:
	// the RSS read once settled lands anywhere in a collection cycle (runs
	// whose live heaps matched gave ×0.99 and ×1.27 between steps), the
	// peak at the top of one.
	MasterPeakKiBPerPod float64 `json:"master_peak_kib_per_pod"`
	// MachineWorkMs is the machine's speed during this step's growth: the
	// CPU of a fixed piece of work (machineWork) timed at its start, every
	// speedEvery and at its end (MachineWork), each interval weighed by
	// the master's CPU in it (weighSpeed). The master's CPU per pod over it
	// is what the machine's drift does not move.
	MachineWorkMs float64        `json:"machine_work_ms"`
	MachineWork   []speedReading `json:"machine_work_readings"`
	// The master's Go runtime while growing (its /metrics): bytes allocated
	// per pod added, garbage collections, and its heap in use at the end.
	MasterAllocKiBPerPod float64 `json:"master_alloc_kib_per_pod"`
	MasterGCs            float64 `json:"master_gcs"`
	MasterHeapMiB        float64 `json:"master_heap_mib"`
	// Each of its queues' syncs per pod added.
	MasterSyncsPerPod map[string]float64 `json:"master_syncs_per_pod"`
	// RSS (KiB) of every process once settled.
	RSS map[string]float64 `json:"rss_kib"`
	// PeakRSS (KiB) of every process since it started (VmHWM): what a
	// burst took before it drained (the SB server's backlog to its monitors),
	// which RSS, read once settled, may no longer show.
	PeakRSS map[string]float64 `json:"peak_rss_kib"`
	// The databases: rows ovn-k8s's tables hold in the NB, logical flows in
	// the SB, both files' sizes once compacted.
	NBRows    int     `json:"nb_rows"`
	SBFlows   int     `json:"sb_logical_flows"`
	NBFileMiB float64 `json:"nb_file_mib"`
	SBFileMiB float64 `json:"sb_file_mib"`
	// Pods created at -scale-rate: creation → annotation, and each
	// process's CPU per pod (per change) meanwhile.
	ProbePods         int                `json:"probe_pods"`
	LatencyPods       int                `json:"latency_pods"` // those the master annotated (zone mode: node0000's)
	AnnotationP50Ms   float64            `json:"annotation_p50_ms"`
	AnnotationP99Ms   float64            `json:"annotation_p99_ms"`
	CPUMsPerChange    map[string]float64 `json:"cpu_ms_per_change"`
	RestartS          float64            `json:"restart_s"`
	RestartNBTxns     float64            `json:"restart_nb_transactions"`
	ColdS             float64            `json:"cold_s"`
	ColdLSPsS         float64            `json:"cold_lsps_s"`
	ColdPoliciesS     float64            `json:"cold_policies_s"`
	NodesAnnotatedS   float64            `json:"nodes_annotated_s"`
	ProbeMasterCPUMs  float64            `json:"probe_master_cpu_ms"`
	ProbeNorthdCPUMs  float64            `json:"probe_northd_cpu_ms"`
	ProbeSBServerCPUs float64            `json:"probe_sb_server_cpu_ms"`
	// ovn-northd during the probe: its logical flows updated, and how many
	// of those computed every logical flow again (its lflow node recomputed).
	NorthdFlowRuns       int `json:"northd_lflow_runs"`
	NorthdFlowRecomputes int `json:"northd_lflow_recomputes"`
	// The real node (-scale-node-side): its br-int's OpenFlow flows and
	// Geneve ports, ovn-controller's RSS and its CPU per probe pod.
	NodeFlows                int     `json:"node_openflow_flows,omitempty"`
	NodeTunnels              int     `json:"node_tunnels,omitempty"`
	ControllerKiB            float64 `json:"ovn_controller_rss_kib,omitempty"`
	ControllerCPUMsPerChange float64 `json:"ovn_controller_cpu_ms_per_change,omitempty"`
	NodeStopped              string  `json:"node_stopped,omitempty"` // why the node side measured nothing
	// Zone mode (-scale-zones): the master is node0000's zone's, and the
	// report counts what one node runs.
	ZoneMode bool `json:"zone_mode,omitempty"`
}

// scale: the cluster grown in steps to -scale-* (fractions -scale-steps);
// at each step the costs per object, the databases' sizes, a probe of pods
// at a fixed rate, a restart and a cold start. The report is a table, a
// JSON file and a plot (scale.png).
func (b *bench) scale() Result {
	largest := scaleSize{b.o.scaleNodes, b.o.scalePods, b.o.scaleNamespaces, b.o.scaleServices, b.o.scalePolicies}
	fractions, _ := parseFractions(b.o.scaleSteps) // checked in main
	say("== scale: to %s in %d steps; probes of %d pods at %d/s", largest, len(fractions), b.o.scaleProbe, b.o.scaleRate)
	if b.o.scaleNodeSide {
		b.nodeSide = b.startNodeSide()
	}
	b.startMonitors(b.o.scaleMonitors)
	for _, db := range []string{"nb", "sb"} {
		// As OVN deployments run them (ovn-kubernetes, ovn-heater): memory a
		// compaction frees goes back to the system, so that the RSS read
		// after each step's compaction is what the databases hold.
		if _, err := harness.Run("ovs-appctl", "-t", filepath.Join(b.ovn.Dir, db+".ctl"), "ovsdb-server/memory-trim-on-compaction", "on"); err != nil {
			say("   the %s's memory trimming: %v", db, err)
		}
	}
	stopWatch := b.watchMemory()
	defer stopWatch()
	var cur scaleSize
	var steps []scaleStep
	for i, f := range fractions {
		to := largest.times(f)
		say("-- step %d: %s", i+1, to)
		st := b.scaleTo(cur, to, i)
		cur = to
		st.Size.Pods = b.podCount
		b.writeSteps(append(steps, st)) // the growth kept if the rest of the step runs out of memory
		b.growZones(to.Nodes)
		if b.nodeSide != nil {
			start, cpu := time.Now(), cpuSnapshot()
			b.nodeSide.grow(to.Nodes)
			if used := cpuSnapshot().since(cpu); b.zones == nil { // in zone mode growZones said it
				say("   %d simulated nodes' chassis and pods bound in the SB in %.1f s; CPU: %s", to.Nodes-1, time.Since(start).Seconds(), used.describe(time.Since(start).Seconds()))
			}
		}
		b.scaleProbePods(&st, i)
		if gone := b.ovn.Exited(); gone != "" {
			b.s.Fatal(fmt.Errorf("step %d: %s exited (the kernel's OOM killer, if the machine ran out of memory: dmesg); the steps before are in scale.txt", i+1, gone))
		}
		st.Size.Pods = b.podCount
		b.scaleMeasure(&st)
		b.writeScale(append(steps, st)) // the growth and probe kept if a restart runs out of memory
		b.scaleRestarts(&st)
		steps = append(steps, st)
		say("   master %.2f ms CPU per pod added (a fixed piece of work took %.0f ms), %.2f KiB per pod held; NB %d rows (%.1f MiB), SB %d logical flows (%.1f MiB); probe p99 %.0f ms; restart %.2f s, cold %.2f s",
			st.MasterCPUMsPerPod, st.MachineWorkMs, st.MasterKiBPerPod, st.NBRows, st.NBFileMiB, st.SBFlows, st.SBFileMiB, st.AnnotationP99Ms, st.RestartS, st.ColdS)
		say("   RSS: %s", describeRSS(st.RSS))
		say("   peak RSS since each process started: %s", describeRSS(st.PeakRSS))
		b.writeScale(steps) // after every step: a run stopped later keeps what it measured
	}
	report := scaleReport(steps, b.o.scaleRate, machineMemKiB())
	fmt.Print(report)
	say("  plot: %s", filepath.Join(b.o.out, "scale.png"))
	return Result{Scenario: "scale", Metrics: scaleMetrics(steps), Notes: "per step: see scale-steps.json, scale.txt and scale.png"}
}

// writeScale writes the steps so far: scale-steps.json, scale.txt, scale.png.
func (b *bench) writeScale(steps []scaleStep) {
	b.writeSteps(steps)
	_ = os.WriteFile(filepath.Join(b.o.out, "scale.txt"), []byte(scaleReport(steps, b.o.scaleRate, machineMemKiB())), 0o644)
	if err := plotScale(filepath.Join(b.o.out, "scale.png"), steps); err != nil {
		say("  plot: %v", err)
	}
}

// writeSteps writes the steps so far to scale-steps.json only: the last
// one may be a growth not yet measured further (no RSS, no probe).
func (b *bench) writeSteps(steps []scaleStep) {
	data, _ := json.MarshalIndent(steps, "", "  ")
	_ = os.WriteFile(filepath.Join(b.o.out, "scale-steps.json"), append(data, '\n'), 0o644)
}

// describeRSS lists the processes by RSS, largest first, in MiB.
func describeRSS(rss map[string]float64) string {
	names := make([]string, 0, len(rss))
	for n := range rss {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool { return rss[names[i]] > rss[names[j]] })
	parts := make([]string, 0, len(names))
	for _, n := range names {
		if rss[n] >= 1024 {
			parts = append(parts, fmt.Sprintf("%s %.0f MiB", n, rss[n]/1024))
		}
	}
	return strings.Join(parts, ", ")
}

// scaleMetrics flattens the steps into the scenario's metrics (s<k>_<name>).
func scaleMetrics(steps []scaleStep) map[string]float64 {
	m := map[string]float64{"steps": float64(len(steps))}
	for i, st := range steps {
		p := fmt.Sprintf("s%d_", i+1)
		for k, v := range map[string]float64{"nodes": float64(st.Size.Nodes), "pods": float64(st.Size.Pods), "namespaces": float64(st.Size.Namespaces),
			"services": float64(st.Size.Services), "policies": float64(st.Size.Policies),
			"master_cpu_ms_per_pod": st.MasterCPUMsPerPod, "machine_work_ms": st.MachineWorkMs, "master_kib_per_pod": st.MasterKiBPerPod, "master_peak_kib_per_pod": st.MasterPeakKiBPerPod, "nb_rows": float64(st.NBRows),
			"sb_logical_flows": float64(st.SBFlows), "nb_file_mib": st.NBFileMiB, "sb_file_mib": st.SBFileMiB,
			"annotation_p99_ms": st.AnnotationP99Ms, "restart_s": st.RestartS, "restart_nb_transactions": st.RestartNBTxns, "cold_s": st.ColdS,
			"northd_cpu_ms_per_change": st.ProbeNorthdCPUMs, "sb_server_cpu_ms_per_change": st.ProbeSBServerCPUs, "master_cpu_ms_per_change": st.ProbeMasterCPUMs,
		} {
			m[p+k] = v
		}
	}
	return m
}

func scaleNode(i int) string      { return fmt.Sprintf("node%04d", i) }
func scaleNamespace(i int) string { return fmt.Sprintf("sc-%05d", i) }

// scaleTo grows the cluster from cur to to: nodes (until annotated), then
// namespaces, policies, services and pods, until the master has programmed
// every one of them.
func (b *bench) scaleTo(cur, to scaleSize, step int) scaleStep {
	ctx := context.Background()
	st := scaleStep{Size: to, ZoneMode: b.zones != nil}
	stopProfile := b.profile(fmt.Sprintf("scale-grow-%d", step+1))
	defer stopProfile()
	stopAllocs := b.allocations(fmt.Sprintf("scale-grow-%d", step+1))
	defer stopAllocs()
	base := cpuSnapshot()
	speed := watchSpeed(func() float64 { return cpuSnapshot().since(base)["ovnkube"] })
	defer speed.end()
	start, cpu, metrics := time.Now(), cpuSnapshot(), b.scrapeMaster()
	parallel(to.Nodes-cur.Nodes, b.o.workers, func(i int) {
		n := cur.Nodes + i
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: scaleNode(n), Labels: map[string]string{"zone": fmt.Sprintf("z%d", n%4)}}}
		b.zoneNode(node)
		if _, err := b.kube.Client.CoreV1().Nodes().Create(ctx, node, metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	harness.Eventually(b.s, b.waitFor(to.Nodes, 50), "every node annotated", func() error {
		nodes, err := b.kube.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return err
		}
		missing := 0
		for _, n := range nodes.Items {
			if n.Annotations[annotations.NodeSubnets] == "" {
				missing++
			}
		}
		if missing > 0 || len(nodes.Items) < to.Nodes {
			return fmt.Errorf("%d of %d nodes not annotated", missing, len(nodes.Items))
		}
		b.readZoneSubnets(nodes.Items)
		return nil
	})
	st.NodesAnnotatedS = time.Since(start).Seconds()
	parallel(to.Namespaces-cur.Namespaces, b.o.workers, func(i int) {
		n := cur.Namespaces + i
		b.kube.EnsureLabelledNamespace(b.s, scaleNamespace(n), map[string]string{"team": fmt.Sprintf("t%d", n%10)})
	})
	// Policies and services before the pods, at every step: each new pod
	// lands under the policies of its namespace (the steady state of a
	// cluster, and the same work per pod at every step; pods created
	// before their namespace's policy cost a share of one policy sync).
	parallel(to.Policies-cur.Policies, b.o.workers, func(i int) {
		j := cur.Policies + i
		np := benchPolicy(scaleNamespace(j%to.Namespaces), j, j)
		np.Name = fmt.Sprintf("np%06d", j)
		if _, err := b.kube.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	parallel(to.Services-cur.Services, b.o.serviceWorkers, func(i int) {
		j := cur.Services + i
		b.createService(scaleNamespace(j%to.Namespaces), j)
	})
	keys := make([]string, to.Pods-cur.Pods)
	nodes := b.placePods(len(keys), to.Nodes, to.Pods)
	parallel(len(keys), b.o.workers, func(i int) {
		j := cur.Pods + i
		keys[i] = b.scalePod(scaleNamespace(j%to.Namespaces), fmt.Sprintf("p%06d", j), scaleNode(nodes[i]), j/to.Namespaces)
	})
	b.waitPods(keys, b.waitFor(len(keys), 100))
	b.podCount += len(keys)
	harness.Eventually(b.s, b.waitFor(to.Services, 50), "every service load balancer programmed", func() error {
		if full, _ := b.programmedServices(); full < to.Services {
			return fmt.Errorf("%d of %d", full, to.Services)
		}
		return nil
	})
	harness.Eventually(b.s, b.waitFor(to.Policies, 50), "every policy's port group and ACLs in the NB", func() error {
		if n := b.policyTrack.programmed(); n < to.Policies {
			return fmt.Errorf("%d of %d", n, to.Policies)
		}
		return nil
	})
	b.serviceCount, b.policyCount = to.Services, to.Policies
	st.GrowS = time.Since(start).Seconds()
	used := cpuSnapshot().since(cpu)
	st.GrowCPU = used
	st.MachineWork = speed.end()
	st.MachineWorkMs = weighSpeed(st.MachineWork)
	st.MasterCPUMsPerPod = 1000 * used["ovnkube"] / float64(len(keys))
	after, pods := b.scrapeMaster(), float64(len(keys))
	st.MasterAllocKiBPerPod = after.delta(metrics, "go_memstats_alloc_bytes_total") / 1024 / pods
	st.MasterGCs = after.delta(metrics, "go_gc_duration_seconds_count")
	st.MasterHeapMiB = after["go_memstats_heap_inuse_bytes"] / (1 << 20)
	st.MasterSyncsPerPod = map[string]float64{}
	var syncs []string
	for q, n := range after.queueSyncs(metrics) {
		st.MasterSyncsPerPod[q] = n / pods
		syncs = append(syncs, fmt.Sprintf("%s %.2f", q, n/pods))
	}
	sort.Strings(syncs)
	var work []string
	for _, r := range st.MachineWork {
		work = append(work, strconv.FormatFloat(r.WorkMs, 'f', 0, 64))
	}
	say("   the fixed piece of work during the growth: %s ms, %.0f ms weighed by the master's CPU", strings.Join(work, ", "), st.MachineWorkMs)
	say("   grown in %.1f s (nodes annotated after %.1f s); CPU: %s; the master allocated %.1f KiB per pod added in %.0f garbage collections, heap in use %.0f MiB; syncs per pod added: %s",
		st.GrowS, st.NodesAnnotatedS, used.describe(st.GrowS), st.MasterAllocKiBPerPod, st.MasterGCs, st.MasterHeapMiB, strings.Join(syncs, ", "))
	return st
}

// placePods picks the nodes of n new pods, round-robin over those holding
// less than their share of total: the earlier steps' nodes are full when
// new nodes join, and no node ends up with more than its share.
func (b *bench) placePods(n, nodes, total int) []int {
	for len(b.scaleLoad) < nodes {
		b.scaleLoad = append(b.scaleLoad, 0)
	}
	share := (total + nodes - 1) / nodes
	out := make([]int, 0, n)
	for len(out) < n {
		placed := false
		for node := 0; node < nodes && len(out) < n; node++ {
			if b.scaleLoad[node] < share {
				b.scaleLoad[node]++
				out = append(out, node)
				placed = true
			}
		}
		if !placed {
			share++
		}
	}
	return out
}

// waitFor is how long to wait for n objects at no less than rate per second
// (and never less than two minutes).
func (b *bench) waitFor(n, rate int) time.Duration {
	return max(2*time.Minute, time.Duration(n/rate)*time.Second)
}

// scalePod creates a pod labelled app=a<k mod 10>, recording when; it
// returns its key.
func (b *bench) scalePod(ns, name, node string, k int) string {
	key := ns + "/" + name
	b.mu.Lock()
	b.created[key] = time.Now()
	b.mu.Unlock()
	labels := map[string]string{"app": fmt.Sprintf("a%d", k%10)}
	pod, err := b.kube.Client.CoreV1().Pods(ns).Create(context.Background(), podObject(name, node, labels), metav1.CreateOptions{})
	if err != nil {
		b.s.Fatal(err)
	}
	b.zoneLocal(node)
	if b.zones != nil && node != realNode {
		b.annotateRemotePod(pod)
	}
	return key
}

// scaleProbePods creates -scale-probe pods at -scale-rate over the
// namespaces and nodes there are, each selected by a policy: creation →
// annotation, and every process's CPU per pod until northd has digested them.
func (b *bench) scaleProbePods(st *scaleStep, step int) {
	b.settle(fmt.Sprintf("the probe of step %d", step+1))
	n := b.o.scaleProbe
	keys := make([]string, n)
	nodes := b.placePods(n, st.Size.Nodes, b.podCount+n)
	for i := range nodes {
		nodes[i] = b.zoneProbeNode(i, nodes[i])
	}
	interval := time.Second / time.Duration(b.o.scaleRate)
	var wg sync.WaitGroup
	engine := b.northdRecomputes()
	stopProfile := b.profile(fmt.Sprintf("scale-probe-%d", step+1))
	defer stopProfile()
	start, cpu := time.Now(), cpuSnapshot()
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			keys[i] = b.scalePod(scaleNamespace(i%st.Size.Namespaces), fmt.Sprintf("q%d-%05d", step, i), scaleNode(nodes[i]), i)
		}(i)
	}
	wg.Wait()
	b.waitPods(keys, b.waitFor(n, 10))
	b.waitNBQuietBefore("the probe's CPU is read")
	if _, err := b.ovn.NBCtl("--timeout=300", "--wait=sb", "sync"); err != nil {
		b.s.Fatal(err)
	}
	if b.nodeSide != nil { // the probe's pods bound, and ovn-controller done with them
		b.nodeSide.grow(st.Size.Nodes)
		b.settle("the probe's CPU is read")
	}
	used := cpuSnapshot().since(cpu)
	after := b.northdRecomputes()
	st.NorthdFlowRuns = after["lflow compute"] + after["lflow recompute"] - engine["lflow compute"] - engine["lflow recompute"]
	st.NorthdFlowRecomputes = after["lflow recompute"] - engine["lflow recompute"]
	b.podCount += n
	var ann []float64
	b.mu.Lock()
	for _, k := range b.probeLatencyKeys(keys, nodes) {
		ann = append(ann, float64(b.annotated[k].Sub(b.created[k]).Microseconds())/1000)
	}
	b.mu.Unlock()
	sort.Float64s(ann)
	st.ProbePods, st.LatencyPods, st.AnnotationP50Ms, st.AnnotationP99Ms = n, len(ann), pct(ann, 0.5), pct(ann, 0.99)
	st.CPUMsPerChange = map[string]float64{}
	for name, s := range used {
		st.CPUMsPerChange[name] = 1000 * s / float64(n)
	}
	st.ProbeMasterCPUMs, st.ProbeNorthdCPUMs, st.ProbeSBServerCPUs = st.CPUMsPerChange["ovnkube"], st.CPUMsPerChange["ovn-northd"], st.CPUMsPerChange["ovsdb-server-sb"]
	say("   probe: %d pods at %d/s: creation → annotation (of %d) p50 %.0f ms, p99 %.0f ms; CPU per pod: master %.2f ms, northd %.2f ms, SB server %.2f ms, NB server %.2f ms; "+
		"northd's logical flows updated %d times, %d of them computed again in full",
		n, b.o.scaleRate, st.LatencyPods, st.AnnotationP50Ms, st.AnnotationP99Ms, st.ProbeMasterCPUMs, st.ProbeNorthdCPUMs, st.ProbeSBServerCPUs, st.CPUMsPerChange["ovsdb-server-nb"],
		st.NorthdFlowRuns, st.NorthdFlowRecomputes)
}

// northdRecomputes reads ovn-northd's incremental engine's counts: for
// each of its nodes, "<node> recompute" (computed again in full) and
// "<node> compute" (updated incrementally); nil when northd does not say.
func (b *bench) northdRecomputes() map[string]int {
	out, err := harness.Run("ovn-appctl", "-t", filepath.Join(b.ovn.Dir, "northd.ctl"), "inc-engine/show-stats")
	if err != nil {
		return nil
	}
	m := map[string]int{}
	node := ""
	for _, line := range strings.Split(out, "\n") {
		if name, ok := strings.CutPrefix(line, "Node: "); ok {
			node = strings.TrimSpace(name)
		} else if f := strings.Fields(line); len(f) == 3 && (f[1] == "recompute:" || f[1] == "compute:") {
			m[node+" "+strings.TrimSuffix(f[1], ":")], _ = strconv.Atoi(f[2])
		}
	}
	return m
}

// scaleMeasure reads every process's RSS and the databases' sizes, both
// databases compacted first (their memory trimmed).
func (b *bench) scaleMeasure(st *scaleStep) {
	st.NBFileMiB, st.SBFileMiB = b.compactedMiB("nb"), b.compactedMiB("sb")
	time.Sleep(2 * time.Second) // let the Go runtimes settle before reading RSS
	st.RSS, st.PeakRSS = map[string]float64{}, map[string]float64{}
	for pid, p := range cpuSnapshot() {
		if pid > 0 {
			st.RSS[p.name] += procStatus(pid, "VmRSS")
			st.PeakRSS[p.name] += procStatus(pid, "VmHWM")
		}
	}
	st.MasterKiBPerPod = (procStatus(b.master.Cmd.Process.Pid, "VmRSS") - b.idleRSS) / float64(b.podCount)
	st.MasterPeakKiBPerPod = (procStatus(b.master.Cmd.Process.Pid, "VmHWM") - b.idleRSS) / float64(b.podCount)
	st.NBRows = b.nbRows()
	if b.nodeSide != nil && !b.nodeSide.running() {
		st.NodeStopped = b.nodeSide.stopped
	} else if b.nodeSide != nil {
		st.NodeFlows, st.NodeTunnels = b.nodeSide.flows(), b.nodeSide.tunnels()
		st.ControllerKiB = st.RSS["ovn-controller"]
		st.ControllerCPUMsPerChange = st.CPUMsPerChange["ovn-controller"]
		say("   %s: ovn-controller RSS %.0f MiB, %d OpenFlow flows, %d Geneve tunnels; CPU per pod created elsewhere: ovn-controller %.2f ms, its ovs-vswitchd %.2f ms",
			realNode, st.ControllerKiB/1024, st.NodeFlows, st.NodeTunnels, st.ControllerCPUMsPerChange, st.CPUMsPerChange["ovs-vswitchd"])
	}
	if b.o.scaleMonitors > 0 && b.o.scaleRelays == 0 {
		say("   the SB server's clients: %s (%d of them the benchmark's monitors)", b.sbSessions(), b.o.scaleMonitors)
	} else if b.o.scaleMonitors > 0 {
		say("   the SB server's clients: %s; the %d relays' CPU per probe pod %.2f ms in all (the benchmark's %d monitors are theirs)",
			b.sbSessions(), b.o.scaleRelays, st.CPUMsPerChange["ovsdb-server-relay"], b.o.scaleMonitors)
	}
	st.SBFlows = b.sbLogicalFlows()
}

// nbRows counts the rows of the benchmark's NB monitor.
func (b *bench) nbRows() int {
	n := 0
	for _, table := range b.nb.Cache().Tables() {
		n += b.nb.Cache().Table(table).Len()
	}
	return n
}

// compactedMiB compacts a database and reports its file's size.
func (b *bench) compactedMiB(db string) float64 {
	if _, err := harness.Run("ovs-appctl", "-t", filepath.Join(b.ovn.Dir, db+".ctl"), "ovsdb-server/compact"); err != nil {
		say("   compacting the %s: %v", db, err)
	}
	fi, err := os.Stat(filepath.Join(b.ovn.Dir, db+".db"))
	if err != nil {
		return 0
	}
	return float64(fi.Size()) / (1 << 20)
}

// sbLogicalFlows counts the SB's logical flows (selecting their UUIDs only:
// a select of no columns returns identical rows once).
func (b *bench) sbLogicalFlows() int {
	out, err := harness.Run("ovsdb-client", "query", "unix:"+b.ovn.SBSock,
		`["OVN_Southbound",{"op":"select","table":"Logical_Flow","where":[],"columns":["_uuid"]}]`)
	if err != nil {
		say("   counting logical flows: %v", err)
		return 0
	}
	return strings.Count(out, `"_uuid"`)
}

// scaleRestarts restarts the master (idle: it should write nothing), then
// starts it on an empty NB.
func (b *bench) scaleRestarts(st *scaleStep) {
	r := b.restart()
	st.RestartS, st.RestartNBTxns = r.Metrics["synced_s"], r.Metrics["nb_transactions"]
	c := b.cold()
	st.ColdS, st.ColdLSPsS, st.ColdPoliciesS = c.Metrics["programmed_s"], c.Metrics["lsps_programmed_s"], c.Metrics["policies_programmed_s"]
}

// watchMemory stops the benchmark, as an interrupt would (everything it
// started removed; the steps done are already written), when the machine's
// available memory falls below -scale-min-free: the size where this
// machine runs out is a result, not a reason to let the kernel kill
// processes. It returns the function that stops watching.
func (b *bench) watchMemory() func() {
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(2 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				if avail := meminfo("MemAvailable"); avail > 0 && avail < float64(b.o.scaleMinFree)*1024 {
					msg := fmt.Sprintf("stopped: this machine had %.0f MiB of memory left (-scale-min-free %d) at %d nodes and %d pods; the steps before are in scale.txt, this step's growth (when it ended) in scale-steps.json",
						avail/1024, b.o.scaleMinFree, len(b.scaleLoad), b.podCount)
					say("   %s", msg)
					f, err := os.OpenFile(filepath.Join(b.o.out, "scale.txt"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
					if err == nil {
						_, _ = fmt.Fprintln(f, msg)
						_ = f.Close()
					}
					_ = syscall.Kill(os.Getpid(), syscall.SIGINT)
					return
				}
			}
		}
	}()
	return func() { close(done) }
}

// machineMemKiB is MemTotal of /proc/meminfo.
func machineMemKiB() float64 { return meminfo("MemTotal") }

// meminfo reads a field of /proc/meminfo, in KiB (0 when absent).
func meminfo(field string) float64 {
	data, _ := os.ReadFile("/proc/meminfo")
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == field+":" {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}
