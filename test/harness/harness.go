// Package harness starts the real components ovn-k8s is tested against, all
// on this machine: OVN central (NB and SB ovsdb-server, ovn-northd), etcd and
// a kube-apiserver built from k8s.io/kubernetes, and ovnkube itself. Every
// process is a child started here and stopped by PID when the test ends,
// pass or fail; everything listens on unix sockets or 127.0.0.1.
package harness

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// RepoRoot finds the checkout (the directory holding go.mod).
func RepoRoot(t T) string {
	t.Helper()
	dir, err := findRepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

func findRepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "go-controller")); err == nil {
				return dir, nil
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("cannot find the ovn-k8s checkout above the working directory")
		}
		dir = parent
	}
}

// Binary returns the path of a built binary under _output/bin, failing the
// test with the command that builds it when it is missing.
func Binary(t T, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), "_output", "bin", name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("%s is missing: run `make build deps` first (make test does)", p)
	}
	return p
}

// LookPath fails the test when a binary is missing from the stack or the system.
func LookPath(t T, name string) string {
	t.Helper()
	CurrentStack.Check(t)
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s not found in PATH: run `make deps` (installs the Debian packages)", name)
	}
	return p
}

// Process is a child process with its output in a log file.
type Process struct {
	Name string
	Cmd  *exec.Cmd
	Log  string
	done chan struct{}
	err  error
}

// Start runs a command in the background; logDir receives NAME.log. The
// process is stopped at test end unless stopped earlier.
func Start(t T, logDir, name string, args ...string) *Process {
	t.Helper()
	p, err := StartProcess(logDir, name, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop() })
	return p
}

// StartProcess is Start without a test, for the demo.
func StartProcess(logDir, name string, args ...string) (*Process, error) {
	logPath := filepath.Join(logDir, name+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &Process{Name: name, Cmd: cmd, Log: logPath, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.done)
	}()
	return p, nil
}

// Exited reports whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Stop sends SIGTERM, then SIGKILL after 10 s, and waits.
func (p *Process) Stop() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Kill stops the process at once, as a crash would.
func (p *Process) Kill() {
	if !p.Exited() {
		_ = p.Cmd.Process.Kill()
		<-p.done
	}
}

// Tail returns the end of the process log, for failure messages.
func (p *Process) Tail(n int) string {
	b, _ := os.ReadFile(p.Log)
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// FreePort returns a TCP port on 127.0.0.1 that was free a moment ago. It
// is drawn below the kernel's ephemeral range, so that outgoing connections
// (which take ephemeral ports) cannot grab it before the server binds it, and
// never twice in one process.
func FreePort(t T) int {
	t.Helper()
	portsMu.Lock()
	defer portsMu.Unlock()
	low := ephemeralLow()
	for tries := 0; tries < 1000; tries++ {
		port := 10000 + rand.IntN(low-10000)
		if portsHanded[port] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			continue
		}
		_ = l.Close()
		portsHanded[port] = true
		return port
	}
	t.Fatalf("no free TCP port between 10000 and %d on 127.0.0.1", low)
	return 0
}

// ephemeralLow is the start of the kernel's ephemeral port range.
func ephemeralLow() int {
	data, _ := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(data)); len(f) == 2 {
		if low, err := strconv.Atoi(f[0]); err == nil && low > 11000 {
			return low
		}
	}
	return 32768
}

var (
	portsMu     sync.Mutex
	portsHanded = map[int]bool{}
)

// Run runs a command to completion and returns its combined output.
func Run(args ...string) (string, error) {
	var out bytes.Buffer
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	if err != nil {
		return out.String(), fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out.String())
	}
	return out.String(), nil
}

// Eventually polls cond until it returns nil or the timeout passes.
func Eventually(t T, timeout time.Duration, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = cond(); err == nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s: %v", timeout, what, err)
}
