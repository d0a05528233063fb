// Package nbdiff is `ovnkube diff`: what the master would change in the
// Northbound database, computed by the master itself. The NB's rows are
// copied into an in-memory database, a master runs against the copy (its
// reads of the cluster are the real ones; its writes to the API server are
// refused) until it has nothing left to do, and the copy is compared with
// the NB row by row. Nothing is written to the NB.
package nbdiff

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/go-logr/logr"
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
	Took         time.Duration
	// Phases are the time of each step: read (the NB), copy (into the
	// in-memory database), master (until it settled, Quiet included),
	// compare.
	Phases map[string]time.Duration
}

// Diff computes how the NB differs from what the master wants.
func Diff(ctx context.Context, opts Options) (Result, error) {
	start := time.Now()
	if opts.Quiet <= 0 {
		opts.Quiet = 300 * time.Millisecond
	}
	// The API's lists (10,000 pods: a second) overlap the NB's read and copy.
	informerCtx, stopInformers := context.WithCancel(ctx)
	defer stopInformers()
	factory := master.NewInformers(opts.Kube)
	factory.Start(informerCtx.Done())
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
	txns, err := converge(ctx, opts, factory, []string{"unix:" + sock})
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
	return Result{Rows: rows, NBRows: have.Rows(), Transactions: txns, Took: time.Since(start), Phases: phases}, nil
}

// readNB reads every row of the NB, and its schema.
func readNB(ctx context.Context, opts Options) (ovndb.Snapshot, ovsdb.DatabaseSchema, error) {
	var tlsCfg []*tls.Config
	if opts.Master.NBTLS != nil {
		tlsCfg = append(tlsCfg, opts.Master.NBTLS)
	}
	nb, err := ovndb.ConnectNBFull(ctx, opts.Master.NBAddress, opts.Log.WithName("nb"), tlsCfg...)
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

// converge runs a master (reading the cluster through factory, started)
// against the copy until it has been idle, sending nothing, for opts.Quiet,
// and says how many transactions it sent.
func converge(ctx context.Context, opts Options, factory informers.SharedInformerFactory, nbAddress []string) (uint64, error) {
	cfg := opts.Master
	cfg.NBAddress, cfg.NBTLS = nbAddress, nil
	cfg.DNSTapAddress = "" // the running master's to take
	nb, err := ovndb.ConnectNB(ctx, nbAddress, logr.Discard())
	if err != nil {
		return 0, err
	}
	defer nb.Close()
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
	case err := <-done:
		done <- err
		return 0, fmt.Errorf("the master on the copy stopped: %w", err)
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	last, quietSince := m.Committer().Transactions(), time.Now()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("the master on the copy did not settle: %w", ctx.Err())
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

// ReadOnly wraps an API client's transport so that it only reads: every
// other request (the master on the copy may want to annotate a pod or
// record an Event) fails in-process, as a deposed leader's do (a fence that
// never opens).
var ReadOnly = leader.FenceTransport(func() error { return errors.New("ovnkube diff only reads") })
