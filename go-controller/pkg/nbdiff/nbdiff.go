// Package nbdiff is `ovnkube diff`: what the master would change in the
// Northbound database, computed by the master itself. A master runs on the
// NB with every write refused (its reads of the cluster are the real ones;
// its writes to the API server are refused too): if it settles without
// asking to write, the NB is in sync. Otherwise the NB's rows are copied
// into an in-memory database, a master runs against the copy until it has
// nothing left to do, and the copy is compared with the NB row by row.
// Nothing is written to the NB.
package nbdiff

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/master"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// Options are what a diff reads.
type Options struct {
	// Master is the master's configuration (its flags): the NB to read and
	// the settings that decide the rows.
	Master config.Master
	// Kube and APIs read the cluster; the master's writes through them
	// must fail or go nowhere (ReadOnly). APIs makes the custom resources'
	// (their informers run once: a new set for each pass); nil for none.
	Kube kubernetes.Interface
	APIs func() master.APIs
	// Quiet is how long the master on the copy must have been idle, with no
	// transaction sent, to count as done (default 300 ms).
	Quiet time.Duration
	Log   logr.Logger
}

// Result is a diff and what it cost: the rows the master would add, change
// or delete, and those named as its rows that nobody owns (ovndb.RowUnowned).
type Result struct {
	Rows         []ovndb.RowDiff
	NBRows       int    // rows read from the NB
	Transactions uint64 // the master's transactions on the copy
	// OnCopy is set when the master wanted to write: the rows were found
	// on a copy of the NB.
	OnCopy bool
	Took   time.Duration
	// Phases are the time of each step: read (the NB), copy (into the
	// in-memory database, when made), master (until it settled, Quiet
	// included), compare; inPlace is the pass on the NB itself that the
	// copy followed.
	Phases map[string]time.Duration
}

// Diff computes how the NB differs from what the master wants. A master
// first runs on the NB itself with its writes refused (readOnlyNB): when it
// settles without asking for one, the NB is what it wants, and only rows
// named as ours that nobody owns are left to report. Its first write sends
// the diff to a copy of the NB, where the master's writes are made and the
// copy compared with the NB row by row.
func Diff(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	if opts.Quiet <= 0 {
		opts.Quiet = 300 * time.Millisecond
	}
	r, err := diffInPlace(ctx, opts)
	if !errors.Is(err, errWouldWrite) {
		r.Took = time.Since(start)
		return r, err
	}
	inPlace := time.Since(start)
	r, err = diffOnCopy(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	r.Phases["inPlace"], r.Took = inPlace, time.Since(start)
	return r, nil
}

// diffInPlace runs a master on the NB as its own client would see it (the
// NB read once, in the columns the master monitors), every write refused.
// It fails with errWouldWrite as soon as the master asks for one.
func diffInPlace(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	factory, stopInformers := startInformers(ctx, opts)
	defer stopInformers()
	nb, err := ovndb.ConnectNB(ctx, opts.Master.NBAddress, opts.Log.WithName("nb"), nbTLS(opts)...)
	if err != nil {
		return Result{}, fmt.Errorf("reading the NB: %w", err)
	}
	defer nb.Close()
	phases := map[string]time.Duration{"read": time.Since(start)}
	mark := time.Now()
	ro := &readOnlyNB{Client: nb, refused: make(chan struct{})}
	if _, err := converge(ctx, opts, factory, ro, ro.refused); err != nil {
		return Result{}, err
	}
	phases["master"], mark = time.Since(mark), time.Now()
	have := ovndb.TakeSnapshot(nb)
	rows := have.Unowned()
	phases["compare"] = time.Since(mark)
	return Result{Rows: rows, NBRows: have.Rows(), Phases: phases}, nil
}

// diffOnCopy copies every row of the NB into an in-memory database, runs a
// master on the copy until it is done and compares the two.
func diffOnCopy(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	factory, stopInformers := startInformers(ctx, opts)
	defer stopInformers()
	have, schema, err := readNB(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	phases := map[string]time.Duration{"read": time.Since(start)}
	mark := time.Now()
	dir, err := os.MkdirTemp("", "ovnkube-diff-")
	if err != nil {
		return Result{}, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "nb.sock")
	copyNB, err := serveCopy(schema, have, sock)
	if err != nil {
		return Result{}, err
	}
	defer copyNB.Close()
	phases["copy"], mark = time.Since(mark), time.Now()
	onCopy := opts
	onCopy.Master.NBAddress, onCopy.Master.NBTLS = []string{"unix:" + sock}, nil
	nb, err := ovndb.ConnectNB(ctx, onCopy.Master.NBAddress, logr.Discard())
	if err != nil {
		return Result{}, err
	}
	defer nb.Close()
	txns, err := converge(ctx, onCopy, factory, nb, nil)
	if err != nil {
		return Result{}, err
	}
	phases["master"], mark = time.Since(mark), time.Now()
	// Read from the database itself: exactly what the master left there.
	want, err := copyNB.Snapshot()
	if err != nil {
		return Result{}, err
	}
	rows := append(ovndb.Compare(have, want), have.Unowned()...)
	phases["compare"] = time.Since(mark)
	return Result{Rows: rows, NBRows: have.Rows(), Transactions: txns, OnCopy: true, Phases: phases}, nil
}

// startInformers starts a pass's own informers (a master's handlers stay
// with them), before the NB is read: the API's lists (10,000 pods: a
// second) overlap the read.
func startInformers(ctx context.Context, opts Options) (informers.SharedInformerFactory, context.CancelFunc) {
	informerCtx, stop := context.WithCancel(ctx)
	factory := master.NewInformers(opts.Kube)
	factory.Start(informerCtx.Done())
	return factory, stop
}

func nbTLS(opts Options) []*tls.Config {
	if opts.Master.NBTLS == nil {
		return nil
	}
	return []*tls.Config{opts.Master.NBTLS}
}

// readNB reads every row of the NB, and its schema.
func readNB(ctx context.Context, opts Options) (ovndb.Snapshot, ovsdb.DatabaseSchema, error) {
	nb, err := ovndb.ConnectNBFull(ctx, opts.Master.NBAddress, opts.Log.WithName("nb"), nbTLS(opts)...)
	if err != nil {
		return nil, ovsdb.DatabaseSchema{}, fmt.Errorf("reading the NB: %w", err)
	}
	defer nb.Close()
	return ovndb.TakeSnapshot(nb), nb.Schema(), nil
}

// serveCopy serves an in-memory database of schema on the unix socket
// sock holding the rows.
func serveCopy(schema ovsdb.DatabaseSchema, rows ovndb.Snapshot, sock string) (*ovndb.InMemory, error) {
	clientModel, err := nbdb.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	db, err := ovndb.ServeInMemory(schema, clientModel, sock, rows)
	if err != nil {
		return nil, fmt.Errorf("copying the NB's %d rows: %w", rows.Rows(), err)
	}
	return db, nil
}

// converge runs a master on nb (reading the cluster through factory,
// started) until it has been idle, sending nothing, for opts.Quiet, and says
// how many transactions it sent; it fails with errWouldWrite when refused
// closes first.
func converge(ctx context.Context, opts Options, factory informers.SharedInformerFactory, nb libovsdbclient.Client, refused <-chan struct{}) (uint64, error) {
	cfg := opts.Master
	cfg.DNSTapAddress = "" // the running master's to take
	runCtx, cancel := context.WithCancel(ctx)
	var apis master.APIs
	if opts.APIs != nil {
		apis = opts.APIs()
	}
	m := master.New(cfg, opts.Kube, nb, factory, apis, opts.Log.WithName("master"))
	done := make(chan error, 1)
	go func() { done <- m.Run(runCtx) }()
	defer func() {
		cancel()
		<-done
	}()
	select {
	case <-m.Synced():
	case <-refused:
		return 0, errWouldWrite
	case err := <-done:
		done <- err
		return 0, fmt.Errorf("the master stopped: %w", err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	last, quietSince := m.Committer().Transactions(), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the master did not settle: %w", ctx.Err())
		case <-refused:
			return 0, errWouldWrite
		case <-tick.C:
		}
		n := m.Committer().Transactions()
		if n != last || !m.Idle() || m.Committer().Queued() > 0 {
			last, quietSince = n, time.Now()
			continue
		}
		if time.Since(quietSince) >= opts.Quiet {
			return n, nil
		}
	}
}

// errWouldWrite is a write the master asked of readOnlyNB.
var errWouldWrite = errors.New("ovnkube diff does not write to the NB")

// readOnlyNB is an NB client that sends transactions of selects only (the
// reads of columns the master does not monitor): the first transaction with
// any other operation is refused, not sent, and closes refused.
type readOnlyNB struct {
	libovsdbclient.Client
	once    sync.Once
	refused chan struct{}
}

func (c *readOnlyNB) Transact(ctx context.Context, ops ...ovsdb.Operation) ([]ovsdb.OperationResult, error) {
	for _, op := range ops {
		if op.Op != ovsdb.OperationSelect {
			c.once.Do(func() { close(c.refused) })
			return nil, fmt.Errorf("%w (%s on %s)", errWouldWrite, op.Op, op.Table)
		}
	}
	return c.Client.Transact(ctx, ops...)
}

// ReadOnly wraps an API client's transport so that it only reads: every
// other request (the master on the copy may want to annotate a pod or
// record an Event) fails in-process, as a deposed leader's do (a fence that
// never opens).
var ReadOnly = leader.FenceTransport(func() error { return errors.New("ovnkube diff only reads") })
