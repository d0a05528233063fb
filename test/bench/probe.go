package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
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

// northdStats reads ovn-northd's incremental engine counters
// (inc-engine/show-stats): recomputes and incremental computes by engine
// node; clear first resets them (inc-engine/clear-stats).
func (b *bench) northdStats(clear bool) map[string][2]float64 {
	ctl := filepath.Join(b.ovn.Dir, "northd.ctl")
	if clear {
		_, _ = exec.Command("ovn-appctl", "-t", ctl, "inc-engine/clear-stats").CombinedOutput()
		return nil
	}
	out, err := exec.Command("ovn-appctl", "-t", ctl, "inc-engine/show-stats").CombinedOutput()
	if err != nil {
		say("  (northd engine stats: %v: %s)", err, strings.TrimSpace(string(out)))
		return nil
	}
	stats := map[string][2]float64{}
	node := ""
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(strings.TrimSpace(line))
		switch {
		case len(f) >= 2 && f[0] == "Node:":
			node = f[1]
		case len(f) == 3 && f[0] == "-" && node != "":
			v, _ := strconv.ParseFloat(f[2], 64)
			s := stats[node]
			switch strings.TrimSuffix(f[1], ":") {
			case "recompute":
				s[0] = v
			case "compute":
				s[1] = v
			}
			stats[node] = s
		}
	}
	return stats
}

// describeNorthd adds northd's recomputes and incremental computes of its
// main nodes as metrics under prefix and says them.
func describeNorthd(m map[string]float64, prefix string, stats map[string][2]float64) string {
	var parts []string
	for _, node := range []string{"northd", "lflow", "port_group", "sync_to_sb_addr_set"} {
		s, ok := stats[node]
		if !ok {
			continue
		}
		m[prefix+"northd_"+node+"_recomputes"], m[prefix+"northd_"+node+"_computes"] = s[0], s[1]
		parts = append(parts, fmt.Sprintf("%s %.0f recomputes, %.0f incremental", node, s[0], s[1]))
	}
	if len(parts) == 0 {
		return "no northd engine stats"
	}
	return strings.Join(parts, "; ")
}
