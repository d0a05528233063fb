package policy

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestStatusPacer(t *testing.T) {
	now := time.Unix(1000, 0)
	busy := false
	p := newStatusPacer(100*time.Millisecond, 2*time.Second, func() time.Time { return now }, func() bool { return busy })
	step := func(d time.Duration) { now = now.Add(d) }
	due := func(wantKeys []string, wantNext time.Duration) {
		t.Helper()
		keys, next := p.due()
		slices.Sort(keys)
		if !slices.Equal(keys, wantKeys) || next != wantNext {
			t.Fatalf("due: %v, next in %v; want %v, next in %v", keys, next, wantKeys, wantNext)
		}
	}

	// Quiet for long: a write goes ahead at once and nothing is held.
	step(time.Hour)
	if p.hold("CNP/a") {
		t.Fatal("quiet, idle queue: held")
	}
	due(nil, 0)

	// An event 30 ms ago: held until the quiet period ends, then released
	// once, and written without a second hold.
	p.event()
	step(30 * time.Millisecond)
	if !p.hold("CNP/b") || !p.pending() {
		t.Fatal("event 30 ms ago: not held")
	}
	due(nil, 70*time.Millisecond)
	if !p.hold("CNP/b") { // queued again by its policy's sync meanwhile
		t.Fatal("a held key queued again went ahead")
	}
	step(70 * time.Millisecond)
	due([]string{"CNP/b"}, 0)
	if p.hold("CNP/b") {
		t.Fatal("a released key held again")
	}
	p.done("CNP/b")
	if p.pending() {
		t.Fatal("pending after done")
	}

	// A busy queue holds writes whatever the events; events every 20 ms
	// hold them too; neither for longer than maxHold from each one's hold.
	busy = true
	if !p.hold("CNP/c") {
		t.Fatal("busy queue: not held")
	}
	step(time.Second)
	if !p.hold("CNP/d") {
		t.Fatal("busy queue: not held")
	}
	busy = false
	for i := 0; i < 45; i++ { // c held up to 1.9 s
		p.event()
		step(20 * time.Millisecond)
		due(nil, 80*time.Millisecond)
	}
	p.event()
	step(60 * time.Millisecond) // c's hold ends in 40 ms, the quiet period too
	due(nil, 40*time.Millisecond)
	p.event()
	step(40 * time.Millisecond) // c held 2 s: released, though not quiet
	due([]string{"CNP/c"}, 60*time.Millisecond)
	step(60 * time.Millisecond) // quiet: d released
	due([]string{"CNP/d"}, 0)
	p.done("CNP/c")
	p.done("CNP/d")

	// A key no longer needing a write is forgotten while held.
	busy = true
	p.hold("CNP/e")
	p.done("CNP/e")
	if p.pending() {
		t.Fatal("a forgotten key is pending")
	}
	due(nil, 0)
}

// TestStatusPacerRun: run queues a held key once the quiet period ends.
func TestStatusPacerRun(t *testing.T) {
	p := newStatusPacer(20*time.Millisecond, time.Minute, time.Now, func() bool { return false })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	added := make(chan string, 1)
	go p.run(ctx, func(k string) { added <- k })
	p.event()
	if !p.hold("CNP/a") {
		t.Fatal("not held right after an event")
	}
	select {
	case k := <-added:
		if k != "CNP/a" {
			t.Fatalf("queued %q, want CNP/a", k)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("CNP/a not queued again within 10 s of a 20 ms quiet period")
	}
	if p.hold("CNP/a") {
		t.Fatal("the released key held again")
	}
}
