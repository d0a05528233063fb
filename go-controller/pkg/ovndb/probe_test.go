package ovndb_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// A connection left half-open (the server gone without a word: a crashed
// host, a partition) is found by the probe and dropped, the transaction
// waiting on it failed; the client reconnects and writes again. Without the
// probe the client waits on the dead connection for good.
func TestProbeDropsAHalfOpenConnection(t *testing.T) {
	server := ovndbtest.NewServer(t)
	proxy := ovndbtest.NewProxy(t, server)
	c := ovndb.WithProbe(ovndbtest.Connect(t, proxy.Sock), 100*time.Millisecond, time.Second)
	t.Cleanup(c.Close)
	observer := ovndbtest.ConnectObserver(t, server)
	writeWithin := func(d time.Duration, name string) error {
		ctx, cancel := context.WithTimeout(context.Background(), d)
		defer cancel()
		ops := ensureOps(t, c, lb(name, "ns/"+name))
		if len(ops) == 0 {
			return nil
		}
		return ovndb.Transact(ctx, c, ops)
	}
	write := func(name string) error { return writeWithin(time.Second, name) }
	harness.Eventually(t, 10*time.Second, "a write before the freeze committed", func() error {
		return write("Service_ns/before_TCP_cluster")
	})
	proxy.Freeze()
	// A transaction with no deadline of its own, in flight on the dead
	// connection, fails once the probe gives up on it.
	inFlight := make(chan error, 1)
	go func() { inFlight <- writeWithin(time.Hour, "Service_ns/during_TCP_cluster") }()
	select {
	case err := <-inFlight:
		if !errors.Is(err, ovndb.ErrConnectionDead) {
			t.Fatalf("the transaction on the dead connection ended with %v, want ErrConnectionDead", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("a transaction on the dead connection still waits after 10 s")
	}
	harness.Eventually(t, 10*time.Second, "a write after the freeze committed", func() error {
		if err := write("Service_ns/after_TCP_cluster"); err != nil {
			return err
		}
		if n := countLBs(observer, "Service_ns/after_TCP_cluster"); n != 1 {
			return fmt.Errorf("%d rows in the server", n)
		}
		return nil
	})
}
