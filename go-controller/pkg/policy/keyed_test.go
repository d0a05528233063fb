package policy

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestNameLocks: one holder per name at a time, names never wait for one
// another, and no entry is left once every holder is done.
func TestNameLocks(t *testing.T) {
	var l nameLocks
	unlockA := l.lock("a")
	unlockB := l.lock("b") // held beside a: returns at once
	if got := l.held(); got != 2 {
		t.Fatalf("names held: %d, want 2", got)
	}
	unlockB()
	unlockA()

	var wg sync.WaitGroup
	inside := map[string]*atomic.Int32{"a": {}, "b": {}}
	var overlaps atomic.Int32
	for i := range 64 {
		name := []string{"a", "b"}[i%2]
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.lock(name)()
			if inside[name].Add(1) > 1 {
				overlaps.Add(1)
			}
			runtime.Gosched()
			inside[name].Add(-1)
		}()
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times two callers held one name at once", n)
	}
	if got := l.held(); got != 0 {
		t.Errorf("names left after every holder is done: %d, want 0", got)
	}
}

// TestNameLocksTryLockAll: all names are taken when all are free, none
// when one is held, without waiting, and nothing is left once all are
// released.
func TestNameLocksTryLockAll(t *testing.T) {
	var l nameLocks
	unlockB := l.lock("b")
	if unlock := l.tryLockAll([]string{"a", "b", "c"}); unlock != nil {
		t.Fatal("tryLockAll took a, b and c while b was held")
	}
	if got := l.held(); got != 1 {
		t.Errorf("names held after a failed tryLockAll: %d, want 1 (b)", got)
	}
	unlock := l.tryLockAll([]string{"a", "c"})
	if unlock == nil {
		t.Fatal("tryLockAll did not take a and c, both free")
	}
	if again := l.tryLockAll([]string{"c"}); again != nil {
		t.Error("c taken twice")
	}
	unlock()
	unlockB()
	if got := l.held(); got != 0 {
		t.Errorf("names left after every holder is done: %d, want 0", got)
	}
}

// TestPortIndexForgetsOnlyItsPort: a pod re-created under the same name
// gets a new port before the old one's deletion is seen; that deletion
// must not drop the new port's entry.
func TestPortIndexForgetsOnlyItsPort(t *testing.T) {
	var x portIndex
	if _, ok := x.load("ns/a"); ok {
		t.Fatal("an empty index holds ns/a")
	}
	x.store("ns/a", "old")
	x.store("ns/a", "new")
	x.forget("ns/a", "old")
	if got, ok := x.load("ns/a"); !ok || got != "new" {
		t.Fatalf("after the old port's deletion: %q, %v; want \"new\", true", got, ok)
	}
	x.forget("ns/a", "new")
	if got, ok := x.load("ns/a"); ok {
		t.Fatalf("after its own port's deletion ns/a still maps to %q", got)
	}
}
