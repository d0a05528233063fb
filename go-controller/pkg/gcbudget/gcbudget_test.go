package gcbudget

import (
	"context"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/go-logr/logr"
)

func TestNext(t *testing.T) {
	b := Budget{Share: 0.25, Min: 50, Max: 400}
	for _, c := range []struct {
		name string
		p    int
		w    Window
		want int
	}{
		// p·(s/(1−s))·((1−b)/b): s = 0.5 at 50: 150, doubled at most.
		{"half the CPU at 50: doubled at most", 50, Window{GC: 1, User: 1, Cycles: 5}, 100},
		// s = 0.4 at 100: 200.
		{"share 0.4 at 100: 200", 100, Window{GC: 0.4, User: 0.6, Cycles: 5}, 200},
		// s = 0.3 at 100: 128.6.
		{"share 0.3 at 100: 129", 100, Window{GC: 0.3, User: 0.7, Cycles: 5}, 129},
		// s = 0.9 at 100: 2,700, doubled at most.
		{"share 0.9: doubled at most", 100, Window{GC: 0.9, User: 0.1, Cycles: 5}, 200},
		{"at the budget: kept", 120, Window{GC: 0.25, User: 0.75, Cycles: 5}, 120},
		// s = 0.26 at 120: 126.5, within a tenth: kept.
		{"near the budget: kept", 120, Window{GC: 0.26, User: 0.74, Cycles: 5}, 120},
		// s = 0.2 at 300: 225.
		{"cheap: lowered", 300, Window{GC: 0.2, User: 0.8, Cycles: 5}, 225},
		// s = 0.1 at 300: 100, halved at most.
		{"very cheap: halved at most", 300, Window{GC: 0.1, User: 0.9, Cycles: 5}, 150},
		{"cheap at the floor: floor", 50, Window{GC: 0.01, User: 0.99, Cycles: 5}, 50},
		{"dear at the ceiling: ceiling", 400, Window{GC: 0.9, User: 0.1, Cycles: 5}, 400},
		{"nothing but GC: kept (no program time to judge by)", 60, Window{GC: 1, User: 0, Cycles: 5}, 60},
		{"below the floor: brought in", 20, Window{GC: 0.25, User: 0.75, Cycles: 5}, 50},
		{"above the ceiling: brought in", 1000, Window{GC: 0.25, User: 0.75, Cycles: 5}, 400},
	} {
		if got := b.Next(c.p, c.w); got != c.want {
			t.Errorf("%s: Next(%d, %+v) = %d, want %d", c.name, c.p, c.w, got, c.want)
		}
	}
	if got := (Budget{Share: 0, Min: 50, Max: 400}).Next(80, Window{GC: 1, User: 1, Cycles: 5}); got != 80 {
		t.Errorf("a zero share must not move GOGC: got %d", got)
	}
}

func TestEnough(t *testing.T) {
	for _, c := range []struct {
		w    Window
		want bool
	}{
		{Window{GC: 0.5, User: 0.5, Cycles: 2}, true},
		{Window{GC: 0.5, User: 0.5, Cycles: 1}, false},
		{Window{GC: 0.1, User: 0.5, Cycles: 9}, false},
	} {
		if got := c.w.Enough(); got != c.want {
			t.Errorf("Enough(%+v) = %v, want %v", c.w, got, c.want)
		}
	}
}

func gogc() int64 {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// churn keeps a live heap of small linked objects (marking has work) and
// replaces them, allocating, until ctx is done.
func churn(ctx context.Context) {
	type node struct {
		next *node
		s    string
	}
	anchors := make([]node, 1<<16)
	live := make([]*node, len(anchors))
	for i := 0; ctx.Err() == nil; i++ {
		live[i%len(live)] = &node{s: string(make([]byte, 48)), next: &anchors[i%len(anchors)]}
	}
}

// TestKeepMovesGOGC runs Keep on this process's real runtime: with a budget
// far under what the collector takes, GOGC must rise from the floor to the
// ceiling; with one far over it, it must leave the floor alone (Next's
// table covers coming down).
func TestKeepMovesGOGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go churn(ctx)

	start := func(b Budget) (stop func()) {
		kctx, cancel := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { Keep(kctx, 50*time.Millisecond, b, logr.Discard()); close(done) }()
		return func() { cancel(); <-done }
	}
	waitFor := func(want int64, what string) {
		deadline := time.Now().Add(60 * time.Second)
		for p := gogc(); p != want; p = gogc() {
			if time.Now().After(deadline) {
				t.Fatalf("%s: GOGC still %d after 60 s, want %d", what, p, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	stop := start(Budget{Share: 0.001, Min: 50, Max: 400})
	waitFor(400, "budget 0.1 %")
	stop()

	stop = start(Budget{Share: 0.999, Min: 70, Max: 400})
	defer stop()
	waitFor(70, "budget 99.9 %: the floor at start")
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if p := gogc(); p != 70 {
			t.Fatalf("budget 99.9 %%: GOGC moved from the floor to %d", p)
		}
	}
}
