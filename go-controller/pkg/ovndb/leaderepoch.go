package ovndb

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// LeaderEpochKey is the NB_Global external_ids key holding the leader epoch,
// "<identity>/<n>": each new leader term writes its identity and one more
// than the n it found, before any other write of that term.
const LeaderEpochKey = "k8s.ovn.org/leader-epoch"

// ErrDeposed means another replica claimed the leader epoch in the NB (it
// holds the lease now): the transaction committed nothing, and nothing more
// will be sent. The process must stop writing and exit (a supervisor starts
// it again as a standby); re-sending would be refused the same way.
var ErrDeposed = errors.New("another master claimed the NB leader epoch (" + LeaderEpochKey +
	" in NB_Global external_ids): this replica is deposed, its transaction committed nothing; stop writing and restart as a standby")

// ErrEpochMissing means the NB no longer held this term's epoch (a database
// replaced or restored from an older copy) while the lease is still ours:
// the epoch was claimed again, the transaction committed nothing, and the
// caller rebuilds it from the cache and retries.
var ErrEpochMissing = errors.New("the NB had lost the leader epoch (a replaced or restored database); claimed it again: the transaction committed nothing, rebuild it and retry")

// LeaderEpoch is the database side of leader fencing: every transaction of
// the leader carries an OVSDB wait that NB_Global still holds the epoch this
// process wrote (never the cached value, which a new leader may already have
// changed), so a transaction delayed past the lease commits nothing once a
// new leader has claimed the epoch.
type LeaderEpoch struct {
	c        client.Client
	identity string
	lease    func() error
	log      logr.Logger

	mu    sync.Mutex
	value string // the epoch this process wrote
	row   string // the NB_Global row it was written to
	lost  chan struct{}
	once  sync.Once
}

// ClaimLeaderEpoch starts a leader term: it writes a new epoch into the NB
// in one conditional transaction (it fails if another replica changed the
// epoch meanwhile, so two replicas cannot both win). Call it before any
// other write of the term. lease, when not nil, must allow the claim (the
// lease is held).
func ClaimLeaderEpoch(ctx context.Context, c client.Client, identity string, lease func() error, log logr.Logger) (*LeaderEpoch, error) {
	if identity == "" {
		return nil, fmt.Errorf("claiming the NB leader epoch: no replica identity (set --leader-elect-identity)")
	}
	e := &LeaderEpoch{c: c, identity: identity, lease: lease, log: log, lost: make(chan struct{})}
	if err := e.claim(ctx); err != nil {
		return nil, err
	}
	return e, nil
}

// Value is the epoch this process wrote.
func (e *LeaderEpoch) Value() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.value
}

// Lost is closed when another replica's epoch was found in the NB.
func (e *LeaderEpoch) Lost() <-chan struct{} { return e.lost }

// Err is ErrDeposed once Lost is closed, else nil.
func (e *LeaderEpoch) Err() error {
	select {
	case <-e.lost:
		return ErrDeposed
	default:
		return nil
	}
}

// WaitOp is the guard every transaction of the term starts with: OVSDB's
// wait until the NB_Global row holding our epoch is exactly the row we
// wrote it to, with a zero timeout (RFC 7047 5.2.6).
func (e *LeaderEpoch) WaitOp() ovsdb.Operation {
	e.mu.Lock()
	defer e.mu.Unlock()
	timeout := 0
	return ovsdb.Operation{Op: ovsdb.OperationWait, Table: nbdb.NBGlobalTable, Timeout: &timeout,
		Where:   []ovsdb.Condition{ovsdb.NewCondition("external_ids", ovsdb.ConditionIncludes, epochMap(e.value))},
		Columns: []string{"_uuid"}, Until: string(ovsdb.WaitConditionEqual),
		Rows: []ovsdb.Row{{"_uuid": ovsdb.UUID{GoUUID: e.row}}}}
}

// Check takes the results of a transaction that started with WaitOp and
// returns the results of the caller's operations, or, when the wait failed
// (nothing was committed), ErrDeposed or ErrEpochMissing (see resolve).
func (e *LeaderEpoch) Check(ctx context.Context, results []ovsdb.OperationResult) ([]ovsdb.OperationResult, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("the NB answered the fenced transaction with no result")
	}
	if results[0].Error == "" {
		return results[1:], nil
	}
	return nil, e.resolve(ctx, results[0])
}

// resolve reads the NB's epoch after the guard failed: another replica's
// epoch deposes this one for good; none (or ours on another row) means the
// database lost it, and the epoch is claimed again while the lease is ours.
func (e *LeaderEpoch) resolve(ctx context.Context, failed ovsdb.OperationResult) error {
	g, found, err := readNBGlobal(ctx, e.c)
	if err != nil {
		return fmt.Errorf("the leader epoch guard failed (%s) and the NB's epoch could not be read: %w", failed.Error, err)
	}
	now := ""
	if found {
		now = g.ExternalIDs[LeaderEpochKey]
	}
	if mine := e.Value(); now != "" && now != mine {
		e.once.Do(func() { close(e.lost) })
		e.log.Info("deposed: another master claimed the NB leader epoch; sending nothing more", "ours", mine, "nb", now)
		return ErrDeposed
	}
	if err := e.claim(ctx); err != nil {
		return fmt.Errorf("the NB had lost the leader epoch; claiming it again: %w", err)
	}
	return ErrEpochMissing
}

// claim writes a new epoch, retrying a claim that lost a race with another
// writer of NB_Global's external_ids (each try reads the server afresh).
func (e *LeaderEpoch) claim(ctx context.Context) error {
	var err error
	for attempt := 0; attempt < 5; attempt++ {
		if e.lease != nil {
			if err = e.lease(); err != nil {
				return err
			}
		}
		var raced bool
		if raced, err = e.claimOnce(ctx); err == nil {
			return nil
		} else if !raced {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt+1) * 100 * time.Millisecond):
		}
	}
	return fmt.Errorf("claiming the NB leader epoch: %w (another writer keeps changing NB_Global external_ids)", err)
}

// claimOnce sends one conditional claim; raced says it lost a race (the
// row changed since it was read) and may be tried again.
func (e *LeaderEpoch) claimOnce(ctx context.Context) (raced bool, err error) {
	g, found, err := readNBGlobal(ctx, e.c)
	if err != nil {
		return false, err
	}
	value := e.identity + "/" + strconv.FormatUint(epochCounter(g.ExternalIDs[LeaderEpochKey])+1, 10)
	ops := claimOps(g, found, value)
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	results, err := e.c.Transact(tctx, ops...)
	if err != nil {
		return true, fmt.Errorf("claiming the NB leader epoch: %w", err) // maybe committed: claim again, higher
	}
	if err := checkResults(results, ops); err != nil {
		return true, fmt.Errorf("claiming the NB leader epoch (NB_Global changed meanwhile): %w", err)
	}
	row := g.UUID
	if !found {
		row = results[0].UUID.GoUUID
	}
	e.mu.Lock()
	e.value, e.row = value, row
	e.mu.Unlock()
	e.log.Info("claimed the NB leader epoch: transactions of an earlier leader now commit nothing", "epoch", value, "previous", g.ExternalIDs[LeaderEpochKey])
	return false, nil
}

// claimOps writes value into g's external_ids if they are still what was
// read; without a row it inserts one (NB_Global holds at most one row: the
// server refuses a second, so two inserting leaders cannot both win).
func claimOps(g *nbdb.NBGlobal, found bool, value string) []ovsdb.Operation {
	if !found {
		return []ovsdb.Operation{{Op: ovsdb.OperationInsert, Table: nbdb.NBGlobalTable,
			Row: ovsdb.Row{"external_ids": epochMap(value)}}}
	}
	ids := map[string]string{}
	for k, v := range g.ExternalIDs {
		ids[k] = v
	}
	before, _ := ovsdb.NewOvsMap(g.ExternalIDs)
	ids[LeaderEpochKey] = value
	after, _ := ovsdb.NewOvsMap(ids)
	timeout := 0
	where := []ovsdb.Condition{ovsdb.NewCondition("_uuid", ovsdb.ConditionEqual, ovsdb.UUID{GoUUID: g.UUID})}
	return []ovsdb.Operation{
		{Op: ovsdb.OperationWait, Table: nbdb.NBGlobalTable, Timeout: &timeout, Where: where,
			Columns: []string{"external_ids"}, Until: string(ovsdb.WaitConditionEqual), Rows: []ovsdb.Row{{"external_ids": before}}},
		{Op: ovsdb.OperationUpdate, Table: nbdb.NBGlobalTable, Where: where, Row: ovsdb.Row{"external_ids": after}},
	}
}

func epochMap(value string) ovsdb.OvsMap {
	return ovsdb.OvsMap{GoMap: map[any]any{LeaderEpochKey: value}}
}

// epochCounter is the n of "<identity>/<n>", 0 when there is none.
func epochCounter(epoch string) uint64 {
	n, err := strconv.ParseUint(epoch[strings.LastIndex(epoch, "/")+1:], 10, 64)
	if err != nil {
		return 0
	}
	return n
}

// readNBGlobal reads NB_Global from the server, not the cache (which may lag
// a claim another replica just made).
func readNBGlobal(ctx context.Context, c client.Client) (*nbdb.NBGlobal, bool, error) {
	tc := c.Cache()
	if tc == nil || c.CurrentEndpoint() == "" {
		return nil, false, ErrNotConnected
	}
	op := ovsdb.Operation{Op: ovsdb.OperationSelect, Table: nbdb.NBGlobalTable, Columns: []string{"_uuid", "external_ids"}}
	tctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	results, err := c.Transact(tctx, op)
	if err == nil {
		err = checkResults(results, []ovsdb.Operation{op})
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading NB_Global: %w", err)
	}
	g := &nbdb.NBGlobal{}
	if len(results[0].Rows) == 0 {
		return g, false, nil
	}
	uuid, ok := results[0].Rows[0]["_uuid"].(ovsdb.UUID)
	if !ok {
		return nil, false, fmt.Errorf("reading NB_Global: the server sent no _uuid")
	}
	g.UUID = uuid.GoUUID
	info, err := tc.DatabaseModel().NewModelInfo(g)
	if err != nil {
		return nil, false, err
	}
	if err := tc.DatabaseModel().Mapper.GetRowData(&results[0].Rows[0], info); err != nil {
		return nil, false, fmt.Errorf("reading NB_Global: %w", err)
	}
	g.UUID = uuid.GoUUID
	return g, true, nil
}

// Run runs f under a context that ends when the epoch is lost (another
// replica claimed it), and then returns ErrDeposed whatever f returned.
func (e *LeaderEpoch) Run(ctx context.Context, f func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() {
		select {
		case <-e.lost:
			cancel()
		case <-ctx.Done():
		}
	}()
	err := f(ctx)
	if e.Err() != nil {
		return e.Err()
	}
	return err
}
