package harness

import (
	"sync/atomic"
	"testing"
)

// A second RunCleanups (a signal arriving during the normal exit) returns only
// once the cleanups the first call took have run: the program must not exit
// in the middle of them.
func TestRunCleanupsWaitsForTheRunUnderWay(t *testing.T) {
	s := NewSession(t.TempDir())
	started, release := make(chan struct{}), make(chan struct{})
	var done atomic.Bool
	s.Cleanup(func() {
		close(started)
		<-release
		done.Store(true)
	})
	go s.RunCleanups()
	<-started

	calling, returned := make(chan struct{}), make(chan bool)
	go func() {
		close(calling)
		s.RunCleanups()
		returned <- done.Load()
	}()
	<-calling
	close(release)
	if !<-returned {
		t.Fatal("the second RunCleanups returned while the first's cleanup was still running")
	}
}

// A cleanup registered after RunCleanups (something created while a signal
// stops the program) runs at once.
func TestCleanupAfterRunCleanupsRunsAtOnce(t *testing.T) {
	s := NewSession(t.TempDir())
	s.RunCleanups()
	ran := false
	s.Cleanup(func() { ran = true })
	if !ran {
		t.Fatal("a cleanup registered after RunCleanups did not run")
	}
}
