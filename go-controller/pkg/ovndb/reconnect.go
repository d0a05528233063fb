package ovndb

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"k8s.io/apimachinery/pkg/util/wait"
)

// Epoch identifies one generation of a client's cache. libovsdb refills its
// cache after a reconnect by purging it (new row caches, no delete events for
// rows the new database lacks) unless the server could resume the monitor
// from our last transaction. A changed epoch therefore means: every index
// built from cache events may be wrong, and every operation built from the
// old cache may refer to rows that do not exist.
type Epoch struct{ rows *cache.RowCache }

// CurrentEpoch reads c's cache generation.
func CurrentEpoch(c client.Client) Epoch {
	tc := c.Cache()
	if tc == nil {
		return Epoch{}
	}
	table, ok := epochTable.Load(tc)
	if !ok {
		tables := make([]string, 0, len(tc.DatabaseModel().Schema.Tables))
		for name := range tc.DatabaseModel().Schema.Tables {
			tables = append(tables, name)
		}
		if len(tables) == 0 {
			return Epoch{}
		}
		sort.Strings(tables)
		table, _ = epochTable.LoadOrStore(tc, tables[0])
	}
	return Epoch{rows: tc.Table(table.(string))}
}

// epochTable remembers, per client cache, which table's row store marks
// its generation (any will do; the first by name, so it is stable).
var epochTable sync.Map

// WatchReconnects calls onReconnect, from one goroutine, after every
// reconnect of c once the refreshed cache is filled: when the cache was
// replaced (however fast the reconnect was: the epoch stays changed until
// seen) or when the connection was seen down and is up again. every bounds
// how late the signal comes, not whether it comes. Returns when ctx ends.
func WatchReconnects(ctx context.Context, c client.Client, every time.Duration, log logr.Logger, onReconnect func()) {
	last := CurrentEpoch(c)
	wasUp := c.CurrentEndpoint() != ""
	_ = wait.PollUntilContextCancel(ctx, every, false, func(context.Context) (bool, error) {
		up := c.CurrentEndpoint() != ""
		if !up {
			if wasUp {
				log.Info("OVSDB connection lost; the client is reconnecting")
			}
			wasUp = false
			return false, nil
		}
		if CurrentEpoch(c) == last && wasUp {
			return false, nil
		}
		// Connected() waits for a reconnect in progress to finish, so the
		// cache is filled before anyone resyncs from it.
		_ = c.Connected()
		last, wasUp = CurrentEpoch(c), true
		log.Info("OVSDB connection restored or cache replaced; resyncing from the fresh cache", "endpoint", c.CurrentEndpoint())
		onReconnect()
		return false, nil
	})
}
