package app

import (
	"context"
	"runtime"
	"testing"

	"github.com/go-logr/logr"
)

func TestOneProcAfterSync(t *testing.T) {
	was := runtime.GOMAXPROCS(2)
	t.Cleanup(func() { runtime.GOMAXPROCS(was) })

	synced := make(chan struct{})
	done := make(chan struct{})
	go func() { oneProcAfterSync(context.Background(), synced, logr.Discard()); close(done) }()
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d before the startup sync, want 2 (unchanged)", got)
	}
	close(synced)
	<-done
	if got := runtime.GOMAXPROCS(0); got != 1 {
		t.Fatalf("GOMAXPROCS %d after the startup sync, want 1", got)
	}

	runtime.GOMAXPROCS(2)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	oneProcAfterSync(ctx, make(chan struct{}), logr.Discard())
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d after a stop before the sync, want 2 (unchanged)", got)
	}

	t.Setenv("GOMAXPROCS", "2")
	oneProcAfterSync(context.Background(), synced, logr.Discard())
	if got := runtime.GOMAXPROCS(0); got != 2 {
		t.Fatalf("GOMAXPROCS %d with GOMAXPROCS=2 in the environment, want 2 (the environment wins)", got)
	}
}
