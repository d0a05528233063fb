package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"
)

// promSample is the master's /metrics: value by series (name and labels as
// the text format writes them).
type promSample map[string]float64

// scrapeMaster reads the master's /metrics (empty when it serves none).
func (b *bench) scrapeMaster() promSample {
	if b.metricsAddr == "" {
		return promSample{}
	}
	cl := http.Client{Timeout: 5 * time.Second}
	resp, err := cl.Get("http://" + b.metricsAddr + "/metrics")
	if err != nil {
		say("  (master metrics: %v)", err)
		return promSample{}
	}
	defer resp.Body.Close()
	return parseProm(resp.Body)
}

// scrapeAPIServer reads kube-apiserver's /metrics, which it serves to
// system:masters, as the benchmark is.
func (b *bench) scrapeAPIServer() (promSample, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	body, err := b.kube.Client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	return parseProm(bytes.NewReader(body)), nil
}

// apiSample is scrapeAPIServer's sample for a report, empty (and said)
// when it cannot be read.
func (b *bench) apiSample() promSample {
	p, err := b.scrapeAPIServer()
	if err != nil {
		say("  (%v)", err)
	}
	return p
}

// parseProm reads the Prometheus text format (values by series).
func parseProm(r io.Reader) promSample {
	out := promSample{}
	sc := bufio.NewScanner(io.LimitReader(r, 64<<20))
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

// seriesLabel is the value of label name in a series ("" when it has none).
func seriesLabel(series, name string) string {
	_, rest, ok := strings.Cut(series, "{")
	for ok && rest != "" {
		var pair string
		// Values are quoted; none of the API server's holds `",`.
		pair, rest, _ = strings.Cut(rest, `",`)
		k, v, found := strings.Cut(pair, `="`)
		if found && k == name {
			return strings.TrimSuffix(strings.TrimSuffix(v, "}"), `"`)
		}
	}
	return ""
}

// apiRequests are the API server's requests between two samples of its
// metrics, by "VERB resource[/subresource]", with the sum of their
// durations in seconds (long-running requests, WATCH, have none).
func apiRequests(before, after promSample) (count, seconds map[string]float64) {
	count, seconds = map[string]float64{}, map[string]float64{}
	key := func(series string) string {
		k := seriesLabel(series, "verb") + " " + seriesLabel(series, "resource")
		if sub := seriesLabel(series, "subresource"); sub != "" {
			k += "/" + sub
		}
		return k
	}
	for series, v := range after {
		switch {
		case strings.HasPrefix(series, "apiserver_request_total{"):
			if d := v - before[series]; d > 0 {
				count[key(series)] += d
			}
		case strings.HasPrefix(series, "apiserver_request_duration_seconds_sum{"):
			if d := v - before[series]; d > 0 {
				seconds[key(series)] += d
			}
		}
	}
	return count, seconds
}

// describeAPI says what the API server served between two samples: the
// requests in all and the most frequent kinds with their mean duration, as
// metrics under prefix and one line of text.
func describeAPI(m map[string]float64, prefix string, before, after promSample) string {
	count, seconds := apiRequests(before, after)
	if len(count) == 0 {
		return "no request counts"
	}
	kinds := slices.Collect(maps.Keys(count))
	sort.Slice(kinds, func(i, j int) bool {
		if count[kinds[i]] != count[kinds[j]] {
			return count[kinds[i]] > count[kinds[j]]
		}
		return kinds[i] < kinds[j]
	})
	total := 0.0
	var parts []string
	for i, k := range kinds {
		total += count[k]
		metric := prefix + "api_" + strings.NewReplacer(" ", "_", "/", "_").Replace(strings.ToLower(k))
		m[metric] = count[k]
		if i < 6 {
			part := fmt.Sprintf("%s %.0f", k, count[k])
			if s := seconds[k]; s > 0 {
				m[metric+"_mean_ms"] = 1000 * s / count[k]
				part += fmt.Sprintf(" (mean %.0f ms)", m[metric+"_mean_ms"])
			}
			parts = append(parts, part)
		}
	}
	m[prefix+"api_requests"] = total
	return fmt.Sprintf("%.0f requests; %s", total, strings.Join(parts, ", "))
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
