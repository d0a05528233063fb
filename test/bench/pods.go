package main

import (
	"context"
	"fmt"
	"runtime"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func podObject(name, node string, labels map[string]string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
}

// burst: Nodes, then Pods created as fast as the API takes them.
func (b *bench) burst(patchLimit, createLimit float64) Result {
	say("== burst: %d nodes, then %d pods as fast as the API takes them", b.o.nodes, b.o.pods)
	// The nodes are labelled zone=z0..z3, for the adminpolicies scenario's node peers.
	ctx := context.Background()
	parallel(b.o.nodes, b.o.workers, func(i int) {
		if _, err := b.kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%03d", i),
			Labels: map[string]string{"zone": fmt.Sprintf("z%d", i%4)}}}, metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	harness.Eventually(b.s, 120*time.Second, "every node annotated", func() error {
		nodes, err := b.kube.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if n.Annotations[annotations.NodeSubnets] == "" {
				return fmt.Errorf("%s not annotated", n.Name)
			}
		}
		return nil
	})
	// The pods are spread over namespaces labelled for the policies scenario.
	for i := 0; i < b.o.namespaces; i++ {
		b.labelledNamespace(burstNamespace(i), map[string]string{"team": fmt.Sprintf("t%d", i%10)})
	}
	stopProfile := b.profile("burst")
	cpu := cpuSnapshot()
	keys := b.createPods(b.o.pods, 0)
	createdAt, cpuCreated := time.Now(), cpuSnapshot()
	annotatedAll, lspAll := b.waitPods(keys, 300*time.Second)
	ended := cpuSnapshot()
	used, drainUsed := ended.since(cpu), ended.since(cpuCreated)
	stopProfile()
	start := b.firstCreated(keys)
	total := maxDur(annotatedAll, lspAll).Sub(start)
	rate := float64(len(keys)) / total.Seconds()
	// Each pod costs the API server a CREATE (the benchmark's) and a PATCH
	// (ours): together they bound what any controller can reach here.
	ceiling := 1 / (1/createLimit + 1/patchLimit)
	say("  created in %.2fs; all annotated after %.2fs, all LSPs after %.2fs: %.0f pods/s = %.0f%% of the PATCH limit, %.0f%% of the CREATE+PATCH ceiling (%.0f/s)",
		createdAt.Sub(start).Seconds(), annotatedAll.Sub(start).Seconds(), lspAll.Sub(start).Seconds(), rate, 100*rate/patchLimit, 100*rate/ceiling, ceiling)
	// Once the CREATEs stop, the API server serves only the master: the rate
	// at which it annotates the backlog is its throughput against the limit.
	backlog := b.annotatedAfter(keys, createdAt)
	drainRate := 0.0
	if drain := annotatedAll.Sub(createdAt); backlog >= 100 && drain > 0 {
		drainRate = float64(backlog) / drain.Seconds()
		say("  after the last CREATE, %d pods were still to annotate: done at %.0f pods/s = %.0f%% of the PATCH limit; CPU meanwhile: %s",
			backlog, drainRate, 100*drainRate/patchLimit, drainUsed.describe(drain.Seconds()))
	}
	say("  CPU: %s", used.describe(total.Seconds()))
	apiPerPod := 1000 * (used["kube-apiserver"] + used["etcd"]) / float64(len(keys))
	say("  API server + etcd CPU per pod: %.2f ms here, %.2f ms for a bare CREATE + PATCH in the limits", apiPerPod, b.apiCPUPerPod)
	// What the target rate would take from the API server and etcd alone, at
	// their cost per pod measured without anything else running.
	target := 0.7 * patchLimit
	apiShare := target * b.apiCPUPerPod / 1000 / float64(runtime.NumCPU())
	say("  at 70%% of the PATCH limit (%.0f pods/s) the API server and etcd alone would need %.0f%% of the %d cores", target, 100*apiShare, runtime.NumCPU())
	b.podCount += len(keys)
	time.Sleep(11 * time.Second) // let the master log its commit counts
	txns, ops := commitStats(b.master.Tail(100000))
	say("  NB: %.0f transactions carried %.0f operations (%.1f per transaction) so far", txns, ops, ops/txns)
	m := map[string]float64{"backlog_after_creates": float64(backlog), "backlog_drain_per_s": drainRate, "ratio_drain_to_patch_limit": drainRate / patchLimit,
		"api_cpu_ms_per_pod": apiPerPod, "bare_api_cpu_ms_per_pod": b.apiCPUPerPod, "api_share_of_machine_at_target": apiShare}
	used.metrics(m, total.Seconds())
	for k, v := range map[string]float64{
		"nb_transactions": txns, "nb_operations": ops,
		"nodes": float64(b.o.nodes), "pods": float64(len(keys)),
		"create_s": createdAt.Sub(start).Seconds(), "all_annotated_s": annotatedAll.Sub(start).Seconds(), "all_lsp_s": lspAll.Sub(start).Seconds(),
		"pods_per_s": rate, "ratio_to_patch_limit": rate / patchLimit,
		"create_plus_patch_ceiling_per_s": ceiling, "ratio_to_create_plus_patch_ceiling": rate / ceiling,
	} {
		m[k] = v
	}
	return Result{Scenario: "burst", Metrics: m}
}

// burstNamespace is the i-th namespace of the burst pods.
func burstNamespace(i int) string { return fmt.Sprintf("burst-%02d", i) }

// createPods creates n pods over the nodes and the burst namespaces with the
// given workers, recording creation times. Pod i is in namespace i mod
// namespaces and labelled app=a<(i / namespaces) mod 10>.
func (b *bench) createPods(n, offset int) []string {
	keys := make([]string, n)
	parallel(n, b.o.workers, func(i int) {
		j := offset + i
		ns := burstNamespace(j % b.o.namespaces)
		name := fmt.Sprintf("p%05d", j)
		keys[i] = ns + "/" + name
		b.mu.Lock()
		b.created[keys[i]] = time.Now()
		b.mu.Unlock()
		labels := map[string]string{"app": fmt.Sprintf("a%d", (j/b.o.namespaces)%10)}
		if _, err := b.kube.Client.CoreV1().Pods(ns).Create(context.Background(), podObject(name, fmt.Sprintf("node%03d", j%b.o.nodes), labels), metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	return keys
}

// annotatedAfter counts the pods first seen annotated after t.
func (b *bench) annotatedAfter(keys []string, t time.Time) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, k := range keys {
		if b.annotated[k].After(t) {
			n++
		}
	}
	return n
}

func (b *bench) firstCreated(keys []string) time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	first := time.Now()
	for _, k := range keys {
		if t := b.created[k]; t.Before(first) {
			first = t
		}
	}
	return first
}

// waitPods waits until every pod is annotated and has its LSP; it returns
// when the last of each happened.
func (b *bench) waitPods(keys []string, timeout time.Duration) (time.Time, time.Time) {
	var lastAnn, lastLSP time.Time
	harness.Eventually(b.s, timeout, fmt.Sprintf("%d pods annotated and in the NB", len(keys)), func() error {
		b.mu.Lock()
		defer b.mu.Unlock()
		lastAnn, lastLSP = time.Time{}, time.Time{}
		missing := 0
		for _, k := range keys {
			a, ok1 := b.annotated[k]
			l, ok2 := b.lspSeen[k]
			if b.zones != nil && b.zones.remote[k] { // another zone's: no port in this NB
				l, ok2 = a, true
			}
			if !ok1 || !ok2 {
				missing++
				continue
			}
			lastAnn, lastLSP = maxDur(lastAnn, a), maxDur(lastLSP, l)
		}
		if missing > 0 {
			return fmt.Errorf("%d pods not done", missing)
		}
		return nil
	})
	return lastAnn, lastLSP
}

// latency: pods at a steady rate; creation → annotation and → LSP.
func (b *bench) latency() Result {
	say("== latency: %d pods/s for %s", b.o.latencyRate, b.o.latencyDuration)
	b.namespace("lat")
	n := int(float64(b.o.latencyRate) * b.o.latencyDuration.Seconds())
	keys := make([]string, 0, n)
	pods := b.kube.Client.CoreV1().Pods("lat")
	interval := time.Second / time.Duration(b.o.latencyRate)
	var wg sync.WaitGroup
	stopProfile := b.profile("latency")
	defer stopProfile()
	start, cpu := time.Now(), cpuSnapshot()
	for i := 0; i < n; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		name := fmt.Sprintf("p%05d", i)
		key := "lat/" + name
		keys = append(keys, key)
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			b.mu.Lock()
			b.created[key] = time.Now()
			b.mu.Unlock()
			if _, err := pods.Create(context.Background(), podObject(name, fmt.Sprintf("node%03d", i%b.o.nodes), nil), metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
		}(i)
	}
	wg.Wait()
	b.waitPods(keys, 120*time.Second)
	used, wall := cpuSnapshot().since(cpu), time.Since(start).Seconds()
	say("  CPU: %s", used.describe(wall))
	var ann, lsp, watch, afterWatch []float64
	ms := func(d time.Duration) float64 { return d.Seconds() * 1000 }
	b.mu.Lock()
	for _, k := range keys {
		ann = append(ann, ms(b.annotated[k].Sub(b.created[k])))
		lsp = append(lsp, ms(b.lspSeen[k].Sub(b.created[k])))
		watch = append(watch, ms(b.watched[k].Sub(b.created[k])))
		afterWatch = append(afterWatch, ms(b.annotated[k].Sub(b.watched[k])))
	}
	b.mu.Unlock()
	m := map[string]float64{"pods": float64(len(keys)), "rate_per_s": float64(b.o.latencyRate)}
	used.metrics(m, wall)
	for name, v := range map[string][]float64{"annotation": ann, "lsp": lsp, "watch": watch, "watch_to_annotation": afterWatch} {
		sort.Float64s(v)
		m[name+"_p50_ms"], m[name+"_p99_ms"], m[name+"_max_ms"] = pct(v, 0.50), pct(v, 0.99), v[len(v)-1]
	}
	for _, l := range []struct{ what, name string }{
		{"creation → annotation:", "annotation"}, {"creation → LSP:       ", "lsp"},
		// Where the time goes: the API server's CREATE and watch delivery
		// before any controller can act, then the controller with its PATCH.
		{"split: creation → pod in a watch:  ", "watch"}, {"split: pod in a watch → annotation:", "watch_to_annotation"},
	} {
		say("  %s p50 %.0f ms, p99 %.0f ms, max %.0f ms", l.what, m[l.name+"_p50_ms"], m[l.name+"_p99_ms"], m[l.name+"_max_ms"])
	}
	b.podCount += len(keys)
	return Result{Scenario: "latency", Metrics: m, Notes: "creation time is taken when the client sends CREATE; both ends observed by watches"}
}
