package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
)

// demoT satisfies harness.T for a process that outlives any test: cleanups
// run when the demo is brought down, and Fatal unwinds to serve.
type demoT struct {
	mu       sync.Mutex
	dir      string
	n        int
	cleanups []func()
	failed   bool
}

type demoFatal struct{}

func newDemoT(dir string) *demoT { return &demoT{dir: dir} }

func (t *demoT) Helper() {}

func (t *demoT) Logf(format string, args ...any) { fmt.Printf(format+"\n", args...) }

func (t *demoT) Fatal(args ...any) {
	t.failed = true
	fmt.Println(append([]any{"FATAL:"}, args...)...)
	panic(demoFatal{})
}

func (t *demoT) Fatalf(format string, args ...any) { t.Fatal(fmt.Sprintf(format, args...)) }

func (t *demoT) Failed() bool { return t.failed }

func (t *demoT) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *demoT) TempDir() string {
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

// runCleanups runs what was registered, last first, as testing does.
func (t *demoT) runCleanups() {
	t.mu.Lock()
	cs := t.cleanups
	t.cleanups = nil
	t.mu.Unlock()
	for i := len(cs) - 1; i >= 0; i-- {
		func() {
			defer func() { _ = recover() }()
			cs[i]()
		}()
	}
}
