package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// ipFamily is a value of -ip-families: the IP families the master gives
// every pod an address of, and the range flags that make it do so.
type ipFamily struct {
	name, label string
	families    []corev1.IPFamily
	masterArgs  []string
}

// ipFamilies are the values -ip-families takes. IPv4 runs on the master's
// defaults; dual-stack adds the IPv6 ranges of the cluster in a box (the
// API server serves both service ranges either way, harness.StartKubeAPI;
// the master's default --join-subnet has a range of each family).
var ipFamilies = []ipFamily{
	{name: "ipv4", label: "IPv4", families: []corev1.IPFamily{corev1.IPv4Protocol}},
	{name: "dual", label: "dual-stack", families: []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
		masterArgs: []string{"--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--service-cidr", "10.96.0.0/16,fd00:10:96::/112"}},
}

// familyScenarios are the scenarios that measure what a pod costs (burst
// and latency time it, memory divides the master's CPU and RSS by it): the
// ones compared across families.
var familyScenarios = []string{"burst", "latency", "memory"}

// parseFamilies reads -ip-families: known names, none twice.
func parseFamilies(list string) ([]ipFamily, error) {
	var out []ipFamily
	for _, name := range strings.Split(list, ",") {
		i := slices.IndexFunc(ipFamilies, func(f ipFamily) bool { return f.name == name })
		if i < 0 || slices.ContainsFunc(out, func(f ipFamily) bool { return f.name == name }) {
			return nil, fmt.Errorf("-ip-families %q: give each of ipv4, dual at most once", list)
		}
		out = append(out, ipFamilies[i])
	}
	return out, nil
}

// family is the IP family this (single-family) run gives its master.
func (o options) family() ipFamily {
	f, _ := parseFamilies(o.families) // checked in main
	return f[0]
}

// runDir is where a run on a stack writes its results: ovn-<stack>, with
// the family's name after it for a family other than IPv4.
func runDir(stack string, f ipFamily) string {
	if f.name == "ipv4" {
		return "ovn-" + stack
	}
	return "ovn-" + stack + "-" + f.name
}

// perPodScenarios keeps the requested scenarios that familyScenarios has,
// in their order, comma-separated ("" when none).
func perPodScenarios(requested string) string {
	o := options{scenarios: requested}
	var out []string
	for _, s := range familyScenarios {
		if slices.Contains(o.scenarioList(), s) {
			out = append(out, s)
		}
	}
	return strings.Join(out, ",")
}

// compareFamilies runs the benchmark on the stacks as -stacks says (IPv4),
// then the per-pod scenarios on the first stack (the current one in `make
// bench`) once per family, each in a cluster of its own, one after the
// other, with the results under <out>/families; then prints the families
// side by side with the ratio of each to IPv4. The IPv4 runs of the stacks
// are left out when they would repeat the family comparison's.
func compareFamilies(o options, fams []ipFamily, args []string) error {
	stacks, scenarios := strings.Split(o.stacks, ","), perPodScenarios(o.scenarios)
	if scenarios == "" {
		return fmt.Errorf("-ip-families compares %s: -scenarios names none of them", strings.Join(familyScenarios, ","))
	}
	if len(stacks) > 1 || slices.ContainsFunc(o.scenarioList(), func(s string) bool { return !slices.Contains(familyScenarios, s) }) {
		if err := runStacks(stacks, slices.Concat(args, []string{"-ip-families", "ipv4"}), o.out, ipFamilies[0], o.fullSize()); err != nil {
			return err
		}
	}
	out := filepath.Join(o.out, "families")
	var all []stackResults
	for _, f := range fams {
		fmt.Printf("######## %s master, OVN stack %s: %s\n", f.label, stacks[0], scenarios)
		childArgs := []string{"-stacks", stacks[0], "-ip-families", f.name, "-scenarios", scenarios, "-out", out}
		if err := runChild(stacks[0], slices.Concat(args, childArgs)); err != nil {
			return fmt.Errorf("the benchmark with a %s master: %w", f.label, err)
		}
		r, err := readStack(filepath.Join(out, runDir(stacks[0], f)))
		if err != nil {
			return err
		}
		all = append(all, r)
	}
	fmt.Print(familyTable(all, fams, o.fullSize()))
	data, _ := json.MarshalIndent(all, "", "  ")
	return os.WriteFile(filepath.Join(out, "families.json"), append(data, '\n'), 0o644)
}

// familyRow is a figure of the family comparison; target, when set, is
// the most a family may cost against IPv4 (docs/performance.md, issue 33).
type familyRow struct {
	what   string
	value  func([]Result) (float64, bool)
	format func(float64) string
	target float64
}

var familyRows = []familyRow{
	{"pod addresses (each checked in annotation and LSP)", addresses, unit("%.0f", 1), 0},
	{"burst: pods/s", figure("burst", "pods_per_s"), unit("%.0f /s", 1), 0},
	{"burst vs the CREATE+PATCH ceiling", figure("burst", "ratio_to_create_plus_patch_ceiling"), unit("%.0f %%", 100), 0},
	{"burst: all annotated after", figure("burst", "all_annotated_s"), unit("%.2f s", 1), 0},
	{"burst: master CPU per pod", masterPerPod("burst"), unit("%.2f ms", 1000), 0},
	{"latency: p50 creation → annotation", figure("latency", "annotation_p50_ms"), unit("%.0f ms", 1), 0},
	{"latency: p99 creation → annotation", figure("latency", "annotation_p99_ms"), unit("%.0f ms", 1), 0},
	{"latency: p99 pod seen → annotation (the master's part)", figure("latency", "watch_to_annotation_p99_ms"), unit("%.0f ms", 1), 0},
	{"latency: p99 creation → LSP", figure("latency", "lsp_p99_ms"), unit("%.0f ms", 1), 0},
	{"latency: master CPU per pod", masterPerPod("latency"), unit("%.2f ms", 1000), 0},
	{"master CPU per pod created (dual/IPv4 ≤ 1.30)", figure("memory", "cpu_ms_per_pod"), unit("%.2f ms", 1), 1.30},
	{"master RSS per pod above idle (dual/IPv4 ≤ 1.30)", figure("memory", "kib_per_pod"), unit("%.1f KiB", 1), 1.30},
	{"master RSS", figure("memory", "rss_kib"), unit("%.0f MiB", 1.0/1024), 0},
}

// addresses is what the pod scenarios' address check found per pod.
func addresses(rs []Result) (float64, bool) {
	if v, ok := metric(rs, "burst", "addresses_per_pod"); ok {
		return v, ok
	}
	return metric(rs, "latency", "addresses_per_pod")
}

func figure(scenario, name string) func([]Result) (float64, bool) {
	return func(rs []Result) (float64, bool) { return metric(rs, scenario, name) }
}

// masterPerPod is the master's CPU seconds in a scenario per pod it created.
func masterPerPod(scenario string) func([]Result) (float64, bool) {
	return func(rs []Result) (float64, bool) {
		cpu, ok := metric(rs, scenario, cpuMetric("ovnkube"))
		pods, _ := metric(rs, scenario, "pods")
		return cpu / pods, ok && pods > 0
	}
}

func unit(format string, scale float64) func(float64) string {
	return func(v float64) string { return fmt.Sprintf(format, scale*v) }
}

// familyTable prints the families' figures side by side, each family's
// ratio to IPv4 beside them, the targets' verdicts at full size only.
func familyTable(all []stackResults, fams []ipFamily, fullSize bool) string {
	base := slices.IndexFunc(fams, func(f ipFamily) bool { return f.name == "ipv4" })
	var b strings.Builder
	fmt.Fprintf(&b, "\n== IP families side by side, OVN %s (each in a cluster of its own, one after the other; targets reported, not asserted)\n  %-56s", all[0].Stack, "")
	for _, f := range fams {
		fmt.Fprintf(&b, " %12s", f.label)
	}
	for _, f := range fams {
		if f.name != "ipv4" {
			fmt.Fprintf(&b, " %16s", f.name+"/"+fams[base].label)
		}
	}
	b.WriteString("\n")
	for _, row := range familyRows {
		fmt.Fprintf(&b, "  %-56s", row.what)
		for _, s := range all {
			fmt.Fprintf(&b, " %12s", formatted(row, s.Results))
		}
		for i, s := range all {
			if i != base {
				fmt.Fprintf(&b, " %16s", ratioCell(row, s.Results, all[base].Results, fullSize))
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}

func formatted(row familyRow, rs []Result) string {
	if v, ok := row.value(rs); ok {
		return row.format(v)
	}
	return "-"
}

// ratioCell is a family's figure over IPv4's, with its verdict when the row
// has a target and the sizes are those it is stated for.
func ratioCell(row familyRow, rs, base []Result, fullSize bool) string {
	v, ok1 := row.value(rs)
	ref, ok2 := row.value(base)
	if !ok1 || !ok2 || ref == 0 {
		return "-"
	}
	cell := fmt.Sprintf("%.2f", v/ref)
	if row.target > 0 && fullSize {
		cell += map[bool]string{true: " met", false: " NOT"}[v/ref <= row.target]
	}
	return cell
}

// checkAddresses fails the run unless every pod the burst and latency
// scenarios created has one address of each of the run's families, the
// same in its annotation and in its LSP's addresses and port security: a
// dual-stack figure must not silently be an IPv4 one. It returns the
// addresses per pod.
func (b *bench) checkAddresses() float64 {
	want, label := b.o.family().families, b.o.family().label
	ports := b.podPorts()
	b.mu.Lock()
	keys := make([]string, 0, len(b.created))
	for k := range b.created {
		keys = append(keys, k)
	}
	b.mu.Unlock()
	for _, key := range keys {
		ns, name, _ := strings.Cut(key, "/")
		pod, err := b.pods.Pods(ns).Get(name)
		if err == nil {
			err = podAddresses(pod.Annotations[annotations.PodNetworks], ports[key], want)
		}
		if err != nil {
			b.s.Fatalf("pod %s: %v: the %s master did not give it one address per family %v", key, err, label, want)
		}
	}
	if len(keys) == 0 {
		b.s.Fatalf("no pod to check the %s master's addresses on", label)
	}
	say("  addresses: each of %d pods has one per family %v in its annotation and its LSP (addresses, port security)", len(keys), want)
	return float64(len(want))
}

// podPorts are the pod LSPs in the benchmark's NB cache, by pod key.
func (b *bench) podPorts() map[string]*nbdb.LogicalSwitchPort {
	var lsps []nbdb.LogicalSwitchPort
	if err := b.nb.List(context.Background(), &lsps); err != nil {
		b.s.Fatal(err)
	}
	ports := make(map[string]*nbdb.LogicalSwitchPort, len(lsps))
	for i := range lsps {
		if o, ok := topology.OwnerOf(lsps[i].ExternalIDs); ok && o.Type == topology.OwnerPod {
			ports[o.Name] = &lsps[i]
		}
	}
	return ports
}

// podAddresses checks a pod's annotation and LSP against the families.
func podAddresses(annotation string, lsp *nbdb.LogicalSwitchPort, want []corev1.IPFamily) error {
	pn, err := annotations.ParsePodNetworks(annotation)
	if err != nil {
		return err
	}
	var ips []netip.Addr
	for _, p := range pn.IPs {
		ips = append(ips, p.Addr())
	}
	if len(ips) != len(want) || slices.ContainsFunc(want, func(f corev1.IPFamily) bool { return !slices.ContainsFunc(ips, isFamily(f)) }) {
		return fmt.Errorf("annotation has addresses %v", ips)
	}
	if lsp == nil {
		return fmt.Errorf("annotated (%v) but no LSP", ips)
	}
	for _, col := range [][]string{lsp.Addresses, lsp.PortSecurity} {
		_, got, ok := topology.ParseLSPAddress(strings.Join(col, " "))
		slices.SortFunc(got, netip.Addr.Compare)
		slices.SortFunc(ips, netip.Addr.Compare)
		if len(col) != 1 || !ok || !slices.Equal(got, ips) {
			return fmt.Errorf("LSP addresses %q, port security %q, annotation %v", lsp.Addresses, lsp.PortSecurity, ips)
		}
	}
	return nil
}

func isFamily(f corev1.IPFamily) func(netip.Addr) bool {
	return func(a netip.Addr) bool { return a.Is4() == (f == corev1.IPv4Protocol) }
}

// limitAnnotation is a pod-networks annotation of the size the master
// writes for the families: an address, gateway and route of each.
func limitAnnotation(fams []corev1.IPFamily) string {
	pn := annotations.PodNetwork{MAC: net.HardwareAddr{0x0a, 0x58, 10, 244, 1, 5}}
	for _, f := range fams {
		ip, gw, join := "10.244.1.5/24", "10.244.1.1", "100.64.0.0/16"
		if f == corev1.IPv6Protocol {
			ip, gw, join = "fd00:10:244:1::5/64", "fd00:10:244:1::1", "fd98::/64"
		}
		pn.IPs = append(pn.IPs, netip.MustParsePrefix(ip))
		pn.Gateways = append(pn.Gateways, netip.MustParseAddr(gw))
		pn.Routes = append(pn.Routes, annotations.PodRoute{Dest: netip.MustParsePrefix(join), NextHop: netip.MustParseAddr(gw)})
	}
	return annotations.FormatPodNetworks(pn)
}
