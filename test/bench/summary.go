package main

import (
	"fmt"
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

var targets = []target{
	{"burst", "ratio_to_patch_limit", "burst throughput vs the PATCH limit (≥ 70 %)",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, func(v float64) bool { return v >= 0.7 }},
	{"burst", "ratio_to_create_plus_patch_ceiling", "burst throughput vs the CREATE+PATCH ceiling",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, nil},
	{"latency", "annotation_p99_ms", "p99 creation → annotation at the steady rate (≤ 100 ms)",
		func(v float64) string { return fmt.Sprintf("%.0f ms", v) }, func(v float64) bool { return v <= 100 }},
	{"services", "programmed_s", "services programmed after the first CREATE (≤ 5 s)",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, func(v float64) bool { return v <= 5 }},
	{"services", "lag_after_last_create_s", "services: last programmed after the last CREATE",
		func(v float64) string { return fmt.Sprintf("%.0f ms", 1000*v) }, nil},
	{"services", "ratio_to_api_create_limit", "services vs the API's bare creation rate",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, nil},
	{"memory", "kib_per_pod", "master RSS per pod above idle (≤ 10 KiB)",
		func(v float64) string { return fmt.Sprintf("%.1f KiB", v) }, func(v float64) bool { return v <= 10 }},
	{"restart", "nb_transactions", "NB transactions sent by a restart (0)",
		func(v float64) string { return fmt.Sprintf("%.0f", v) }, func(v float64) bool { return v == 0 }},
	{"restart", "synced_s", "restart in sync (≤ 5 s at 10,000 pods)",
		func(v float64) string { return fmt.Sprintf("%.2f s", v) }, func(v float64) bool { return v <= 5 }},
	{"cold", "ratio_to_nb_limit", "cold: LSPs programmed vs the NB limit",
		func(v float64) string { return fmt.Sprintf("%.0f %%", 100*v) }, nil},
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
		if !ok {
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
	}
	return b.String()
}
