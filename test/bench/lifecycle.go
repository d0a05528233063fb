package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// memory: master RSS over what it now holds, and its CPU per pod: what it
// spent in the scenarios that created pods, over those pods (its CPU for
// services and policies is theirs, as their RSS is; the whole is shown too).
func (b *bench) memory() Result {
	pid := b.master.Cmd.Process.Pid
	rss, hwm := procStatus(pid, "VmRSS"), procStatus(pid, "VmHWM")
	cpu := procCPU(pid)
	// What the policies and EgressIPs added is theirs (reported per policy
	// and per EgressIP), not the pods'.
	perPod := (rss - b.idleRSS - b.policyRSS - b.adminRSS - b.eipRSS) / float64(b.podCount)
	cpuPerPod := 1000 * b.podCPU / float64(max(b.podsTimed, 1))
	say("== memory/CPU: master RSS %.1f MiB (idle %.1f MiB, peak %.1f MiB) → %.1f KiB per pod above idle", rss/1024, b.idleRSS/1024, hwm/1024, perPod)
	say("  master CPU: %.1f s in the scenarios that created %d pods = %.2f ms per pod; %.1f s since it started (services and policies included) = %.2f ms per pod held",
		b.podCPU, b.podsTimed, cpuPerPod, cpu, 1000*cpu/float64(b.podCount))
	r := Result{Scenario: "memory", Metrics: map[string]float64{"pods": float64(b.podCount), "rss_kib": rss, "idle_rss_kib": b.idleRSS,
		"peak_rss_kib": hwm, "kib_per_pod": perPod, "cpu_s": cpu, "cpu_ms_per_pod_held": 1000 * cpu / float64(b.podCount),
		"policy_rss_kib": b.policyRSS, "admin_policy_rss_kib": b.adminRSS, "egressip_rss_kib": b.eipRSS, "pod_scenarios_cpu_s": b.podCPU, "pod_scenarios_pods": float64(b.podsTimed)}}
	if b.podsTimed > 0 { // else no scenario created pods: no figure
		r.Metrics["cpu_ms_per_pod"] = cpuPerPod
	}
	return r
}

var commitLine = regexp.MustCompile(`"NB commits".*transactions=(\d+) operations=(\d+)`)

// commitStats sums the master's "NB commits" log lines.
func commitStats(log string) (txns, ops float64) {
	for _, m := range commitLine.FindAllStringSubmatch(log, -1) {
		t, _ := strconv.ParseFloat(m[1], 64)
		o, _ := strconv.ParseFloat(m[2], 64)
		txns, ops = txns+t, ops+o
	}
	return txns, ops
}

var syncLine = regexp.MustCompile(`initial sync done.*nbTransactions=(\d+)`)

// restart: with everything in place, restart the master.
func (b *bench) restart() Result {
	say("== restart with %d pods and %d services in place", b.podCount, b.serviceCount)
	b.waitNBQuiet()
	synced, txns, changes, used := b.restartMaster("restart")
	say("  synced %.2fs after start; %.0f NB transactions sent; %.0f NB row changes seen", synced.Seconds(), txns, changes)
	say("  CPU until synced: %s", used.describe(synced.Seconds()))
	m := map[string]float64{"pods": float64(b.podCount), "synced_s": synced.Seconds(), "nb_transactions": txns, "nb_row_changes": changes}
	used.metrics(m, synced.Seconds())
	return Result{Scenario: "restart", Metrics: m,
		Notes: "time from process start (includes connecting and the informers' initial list)"}
}

// waitNBQuiet waits until the running master has finished what earlier
// scenarios queued (a scenario waits for the rows it measures, not for
// every other row the change touches): the NB quiet for a second.
func (b *bench) waitNBQuiet() { b.waitNBQuietBefore("the restart") }

func (b *bench) waitNBQuietBefore(what string) {
	last, since := b.nbEvents.Load(), time.Now()
	harness.Eventually(b.s, 120*time.Second, "the NB quiet for a second before "+what, func() error {
		if n := b.nbEvents.Load(); n != last {
			last, since = n, time.Now()
		}
		if time.Since(since) < time.Second {
			return fmt.Errorf("a row changed %v ago", time.Since(since).Round(time.Millisecond))
		}
		return nil
	})
}

// restartMaster stops the master and starts a new one (its CPU profile,
// when the master serves pprof, named after profile): the time from its
// start to "initial sync done", the NB transactions it says it sent until
// then (-1: not found), the NB row changes the watcher saw until a second
// after, and the CPU used until it synced.
func (b *bench) restartMaster(profile string) (time.Duration, float64, float64, cpuUse) {
	b.master.Stop()
	time.Sleep(500 * time.Millisecond)
	before := b.nbEvents.Load()
	start, cpu := time.Now(), cpuSnapshot()
	b.master = harness.StartMaster(b.s, b.logDir, fmt.Sprintf("master-%d", time.Now().UnixNano()), b.ovn, b.kube, b.masterArgs()...)
	stopProfile := b.profile(profile)
	harness.WaitForLog(b.s, b.master, "initial sync done", b.waitFor(b.podCount, 500))
	synced := time.Since(start)
	used := cpuSnapshot().since(cpu)
	stopProfile()
	time.Sleep(time.Second)
	txns := -1.0
	if m := syncLine.FindStringSubmatch(b.master.Tail(100000)); m != nil {
		txns, _ = strconv.ParseFloat(m[1], 64)
	}
	return synced, txns, float64(b.nbEvents.Load() - before), used
}

// cold: an empty NB with everything in the API.
func (b *bench) cold() Result {
	say("== cold: empty NB, %d pods and %d services in the API", b.podCount, b.serviceCount)
	b.master.Stop()
	b.ovn.ResetNB()
	ctx := context.Background()
	// Our watcher reconnects by itself; wait until it sees the empty database.
	harness.Eventually(b.s, 30*time.Second, "watcher reconnected to the empty NB", func() error {
		var lsps []nbdb.LogicalSwitchPort
		if err := b.nb.List(ctx, &lsps); err != nil || len(lsps) > 0 || b.nb.CurrentEndpoint() == "" {
			return fmt.Errorf("still %d ports cached", len(lsps))
		}
		return nil
	})
	// A reconnect empties the cache without delete events: start counting afresh.
	b.podLSPs.Store(0)
	b.mu.Lock()
	b.lbFull = map[string]bool{}
	b.mu.Unlock()
	b.policyTrack.reset()
	b.adminTrack.reset()
	eips := b.eipTrack.resetRows()
	start, cpu := time.Now(), cpuSnapshot()
	b.master = harness.StartMaster(b.s, b.logDir, fmt.Sprintf("master-%d", time.Now().UnixNano()), b.ovn, b.kube, b.masterArgs()...)
	stopProfile := b.profile("cold")
	defer stopProfile()
	var done, lspsDone, lbsDone, policiesDone, adminDone, eipsDone time.Duration
	lspWant := b.localPods()
	harness.Eventually(b.s, max(5*time.Minute, b.waitFor(b.podCount, 250)), "everything programmed into the empty NB", func() error {
		lsps := int(b.podLSPs.Load())
		full, _ := b.programmedServices()
		if lspsDone == 0 && lsps >= lspWant {
			lspsDone = time.Since(start)
		}
		if lbsDone == 0 && full >= b.serviceCount {
			lbsDone = time.Since(start)
		}
		policies := b.policyTrack.programmed()
		if policiesDone == 0 && policies >= b.policyCount {
			policiesDone = time.Since(start)
		}
		admins := b.adminTrack.programmed()
		if adminDone == 0 && admins >= b.adminCount {
			adminDone = time.Since(start)
		}
		_, egress := b.eipTrack.progress(eips)
		if eipsDone == 0 && egress >= b.eipCount {
			eipsDone = time.Since(start)
		}
		if lsps < lspWant || full < b.serviceCount || policies < b.policyCount || admins < b.adminCount || egress < b.eipCount {
			return fmt.Errorf("%d/%d LSPs, %d/%d load balancers, %d/%d policies, %d/%d admin policies, %d/%d EgressIPs",
				lsps, lspWant, full, b.serviceCount, policies, b.policyCount, admins, b.adminCount, egress, b.eipCount)
		}
		done = time.Since(start)
		return nil
	})
	lspRate := float64(lspWant) / lspsDone.Seconds()
	ofLimit := "" // the scale scenario measures no limits
	if b.nbLimit > 0 {
		ofLimit = fmt.Sprintf(" = %.0f%% of the NB limit", 100*lspRate/b.nbLimit)
	}
	say("  %d LSPs and %d services programmed %.2fs after start (all load balancers after %.2fs, all LSPs after %.2fs: %.0f LSPs/s%s)",
		lspWant, b.serviceCount, done.Seconds(), lbsDone.Seconds(), lspsDone.Seconds(), lspRate, ofLimit)
	used := cpuSnapshot().since(cpu)
	say("  CPU until then: %s", used.describe(done.Seconds()))
	if b.policyCount > 0 {
		say("  all %d policies (port groups with their ACLs) programmed %.2fs after start", b.policyCount, policiesDone.Seconds())
	}
	if b.adminCount > 0 {
		say("  all %d admin policies (port groups with all their ACLs) programmed %.2fs after start", b.adminCount, adminDone.Seconds())
	}
	if b.eipCount > 0 {
		say("  all %d EgressIPs (reroute, set, every pod's SNAT on its node's gateway router) programmed %.2fs after start", b.eipCount, eipsDone.Seconds())
	}
	m := map[string]float64{"pods": float64(b.podCount), "services": float64(b.serviceCount), "programmed_s": done.Seconds(),
		"services_programmed_s": lbsDone.Seconds(), "lsps_programmed_s": lspsDone.Seconds(), "lsps_per_s": lspRate, "ratio_to_nb_limit": lspRate / b.nbLimit,
		"policies": float64(b.policyCount), "policies_programmed_s": policiesDone.Seconds()}
	if b.adminRan { // without ACL tiers there is nothing of theirs to wait for
		m["admin_policies"], m["acl_tiers"] = float64(b.adminCount), 0
		if b.adminTiers {
			m["acl_tiers"], m["admin_policies_programmed_s"] = 1, adminDone.Seconds()
		}
	}
	if b.eipCount > 0 {
		m["egress_ips"], m["egress_ips_programmed_s"] = float64(b.eipCount), eipsDone.Seconds()
	}
	used.metrics(m, done.Seconds())
	return Result{Scenario: "cold", Metrics: m}
}

// quietCores is the CPU (in cores) below which the machine counts as quiet:
// the API server, etcd and the OVN daemons idle over 10,000 pods use a few
// percent of one core each.
const quietCores = 0.3

// settle waits, before a scenario, until what the earlier ones started is
// done: the NB quiet for a second, northd caught up with it (the SB in
// sync), and the processes the benchmark runs using less than quietCores
// over a second (at most a minute: then it says what still runs and goes
// on). A scenario timed while the API server still digests the last one's
// 10,000 pods measures that one as much as its own.
func (b *bench) settle(next string) {
	start := time.Now()
	b.waitNBQuietBefore(next)
	if _, err := b.ovn.NBCtl("--timeout=120", "--wait=sb", "sync"); err != nil {
		b.s.Fatal(err)
	}
	for {
		before := cpuSnapshot()
		time.Sleep(time.Second)
		used := cpuSnapshot().since(before)
		if used.total() < quietCores {
			say("  (settled before %s in %.1f s)", next, time.Since(start).Seconds())
			return
		}
		if time.Since(start) > time.Minute {
			say("  (not quiet a minute after the last scenario; going on with %s: %s)", next, used.describe(1))
			return
		}
	}
}

// diff: with everything in place and the master running, `ovnkube diff`
// (issue 36: in sync, within 5 s against 10,000 pods, 1,000 services and
// 1,000 policies).
func (b *bench) diff() Result {
	say("== diff with %d pods and %d services in place", b.podCount, b.serviceCount)
	b.waitNBQuietBefore("the diff")
	args := append([]string{"--loglevel", "0", "diff", "-o", "json", "--kubeconfig", b.kube.Kubeconfig, "--nb-address", b.ovn.NBAddress(),
		"--dns-servers", harness.NoDNS, "--egressip-reachability-timeout", "0"}, b.settingArgs()...)
	// The master's settings from -master-args too (not where it serves metrics).
	extra := strings.Fields(b.o.masterArgs)
	for i := 0; i < len(extra); i++ {
		if extra[i] == "--metrics-address" || extra[i] == "--pprof-address" {
			i++
			continue
		}
		args = append(args, extra[i])
	}
	start, cpu := time.Now(), cpuSnapshot()
	cmd := exec.Command(harness.Binary(b.s, "ovnkube"), args...)
	out, err := cmd.Output()
	took := time.Since(start)
	used := cpuSnapshot().since(cpu)
	var own time.Duration // the diff's own CPU (an exited process is not in the snapshot)
	if cmd.ProcessState != nil {
		own = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	}
	var r struct {
		InSync bool               `json:"inSync"`
		Rows   []json.RawMessage  `json:"rows"`
		NBRows int                `json:"nbRows"`
		Phases map[string]float64 `json:"phasesSeconds"`
	}
	if jerr := json.Unmarshal(out, &r); jerr != nil {
		b.s.Fatalf("ovnkube diff: %v (%v): %s", jerr, err, out)
	}
	// The pass on the NB itself, then (when the master there wanted to
	// write) the pass on a copy: inPlace, read, copy, master, compare.
	var phases []string
	for _, p := range []string{"inPlace", "read", "copy", "master", "compare"} {
		if v, ok := r.Phases[p]; ok {
			phases = append(phases, fmt.Sprintf("%s %.2fs", p, v))
		}
	}
	say("  %.2fs for the NB's %d rows: %d differences (in sync: %v); %s; its own CPU %.2fs",
		took.Seconds(), r.NBRows, len(r.Rows), r.InSync, strings.Join(phases, ", "), own.Seconds())
	for _, row := range r.Rows[:min(len(r.Rows), 5)] {
		say("    %s", row)
	}
	m := map[string]float64{"pods": float64(b.podCount), "took_s": took.Seconds(), "nb_rows": float64(r.NBRows), "differences": float64(len(r.Rows)), "diff_cpu_s": own.Seconds()}
	for k, v := range r.Phases {
		m[k+"_s"] = v
	}
	used.metrics(m, took.Seconds())
	return Result{Scenario: "diff", Metrics: m, Notes: "the whole command: reading the NB and the API, the master on the in-memory copy, the comparison"}
}
