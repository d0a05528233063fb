package main

import (
	"os"
	"os/signal"
	"syscall"
	"testing"
	"time"
)

// TestSayStopsOnAClosedStdout: with its report's reader gone, the
// benchmark stops as an interrupt would (and so removes what it created)
// instead of being killed by SIGPIPE or running on unread.
func TestSayStopsOnAClosedStdout(t *testing.T) {
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM)
	defer signal.Stop(term)
	surviveClosedStdout()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	_ = r.Close()
	defer w.Close()
	stdout := os.Stdout
	os.Stdout = w
	say("a line nobody reads")
	os.Stdout = stdout
	select {
	case <-term:
	case <-time.After(10 * time.Second):
		t.Fatal("no SIGTERM 10 s after a write to a closed stdout")
	}
}
