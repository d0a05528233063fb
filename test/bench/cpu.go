package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// cpuUse is CPU seconds by process name: the benchmark itself and every
// process it started (API server, etcd, ovsdb-servers, northd, the master).
type cpuUse map[string]float64

// cpuSample is CPU seconds by process ID, so that a process started between
// two samples (a restarted master) counts from zero.
type cpuSample map[int]procTime

type procTime struct {
	name string
	cpu  float64
}

// cpuSnapshot reads /proc for this process and its direct children.
func cpuSnapshot() cpuSample {
	self := os.Getpid()
	use := cpuSample{self: {"ovnk-bench", procCPU(self)}, stealPID: {stealName, stealSeconds()}}
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		s := string(data)
		open, end := strings.IndexByte(s, '('), strings.LastIndex(s, ")")
		if open < 0 || end < open {
			continue
		}
		f := strings.Fields(s[end+2:])
		if ppid, _ := strconv.Atoi(f[1]); ppid != self {
			continue
		}
		pid, _ := strconv.Atoi(strings.TrimSpace(s[:open]))
		use[pid] = procTime{processName(pid, s[open+1:end]), statCPU(f)}
	}
	return use
}

// The hypervisor's steal time (CPU this VM was ready to use but another VM
// got) is reported like a process, as it explains a slow run.
const (
	stealPID  = -1
	stealName = "stolen by other VMs"
)

// stealSeconds is the steal column of /proc/stat's cpu line, in seconds.
func stealSeconds() float64 {
	data, _ := os.ReadFile("/proc/stat")
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return 0
	}
	ticks, _ := strconv.ParseFloat(f[8], 64)
	return ticks / 100
}

// processName tells the ovsdb-servers apart by their database file, and
// zone mode's cluster manager from the master.
func processName(pid int, comm string) string {
	if comm != "ovsdb-server" && comm != "ovnkube" {
		return comm
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if comm == "ovnkube" { // the master, or zone mode's cluster manager
		if strings.Contains(string(cmdline), "\x00cluster-manager\x00") {
			return "ovnkube-cluster-manager"
		}
		return comm
	}
	if args := strings.Split(string(cmdline), "\x00"); len(args) > 1 && strings.HasPrefix(args[1], "relay:") {
		return comm + "-relay" // every SB relay of the scale scenario, as one
	} else if len(args) > 1 {
		return comm + "-" + strings.TrimSuffix(filepath.Base(args[1]), ".db")
	}
	return comm
}

// since is the CPU each process used after the earlier snapshot, by name.
// Processes that ended in between are not counted.
func (c cpuSample) since(earlier cpuSample) cpuUse {
	d := cpuUse{}
	for pid, now := range c {
		if used := now.cpu - earlier[pid].cpu; used > 0.005 {
			d[now.name] += used
		}
	}
	return d
}

// describe lists the processes by CPU used, largest first, with the share of
// one core over the given wall time.
func (c cpuUse) describe(wall float64) string {
	names := make([]string, 0, len(c))
	for n := range c {
		names = append(names, n)
	}
	total := c.total()
	sort.Slice(names, func(i, j int) bool { return c[names[i]] > c[names[j]] })
	parts := make([]string, 0, len(names)+1)
	for _, n := range names {
		parts = append(parts, fmt.Sprintf("%s %.0f%%", n, 100*c[n]/wall))
	}
	return fmt.Sprintf("%.0f%% of one core in all: %s", 100*total/wall, strings.Join(parts, ", "))
}

// total is the CPU seconds of every process, without the steal time.
func (c cpuUse) total() float64 {
	t := 0.0
	for n, v := range c {
		if n != stealName {
			t += v
		}
	}
	return t
}

// cpuPrefix starts the metrics that hold a process's CPU seconds in a
// scenario; wall_s is the time they were used over.
const cpuPrefix = "cpu_s_"

// metrics adds each process's CPU seconds as cpu_s_<name>, and the wall
// time they were used over as wall_s, so that the summary can name the
// processes that bound a scenario.
func (c cpuUse) metrics(m map[string]float64, wall float64) {
	for n, v := range c {
		m[cpuMetric(n)] = v
	}
	m["wall_s"] = wall
}

// cpuMetric is the metric holding a process's CPU seconds.
func cpuMetric(process string) string {
	return cpuPrefix + strings.NewReplacer("-", "_", " ", "_").Replace(process)
}

// procStatus reads a kB field of /proc/PID/status.
func procStatus(pid int, field string) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// procCPU is user+system CPU seconds of a process.
func procCPU(pid int) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	end := strings.LastIndex(s, ")")
	if end < 0 || end+2 > len(s) {
		return 0
	}
	return statCPU(strings.Fields(s[end+2:]))
}

// statCPU is user+system CPU seconds from the fields of /proc/PID/stat after
// the command name.
func statCPU(f []string) float64 {
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}
