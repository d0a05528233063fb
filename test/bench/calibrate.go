package main

import (
	"runtime"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// machineWork times a fixed piece of work like the master's own (lookups in
// a map of half a million string-keyed entries, about 50 MiB, beyond the
// CPU caches, and the allocations that fill it) on one locked thread, in
// that thread's CPU milliseconds: the median of three. Read at each step of
// the scale scenario, it is the limit the master's CPU per pod is set
// against in the same run: this machine's speed drifts by 10–20 % between
// runs minutes apart (docs/performance.md, "Scale"), as much as the
// flatness the scale targets allow. The work's size is fixed, so what the
// master's heap costs as it grows is not taken out, only the machine's
// drift.
func machineWork() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var ms []float64
	for range 3 {
		start := threadCPU()
		machineWorkOnce()
		ms = append(ms, float64(threadCPU()-start)/float64(time.Millisecond))
	}
	slices.Sort(ms)
	return ms[1]
}

// machineWorkSink keeps the work from being optimized away.
var machineWorkSink int

func machineWorkOnce() {
	const n = 1 << 19
	keys := make([]string, n)
	x := uint64(88172645463325252)
	next := func() uint64 { x ^= x << 13; x ^= x >> 7; x ^= x << 17; return x }
	m := make(map[string]*[4]uint64, n)
	for i := range keys {
		keys[i] = string(rune('a'+i%26)) + strconv.FormatUint(next(), 10)
		m[keys[i]] = &[4]uint64{uint64(i)}
	}
	hits := 0
	for range 4 * n {
		if v := m[keys[next()%n]]; v != nil {
			hits += int(v[0] & 1)
		}
	}
	machineWorkSink += hits
}

// threadCPU is the calling thread's CPU time.
func threadCPU() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}

// speedEvery is how often speedWatch times the fixed work while a step
// grows: about 2 s of one core's CPU a minute, under 2 % of the machine.
const speedEvery = time.Minute

// speedReading is one timing of the fixed work and the master's CPU
// seconds (since the watch began) when it ended.
type speedReading struct {
	MasterCPU float64 `json:"master_cpu_s"`
	WorkMs    float64 `json:"work_ms"`
}

// speedWatch times the fixed work at the start, every speedEvery and at the
// end of a step's growth: a reading taken only before the growth missed the
// machine slowing down during it (docs/performance.md, "Decided over four
// windows").
type speedWatch struct {
	stop     chan struct{}
	done     chan []speedReading
	once     sync.Once
	readings []speedReading
}

// watchSpeed starts the readings; masterCPU is the master's CPU seconds so
// far.
func watchSpeed(masterCPU func() float64) *speedWatch {
	w := &speedWatch{stop: make(chan struct{}), done: make(chan []speedReading, 1)}
	read := func() speedReading {
		ms := machineWork()
		return speedReading{MasterCPU: masterCPU(), WorkMs: ms}
	}
	first := read()
	go func() {
		readings := []speedReading{first}
		tick := time.NewTicker(speedEvery)
		defer tick.Stop()
		for {
			select {
			case <-tick.C:
				readings = append(readings, read())
			case <-w.stop:
				w.done <- append(readings, read())
				return
			}
		}
	}()
	return w
}

// end takes the last reading and returns them all; later calls return the
// same (a deferred end stops the watch of a step that failed).
func (w *speedWatch) end() []speedReading {
	w.once.Do(func() {
		close(w.stop)
		w.readings = <-w.done
	})
	return w.readings
}

// weighSpeed is the fixed work's time over the readings, each interval
// (the mean of its two ends) weighed by the master's CPU in it: the
// harmonic mean that makes the master's CPU over it the sum of each
// interval's CPU over that interval's speed. Without master CPU between
// the readings it is their plain mean.
func weighSpeed(rs []speedReading) float64 {
	var cpu, norm, sum float64
	for i, r := range rs {
		sum += r.WorkMs
		if i == 0 {
			continue
		}
		if d := r.MasterCPU - rs[i-1].MasterCPU; d > 0 {
			cpu += d
			norm += d / ((r.WorkMs + rs[i-1].WorkMs) / 2)
		}
	}
	switch {
	case norm > 0:
		return cpu / norm
	case len(rs) > 0:
		return sum / float64(len(rs))
	}
	return 0
}
