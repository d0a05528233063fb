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
	// one is a single window run under GOGC p.
	one := func(p int, gc, user float64) []Window {
		return []Window{{GC: gc, User: user, Cycles: 5, GOGC: p}}
	}
	for _, c := range []struct {
		name string
		p    int
		ws   []Window
		want int
	}{
		// p·(s/(1−s))·((1−b)/b): s = 0.5 at 50: 150, doubled at most.
		{"half the CPU at 50: doubled at most", 50, one(50, 1, 1), 100},
		// s = 0.4 at 100: 200.
		{"share 0.4 at 100: 200", 100, one(100, 0.4, 0.6), 200},
		// s = 0.3 at 100: 128.6.
		{"share 0.3 at 100: 129", 100, one(100, 0.3, 0.7), 129},
		// s = 0.9 at 100: 2,700, doubled at most.
		{"share 0.9: doubled at most", 100, one(100, 0.9, 0.1), 200},
		{"at the budget: kept", 120, one(120, 0.25, 0.75), 120},
		// s = 0.26 at 120: 126.5, within a tenth: kept.
		{"near the budget: kept", 120, one(120, 0.26, 0.74), 120},
		// s = 0.2 at 300: 225.
		{"cheap: lowered", 300, one(300, 0.2, 0.8), 225},
		// s = 0.1 at 300: 100, halved at most.
		{"very cheap: halved at most", 300, one(300, 0.1, 0.9), 150},
		{"cheap at the floor: floor", 50, one(50, 0.01, 0.99), 50},
		{"dear at the ceiling: ceiling", 400, one(400, 0.9, 0.1), 400},
		{"nothing but GC: kept (no program time to judge by)", 60, one(60, 1, 0), 60},
		{"no window: kept", 60, nil, 60},
		{"below the floor: brought in", 20, one(20, 0.25, 0.75), 50},
		{"above the ceiling: brought in", 1000, one(1000, 0.25, 0.75), 400},
		// Σ GC·GOGC / Σ User = (40 + 20) / 1.4 = 42.86, ×3: 128.6; the
		// first window alone would say 200, the second 75.
		{"two windows weighed together", 100, []Window{
			{GC: 0.4, User: 0.6, Cycles: 2, GOGC: 100},
			{GC: 0.2, User: 0.8, Cycles: 2, GOGC: 100},
		}, 129},
		// (0.5·50 + 0.25·100) / (0.5 + 0.75) = 40, ×3: 120. Each window's
		// cost counts under its own GOGC: read at 100, the first would
		// say 300.
		{"windows under different GOGC values", 100, []Window{
			{GC: 0.5, User: 0.5, Cycles: 2, GOGC: 50},
			{GC: 0.25, User: 0.75, Cycles: 2, GOGC: 100},
		}, 120},
		// Weighed by program CPU: (0.5·100 + 0.5·100) / (1.5 + 0.5) = 50,
		// ×3: 150; the plain mean of the windows' costs (33.3 and 100)
		// would give 200.
		{"windows weighed by their program CPU", 100, []Window{
			{GC: 0.5, User: 1.5, Cycles: 2, GOGC: 100},
			{GC: 0.5, User: 0.5, Cycles: 2, GOGC: 100},
		}, 150},
	} {
		if got := b.Next(c.p, c.ws); got != c.want {
			t.Errorf("%s: Next(%d, %+v) = %d, want %d", c.name, c.p, c.ws, got, c.want)
		}
	}
	if got := (Budget{Share: 0, Min: 50, Max: 400}).Next(80, one(80, 1, 1)); got != 80 {
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
