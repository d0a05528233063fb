package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

type bench struct {
	s      *harness.Session
	o      options
	ovn    *harness.OVNCentral
	kube   *harness.KubeAPI
	logDir string
	master *harness.Process
	nb     client.Client

	mu        sync.Mutex
	created   map[string]time.Time // pod key → creation call start
	watched   map[string]time.Time // pod key → first seen by the benchmark's watch
	annotated map[string]time.Time // pod key → first seen annotated
	lspSeen   map[string]time.Time // pod key → LSP first seen in the NB
	nbEvents  atomic.Int64         // changes to rows ovn-k8s writes
	podLSPs   atomic.Int64         // pod LSPs added since the last reset
	lbFull    map[string]bool      // service load balancer UUID → has all its backends

	idleRSS          float64
	podCount         int
	serviceCount     int     // Services the services scenario created
	apiCPUPerPod     float64 // API server + etcd CPU ms of a bare pod CREATE + PATCH
	apiCPUPerService float64 // the same for a bare Service + EndpointSlice CREATE
	serviceLimit     float64 // bare Service + EndpointSlice CREATEs per second
	nbLimit          float64 // batched LSP inserts per second
}

func newBench(s *harness.Session, o options) *bench {
	b := &bench{s: s, o: o, ovn: harness.StartOVNCentral(s), kube: harness.StartKubeAPI(s), logDir: s.TempDir(),
		created: map[string]time.Time{}, watched: map[string]time.Time{}, annotated: map[string]time.Time{}, lspSeen: map[string]time.Time{}, lbFull: map[string]bool{}}
	b.nb = b.watchNB()
	f := informers.NewSharedInformerFactory(b.kube.Client, 0)
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.podSeen(obj) },
		UpdateFunc: func(_, obj any) { b.podSeen(obj) },
	})
	stop := make(chan struct{})
	s.Cleanup(func() { close(stop) })
	f.Start(stop)
	f.WaitForCacheSync(stop)
	return b
}

func (b *bench) podSeen(obj any) {
	p := obj.(*corev1.Pod)
	now := time.Now()
	key := p.Namespace + "/" + p.Name
	_, annotated := p.Annotations[annotations.PodNetworks]
	b.mu.Lock()
	if _, ok := b.watched[key]; !ok {
		b.watched[key] = now
	}
	if _, ok := b.annotated[key]; !ok && annotated {
		b.annotated[key] = now
	}
	b.mu.Unlock()
}

// watchNB connects a monitoring client that timestamps pod LSPs and counts
// changes to the tables ovn-k8s writes.
func (b *bench) watchNB() client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := ovndb.ConnectNB(ctx, []string{b.ovn.NBAddress()}, logr.Discard())
	if err != nil {
		b.s.Fatal(err)
	}
	b.s.Cleanup(c.Close)
	count := func(table string) {
		switch table {
		case nbdb.LogicalSwitchTable, nbdb.LogicalSwitchPortTable, nbdb.LogicalRouterTable, nbdb.LogicalRouterPortTable, nbdb.LoadBalancerTable, nbdb.LoadBalancerGroupTable:
			b.nbEvents.Add(1)
		}
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, row model.Model) {
			count(table)
			b.trackLB(row, false)
			if lsp, ok := row.(*nbdb.LogicalSwitchPort); ok {
				if o, ok := topology.OwnerOf(lsp.ExternalIDs); ok && o.Type == topology.OwnerPod {
					b.podLSPs.Add(1)
					now := time.Now()
					b.mu.Lock()
					if _, seen := b.lspSeen[o.Name]; !seen {
						b.lspSeen[o.Name] = now
					}
					b.mu.Unlock()
				}
			}
		},
		UpdateFunc: func(table string, old, cur model.Model) {
			b.trackLB(cur, false)
			// ovn-northd writes the up column of ports; that is not ours.
			if o, ok := old.(*nbdb.LogicalSwitchPort); ok {
				n := *cur.(*nbdb.LogicalSwitchPort)
				n.Up = o.Up
				if reflect.DeepEqual(*o, n) {
					return
				}
			}
			count(table)
		},
		DeleteFunc: func(table string, row model.Model) {
			count(table)
			b.trackLB(row, true)
		},
	})
	return c
}

// trackLB keeps lbFull current from the watcher's events, so that waiting
// for services costs the benchmark nothing per poll.
func (b *bench) trackLB(row model.Model, deleted bool) {
	lb, ok := row.(*nbdb.LoadBalancer)
	if !ok || !strings.HasPrefix(lb.ExternalIDs[topology.OwnerNameKey], "svc/") {
		return
	}
	full := len(lb.Vips) > 0
	for _, backends := range lb.Vips {
		full = full && strings.Count(backends, ",")+1 == b.o.endpoints
	}
	b.mu.Lock()
	if deleted {
		delete(b.lbFull, lb.UUID)
	} else {
		b.lbFull[lb.UUID] = full
	}
	b.mu.Unlock()
}

func (b *bench) startMaster() {
	b.master = harness.StartMaster(b.s, b.logDir, fmt.Sprintf("master-%d", time.Now().UnixNano()), b.ovn, b.kube, b.masterArgs()...)
	harness.WaitForLog(b.s, b.master, "initial sync done", 60*time.Second)
	time.Sleep(2 * time.Second)
	b.idleRSS = procStatus(b.master.Cmd.Process.Pid, "VmRSS")
}

// profile fetches a CPU profile of the master (when it serves pprof, see
// -master-args) until the returned function is called.
func (b *bench) profile(name string) func() {
	addr := ""
	if f := strings.Fields(b.o.masterArgs); len(f) > 1 {
		for i := range f[:len(f)-1] {
			if f[i] == "--pprof-address" {
				addr = f[i+1]
			}
		}
	}
	var wg sync.WaitGroup
	save := func(what, file string, data []byte, err error) {
		if err != nil {
			say("  %s profile: %v", what, err)
			return
		}
		path := filepath.Join(b.o.out, name+file)
		_ = os.WriteFile(path, data, 0o644)
		say("  %s CPU profile: %s", what, path)
	}
	if b.o.profileAPI {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// The API server serves pprof to system:masters, which the benchmark is.
			data, err := b.kube.Client.CoreV1().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "15").DoRaw(context.Background())
			save("API server", "-apiserver-cpu.prof", data, err)
		}()
	}
	if addr != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp *http.Response
			var err error
			for i := 0; i < 100; i++ { // the master may not be listening yet
				if resp, err = http.Get("http://" + addr + "/debug/pprof/profile?seconds=10"); err == nil {
					break
				}
				time.Sleep(20 * time.Millisecond)
			}
			var data []byte
			if err == nil {
				data, err = io.ReadAll(resp.Body)
				_ = resp.Body.Close()
			}
			save("master", "-cpu.prof", data, err)
		}()
	}
	return wg.Wait
}

func (b *bench) masterArgs() []string {
	// Level 2 adds one "NB commits" line every 10 s, read back for batching figures.
	return append([]string{"--loglevel", "2"}, strings.Fields(b.o.masterArgs)...)
}

func say(format string, args ...any) { fmt.Printf(format+"\n", args...) }

// parallel runs f(0..n-1) on the given number of workers.
func parallel(n, workers int, f func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				f(i)
			}
		}()
	}
	wg.Wait()
}

func (b *bench) namespace(name string) { b.kube.EnsureNamespace(b.s, name) }

func podObject(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: new(bool),
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}}}
}

// limits measures what the components take without ovn-k8s in between: LSP
// inserts into the NB (100 per transaction, 4 at once), and pod CREATE and
// annotation merge-PATCH on the API server with the master's client settings.
func (b *bench) limits() Result {
	say("== limits (no ovn-k8s involved)")
	ctx := context.Background()
	// The API first, while nothing else runs.
	b.namespace("limit")
	pods := b.kube.Client.CoreV1().Pods("limit")
	start, cpu := time.Now(), cpuSnapshot()
	parallel(b.o.limitPatches, b.o.workers, func(i int) {
		if _, err := pods.Create(ctx, podObject(fmt.Sprintf("l%05d", i), ""), metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	createWall := time.Since(start).Seconds()
	createRate, createCPU := float64(b.o.limitPatches)/createWall, cpuSnapshot().since(cpu)
	// An annotation of the size the master writes.
	ann := annotations.FormatPodNetworks(annotations.PodNetwork{
		IPs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")}, MAC: net.HardwareAddr{0x0a, 0x58, 10, 244, 1, 5},
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		Routes:   []annotations.PodRoute{{Dest: netip.MustParsePrefix("100.64.0.0/16"), NextHop: netip.MustParseAddr("10.244.1.1")}},
	})
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{"bench/limit": ann}}})
	start, cpu = time.Now(), cpuSnapshot()
	parallel(b.o.limitPatches, b.o.workers, func(i int) {
		if _, err := pods.Patch(ctx, fmt.Sprintf("l%05d", i), types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	patchWall := time.Since(start).Seconds()
	patchRate, patchCPU := float64(b.o.limitPatches)/patchWall, cpuSnapshot().since(cpu)
	_ = pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	start, cpu = time.Now(), cpuSnapshot()
	parallel(b.o.limitServices, b.o.serviceWorkers, func(i int) { b.createService("limit", i) })
	serviceWall := time.Since(start).Seconds()
	serviceRate, serviceCPU := float64(b.o.limitServices)/serviceWall, cpuSnapshot().since(cpu)
	b.serviceLimit = serviceRate
	b.apiCPUPerService = 1000 * (serviceCPU["kube-apiserver"] + serviceCPU["etcd"]) / float64(b.o.limitServices)
	// The master must not find them later (Services have no DeleteCollection).
	parallel(b.o.limitServices, b.o.workers, func(i int) {
		if err := b.kube.Client.CoreV1().Services("limit").Delete(ctx, fmt.Sprintf("s%04d", i), metav1.DeleteOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	_ = b.kube.Client.DiscoveryV1().EndpointSlices("limit").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{})
	ops, _ := b.nb.Create(&nbdb.LogicalSwitch{UUID: "sw", Name: "bench-limit"})
	if _, err := b.nb.Transact(ctx, ops...); err != nil {
		b.s.Fatal(err)
	}
	var sw []nbdb.LogicalSwitch
	harness.Eventually(b.s, 10*time.Second, "bench switch in cache", func() error {
		sw = nil
		_ = b.nb.WhereCache(func(ls *nbdb.LogicalSwitch) bool { return ls.Name == "bench-limit" }).List(ctx, &sw)
		if len(sw) != 1 {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	const batch = 100
	batches := (b.o.limitPorts + batch - 1) / batch
	start = time.Now()
	parallel(batches, 4, func(i int) {
		var all []ovsdb.Operation
		var uuids []string
		for j := 0; j < batch; j++ {
			u := fmt.Sprintf("p%d_%d", i, j)
			o, _ := b.nb.Create(&nbdb.LogicalSwitchPort{UUID: u, Name: fmt.Sprintf("limit-%d-%d", i, j), Addresses: []string{"0a:58:0a:00:00:01 10.0.0.1"}})
			all = append(all, o...)
			uuids = append(uuids, u)
		}
		target := &nbdb.LogicalSwitch{UUID: sw[0].UUID}
		m, _ := b.nb.Where(target).Mutate(target, model.Mutation{Field: &target.Ports, Mutator: ovsdb.MutateOperationInsert, Value: uuids})
		res, err := b.nb.Transact(ctx, append(all, m...)...)
		if err == nil {
			_, err = ovsdb.CheckOperationResults(res, append(all, m...))
		}
		if err != nil {
			b.s.Fatal(err)
		}
	})
	nbRate := float64(batches*batch) / time.Since(start).Seconds()
	b.nbLimit = nbRate
	del, _ := b.nb.Where(&sw[0]).Delete()
	if _, err := b.nb.Transact(ctx, del...); err != nil {
		b.s.Fatal(err)
	}

	// northd turns those inserts and the deletion into SB rows; let it finish
	// so that nothing measured later pays for them.
	if _, err := b.ovn.NBCtl("--timeout=120", "--wait=sb", "sync"); err != nil {
		b.s.Fatal(err)
	}
	say("  NB: %.0f LSP inserts/s (100 per transaction, 4 concurrent)", nbRate)
	say("  API: %.0f pod CREATE/s, %.0f annotation merge-PATCH/s (%d concurrent clients, QPS 2000)", createRate, patchRate, b.o.workers)
	say("  CPU during the CREATEs: %s", createCPU.describe(createWall))
	say("  CPU during the PATCHes: %s", patchCPU.describe(patchWall))
	say("  API: %.0f Services with their EndpointSlice created/s (%d concurrent clients); CPU: %s", serviceRate, b.o.serviceWorkers, serviceCPU.describe(serviceWall))
	b.apiCPUPerPod = 1000 * (createCPU["kube-apiserver"] + createCPU["etcd"] + patchCPU["kube-apiserver"] + patchCPU["etcd"]) / float64(b.o.limitPatches)
	m := map[string]float64{"nb_lsp_insert_per_s": nbRate, "pod_create_per_s": createRate, "patch_per_s": patchRate,
		"service_create_per_s": serviceRate, "service_api_cpu_ms": b.apiCPUPerService,
		"create_api_cpu_ms": 1000 * createCPU["kube-apiserver"] / float64(b.o.limitPatches), "patch_api_cpu_ms": 1000 * patchCPU["kube-apiserver"] / float64(b.o.limitPatches)}
	return Result{Scenario: "limits", Metrics: m}
}

// burst: Nodes, then Pods created as fast as the API takes them.
func (b *bench) burst(patchLimit, createLimit float64) Result {
	say("== burst: %d nodes, then %d pods as fast as the API takes them", b.o.nodes, b.o.pods)
	ctx := context.Background()
	parallel(b.o.nodes, b.o.workers, func(i int) {
		if _, err := b.kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node%03d", i)}}, metav1.CreateOptions{}); err != nil {
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
	b.namespace("burst")
	stopProfile := b.profile("burst")
	cpu := cpuSnapshot()
	keys := b.createPods("burst", b.o.pods, 0)
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
	used.metrics(m)
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

// createPods creates n pods over the nodes with the given workers, recording creation times.
func (b *bench) createPods(ns string, n, offset int) []string {
	keys := make([]string, n)
	pods := b.kube.Client.CoreV1().Pods(ns)
	parallel(n, b.o.workers, func(i int) {
		name := fmt.Sprintf("p%05d", offset+i)
		keys[i] = ns + "/" + name
		b.mu.Lock()
		b.created[keys[i]] = time.Now()
		b.mu.Unlock()
		if _, err := pods.Create(context.Background(), podObject(name, fmt.Sprintf("node%03d", (offset+i)%b.o.nodes)), metav1.CreateOptions{}); err != nil {
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
			if _, err := pods.Create(context.Background(), podObject(name, fmt.Sprintf("node%03d", i%b.o.nodes)), metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
		}(i)
	}
	wg.Wait()
	b.waitPods(keys, 120*time.Second)
	say("  CPU: %s", cpuSnapshot().since(cpu).describe(time.Since(start).Seconds()))
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

// createService creates Service s<i> with an EndpointSlice of the configured
// number of ready endpoints.
func (b *bench) createService(ns string, i int) {
	ctx := context.Background()
	name := fmt.Sprintf("s%04d", i)
	if _, err := b.kube.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(8080)}}}},
		metav1.CreateOptions{}); err != nil {
		b.s.Fatal(err)
	}
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: strPtr("http"), Protocol: protoPtr(corev1.ProtocolTCP), Port: int32Ptr(8080)}}}
	for e := 0; e < b.o.endpoints; e++ {
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.250.%d.%d", i%250, e+1)}})
	}
	if _, err := b.kube.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		b.s.Fatal(err)
	}
}

// programmedServices counts the benchmark's service load balancers that have
// all their backends, and all its load balancer rows.
func (b *bench) programmedServices() (full, rows int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.lbFull {
		if f {
			full++
		}
	}
	return full, len(b.lbFull)
}

// services: Services with endpoints each → until every load balancer is programmed.
func (b *bench) services() Result {
	say("== services: %d services x %d endpoints", b.o.services, b.o.endpoints)
	b.namespace("svc")
	stopProfile := b.profile("services")
	defer stopProfile()
	start, cpu := time.Now(), cpuSnapshot()
	parallel(b.o.services, b.o.serviceWorkers, func(i int) { b.createService("svc", i) })
	b.serviceCount = b.o.services
	created := time.Since(start)
	createCPU := cpuSnapshot().since(cpu)
	var done time.Duration
	var rows int
	harness.Eventually(b.s, 300*time.Second, "every service load balancer programmed", func() error {
		var full int
		full, rows = b.programmedServices()
		if full < b.o.services {
			return fmt.Errorf("%d of %d programmed", full, b.o.services)
		}
		done = time.Since(start)
		return nil
	})
	rate := float64(b.o.services) / done.Seconds()
	say("  created in %.2fs; all programmed after %.2fs (%.0f ms after the last object was created): %.0f services/s = %.0f%% of the API's bare creation rate; %.1f load balancer rows per service",
		created.Seconds(), done.Seconds(), float64((done - created).Milliseconds()), rate, 100*rate/b.serviceLimit, float64(rows)/float64(b.o.services))
	say("  CPU while the API created them: %s", createCPU.describe(created.Seconds()))
	say("  the API server and etcd alone need %.2f s of CPU to create them (%.2f ms per Service + EndpointSlice, measured in the limits)",
		b.apiCPUPerService*float64(b.o.services)/1000, b.apiCPUPerService)
	return Result{Scenario: "services", Metrics: map[string]float64{"services": float64(b.o.services), "endpoints_each": float64(b.o.endpoints),
		"create_s": created.Seconds(), "programmed_s": done.Seconds(), "lag_after_last_create_s": (done - created).Seconds(),
		"services_per_s": rate, "ratio_to_api_create_limit": rate / b.serviceLimit,
		"lb_rows_per_service": float64(rows) / float64(b.o.services)}}
}

// memory: master RSS and CPU over what it now holds.
func (b *bench) memory() Result {
	pid := b.master.Cmd.Process.Pid
	rss, hwm := procStatus(pid, "VmRSS"), procStatus(pid, "VmHWM")
	cpu := procCPU(pid)
	perPod := (rss - b.idleRSS) / float64(b.podCount)
	say("== memory/CPU: master RSS %.1f MiB (idle %.1f MiB, peak %.1f MiB) → %.1f KiB per pod above idle; %.1f CPU s = %.2f ms per pod",
		rss/1024, b.idleRSS/1024, hwm/1024, perPod, cpu, 1000*cpu/float64(b.podCount))
	return Result{Scenario: "memory", Metrics: map[string]float64{"pods": float64(b.podCount), "rss_kib": rss, "idle_rss_kib": b.idleRSS,
		"peak_rss_kib": hwm, "kib_per_pod": perPod, "cpu_s": cpu, "cpu_ms_per_pod": 1000 * cpu / float64(b.podCount)}}
}

var commitLine = regexp.MustCompile(`"NB commits".*transactions=(\d+) operations=(\d+)`)

// commitStats sums the master's "NB commits" log lines.
func commitStats(log string) (txns, ops float64) {
	for _, m := range commitLine.FindAllStringSubmatch(log, -1) {
		t, _ := strconv.ParseFloat(m[1], 64)
		o, _ := strconv.ParseFloat(m[2], 64)
		txns, ops = txns+t, ops+o
	}
	return txns, ops
}

var syncLine = regexp.MustCompile(`initial sync done.*nbTransactions=(\d+)`)

// restart: with everything in place, restart the master.
func (b *bench) restart() Result {
	say("== restart with %d pods and %d services in place", b.podCount, b.serviceCount)
	b.master.Stop()
	time.Sleep(500 * time.Millisecond)
	before := b.nbEvents.Load()
	start, cpu := time.Now(), cpuSnapshot()
	b.master = harness.StartMaster(b.s, b.logDir, fmt.Sprintf("master-%d", time.Now().UnixNano()), b.ovn, b.kube, b.masterArgs()...)
	stopProfile := b.profile("restart")
	harness.WaitForLog(b.s, b.master, "initial sync done", 120*time.Second)
	synced := time.Since(start)
	used := cpuSnapshot().since(cpu)
	stopProfile()
	time.Sleep(time.Second)
	txns := -1.0
	if m := syncLine.FindStringSubmatch(b.master.Tail(100000)); m != nil {
		txns, _ = strconv.ParseFloat(m[1], 64)
	}
	changes := float64(b.nbEvents.Load() - before)
	say("  synced %.2fs after start; %.0f NB transactions sent; %.0f NB row changes seen", synced.Seconds(), txns, changes)
	say("  CPU until synced: %s", used.describe(synced.Seconds()))
	return Result{Scenario: "restart", Metrics: map[string]float64{"pods": float64(b.podCount), "synced_s": synced.Seconds(), "nb_transactions": txns, "nb_row_changes": changes},
		Notes: "time from process start (includes connecting and the informers' initial list)"}
}

// cold: an empty NB with everything in the API.
func (b *bench) cold() Result {
	say("== cold: empty NB, %d pods and %d services in the API", b.podCount, b.serviceCount)
	b.master.Stop()
	b.ovn.ResetNB()
	ctx := context.Background()
	// Our watcher reconnects by itself; wait until it sees the empty database.
	harness.Eventually(b.s, 30*time.Second, "watcher reconnected to the empty NB", func() error {
		var lsps []nbdb.LogicalSwitchPort
		if err := b.nb.List(ctx, &lsps); err != nil || len(lsps) > 0 || b.nb.CurrentEndpoint() == "" {
			return fmt.Errorf("still %d ports cached", len(lsps))
		}
		return nil
	})
	// A reconnect empties the cache without delete events: start counting afresh.
	b.podLSPs.Store(0)
	b.mu.Lock()
	b.lbFull = map[string]bool{}
	b.mu.Unlock()
	start, cpu := time.Now(), cpuSnapshot()
	b.master = harness.StartMaster(b.s, b.logDir, fmt.Sprintf("master-%d", time.Now().UnixNano()), b.ovn, b.kube, b.masterArgs()...)
	var done, lspsDone, lbsDone time.Duration
	harness.Eventually(b.s, 300*time.Second, "everything programmed into the empty NB", func() error {
		lsps := int(b.podLSPs.Load())
		full, _ := b.programmedServices()
		if lspsDone == 0 && lsps >= b.podCount {
			lspsDone = time.Since(start)
		}
		if lbsDone == 0 && full >= b.serviceCount {
			lbsDone = time.Since(start)
		}
		if lsps < b.podCount || full < b.serviceCount {
			return fmt.Errorf("%d/%d LSPs, %d/%d load balancers", lsps, b.podCount, full, b.serviceCount)
		}
		done = time.Since(start)
		return nil
	})
	lspRate := float64(b.podCount) / lspsDone.Seconds()
	say("  %d LSPs and %d services programmed %.2fs after start (all load balancers after %.2fs, all LSPs after %.2fs: %.0f LSPs/s = %.0f%% of the NB limit)",
		b.podCount, b.serviceCount, done.Seconds(), lbsDone.Seconds(), lspsDone.Seconds(), lspRate, 100*lspRate/b.nbLimit)
	say("  CPU until then: %s", cpuSnapshot().since(cpu).describe(done.Seconds()))
	return Result{Scenario: "cold", Metrics: map[string]float64{"pods": float64(b.podCount), "services": float64(b.serviceCount), "programmed_s": done.Seconds(),
		"services_programmed_s": lbsDone.Seconds(), "lsps_programmed_s": lspsDone.Seconds(), "lsps_per_s": lspRate, "ratio_to_nb_limit": lspRate / b.nbLimit}}
}

func pct(sorted []float64, p float64) float64 {
	i := int(p*float64(len(sorted))+0.5) - 1
	if i < 0 {
		i = 0
	}
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	return sorted[i]
}

func maxDur(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}

// procStatus reads a kB field of /proc/PID/status.
func procStatus(pid int, field string) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	for _, line := range strings.Split(string(data), "\n") {
		if strings.HasPrefix(line, field+":") {
			f := strings.Fields(line)
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	return 0
}

// procCPU is user+system CPU seconds of a process.
func procCPU(pid int) float64 {
	data, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	s := string(data)
	end := strings.LastIndex(s, ")")
	if end < 0 || end+2 > len(s) {
		return 0
	}
	return statCPU(strings.Fields(s[end+2:]))
}

// statCPU is user+system CPU seconds from the fields of /proc/PID/stat after
// the command name.
func statCPU(f []string) float64 {
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseFloat(f[11], 64)
	st, _ := strconv.ParseFloat(f[12], 64)
	return (ut + st) / 100
}

func strPtr(s string) *string                     { return &s }
func int32Ptr(i int32) *int32                     { return &i }
func protoPtr(p corev1.Protocol) *corev1.Protocol { return &p }
