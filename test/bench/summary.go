package main

import (
	"fmt"
	"sort"
	"strings"
)

// target is one of the performance targets of docs/performance.md, read
// from a scenario's metrics. The summary reports it; nothing is asserted.
type target struct {
	scenario, metric string
	what             string
	format           func(v float64) string
	met              func(v float64) bool
}

// The targets of issue 11, on the current stack; the same figures are
// reported for every stack.
var targets = []target{
	{"cni", "standalone_add_p99_ms", "p99 CNI ADD, pods started at once on a node, ovn_cni standalone",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, nil},
	{"cni", "server_add_p99_ms", "p99 CNI ADD, the same through the node daemon's CNI server",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, nil},
	{"cni", "standalone_add_failures", "CNI ADDs failed (retried by a runtime), standalone",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, nil},
	{"cni", "server_add_failures", "CNI ADDs failed, CNI server",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, nil},
	{"cni", "standalone_pod_gets_per_add", "API pod GETs per ADD, standalone",
		func(v float64) string { return fmt.Sprintf("%.1f", v) }, nil},
	{"cni", "server_pod_gets_per_add", "API pod GETs per ADD, CNI server",
		func(v float64) string { return fmt.Sprintf("%.1f", v) }, nil},
	{"burst", "ratio_to_create_plus_patch_ceiling", "burst vs the CREATE+PATCH ceiling (≥ 90 %)",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, func(v float64) bool { return v >= 0.9 }},
	{"burst", "ratio_to_patch_limit", "burst vs the PATCH limit",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, nil},
	{"latency", "annotation_p99_ms", "p99 creation → annotation, 100 pods/s (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"services", "lag_after_last_create_s", "services: last programmed after last CREATE (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", 1000*v) }, func(v float64) bool { return v <= 0.1 }},
	{"services", "programmed_s", "services programmed after the first CREATE",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"services", "ratio_to_api_create_limit", "services vs the API's bare creation rate",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, nil},
	{"cold", "ratio_to_nb_limit", "cold: LSPs programmed vs the NB insert limit (≥ 50 %)",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, func(v float64) bool { return v >= 0.5 }},
	{"policies", "create_to_acls_p99_ms", "p99 policy created → ACLs committed (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"policies", "label_to_address_set_p99_ms", "p99 pod label change → address sets updated (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"policies", "rows_per_policy", "NB rows per policy (independent of the pods selected)",
		func(v float64) string { return fmt.Sprintf("%.1f", v) }, nil},
	{"policies", "kib_per_policy", "master RSS per policy",
		func(v float64) string { return fmt.Sprintf("%.1f KiB", v) }, nil},
	{"cold", "policies_programmed_s", "cold: every policy programmed (≤ 10 s)",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, func(v float64) bool { return v <= 10 }},
	// Issue 34's, for the cluster-wide admin policies (ACL tiers: OVN 23.09
	// and later; on 23.03 the policies are refused, which is checked).
	{"adminpolicies", "create_to_acls_p99_ms", "p99 admin policy created → port group + ACLs (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"adminpolicies", "ns_label_to_address_sets_p99_ms", "p99 namespace relabelled → admin peer sets updated (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"adminpolicies", "rows_per_rule", "NB rows per admin policy rule (independent of the pods)",
		func(v float64) string { return fmt.Sprintf("%.2f", v) }, nil},
	{"adminpolicies", "create_to_condition_p99_ms", "p99 admin policy created → Ready condition (23.03: refused)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, nil},
	{"adminpolicies", "kib_per_admin_policy", "master RSS per admin policy",
		func(v float64) string { return fmt.Sprintf("%.1f KiB", v) }, nil},
	{"cold", "admin_policies_programmed_s", "cold: every admin policy programmed",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	// Issue 35's, for EgressIP: reported, no target stated but the idle restart's.
	{"egressips", "create_to_rows_p99_ms", "p99 EgressIP created → reroute, set, every SNAT in the NB",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, nil},
	{"egressips", "create_to_status_p99_ms", "p99 EgressIP created → assigned in its status",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, nil},
	{"egressips", "programmed_s", "every EgressIP programmed after the first CREATE",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"egressips", "rows_per_pod", "NB rows per EgressIP-selected pod (SNAT, set entry, policy)",
		func(v float64) string { return fmt.Sprintf("%.2f", v) }, nil},
	{"egressips", "failover_rows_s", "egress node NotReady → its IPs' rows on other nodes",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"egressips", "failover_status_s", "egress node NotReady → its IPs elsewhere in the status",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"egressips", "heartbeat_master_cpu_s", "master CPU for one node heartbeat, EgressIPs in place",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"egressips", "restart_nb_transactions", "idle restart with EgressIPs: NB transactions sent (0)",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) bool { return v == 0 }},
	{"cold", "egress_ips_programmed_s", "cold: every EgressIP programmed",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, nil},
	{"memory", "cpu_ms_per_pod", "master CPU per pod created (≤ 0.5 ms)",
		func(v float64) string { return fmt.Sprintf("%.2f ms", v) }, func(v float64) bool { return v <= 0.5 }},
	{"memory", "kib_per_pod", "master RSS per pod above idle (≤ 8 KiB)",
		func(v float64) string { return fmt.Sprintf("%.1f KiB", v) }, func(v float64) bool { return v <= 8 }},
	{"restart", "nb_transactions", "NB transactions sent by a restart (0)",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) bool { return v == 0 }},
	{"restart", "synced_s", "restart in sync (≤ 5 s)",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, func(v float64) bool { return v <= 5 }},
	{"diff", "differences", "ovnkube diff with the master converged: differences (0)",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) bool { return v == 0 }},
	{"diff", "took_s", "ovnkube diff, the whole command (≤ 5 s)",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, func(v float64) bool { return v <= 5 }},
}

// summary lists every target and ratio the scenarios that ran produced.
// Verdicts are given only at the sizes the targets are stated for.
func summary(results []Result, fullSize bool) string {
	byName := map[string]Result{}
	for _, r := range results {
		byName[r.Scenario] = r
	}
	var b strings.Builder
	if fullSize {
		b.WriteString("\n== summary (targets reported, not asserted)\n")
	} else {
		b.WriteString("\n== summary (smaller than the sizes the targets are stated for: no verdicts)\n")
	}
	for _, t := range targets {
		r, ok := byName[t.scenario]
		if !ok {
			continue
		}
		v, ok := r.Metrics[t.metric]
		if !ok { // the scenario ran but could not measure it: say so, never 0
			fmt.Fprintf(&b, "  %-62s %10s\n", t.what, absent(r))
			continue
		}
		verdict := ""
		if t.met != nil && fullSize {
			verdict = "  not met"
			if t.met(v) {
				verdict = "  met"
			}
		}
		fmt.Fprintf(&b, "  %-62s %10s%s\n", t.what, t.format(v), verdict)
		if verdict == "  not met" {
			switch t.metric {
			case "cpu_ms_per_pod":
				fmt.Fprintf(&b, "      where the master's CPU went: %s\n", masterCPU(results))
			case "kib_per_pod":
				fmt.Fprintf(&b, "      the master's own memory: %.1f MiB RSS, %.1f MiB of it idle, %.1f MiB the policies'\n",
					r.Metrics["rss_kib"]/1024, r.Metrics["idle_rss_kib"]/1024, r.Metrics["policy_rss_kib"]/1024)
			case "restart_nb_transactions":
				fmt.Fprintf(&b, "      what it wrote: %.0f NB row changes seen, %.0f EgressIP statuses rewritten\n",
					r.Metrics["restart_nb_row_changes"], r.Metrics["restart_status_writes"])
			default:
				fmt.Fprintf(&b, "      bound: %s\n", bound(r))
			}
		}
	}
	return b.String()
}

// absent says why a scenario that ran has no figure for a target: admin
// policies are not programmed where the NB has no ACL tiers (acl_tiers 0).
func absent(r Result) string {
	if v, ok := r.Metrics["acl_tiers"]; ok && v == 0 {
		return "no ACL tiers"
	}
	return "not measured"
}

// bound names the processes that used the most CPU in a scenario, as shares
// of one core: what a target that was not met waited on.
func bound(r Result) string {
	wall := r.Metrics["wall_s"]
	if wall == 0 {
		return "the master's own CPU (" + r.Scenario + " has no phase of its own)"
	}
	type use struct {
		name string
		v    float64
	}
	var uses []use
	total := 0.0
	for k, v := range r.Metrics {
		if name, ok := strings.CutPrefix(k, cpuPrefix); ok {
			uses = append(uses, use{name, v})
			if k != cpuMetric(stealName) {
				total += v
			}
		}
	}
	sort.Slice(uses, func(i, j int) bool { return uses[i].v > uses[j].v })
	parts := []string{fmt.Sprintf("%.0f%% of one core in all over %.1f s", 100*total/wall, wall)}
	for i := 0; i < len(uses) && i < 4; i++ {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", uses[i].name, 100*uses[i].v/wall))
	}
	return strings.Join(parts, ", ")
}

// masterCPU is the master's CPU in each scenario that created objects, per
// object: where the CPU per pod of the memory figure came from.
func masterCPU(results []Result) string {
	var parts []string
	for _, r := range results {
		cpu, ok := r.Metrics[cpuMetric("ovnkube")]
		if !ok {
			continue
		}
		n, what := r.Metrics["pods"], "pod"
		if r.Scenario == "services" {
			n, what = r.Metrics["services"], "service"
		}
		if n == 0 || r.Scenario == "restart" || r.Scenario == "cold" {
			continue
		}
		parts = append(parts, fmt.Sprintf("%s %.2f ms per %s (%.0f CPU s)", r.Scenario, 1000*cpu/n, what, cpu))
	}
	return strings.Join(parts, ", ")
}
