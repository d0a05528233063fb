package main

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// probeSet is the benchmark's own address set, which the NB probe changes.
const probeSet = "bench_nb_probe"

// probeNB measures, while a scenario runs, what one small NB transaction
// costs with nothing of ovn-k8s in between: every interval the benchmark
// adds an address to (or removes it from) an address set of its own and
// times the round trip to the reply. It is the limit, measured in the same
// run under the same load, below which no controller's "committed" latency
// can go. The returned function stops it and gives the latencies (ms),
// sorted.
func (b *bench) probeNB(interval time.Duration) func() []float64 {
	ctx := context.Background()
	as := &nbdb.AddressSet{UUID: "probe", Name: probeSet}
	if err := b.nb.Get(ctx, &nbdb.AddressSet{Name: probeSet}); err != nil {
		ops, _ := b.nb.Create(as)
		if _, err := b.nb.Transact(ctx, ops...); err != nil {
			b.s.Fatal(err)
		}
	}
	var mu sync.Mutex
	var lat []float64
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(interval)
		defer t.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-t.C:
			}
			mutator := ovsdb.MutateOperationInsert
			if i%2 == 1 {
				mutator = ovsdb.MutateOperationDelete
			}
			target := &nbdb.AddressSet{Name: probeSet}
			ops, err := b.nb.Where(target).Mutate(target, model.Mutation{Field: &target.Addresses, Mutator: mutator, Value: []string{"192.0.2.1"}})
			if err != nil {
				b.s.Fatal(err)
			}
			t0 := time.Now()
			res, err := b.nb.Transact(ctx, ops...)
			if err == nil {
				_, err = ovsdb.CheckOperationResults(res, ops)
			}
			if err != nil {
				say("  (NB probe: %v)", err)
				continue
			}
			mu.Lock()
			lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
			mu.Unlock()
		}
	}()
	return func() []float64 {
		close(done)
		<-stopped
		sort.Float64s(lat)
		return lat
	}
}

// describeProbe adds the probe's figures as metrics under prefix and says them.
func describeProbe(m map[string]float64, prefix string, lat []float64) string {
	if len(lat) == 0 {
		return "no NB probe transactions"
	}
	m[prefix+"nb_probe_p50_ms"], m[prefix+"nb_probe_p99_ms"], m[prefix+"nb_probe_n"] = pct(lat, 0.5), pct(lat, 0.99), float64(len(lat))
	return fmt.Sprintf("one small NB transaction of the benchmark's own, alone (%d of them): p50 %.1f ms, p99 %.1f ms", len(lat), pct(lat, 0.5), pct(lat, 0.99))
}
