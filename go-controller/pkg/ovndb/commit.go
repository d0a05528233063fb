package ovndb

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/metrics"
)

// ErrRowGone means an update or mutate matched no row: the cache was behind
// the database (a row was deleted meanwhile). The caller retries its sync.
var ErrRowGone = errors.New("a row this change refers to no longer exists")

// ErrStaleCache means the operations were built from a cache generation that
// was replaced (a reconnect) before they could be sent: they are dropped, not
// re-sent, and the caller rebuilds them from the fresh cache.
var ErrStaleCache = errors.New("the client cache was refreshed after these operations were built; rebuild them")

// ErrNotConnected means the database connection is down; nothing was sent.
var ErrNotConnected = errors.New("not connected to the database (the client is reconnecting)")

type opCounterKey struct{}

// WithOpCounter returns a context under which every committed operation is
// added to n, so a caller can tell whether a sync changed anything.
func WithOpCounter(ctx context.Context, n *atomic.Int64) context.Context {
	return context.WithValue(ctx, opCounterKey{}, n)
}

func countOps(ctx context.Context, ops int) {
	if n, ok := ctx.Value(opCounterKey{}).(*atomic.Int64); ok {
		n.Add(int64(ops))
	}
}

// Committer commits operations from many goroutines in shared transactions
// (group commit): while one transaction is in flight, requests queue up and
// the next transaction carries them all. A lone request is sent at once, so
// latency stays one round trip while throughput under a burst grows with the
// batch. A failed batch is retried request by request, so one bad request
// cannot fail the others.
type Committer struct {
	c        client.Client
	log      logr.Logger
	requests chan *commitRequest
	maxOps   int
	fence    atomic.Pointer[func() error]
	epoch    atomic.Pointer[LeaderEpoch]

	transactions atomic.Uint64
	operations   atomic.Uint64
}

type commitRequest struct {
	ops   []ovsdb.Operation
	epoch Epoch
	done  chan error
}

// NewCommitter returns a committer over c; call Run to start it.
func NewCommitter(c client.Client, log logr.Logger) *Committer {
	return &Committer{c: c, log: log, requests: make(chan *commitRequest, 1024), maxOps: 4096}
}

// SetFence makes every transaction first ask fence, and fail with its
// error instead of being sent (a replica that lost the leader lease).
func (b *Committer) SetFence(fence func() error) { b.fence.Store(&fence) }

// SetLeaderEpoch makes every transaction carry e's guard (LeaderEpoch.WaitOp)
// first: once another replica has claimed the epoch, a transaction commits
// nothing, its callers get ErrDeposed and nothing more is sent.
func (b *Committer) SetLeaderEpoch(e *LeaderEpoch) { b.epoch.Store(e) }

// Transactions is how many transactions were sent, for tests and benchmarks.
func (b *Committer) Transactions() uint64 { return b.transactions.Load() }

// Operations is how many operations were sent.
func (b *Committer) Operations() uint64 { return b.operations.Load() }

// Commit sends ops (possibly together with other callers' ops) and waits for
// the outcome. Empty ops are a no-op: nothing is sent.
func (b *Committer) Commit(ctx context.Context, ops []ovsdb.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	r := &commitRequest{ops: ops, epoch: CurrentEpoch(b.c), done: make(chan error, 1)}
	select {
	case b.requests <- r:
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case err := <-r.done:
		if err == nil {
			countOps(ctx, len(ops))
		}
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Queued is how many requests wait for the next transaction (for tests).
func (b *Committer) Queued() int { return len(b.requests) }

// Run commits queued requests until ctx ends.
func (b *Committer) Run(ctx context.Context) {
	for {
		var first *commitRequest
		select {
		case <-ctx.Done():
			return
		case first = <-b.requests:
		}
		batch := []*commitRequest{first}
		n := len(first.ops)
	drain:
		for n < b.maxOps {
			select {
			case r := <-b.requests:
				batch = append(batch, r)
				n += len(r.ops)
			default:
				break drain
			}
		}
		b.commitBatch(ctx, batch)
	}
}

func (b *Committer) commitBatch(ctx context.Context, batch []*commitRequest) {
	batch = b.dropStale(batch)
	if len(batch) == 0 {
		return
	}
	if len(batch) == 1 {
		batch[0].done <- b.transact(ctx, batch[0].ops)
		return
	}
	var all []ovsdb.Operation
	for _, r := range batch {
		all = append(all, r.ops...)
	}
	results, err := b.send(ctx, all)
	if err != nil {
		// The transaction may have been committed with its reply lost: re-sending
		// the requests could apply them twice. Each caller rebuilds from the
		// refreshed cache instead.
		for _, r := range batch {
			r.done <- err
		}
		return
	}
	if _, err = ovsdb.CheckOperationResults(results, all); err != nil {
		// One request may have poisoned the batch: give each its own verdict.
		b.log.V(4).Info("batched transaction failed; retrying its requests one by one", "requests", len(batch), "error", err.Error())
		for _, r := range batch {
			r.done <- b.transact(ctx, r.ops)
		}
		return
	}
	off := 0
	for _, r := range batch {
		r.done <- checkCounts(results[off:off+len(r.ops)], r.ops)
		off += len(r.ops)
	}
}

// transact sends ops in their own transaction and checks every result.
func (b *Committer) transact(ctx context.Context, ops []ovsdb.Operation) error {
	results, err := b.send(ctx, ops)
	if err != nil {
		return err
	}
	return checkResults(results, ops)
}

// Transact sends ops in one transaction of their own, unbatched, and checks
// every result: an operation error, or an update, mutate or delete that
// matched no row (ErrRowGone). Nothing is sent while c is disconnected
// (ErrNotConnected): libovsdb would wait and then send operations built
// from a cache that may be gone. Empty ops send nothing.
func Transact(ctx context.Context, c client.Client, ops []ovsdb.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	if c.CurrentEndpoint() == "" {
		return ErrNotConnected
	}
	results, err := c.Transact(ctx, ops...)
	if err != nil {
		return fmt.Errorf("transaction of %d operations: %w", len(ops), err)
	}
	return checkResults(results, ops)
}

func checkResults(results []ovsdb.OperationResult, ops []ovsdb.Operation) error {
	if _, err := ovsdb.CheckOperationResults(results, ops); err != nil {
		return fmt.Errorf("transaction failed: %w", err)
	}
	return checkCounts(results, ops)
}

// dropStale fails the requests built from a cache generation that is gone.
func (b *Committer) dropStale(batch []*commitRequest) []*commitRequest {
	now := CurrentEpoch(b.c)
	kept := batch[:0]
	for _, r := range batch {
		if r.epoch != now {
			r.done <- ErrStaleCache
			continue
		}
		kept = append(kept, r)
	}
	return kept
}

func (b *Committer) send(ctx context.Context, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	// libovsdb would block until reconnected and then send operations built
	// from the old cache; fail instead and let the caller rebuild them.
	if b.c.CurrentEndpoint() == "" {
		return nil, ErrNotConnected
	}
	if f := b.fence.Load(); f != nil {
		if err := (*f)(); err != nil {
			return nil, err
		}
	}
	epoch := b.epoch.Load()
	if epoch != nil && epoch.Err() != nil {
		return nil, epoch.Err() // deposed: nothing is sent any more
	}
	b.transactions.Add(1)
	b.operations.Add(uint64(len(ops)))
	metrics.NBTransactionOperations.Observe(float64(len(ops)))
	if epoch == nil {
		return b.transactTimed(ctx, ops)
	}
	results, err := b.transactTimed(ctx, append([]ovsdb.Operation{epoch.WaitOp()}, ops...))
	if err != nil {
		return nil, err
	}
	return epoch.Check(ctx, results)
}

func (b *Committer) transactTimed(ctx context.Context, ops []ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	start := time.Now()
	results, err := b.c.Transact(ctx, ops...)
	metrics.NBTransactionDuration.WithLabelValues(metrics.Result(err)).Observe(time.Since(start).Seconds())
	if err != nil {
		return nil, fmt.Errorf("NB transaction of %d operations: %w", len(ops), err)
	}
	return results, nil
}

// checkCounts turns an update or mutate that matched no row into ErrRowGone:
// the server reports that as success, but the change did not happen.
func checkCounts(results []ovsdb.OperationResult, ops []ovsdb.Operation) error {
	for i, op := range ops {
		if (op.Op == ovsdb.OperationUpdate || op.Op == ovsdb.OperationMutate || op.Op == ovsdb.OperationDelete) &&
			i < len(results) && results[i].Count == 0 {
			return fmt.Errorf("%w (%s on %s)", ErrRowGone, op.Op, op.Table)
		}
	}
	return nil
}
