package main

import (
	"runtime"
	"slices"
	"strconv"
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
