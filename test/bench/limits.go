package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

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
		if _, err := pods.Create(ctx, podObject(fmt.Sprintf("l%05d", i), "", nil), metav1.CreateOptions{}); err != nil {
			b.s.Fatal(err)
		}
	})
	createWall := time.Since(start).Seconds()
	createRate, createCPU := float64(b.o.limitPatches)/createWall, cpuSnapshot().since(cpu)
	// An annotation of the size the master writes.
	ann := limitAnnotation(b.o.family().families)
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
	cnpLine := b.adminCreateLimit()
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
	if cnpLine != "" {
		say("%s", cnpLine)
	}
	b.apiCPUPerPod = 1000 * (createCPU["kube-apiserver"] + createCPU["etcd"] + patchCPU["kube-apiserver"] + patchCPU["etcd"]) / float64(b.o.limitPatches)
	m := map[string]float64{"nb_lsp_insert_per_s": nbRate, "pod_create_per_s": createRate, "patch_per_s": patchRate,
		"service_create_per_s": serviceRate, "service_api_cpu_ms": b.apiCPUPerService,
		"create_api_cpu_ms": 1000 * createCPU["kube-apiserver"] / float64(b.o.limitPatches), "patch_api_cpu_ms": 1000 * patchCPU["kube-apiserver"] / float64(b.o.limitPatches)}
	if b.cnpCreateP99 > 0 {
		m["cnp_create_call_p99_ms"] = b.cnpCreateP99
	}
	return Result{Scenario: "limits", Metrics: m}
}

// adminCreateLimit times the API server's CREATE of the adminpolicies
// scenario's ClusterNetworkPolicies at its rate with nothing else running
// (the master has not started), then deletes them: the floor under that
// scenario's creation latency. It says what it found in one line ("" when
// the scenario does not run or the stack has no such API).
func (b *bench) adminCreateLimit() string {
	if b.np == nil || !slices.Contains(b.o.scenarioList(), "adminpolicies") {
		return ""
	}
	ctx := context.Background()
	cl := b.np.PolicyV1alpha2().ClusterNetworkPolicies()
	n, interval := b.o.adminPolicies, time.Second/time.Duration(b.o.policyRate)
	lat := make([]float64, n)
	var wg sync.WaitGroup
	start, cpu := time.Now(), cpuSnapshot()
	for k := range n {
		time.Sleep(time.Until(start.Add(time.Duration(k) * interval)))
		cnp := benchCNP(k)
		cnp.Name = "limit-" + cnp.Name
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if _, err := cl.Create(ctx, cnp, metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
			lat[k] = float64(time.Since(t0).Microseconds()) / 1000
		}()
	}
	wg.Wait()
	used := cpuSnapshot().since(cpu)
	if err := cl.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		b.s.Fatal(err)
	}
	harness.Eventually(b.s, 60*time.Second, "the limit's ClusterNetworkPolicies deleted before the master starts", func() error {
		l, err := cl.List(ctx, metav1.ListOptions{})
		if err == nil && len(l.Items) > 0 {
			err = fmt.Errorf("%d left", len(l.Items))
		}
		return err
	})
	sort.Float64s(lat)
	b.cnpCreateP99 = pct(lat, 0.99)
	return fmt.Sprintf("  API: ClusterNetworkPolicy CREATE at %d/s (the adminpolicies scenario's %d, alone): call p50 %.0f ms, p99 %.0f ms; kube-apiserver %.1f ms CPU each",
		b.o.policyRate, n, pct(lat, 0.5), b.cnpCreateP99, 1000*used["kube-apiserver"]/float64(n))
}
