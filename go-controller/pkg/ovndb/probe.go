package ovndb

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// Our own liveness probe replaces libovsdb's (client.WithInactivityCheck):
// libovsdb v0.7.0's transact tells its probe of traffic on a channel that the
// disconnect handler closes, unlocked, so a transaction answered as the
// connection drops panics the process ("send on closed channel",
// ovn-kubernetes/libovsdb#464, open, hit by our unit tests in CI). Without
// that option the channel is never made.
const (
	// probeEvery is how often a connected client echoes its server.
	probeEvery = 30 * time.Second
	// probeTimeout is how long a server may take to answer an echo before
	// the connection is taken for dead (a half-open TCP connection, a frozen
	// server) and dropped, so that the client reconnects.
	probeTimeout = 10 * time.Second
)

// ErrConnectionDead fails a transaction in flight on a connection the probe
// found dead: it may or may not have committed (as with a lost reply).
var ErrConnectionDead = errors.New("the database stopped answering: the connection is dropped and the client reconnects (the transaction may have committed)")

// probed is a client with a liveness probe running beside it; Close stops both.
type probed struct {
	client.Client
	stop context.CancelFunc
	done chan struct{}

	mu sync.Mutex
	// conn ends when the probe gives up on the current connection, failing
	// the transactions in flight on it: libovsdb's Disconnect waits for them,
	// and on a dead connection they would wait for ever.
	conn    context.Context
	endConn context.CancelFunc
}

// withProbe starts probing c every `every`, each echo given `timeout`.
func withProbe(c client.Client, every, timeout time.Duration, log logr.Logger) client.Client {
	ctx, stop := context.WithCancel(context.Background())
	p := &probed{Client: c, stop: stop, done: make(chan struct{})}
	p.conn, p.endConn = context.WithCancel(context.Background())
	go func() {
		defer close(p.done)
		p.probe(ctx, every, timeout, log)
	}()
	return p
}

// Close stops the probe, then closes the connection for good.
func (p *probed) Close() {
	p.stop()
	<-p.done
	p.Client.Close()
}

// Transact is the client's, failed with ErrConnectionDead if the probe finds
// the connection dead while the transaction waits for its reply.
func (p *probed) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	p.mu.Lock()
	conn := p.conn
	p.mu.Unlock()
	tctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	defer context.AfterFunc(conn, func() { cancel(ErrConnectionDead) })()
	res, err := p.Client.Transact(tctx, ops...)
	if err != nil && ctx.Err() == nil && errors.Is(context.Cause(tctx), ErrConnectionDead) {
		return nil, ErrConnectionDead
	}
	return res, err
}

// probe echoes the server every `every` while connected; a server that does
// not answer within timeout has its connection dropped (libovsdb's reconnect
// loop then dials again). A connection that failed otherwise is libovsdb's to
// notice. Returns when ctx ends.
func (p *probed) probe(ctx context.Context, every, timeout time.Duration, log logr.Logger) {
	tick := time.NewTicker(every)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if !p.Connected() {
			continue
		}
		ectx, cancel := context.WithTimeout(ctx, timeout)
		err := p.Echo(ectx)
		timedOut := ectx.Err() == context.DeadlineExceeded
		cancel()
		if err != nil && timedOut && ctx.Err() == nil {
			log.Info("OVSDB server did not answer an echo in time; dropping the connection to reconnect",
				"endpoint", p.CurrentEndpoint(), "timeout", timeout.String())
			p.mu.Lock()
			p.endConn()
			p.conn, p.endConn = context.WithCancel(context.Background())
			p.mu.Unlock()
			p.Disconnect()
		}
	}
}
