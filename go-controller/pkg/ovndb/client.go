// Package ovndb is the thin I/O layer over libovsdb: it connects (and keeps
// reconnecting) to an OVSDB server, turns desired rows into the minimal
// operations against the client cache, and commits them in batched transactions.
package ovndb

import (
	"context"
	"fmt"
	"time"

	"github.com/cenkalti/backoff/v4"
	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// NBModel is the Northbound client model with the client-side indexes the
// controllers look rows up by (switch and router names are not schema indexes).
func NBModel() (model.ClientDBModel, error) {
	m, err := nbdb.FullDatabaseModel()
	if err != nil {
		return m, err
	}
	byName := func(col string) []model.ClientIndex {
		return []model.ClientIndex{{Columns: []model.ColumnKey{{Column: col}}}}
	}
	m.SetIndexes(map[string][]model.ClientIndex{
		nbdb.LogicalSwitchTable: byName("name"),
		nbdb.LogicalRouterTable: byName("name"),
	})
	return m, nil
}

// Connect dials the endpoints (comma-separated OVSDB remotes already split),
// retrying with backoff until ctx ends, and monitors every table. The client
// reconnects by itself after a lost connection and refills its cache.
func Connect(ctx context.Context, endpoints []string, dbModel model.ClientDBModel, log logr.Logger) (client.Client, error) {
	// libovsdb logs every transaction at V(4); keep that below our own debug level.
	quiet := log.V(3)
	opts := []client.Option{
		client.WithLogger(&quiet),
		// MaxElapsedTime 0: never give up reconnecting (libovsdb panics if the backoff stops).
		client.WithReconnect(10*time.Second, &backoff.ExponentialBackOff{
			InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2,
			MaxInterval: 5 * time.Second, MaxElapsedTime: 0, Stop: backoff.Stop, Clock: backoff.SystemClock,
		}),
		client.WithInactivityCheck(30*time.Second, 10*time.Second, &backoff.ExponentialBackOff{
			InitialInterval: 200 * time.Millisecond, RandomizationFactor: 0.2, Multiplier: 2,
			MaxInterval: 5 * time.Second, MaxElapsedTime: 0, Stop: backoff.Stop, Clock: backoff.SystemClock,
		}),
	}
	for _, ep := range endpoints {
		opts = append(opts, client.WithEndpoint(ep))
	}
	c, err := client.NewOVSDBClient(dbModel, opts...)
	if err != nil {
		return nil, fmt.Errorf("OVSDB client for %v: %w", endpoints, err)
	}
	delay := 200 * time.Millisecond
	for attempt := 1; ; attempt++ {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		err = c.Connect(cctx)
		cancel()
		if err == nil {
			break
		}
		log.Info("OVSDB not reachable yet; retrying", "endpoints", endpoints, "attempt", attempt, "error", err.Error())
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("connecting to OVSDB %v: %w (is ovsdb-server running and the address right?)", endpoints, err)
		case <-time.After(delay):
		}
		if delay < 5*time.Second {
			delay *= 2
		}
	}
	if _, err := c.MonitorAll(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("monitoring OVSDB %v: %w", endpoints, err)
	}
	return c, nil
}
