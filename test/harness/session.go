package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// Session satisfies T for programs that are not tests (the demo, the
// benchmarks): cleanups run when RunCleanups is called, and Fatal panics with
// SessionFatal for the program to recover.
type Session struct {
	running  sync.Mutex // held while RunCleanups runs: a second call waits for the first
	mu       sync.Mutex
	dir      string
	n        int
	cleanups []func()
	failed   bool
	closed   bool // RunCleanups was called: a later cleanup runs at once
}

// SessionFatal is the panic value of Session.Fatal.
type SessionFatal struct{}

// NewSession keeps temporary directories under dir.
func NewSession(dir string) *Session { return &Session{dir: dir} }

func (t *Session) Helper() {}

func (t *Session) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (t *Session) Fatal(args ...any) {
	t.failed = true
	fmt.Println(append([]any{"FATAL:"}, args...)...)
	panic(SessionFatal{})
}

func (t *Session) Fatalf(format string, args ...any) { t.Fatal(fmt.Sprintf(format, args...)) }

func (t *Session) Failed() bool { return t.failed }

// Cleanup registers f for RunCleanups; after RunCleanups (a program stopped
// by a signal while it was still creating things) f runs at once.
func (t *Session) Cleanup(f func()) {
	t.mu.Lock()
	if !t.closed {
		t.cleanups = append(t.cleanups, f)
		t.mu.Unlock()
		return
	}
	t.mu.Unlock()
	runCleanup(f)
}

func (t *Session) TempDir() string {
	t.mu.Lock()
	t.n++
	d := filepath.Join(t.dir, strconv.Itoa(t.n))
	t.mu.Unlock()
	if err := os.MkdirAll(d, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(d) })
	return d
}

// RunCleanups runs what was registered, last first, as testing does.
// It may be called more than once, from any goroutine (a signal handler); a
// call returns only when the cleanups it or an earlier call took have run.
func (t *Session) RunCleanups() {
	t.running.Lock()
	defer t.running.Unlock()
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.closed = true
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		runCleanup(cs[i])
	}
}

func runCleanup(f func()) {
	defer func() { _ = recover() }()
	f()
}
