// Package gcbudget keeps the garbage collector's share of the process's CPU
// within a budget by moving GOGC between a floor and a ceiling, the way the
// JVM's GCTimeRatio grows a heap whose collections cost too much.
//
// A collection's work goes as the live heap and collections come after each
// GOGC percent of it allocated, so with a fixed GOGC the marking per object
// changed would be flat if marking cost the same per byte at every size. It
// does not: the master's cost per byte marked grows with its heap (span
// metadata missing the CPU caches; from 10,000 to 150,000 pods the marking
// per pod added went ×2.3 while the master's own work went ×1.1,
// docs/performance.md, "Scale"). Raising GOGC as that share grows holds the
// CPU per change flat and spends heap instead, which is what a large cluster's
// master can afford: GOGC stays at the floor (the master's fixed 50 before
// this package) while collections are cheap, so a small cluster's RSS does
// not change, and GOMEMLIMIT, when set, still bounds the heap whatever GOGC
// says (the runtime collects at the limit).
package gcbudget

import (
	"context"
	"math"
	"runtime/debug"
	"runtime/metrics"
	"time"

	"github.com/go-logr/logr"
)

// Budget is what Keep holds the collector to.
type Budget struct {
	// Share is the collector's share of the CPU the process used (0–1).
	Share float64
	// Min and Max bound GOGC (percent).
	Min, Max int
}

// Default: 27 % of the CPU for the collector, GOGC from 50 (the master's
// long-standing setting) to 400. The budget trades the master's CPU per pod
// for its RSS per pod: grown from 10,000 to 150,000 pods, at 25 % the CPU
// per pod went ×1.04 and the RSS ×1.21, at 30 % ×1.23 and ×1.01 (with GOGC
// fixed at 50, ×1.40 and ×0.84), at 27 % ×1.20 and ×0.99, each decided on
// one window; decided over Windows windows, at 27 % ×1.36, ×1.4 and ×1.2
// in three runs whose first steps were faster (docs/performance.md, "The
// collector held to a CPU budget": the run-to-run spread is the machine's).
// Set against the machine's speed during each growth, at 27 % the CPU per
// pod went ×1.08 and ×1.13 with the RSS ×1.20 and ×1.19, at 30 % ×1.22 and
// ×0.97 ("The machine's speed during the growth").
var Default = Budget{Share: 0.27, Min: 50, Max: 400}

// Window is what the runtime spent between two readings.
type Window struct {
	GC, User float64 // CPU seconds: collection (all its classes), the program
	Cycles   uint64  // collections completed
	GOGC     int     // the GOGC it ran under
}

// Enough says whether a window is long enough to count: two completed
// collections and a second of CPU. The runtime updates its CPU classes at the
// end of each collection only, so a window spans whole cycles; an idle
// master collects rarely and keeps its GOGC.
func (w Window) Enough() bool { return w.Cycles >= 2 && w.GC+w.User >= 1 }

// Windows is how many of the last Enough windows a decision weighs: one
// window's share swung from 0.21 to 0.40 and back between decisions at a
// steady load (its two collections are a small sample of a bursty load), and
// GOGC followed it up and down by a quarter; four hold twenty or more
// collections over 40 s or more, short beside a cluster growing for minutes.
const Windows = 4

// Next moves GOGC toward the value that would have given the windows' work
// the budget's share. The marking per byte allocated goes as 1/GOGC, so a
// window's collector CPU per program CPU times its GOGC, s/(1−s)·p, is a cost
// that does not depend on GOGC; weighed over the windows by their program CPU
// it is k = Σ GC·GOGC / Σ User, and share b needs GOGC k·(1−b)/b. Windows
// run under older GOGC values count as much as the last (going only half way
// instead, to damp noise, lagged a heap growing for 13 minutes: at a 30 %
// budget GOGC reached 110 only near the end, against 129 going all the way,
// and the CPU per pod grew ×1.28 against ×1.23). It moves at most ×2 or ÷2 at
// a time, stays within [Min, Max], and keeps p when the change would be under
// a tenth of it.
func (b Budget) Next(p int, ws []Window) int {
	cost, _, user := totals(ws)
	if user <= 0 || cost <= 0 || b.Share <= 0 || b.Share >= 1 {
		return clamp(p, b.Min, b.Max)
	}
	want := cost / user * ((1 - b.Share) / b.Share)
	want = math.Max(float64(p)/2, math.Min(want, float64(p)*2))
	next := clamp(int(math.Round(want)), b.Min, b.Max)
	if abs(next-p)*10 < p && p >= b.Min && p <= b.Max {
		return p
	}
	return next
}

func clamp(v, lo, hi int) int { return max(lo, min(v, hi)) }

func abs(v int) int {
	if v < 0 {
		return -v
	}
	return v
}

var names = []string{
	"/cpu/classes/gc/total:cpu-seconds",
	"/cpu/classes/user:cpu-seconds",
	"/gc/cycles/total:gc-cycles",
}

// reading is the runtime's counters at one time.
type reading struct {
	gc, user float64
	cycles   uint64
}

func read() reading {
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	var r reading
	if s[0].Value.Kind() == metrics.KindFloat64 {
		r.gc = s[0].Value.Float64()
	}
	if s[1].Value.Kind() == metrics.KindFloat64 {
		r.user = s[1].Value.Float64()
	}
	if s[2].Value.Kind() == metrics.KindUint64 {
		r.cycles = s[2].Value.Uint64()
	}
	return r
}

// Keep sets GOGC to the budget's floor, then every interval looks at what
// the runtime spent since the last window closed and, once that is Enough,
// closes it and sets GOGC to Next of the last Windows windows, until ctx is
// done. A change is logged at V(1); the current GOGC is also the
// go_gc_gogc_percent metric.
func Keep(ctx context.Context, every time.Duration, b Budget, log logr.Logger) {
	p := b.Min
	debug.SetGCPercent(p)
	t := time.NewTicker(every)
	defer t.Stop()
	last := read()
	var ws []Window
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := read()
		w := Window{GC: now.gc - last.gc, User: now.user - last.user, Cycles: now.cycles - last.cycles, GOGC: p}
		if !w.Enough() {
			continue
		}
		last = now
		ws = append(ws, w)
		if len(ws) > Windows {
			ws = ws[1:]
		}
		if next := b.Next(p, ws); next != p {
			log.V(1).Info("GOGC moved to hold the collector's CPU share", "gogc", next, "was", p, "gcShare", share(ws), "budget", b.Share)
			debug.SetGCPercent(next)
			p = next
		}
	}
}

// share is the collector's share of the windows' CPU, to three places.
func share(ws []Window) float64 {
	_, gc, user := totals(ws)
	return math.Round(gc/(gc+user)*1000) / 1000
}

// totals sums the windows: the collector's CPU times the GOGC it ran under
// (the cost Next weighs), the collector's CPU, the program's.
func totals(ws []Window) (cost, gc, user float64) {
	for _, w := range ws {
		cost += w.GC * float64(w.GOGC)
		gc += w.GC
		user += w.User
	}
	return cost, gc, user
}
