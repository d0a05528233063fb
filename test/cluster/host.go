package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// state is what Up changed on the host, written before each change so that
// Down can undo all of it even after the process that ran Up was killed.
type state struct {
	NetNS       []string          `json:"netns"`        // network namespaces we created
	MountNS     []string          `json:"mountns"`      // bind-mounted mount and UTS namespace files
	PrivateDir  string            `json:"private_dir"`  // the private bind mount holding MountNS
	CgroupRoot  string            `json:"cgroup_root"`  // e.g. ovnk-cluster, under every v1 hierarchy
	Sysctls     map[string]string `json:"sysctls"`      // host values before the kubelets ran
	MountPoints []string          `json:"mount_points"` // empty host directories we created to mount over
}

func (c *Cluster) statePath() string { return filepath.Join(c.Dir, "state.json") }

func (c *Cluster) saveState() error {
	b, _ := json.MarshalIndent(c.st, "", "  ")
	tmp := c.statePath() + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.statePath())
}

func loadState(dir string) (*state, error) {
	b, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := &state{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("%s: %w (remove it after cleaning up by hand)", filepath.Join(dir, "state.json"), err)
	}
	return st, nil
}

// run runs a command and returns its output; errors carry the output.
func run(args ...string) (string, error) {
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// kubeletSysctls are the host settings the kubelet changes (they are not
// per network namespace); Up saves them and Down puts them back.
var kubeletSysctls = []string{"vm/overcommit_memory", "kernel/panic", "kernel/panic_on_oops"}

func readSysctls() (map[string]string, error) {
	out := map[string]string{}
	for _, k := range kubeletSysctls {
		b, err := os.ReadFile("/proc/sys/" + k)
		if err != nil {
			return nil, err
		}
		out[k] = strings.TrimSpace(string(b))
	}
	return out, nil
}

func restoreSysctls(saved map[string]string) error {
	var errs []error
	for k, v := range saved {
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			errs = append(errs, fmt.Errorf("restoring %s=%s: %w", k, v, err))
		}
	}
	return errors.Join(errs...)
}

// cgroupHierarchies are the cgroup v1 hierarchies the kubelet uses; each
// node gets <hierarchy>/<root>/<node> (its kubelet's cgroupRoot), and every
// process the cluster starts lives below it, so Down finds all of them.
func cgroupHierarchies() []string {
	var out []string
	for _, h := range []string{"cpu", "cpuacct", "cpuset", "memory", "devices", "freezer", "blkio", "pids", "systemd", "hugetlb", "net_cls", "net_prio", "perf_event"} {
		if _, err := os.Stat(filepath.Join("/sys/fs/cgroup", h, "cgroup.procs")); err == nil {
			out = append(out, h)
		}
	}
	return out
}

// hostFree fails when the host already holds a cluster's namespaces or
// cgroups: another checkout's cluster, running or left behind. Up checks
// it before recording anything, so the Down that follows a failed Up
// cannot remove what another cluster made.
// netnsDir and cgroupDir are /var/run/netns and /sys/fs/cgroup but in tests.
func hostFree(netnsDir, cgroupDir string) error {
	held, _ := filepath.Glob(filepath.Join(netnsDir, prefix+"-*"))
	held = append(held, cgroupCopies(cgroupDir, prefix)...)
	if len(held) > 0 {
		return fmt.Errorf("the host already holds another cluster (%s): run `make cluster-down` in the checkout that started it", strings.Join(held, ", "))
	}
	return nil
}

// makeCgroup creates rel (e.g. ovnk-cluster/node/daemons) in every
// hierarchy; cpuset levels inherit their parent's CPUs and memory nodes.
func makeCgroup(rel string) error {
	for _, h := range cgroupHierarchies() {
		base := filepath.Join("/sys/fs/cgroup", h)
		cur := base
		for _, part := range strings.Split(rel, "/") {
			parent := cur
			cur = filepath.Join(cur, part)
			if err := os.Mkdir(cur, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("creating cgroup %s: %w", cur, err)
			}
			if h == "cpuset" {
				for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
					if b, _ := os.ReadFile(filepath.Join(cur, f)); strings.TrimSpace(string(b)) != "" {
						continue
					}
					b, err := os.ReadFile(filepath.Join(parent, f))
					if err == nil {
						err = os.WriteFile(filepath.Join(cur, f), b, 0o644)
					}
					if err != nil {
						return fmt.Errorf("cgroup %s: %s: %w", cur, f, err)
					}
				}
			}
		}
	}
	return nil
}

// cgroupPIDs lists every process in the pids hierarchy below rel.
func cgroupPIDs(rel string) []int {
	var pids []int
	_ = filepath.WalkDir(filepath.Join("/sys/fs/cgroup/pids", rel), func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
			return nil
		}
		b, _ := os.ReadFile(p)
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return nil
	})
	return pids
}

// killCgroup kills every process below rel until none is left: they are
// all ours (started by the cluster, or by the containerd and runc it started).
func killCgroup(rel string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		pids := cgroupPIDs(rel)
		if len(pids) == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("processes %v in cgroup %s survived SIGKILL for %s", pids, rel, timeout)
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// cgroupCopies lists rel in every hierarchy below cgroupDir that holds it:
// those makeCgroup made, and the cgroup v2 copies ("unified") that runc
// makes for the containers below it on a hybrid host.
func cgroupCopies(cgroupDir, rel string) []string {
	copies, _ := filepath.Glob(filepath.Join(cgroupDir, "*", rel))
	return copies
}

// removeCgroup removes rel and everything below it in every hierarchy,
// deepest first.
func removeCgroup(rel string) error {
	var errs []error
	for _, root := range cgroupCopies("/sys/fs/cgroup", rel) {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		slices.Reverse(dirs)
		for _, d := range dirs {
			if err := os.Remove(d); err != nil && !errors.Is(err, os.ErrNotExist) {
				errs = append(errs, err)
			}
		}
	}
	return errors.Join(errs...)
}

// mountedAt lists the mount points at or below dir in this mount namespace.
func mountedAt(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// cmdline is a process's command line, spaces between the arguments ("" once it is gone).
func cmdline(pid int) string {
	b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	return strings.TrimSpace(strings.ReplaceAll(string(b), "\x00", " "))
}

// killPID stops one process the cluster started (SIGTERM).
func killPID(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && err != syscall.ESRCH {
		return fmt.Errorf("stopping pid %d: %w", pid, err)
	}
	return nil
}
