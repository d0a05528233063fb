package egressip

import (
	"context"
	"net/netip"
	"sync/atomic"
	"testing"
	"time"
)

// A round waiting for a probe that times out (a dead node) must not hold
// the lock reachable takes: the assignment asks reachable for every
// labelled node, and each wait would delay the failover it was queued for
// by up to the probe timeout (in the cluster in a box, 2 s of a 5 s
// failover with two egress nodes).
func TestProberReachableDuringRound(t *testing.T) {
	p := newProber(time.Second, func() {})
	dead, alive := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	entered, release := make(chan struct{}), make(chan struct{})
	p.check = func(_ context.Context, a netip.Addr) bool {
		if a == dead {
			close(entered)
			<-release // a probe timing out
			return false
		}
		return true
	}
	done := make(chan struct{})
	go func() {
		p.round(context.Background(), map[string]netip.Addr{"dead": dead, "alive": alive})
		close(done)
	}()
	<-entered
	answered := make(chan bool)
	go func() { answered <- p.reachable("dead") && p.reachable("alive") }()
	select {
	case ok := <-answered:
		if !ok {
			t.Fatal("reachable before any miss: want true")
		}
	case <-time.After(2 * time.Second):
		t.Fatal("reachable waited for the round's probes")
	}
	close(release)
	<-done
}

// Two misses in a row mark a node down (one change), one answer up again
// (another); a refusal is an answer.
func TestProberMissesAndAnswers(t *testing.T) {
	var changes atomic.Int32
	p := newProber(time.Second, func() { changes.Add(1) })
	up := true
	p.check = func(context.Context, netip.Addr) bool { return up }
	targets := map[string]netip.Addr{"n": netip.MustParseAddr("192.0.2.1")}
	step := func(answer bool, wantReachable bool, wantChanges int32) {
		t.Helper()
		up = answer
		p.round(context.Background(), targets)
		if got := p.reachable("n"); got != wantReachable {
			t.Fatalf("reachable = %v, want %v", got, wantReachable)
		}
		if got := changes.Load(); got != wantChanges {
			t.Fatalf("%d changes, want %d", got, wantChanges)
		}
	}
	step(true, true, 0)
	step(false, true, 0) // one miss
	step(true, true, 0)  // an answer resets the count
	step(false, true, 0)
	step(false, false, 1) // two in a row: down
	step(false, false, 1)
	step(true, true, 2) // one answer: up

	// The real probe: a refusal (nothing listens on port 9 of the loopback
	// here) is an answer.
	if !newProber(time.Second, nil).probe(context.Background(), netip.MustParseAddr("127.0.0.1")) {
		t.Fatal("127.0.0.1:9 neither answered nor refused")
	}
}
