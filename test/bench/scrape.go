package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// promSample is the master's /metrics: value by series (name and labels as
// the text format writes them).
type promSample map[string]float64

// scrapeMaster reads the master's /metrics (empty when it serves none).
func (b *bench) scrapeMaster() promSample {
	out := promSample{}
	if b.metricsAddr == "" {
		return out
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		say("  (master metrics: %v)", err)
		return out
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 64<<20))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		if v, err := strconv.ParseFloat(line[i+1:], 64); err == nil {
			out[line[:i]] = v
		}
	}
	return out
}

// mean is the mean of a histogram between two samples, in milliseconds
// (sum and count of series name with labels), and the count.
func (p promSample) mean(earlier promSample, name, labels string) (ms, count float64) {
	n := p[name+"_count"+labels] - earlier[name+"_count"+labels]
	if n <= 0 {
		return 0, 0
	}
	return 1000 * (p[name+"_sum"+labels] - earlier[name+"_sum"+labels]) / n, n
}

// quantile is the upper bound (ms) of the histogram bucket holding the
// q-quantile of the observations between two samples.
func (p promSample) quantile(earlier promSample, name, labels string, q float64) float64 {
	inner := strings.TrimSuffix(strings.TrimPrefix(labels, "{"), "}")
	type bucket struct{ le, n float64 }
	var bs []bucket
	for k, v := range p {
		if !strings.HasPrefix(k, name+"_bucket{") {
			continue
		}
		ls := strings.TrimSuffix(strings.TrimPrefix(k, name+"_bucket{"), "}")
		if inner != "" && !strings.Contains(ls, inner) {
			continue
		}
		_, le, ok := strings.Cut(ls, `le="`)
		if !ok {
			continue
		}
		le = strings.TrimSuffix(le, `"`)
		bound, err := strconv.ParseFloat(le, 64)
		if err != nil {
			continue
		}
		bs = append(bs, bucket{bound, v - earlier[k]})
	}
	total := 0.0
	for _, x := range bs {
		if x.n > total {
			total = x.n // cumulative: the +Inf bucket holds them all
		}
	}
	best := -1.0
	for _, x := range bs {
		if x.n >= q*total && total > 0 && (best < 0 || x.le < best) {
			best = x.le
		}
	}
	return 1000 * best
}

// delta is how much a counter series grew since earlier.
func (p promSample) delta(earlier promSample, series string) float64 {
	return p[series] - earlier[series]
}

// queueSyncs are the syncs each of the master's queues completed since
// earlier, by queue name.
func (p promSample) queueSyncs(earlier promSample) map[string]float64 {
	out := map[string]float64{}
	for series := range p {
		if q, ok := strings.CutPrefix(series, `workqueue_work_duration_seconds_count{name="`); ok {
			q = strings.TrimSuffix(q, `"}`)
			_, out[q] = p.mean(earlier, "workqueue_work_duration_seconds", fmt.Sprintf("{name=%q}", q))
		}
	}
	return out
}

// masterBreakdown says where the master's time went between two samples:
// each named queue's mean wait and mean sync, and the NB transactions' mean
// and p99 round trip, as metrics under prefix and one line of text.
func masterBreakdown(m map[string]float64, prefix string, before, after promSample, queues ...string) string {
	var parts []string
	for _, q := range queues {
		l := fmt.Sprintf(`{name=%q}`, q)
		wait, n := after.mean(before, "workqueue_queue_duration_seconds", l)
		work, _ := after.mean(before, "workqueue_work_duration_seconds", l)
		if n == 0 {
			continue
		}
		k := prefix + strings.ReplaceAll(q, "-", "_")
		m[k+"_syncs"], m[k+"_wait_mean_ms"], m[k+"_sync_mean_ms"] = n, wait, work
		m[k+"_wait_p99_ms"] = after.quantile(before, "workqueue_queue_duration_seconds", l, 0.99)
		parts = append(parts, fmt.Sprintf("%s: %.0f syncs, wait mean %.0f ms (p99 ≤ %.0f ms), sync mean %.1f ms", q, n, wait, m[k+"_wait_p99_ms"], work))
	}
	l := `{result="ok"}`
	if rt, n := after.mean(before, "ovnkube_master_nb_transaction_duration_seconds", l); n > 0 {
		m[prefix+"nb_txns"], m[prefix+"nb_txn_mean_ms"] = n, rt
		m[prefix+"nb_txn_p99_ms"] = after.quantile(before, "ovnkube_master_nb_transaction_duration_seconds", l, 0.99)
		parts = append(parts, fmt.Sprintf("NB: %.0f transactions, round trip mean %.1f ms (p99 ≤ %.0f ms)", n, rt, m[prefix+"nb_txn_p99_ms"]))
	}
	table := after.delta(before, `ovnkube_master_nb_set_member_reads_total{scope="table"}`)
	row := after.delta(before, `ovnkube_master_nb_set_member_reads_total{scope="row"}`)
	if table+row > 0 {
		m[prefix+"set_member_reads_table"], m[prefix+"set_member_reads_row"] = table, row
		parts = append(parts, fmt.Sprintf("address sets' members read from the NB: %.0f whole, %.0f one set", table, row))
	}
	return strings.Join(parts, "; ")
}
