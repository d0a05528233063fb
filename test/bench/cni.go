package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// cni: pods started at once on one real node (OVS userspace datapath,
// ovn-controller, the node daemon): CNI ADD latency with ovn_cni standalone
// (it polls the API for the annotation) and as the shim of the node daemon's
// CNI server (its pod informer), and the pod GETs each mode costs the API.
func (b *bench) cni() Result {
	say("== cni: %d pods ADDed at once on one node, standalone vs through the node daemon's CNI server", b.o.cniPods)
	ctx := context.Background()
	n := harness.StartNode(b.s, b.ovn, harness.NewUnderlay(b.s), "cni1")
	n.ReachAPI(b.s, b.kube)
	if _, err := b.kube.Client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "cni1"}}, metav1.CreateOptions{}); err != nil {
		b.s.Fatal(err)
	}
	sock := filepath.Join(b.s.TempDir(), "cni.sock")
	daemon := harness.Start(b.s, b.logDir, "node-cni1", "ip", "netns", "exec", n.NS.Name, harness.Binary(b.s, "ovnkube"), "node",
		"--node-name", "cni1", "--encap-ip", n.TunnelIP, "--sb-address", "unix:"+b.ovn.SBSock,
		"--ovs-address", n.OVSAddress(), "--kubeconfig", b.kube.Kubeconfig, "--datapath-type", "netdev", "--cni-server-socket", sock)
	harness.Eventually(b.s, 60*time.Second, "node cni1 set up by its daemon", func() error {
		if daemon.Exited() {
			b.s.Fatalf("ovnkube node exited:\n%s", daemon.Tail(20))
		}
		node, err := b.kube.Client.CoreV1().Nodes().Get(ctx, "cni1", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if node.Annotations[annotations.NodeChassisID] == "" {
			return fmt.Errorf("no chassis annotation yet")
		}
		_, err = os.Stat(sock)
		return err
	})
	metrics := map[string]float64{"pods": float64(b.o.cniPods)}
	for _, mode := range []struct {
		name      string
		overrides map[string]any
	}{{"standalone", nil}, {"server", map[string]any{"cniServerSocket": sock}}} {
		durs, failed, gets := b.cniRound(n, mode.name, harness.NewCNI(b.s, n, b.kube.Kubeconfig, mode.overrides))
		metrics[mode.name+"_add_p50_ms"] = pct(durs, 0.50)
		metrics[mode.name+"_add_p99_ms"] = pct(durs, 0.99)
		metrics[mode.name+"_add_failures"] = float64(len(failed))
		metrics[mode.name+"_pod_gets_per_add"] = gets / float64(b.o.cniPods)
		say("  %-10s ADD p50 %6.0f ms  p99 %6.0f ms (of %d that succeeded)  failed %d  API pod GETs per ADD %.1f",
			mode.name, pct(durs, 0.50), pct(durs, 0.99), len(durs), len(failed), gets/float64(b.o.cniPods))
		if len(failed) > 0 {
			say("    first failure: %s", failed[0])
		}
	}
	daemon.Stop()
	if err := b.kube.Client.CoreV1().Nodes().Delete(ctx, "cni1", metav1.DeleteOptions{}); err != nil {
		b.s.Fatal(err)
	}
	return Result{Scenario: "cni", Metrics: metrics,
		Notes: "ADD measured by the runtime's clock (libcni) from the call to the result, pods created at once just before; includes waiting for the master's annotation and ovn-controller's ovn-installed"}
}

// cniRound creates the pods, ADDs them all at once, and returns the sorted
// durations (ms) of the ADDs that succeeded, the errors of those that
// failed (a runtime would retry them), and the pod GETs the API served.
func (b *bench) cniRound(n *harness.Node, mode string, cni *harness.CNI) ([]float64, []string, float64) {
	ctx := context.Background()
	ns := "cni-" + mode
	b.namespace(ns)
	count := b.o.cniPods
	netns := make([]harness.NetNS, count)
	for i := range netns {
		netns[i] = harness.NewNetNS(b.s, "cnib")
	}
	getsBefore := b.podGets()
	uids := make([]string, count)
	// Failures are collected and reported from this goroutine: a Fatal in
	// a worker would end the process before the cleanups ran.
	errs := make([]error, count)
	parallel(count, count, func(i int) {
		pod, err := b.kube.Client.CoreV1().Pods(ns).Create(ctx, podObject(fmt.Sprintf("p%03d", i), "cni1", nil), metav1.CreateOptions{})
		if err == nil {
			uids[i] = string(pod.UID)
		}
		errs[i] = err
	})
	fatalOnAny(b.s, errs)
	var mu sync.Mutex
	var durs []float64
	var failed []string
	parallel(count, count, func(i int) {
		rt := harness.RuntimeConf(fmt.Sprintf("%s%04d%s", mode[:1], i, strings.Repeat("0", 27)), netns[i], ns, fmt.Sprintf("p%03d", i), uids[i])
		start := time.Now()
		_, err := cni.Add(rt)
		ms := float64(time.Since(start).Microseconds()) / 1000
		mu.Lock()
		defer mu.Unlock()
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s/p%03d after %.0f ms: %v", ns, i, ms, err))
			return
		}
		durs = append(durs, ms)
	})
	gets := b.podGets() - getsBefore
	parallel(count, count, func(i int) {
		rt := harness.RuntimeConf(fmt.Sprintf("%s%04d%s", mode[:1], i, strings.Repeat("0", 27)), netns[i], ns, fmt.Sprintf("p%03d", i), uids[i])
		if err := cni.Del(rt); err != nil {
			errs[i] = fmt.Errorf("%s DEL: %w", mode, err)
			return
		}
		zero := int64(0)
		errs[i] = b.kube.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%03d", i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	fatalOnAny(b.s, errs)
	sort.Float64s(durs)
	return durs, failed, gets
}

// podGets is the API server's count of single-pod GETs so far.
func (b *bench) podGets() float64 {
	p, err := b.scrapeAPIServer()
	if err != nil {
		b.s.Fatal(err)
	}
	total := 0.0
	for series, v := range p {
		if strings.HasPrefix(series, "apiserver_request_total{") && seriesLabel(series, "resource") == "pods" && seriesLabel(series, "verb") == "GET" &&
			seriesLabel(series, "scope") == "resource" && seriesLabel(series, "subresource") == "" {
			total += v
		}
	}
	return total
}

// fatalOnAny fails the session with the first error, from the caller's goroutine.
func fatalOnAny(s *harness.Session, errs []error) {
	for _, err := range errs {
		if err != nil {
			s.Fatal(err)
		}
	}
}
