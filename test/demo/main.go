// Command ovnk-demo runs the ovn-k8s demo: a two-node cluster in network
// namespaces on this machine, a few pods and a service, the topology and a
// connectivity report. `up` starts it in the background and waits until it
// is ready; `down` stops it and removes everything it made.
package main

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

const usage = `usage: ovnk-demo up|down|serve

  up     start the demo cluster in the background and print its report
  down   stop the demo cluster and remove everything it created
  serve  (internal) run the cluster in the foreground until SIGTERM
`

func main() {
	if len(os.Args) != 2 {
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
	dir, err := stateDir()
	if err != nil {
		fmt.Fprintln(os.Stderr, "ovnk-demo:", err)
		os.Exit(1)
	}
	switch os.Args[1] {
	case "up":
		os.Exit(up(dir))
	case "down":
		os.Exit(down(dir))
	case "serve":
		os.Exit(serve(dir))
	default:
		fmt.Fprint(os.Stderr, usage)
		os.Exit(2)
	}
}

// stateDir is _output/demo in the checkout.
func stateDir() (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for d := wd; d != filepath.Dir(d); d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go-controller")); err == nil {
			return filepath.Join(d, "_output", "demo"), nil
		}
	}
	return "", fmt.Errorf("run me from the ovn-k8s checkout")
}

func running(dir string) (int, bool) {
	b, err := os.ReadFile(filepath.Join(dir, "demo.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, false
	}
	return pid, syscall.Kill(pid, 0) == nil
}

// up starts `serve` detached and relays its progress until it is ready.
func up(dir string) int {
	if pid, ok := running(dir); ok {
		fmt.Printf("the demo is already running (pid %d); `make demo-down` stops it\n", pid)
		printFile(filepath.Join(dir, "report.txt"))
		return 0
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logPath := filepath.Join(dir, "demo.log")
	logf, err := os.Create(logPath)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	self, _ := os.Executable()
	cmd := exec.Command(self, "serve")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	logf.Close()
	_ = os.WriteFile(filepath.Join(dir, "demo.pid"), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644)
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	// Relay the supervisor's progress lines ("==> ...") as they come.
	f, _ := os.Open(logPath)
	defer f.Close()
	r := bufio.NewReader(f)
	deadline := time.Now().Add(10 * time.Minute)
	for time.Now().Before(deadline) {
		line, err := r.ReadString('\n')
		if err != nil {
			select {
			case err := <-exited:
				rest, _ := os.ReadFile(logPath)
				fmt.Fprintf(os.Stderr, "the demo failed (%v); its log is %s:\n%s\n", err, logPath, tail(string(rest), 30))
				return 1
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		if strings.HasPrefix(line, "==> ") {
			fmt.Print(line)
		}
		if strings.HasPrefix(line, "==> READY") {
			printFile(filepath.Join(dir, "report.txt"))
			return 0
		}
	}
	fmt.Fprintln(os.Stderr, "the demo did not become ready in 10 minutes; see", logPath)
	return 1
}

func down(dir string) int {
	pid, ok := running(dir)
	if !ok {
		fmt.Println("no demo is running")
		return 0
	}
	fmt.Printf("stopping the demo (pid %d) and removing its namespaces and processes...\n", pid)
	_ = syscall.Kill(pid, syscall.SIGTERM)
	for i := 0; i < 600; i++ {
		if syscall.Kill(pid, 0) != nil {
			_ = os.Remove(filepath.Join(dir, "demo.pid"))
			fmt.Println("demo stopped; nothing left behind")
			return 0
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintln(os.Stderr, "the demo did not stop in 60 s; see", filepath.Join(dir, "demo.log"))
	return 1
}

// serve builds the cluster, reports, and waits for SIGTERM to tear it down.
func serve(dir string) int {
	t := harness.NewSession(filepath.Join(dir, "tmp"))
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
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
		report := runDemo(t, dir)
		if err := os.WriteFile(filepath.Join(dir, "report.txt"), []byte(report), 0o644); err != nil {
			t.Fatal(err)
		}
		fmt.Println("==> READY")
		<-stop
	}()
	fmt.Println("tearing down")
	t.RunCleanups()
	return code
}

func printFile(path string) {
	b, err := os.ReadFile(path)
	if err == nil {
		fmt.Print(string(b))
	}
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
