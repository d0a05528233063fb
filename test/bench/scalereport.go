package main

import (
	"fmt"
	"math"
	"runtime"
	"slices"
	"sort"
	"strings"
)

// The scale scenario's report: pure arithmetic over the steps measured.

// systemRSS is the RSS (KiB) of what is measured (counted).
func systemRSS(st scaleStep) float64 {
	t := 0.0
	for name, v := range st.RSS {
		if counted(st, name) {
			t += v
		}
	}
	return t
}

// counted tells the processes whose costs the report adds up: in central
// mode the control plane's, every process but the benchmark's own and
// node0000's; in zone mode what one node runs, its zone's control plane
// and its OVS (the API server, etcd, the IC databases and the cluster
// manager run once for the cluster).
func counted(st scaleStep, name string) bool {
	if st.ZoneMode {
		return zoneProcess(name)
	}
	return !nodeProcess(name)
}

// zoneProcess tells what a node of a zone per node runs.
func zoneProcess(name string) bool {
	switch name {
	case "ovsdb-server-nb", "ovsdb-server-sb", "ovn-northd", "ovn-ic", "ovnkube", "ovn-controller", "ovs-vswitchd", "ovsdb-server-conf":
		return true
	}
	return false
}

// nodeProcess tells the processes that are not the control plane's: the
// benchmark's own, node0000's (OVS and ovn-controller) and its tools.
func nodeProcess(name string) bool {
	switch name {
	case "ovnk-bench", "ovn-controller", "ovs-vswitchd", "ovsdb-server-conf", "ovsdb-client", "ovs-vsctl", "ip":
		return true
	}
	return false
}

// singleThreaded are the processes that use one core at most: a change rate
// they cannot keep up with is a limit however many cores the host has. The
// master is one of them: after its startup sync it runs on one P unless
// GOMAXPROCS says otherwise (docs/performance.md).
var singleThreaded = []string{"ovn-northd", "ovsdb-server-nb", "ovsdb-server-sb", "ovnkube"}

// bigHost is the control-plane host the report extrapolates to.
var bigHost = struct {
	cores  float64
	memKiB float64
}{16, 64 << 20}

// linear fits y = a + b·pods through the last two steps (through the origin
// with one step).
func linear(steps []scaleStep, y func(scaleStep) float64) (a, b float64) {
	pods := func(st scaleStep) float64 { return float64(st.Size.Pods) }
	if last := steps[len(steps)-1]; len(steps) == 1 {
		return 0, y(last) / pods(last)
	}
	return linearIn(steps[len(steps)-2:], pods, y)
}

// reach is the pods at which a + b·pods reaches limit (+Inf when it never does).
func reach(a, b, limit float64) float64 {
	if b <= 0 {
		if a >= limit {
			return 0
		}
		return math.Inf(1)
	}
	return math.Max(0, (limit-a)/b)
}

// limitOf is one resource's reach.
type limitOf struct {
	what string
	pods float64
}

// limits extrapolates, from the last two steps, the pods at which each
// resource of a host runs out: memory for every process's RSS; all cores
// for every process's CPU at rate pods created per second; one core for
// each single-threaded process at that rate.
func limits(steps []scaleStep, rate, cores, memKiB float64) []limitOf {
	var out []limitOf
	a, b := linear(steps, systemRSS)
	out = append(out, limitOf{fmt.Sprintf("memory (%.0f GiB)", memKiB/(1<<20)), reach(a, b, memKiB)})
	perChange := func(st scaleStep) float64 {
		t := 0.0
		for name, v := range st.CPUMsPerChange {
			if counted(st, name) && name != stealName {
				t += v
			}
		}
		return t
	}
	a, b = linear(steps, perChange)
	out = append(out, limitOf{fmt.Sprintf("CPU (%.0f cores) at %.0f pods/s", cores, rate), reach(a, b, 1000*cores/rate)})
	threads := singleThreaded
	if steps[len(steps)-1].ZoneMode {
		threads = append(slices.Clone(threads), "ovn-ic", "ovn-controller")
	}
	for _, p := range threads {
		a, b = linear(steps, func(st scaleStep) float64 { return st.CPUMsPerChange[p] })
		out = append(out, limitOf{fmt.Sprintf("%s's one core at %.0f pods/s", p, rate), reach(a, b, 1000/rate)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].pods < out[j].pods })
	return out
}

// scaleReport is the scale scenario's table, which costs per object are
// not flat, and where this machine and a bigger host run out.
func scaleReport(steps []scaleStep, rate int, memKiB float64) string {
	var sb strings.Builder
	w := func(format string, args ...any) { fmt.Fprintf(&sb, format+"\n", args...) }
	host, zoneMode := "control-plane host", len(steps) > 0 && steps[0].ZoneMode
	if zoneMode {
		host = "node"
		w("\nzone mode (-scale-zones): what is measured is one node of a zone per node, %s: its zone's NB, SB, northd, ovn-ic and master, "+
			"its OVS and ovn-controller (RSS GiB and the limits below count these; the API server, etcd, the IC databases and the cluster manager run once for the cluster). "+
			"The other nodes are simulated zones.", realNode)
	}
	w("\nscale: per step (CPU per pod added while growing; RSS per pod held; per change = per probe pod at %d/s)", rate)
	w("%6s %7s %6s %6s %6s | %8s %8s %8s | %9s %7s %9s %7s | %7s %8s %8s | %8s %8s | %8s %7s %7s",
		"nodes", "pods", "ns", "svcs", "pols", "mCPU ms", "mKiB", "RSS GiB", "NB rows", "NB MiB", "SB lflows", "SB MiB", "p99 ms", "northd", "SB ms", "restart", "cold",
		"OF flows", "oc MiB", "oc ms")
	for _, st := range steps {
		w("%6d %7d %6d %6d %6d | %8.2f %8.2f %8.2f | %9d %7.1f %9d %7.1f | %7.0f %8.2f %8.2f | %7.2fs %7.2fs | %8d %7.0f %7.2f",
			st.Size.Nodes, st.Size.Pods, st.Size.Namespaces, st.Size.Services, st.Size.Policies,
			st.MasterCPUMsPerPod, st.MasterKiBPerPod, systemRSS(st)/(1<<20),
			st.NBRows, st.NBFileMiB, st.SBFlows, st.SBFileMiB,
			st.AnnotationP99Ms, st.ProbeNorthdCPUMs, st.ProbeSBServerCPUs, st.RestartS, st.ColdS,
			st.NodeFlows, st.ControllerKiB/1024, st.ControllerCPUMsPerChange)
	}
	w("(mCPU, mKiB: the master's; northd, SB ms: CPU per probe pod; OF flows, oc: node0000's br-int flows, ovn-controller's RSS and CPU per probe pod)")
	if len(steps) < 2 {
		return sb.String()
	}
	for _, st := range steps {
		if st.NodeStopped != "" {
			w("%s at %d nodes: %s", realNode, st.Size.Nodes, st.NodeStopped)
			break
		}
	}
	first, last := steps[0], steps[len(steps)-1]
	w("\nper object, last step over first (%d → %d pods; flat: within ±20 %%):", first.Size.Pods, last.Size.Pods)
	pods := func(st scaleStep) float64 { return float64(st.Size.Pods) }
	for _, c := range []struct {
		what string
		y    func(scaleStep) float64
	}{
		{"master CPU per pod added", func(st scaleStep) float64 { return st.MasterCPUMsPerPod }},
		{"  over the machine's speed (below)", func(st scaleStep) float64 { return st.MasterCPUMsPerPod / st.MachineWorkMs }},
		{"the machine: fixed work's CPU, growing", func(st scaleStep) float64 { return st.MachineWorkMs }},
		{"master bytes allocated per pod added", func(st scaleStep) float64 { return st.MasterAllocKiBPerPod }},
		{"master RSS per pod held", func(st scaleStep) float64 { return st.MasterKiBPerPod }},
		{"  at its peak (VmHWM)", func(st scaleStep) float64 { return st.MasterPeakKiBPerPod }},
		{"all processes' RSS per pod", func(st scaleStep) float64 { return systemRSS(st) / pods(st) }},
		{"NB rows per pod", func(st scaleStep) float64 { return float64(st.NBRows) / pods(st) }},
		{"NB file per pod", func(st scaleStep) float64 { return st.NBFileMiB / pods(st) }},
		{"SB logical flows per pod", func(st scaleStep) float64 { return float64(st.SBFlows) / pods(st) }},
		{"SB file per pod", func(st scaleStep) float64 { return st.SBFileMiB / pods(st) }},
		{"master CPU per pod created (probe)", func(st scaleStep) float64 { return st.ProbeMasterCPUMs }},
		{"northd CPU per pod created (probe)", func(st scaleStep) float64 { return st.ProbeNorthdCPUMs }},
		{"SB server CPU per pod created (probe)", func(st scaleStep) float64 { return st.ProbeSBServerCPUs }},
		{"creation → annotation p99 (probe)", func(st scaleStep) float64 { return st.AnnotationP99Ms }},
		{"restart time per pod", func(st scaleStep) float64 { return st.RestartS / pods(st) }},
		{"cold time per pod", func(st scaleStep) float64 { return st.ColdS / pods(st) }},
	} {
		w("  %s", flatness(c.what, c.y(first), c.y(last)))
	}
	if node := nodeSteps(steps); len(node) > 1 {
		nf, nl := node[0], node[len(node)-1]
		w("%s, %d → %d nodes (the steps it ran):", realNode, nf.Size.Nodes, nl.Size.Nodes)
		pairs := func(st scaleStep) float64 { return float64(st.Size.Nodes) * float64(st.Size.Services) }
		for _, c := range []struct {
			what string
			y    func(scaleStep) float64
		}{
			{"OpenFlow flows per pod", func(st scaleStep) float64 { return float64(st.NodeFlows) / pods(st) }},
			{"OpenFlow flows per node × service", func(st scaleStep) float64 { return float64(st.NodeFlows) / pairs(st) }},
			{"ovn-controller RSS per pod", func(st scaleStep) float64 { return st.ControllerKiB / pods(st) }},
			{"ovn-controller CPU per pod created", func(st scaleStep) float64 { return st.ControllerCPUMsPerChange }},
		} {
			w("  %s", flatness(c.what, c.y(nf), c.y(nl)))
		}
		// Every node switch holds every service's load balancer, and every
		// switch is local to every node (through the cluster router): one
		// node's flows and memory go as nodes × services. Not in zone mode:
		// a node's zone holds its own switch only.
		if !zoneMode {
			a, b := linearIn(node[len(node)-2:], pairs, func(st scaleStep) float64 { return st.ControllerKiB })
			top := steps[len(steps)-1].Size
			w("  ovn-controller's RSS, linear in nodes × services through its last two steps, at %d nodes and %d services: %.1f GiB on every node",
				top.Nodes, top.Services, (a+b*pairs(scaleStep{Size: top}))/(1<<20))
		}
	}
	for _, host := range []struct {
		what          string
		cores, memKiB float64
	}{
		{fmt.Sprintf("this machine (%d cores, %.0f GiB)", runtime.NumCPU(), memKiB/(1<<20)), float64(runtime.NumCPU()), memKiB},
		{fmt.Sprintf("a %.0f-core, %.0f GiB %s", bigHost.cores, bigHost.memKiB/(1<<20), host), bigHost.cores, bigHost.memKiB},
	} {
		ls := limits(steps, float64(rate), host.cores, host.memKiB)
		w("\n%s, extrapolated linearly from the last two steps, runs out first of %s %s; then:", host.what, ls[0].what, podsString(ls[0].pods))
		for _, l := range ls[1:] {
			w("  %-44s %s", l.what, podsString(l.pods))
		}
	}
	return sb.String()
}

// flatness compares a cost per object at the first and last step.
func flatness(what string, first, last float64) string {
	verdict := "flat"
	r := last / first
	switch {
	case first == 0 || last == 0 || math.IsNaN(r) || math.IsInf(r, 0):
		verdict = "no figure" // not measured at one end (a step stopped before its restarts)
	case r > 1.2:
		verdict = "GROWS with the cluster"
	case r < 0.8:
		verdict = "falls with the cluster"
	}
	return fmt.Sprintf("%-40s %10.4g → %-10.4g ×%.2f  %s", what, first, last, r, verdict)
}

// nodeSteps are the steps node0000 measured.
func nodeSteps(steps []scaleStep) []scaleStep {
	var out []scaleStep
	for _, st := range steps {
		if st.NodeFlows > 0 {
			out = append(out, st)
		}
	}
	return out
}

// linearIn fits y = a + b·x(step) through the first and last of steps.
func linearIn(steps []scaleStep, x, y func(scaleStep) float64) (a, b float64) {
	f, l := steps[0], steps[len(steps)-1]
	if x(l) == x(f) {
		return y(l), 0
	}
	b = (y(l) - y(f)) / (x(l) - x(f))
	return y(l) - b*x(l), b
}

// podsString says at what size a resource runs out.
func podsString(p float64) string {
	switch {
	case math.IsInf(p, 1):
		return "never (its cost per pod is flat or falls)"
	case p > 1e8:
		return "beyond 100 million pods (its cost per pod barely grows)"
	case p <= 0:
		return "already at the first step"
	}
	return fmt.Sprintf("at %.0f pods", p)
}
