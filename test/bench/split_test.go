package main

import (
	"strings"
	"testing"
)

// A split that comes out negative (the NB's rows before the benchmark's own
// informer heard of the object) is named, not printed as if it were the
// master's time.
func TestInformerLag(t *testing.T) {
	if got := informerLag([]float64{0, 3, 40}); got != "" {
		t.Errorf("no negative split: got %q, want nothing", got)
	}
	if got := informerLag(nil); got != "" {
		t.Errorf("no split: got %q, want nothing", got)
	}
	got := informerLag([]float64{-12, -0.5, 0, 7})
	if !strings.Contains(got, "2 of 4 done before the benchmark's informer was told") {
		t.Errorf("two negative splits of four: got %q", got)
	}
}
