package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	listerscorev1 "k8s.io/client-go/listers/core/v1"
	toolscache "k8s.io/client-go/tools/cache"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

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
	sets   *setWatch               // the NB's address set and port group members (setColumns)
	pods   listerscorev1.PodLister // the benchmark's own informer's

	mu          sync.Mutex
	created     map[string]time.Time // pod key → creation call start
	watched     map[string]time.Time // pod key → first seen by the benchmark's watch
	annotated   map[string]time.Time // pod key → first seen annotated
	lspSeen     map[string]time.Time // pod key → LSP first seen in the NB
	nbEvents    atomic.Int64         // changes to rows ovn-k8s writes
	metricsAddr string               // where the master serves /metrics (masterArgs)
	podLSPs     atomic.Int64         // pod LSPs added since the last reset
	lbFull      map[string]bool      // service load balancer UUID → has all its backends
	policyTrack *policyTracker
	adminTrack  *adminTracker
	eipTrack    *eipTracker
	np          npclient.Interface // the admin policies' API (nil: CRDs not installed)

	idleRSS          float64
	podCount         int
	podCPU           float64 // master CPU s in the scenarios that created pods
	podsTimed        int     // pods those scenarios created
	serviceCount     int     // Services the services scenario created
	policyCount      int     // NetworkPolicies the policies scenario created
	policyRSS        float64 // master RSS (KiB) the policies scenario added
	adminRan         bool    // the adminpolicies scenario ran
	adminTiers       bool    // the NB has ACL tiers: admin policies are programmed
	adminCount       int     // admin policies programmed in the NB
	adminRSS         float64 // master RSS (KiB) the adminpolicies scenario added
	eipRSS           float64 // master RSS (KiB) the egressips scenario added
	eipCount         int     // EgressIPs programmed in the NB
	apiCPUPerPod     float64 // API server + etcd CPU ms of a bare pod CREATE + PATCH
	apiCPUPerService float64 // the same for a bare Service + EndpointSlice CREATE
	serviceLimit     float64 // bare Service + EndpointSlice CREATEs per second
	nbLimit          float64 // batched LSP inserts per second
	cnpCreateP99     float64 // a bare ClusterNetworkPolicy CREATE call's p99 (ms) at the policy rate (0: not measured)
	scaleLoad        []int   // pods the scale scenario put on each node
	nodeSide         *nodeSide
	zones            *zones // the scale scenario in zone mode (-scale-zones)
}

func newBench(s *harness.Session, o options) *bench {
	// The master's logs stay beside the results, for reading after the run.
	logDir := filepath.Join(o.out, "logs")
	_ = os.RemoveAll(logDir)
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		s.Fatal(err)
	}
	b := &bench{s: s, o: o, ovn: harness.StartOVNCentral(s), kube: harness.StartKubeAPI(s), logDir: logDir,
		created: map[string]time.Time{}, watched: map[string]time.Time{}, annotated: map[string]time.Time{}, lspSeen: map[string]time.Time{}, lbFull: map[string]bool{},
		policyTrack: newPolicyTracker(), adminTrack: newAdminTracker(), eipTrack: newEIPTracker()}
	// The logs of etcd, the API server and OVN central are kept too (a stall
	// seen in a figure can then be looked for in them).
	s.Cleanup(func() {
		for _, dir := range []string{b.kube.Dir, b.ovn.Dir} {
			logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
			for _, l := range logs {
				if data, err := os.ReadFile(l); err == nil {
					_ = os.WriteFile(filepath.Join(logDir, filepath.Base(l)), data, 0o644)
				}
			}
		}
	})
	b.nb = b.watchNB()
	f := informers.NewSharedInformerFactory(b.kube.Client, 0)
	_, _ = f.Core().V1().Pods().Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { b.podSeen(obj) },
		UpdateFunc: func(_, obj any) { b.podSeen(obj) },
	})
	b.pods = f.Core().V1().Pods().Lister()
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
// changes to the tables ovn-k8s writes, and the set watch beside it (b.sets)
// for the set columns that client leaves out.
func (b *bench) watchNB() client.Client {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	m, err := ovndb.NBModel()
	if err != nil {
		b.s.Fatal(err)
	}
	c, err := ovndb.Connect(ctx, []string{b.ovn.NBAddress()}, m, benchUnmonitored(), logr.Discard())
	if err != nil {
		b.s.Fatal(err)
	}
	b.s.Cleanup(c.Close)
	b.sets = newSetWatch(b.ovn.NBEndpoints()[0])
	b.sets.changed = func() { b.nbEvents.Add(1) }
	b.sets.onChange(b.policyTrack.setChanged)
	b.sets.onChange(b.adminTrack.setChanged)
	b.sets.onChange(b.eipTrack.setChanged)
	watchCtx, stopWatch := context.WithCancel(context.Background())
	b.s.Cleanup(stopWatch)
	if err := b.sets.start(watchCtx, 20*time.Second); err != nil {
		b.s.Fatal(err)
	}
	count := func(table string) {
		switch table {
		case nbdb.LogicalSwitchTable, nbdb.LogicalSwitchPortTable, nbdb.LogicalRouterTable, nbdb.LogicalRouterPortTable, nbdb.LoadBalancerTable, nbdb.LoadBalancerGroupTable,
			nbdb.PortGroupTable, nbdb.ACLTable, nbdb.AddressSetTable, nbdb.NATTable, nbdb.LogicalRouterPolicyTable, nbdb.LogicalRouterStaticRouteTable:
			b.nbEvents.Add(1)
		}
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, row model.Model) {
			count(table)
			b.trackLB(row, false)
			b.policyTrack.row(row)
			b.adminTrack.row(row)
			b.eipTrack.added(row)
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
			b.policyTrack.row(cur)
			b.adminTrack.row(cur)
			b.eipTrack.updated(old, cur)
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
			b.eipTrack.deleted(row)
		},
	})
	return c
}

// trackLB keeps lbFull current from the watcher's events, so that waiting
// for services costs the benchmark nothing per poll.
func (b *bench) trackLB(row model.Model, deleted bool) {
	lb, ok := row.(*nbdb.LoadBalancer)
	if !ok {
		return
	}
	// The benchmark's services, not the API server's own (default/kubernetes).
	if o, ok := topology.OwnerOf(lb.ExternalIDs); !ok || o.Type != topology.OwnerService || strings.HasPrefix(o.Name, "default/") {
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

// profile fetches CPU profiles of the master (when it serves pprof, see
// -master-args), one after another, until the returned function is called
// (which waits for the last to end).
func (b *bench) profile(name string) func() {
	addr := b.pprofAddress()
	var wg sync.WaitGroup
	save := func(what, file string, data []byte, err error) {
		b.saveProfile(what+" CPU", name+file, data, err)
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
	stopped := make(chan struct{})
	if addr != "" {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Back to back until stopped: a phase longer than one profile is
			// covered whole (go tool pprof reads the parts as one).
			for part := 1; ; part++ {
				file := "-cpu.prof"
				if part > 1 {
					file = fmt.Sprintf("-cpu-%d.prof", part)
				}
				data, err := b.masterPprof(addr, fmt.Sprintf("profile?seconds=%d", b.profileSeconds()))
				save("master", file, data, err)
				select {
				case <-stopped:
					return
				default:
					if err != nil {
						return
					}
				}
			}
		}()
	}
	return func() {
		close(stopped)
		wg.Wait()
	}
}

// allocations saves the master's allocation profiles (when it serves pprof)
// now and when the returned function is called: what it allocated meanwhile
// is go tool pprof -base <name>-allocs-start.prof <name>-allocs.prof.
func (b *bench) allocations(name string) func() {
	addr := b.pprofAddress()
	if addr == "" {
		return func() {}
	}
	data, err := b.masterPprof(addr, "allocs")
	b.saveProfile("master allocation", name+"-allocs-start.prof", data, err)
	return func() {
		data, err := b.masterPprof(addr, "allocs")
		b.saveProfile("master allocation", name+"-allocs.prof", data, err)
	}
}

// pprofAddress is where the master serves pprof (-master-args), or "".
func (b *bench) pprofAddress() string { return b.masterArg("--pprof-address") }

// masterArg is the value -master-args gives the last of the named flags
// found, or "".
func (b *bench) masterArg(names ...string) string {
	f := strings.Fields(b.o.masterArgs)
	v := ""
	for i := 0; i+1 < len(f); i++ {
		if slices.Contains(names, f[i]) {
			v = f[i+1]
		}
	}
	return v
}

func (b *bench) saveProfile(what, file string, data []byte, err error) {
	if err != nil {
		say("  %s profile: %v", what, err)
		return
	}
	path := filepath.Join(b.o.out, file)
	_ = os.WriteFile(path, data, 0o644)
	say("  %s profile: %s", what, path)
}

// masterPprof fetches one of the master's pprof profiles (path below
// /debug/pprof/; a CPU profile lasts as its seconds parameter says).
func (b *bench) masterPprof(addr, path string) ([]byte, error) {
	var resp *http.Response
	var err error
	for i := 0; i < 100; i++ { // the master may not be listening yet
		if resp, err = http.Get(fmt.Sprintf("http://%s/debug/pprof/%s", addr, path)); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	return io.ReadAll(resp.Body)
}

// profileSeconds is how long a master profile lasts: 10 s, and in the scale
// scenario as long as a restart or a cold start of that size takes (a
// second per 2,500 pods, at most a minute), so that it covers the whole.
func (b *bench) profileSeconds() int {
	if b.o.scenarios != scaleScenario {
		return 10
	}
	return min(60, max(10, b.podCount/2500))
}

// settingArgs are the flags that decide the master's rows, for it and for
// ovnkube diff: its IP family's ranges, and an IPv4 cluster subnet with
// room for more nodes than 10.244.0.0/16's 256 subnets of /24 when asked
// for them (the IPv6 one, if any, has room for 65,536).
func (b *bench) settingArgs() []string {
	args := slices.Clone(b.o.family().masterArgs)
	if b.o.scenarios != scaleScenario && b.o.nodes <= 256 {
		return args
	}
	i := slices.Index(args, "--cluster-subnet")
	if i < 0 {
		return append(args, "--cluster-subnet", scaleClusterSubnet)
	}
	v6 := ""
	if _, after, ok := strings.Cut(args[i+1], ","); ok {
		v6 = "," + after
	}
	args[i+1] = scaleClusterSubnet + v6
	return args
}

func (b *bench) masterArgs() []string {
	// Level 2 adds one "NB commits" line every 10 s, read back for batching figures.
	args := append([]string{"--loglevel", "2"}, b.settingArgs()...)
	if b.o.scenarios == scaleScenario {
		// No periodic full resync: one would land in some step's probe and
		// count as the probe's CPU; what a full pass costs is the idle
		// restart's, measured at every step.
		args = append(args, "--resync-interval", "0")
	}
	args = append(args, b.zoneMasterArgs()...)
	extra := strings.Fields(b.o.masterArgs)
	// Its queues' and NB figures are read from /metrics (scrape.go), served
	// where -master-args says (--pprof-address is the old form of
	// --metrics-address) or on a port of the benchmark's.
	if a := b.masterArg("--metrics-address", "--pprof-address"); a != "" {
		b.metricsAddr = a
	}
	if b.metricsAddr == "" {
		b.metricsAddr = fmt.Sprintf("127.0.0.1:%d", harness.FreePort(b.s))
	}
	if !slices.Contains(extra, "--metrics-address") && !slices.Contains(extra, "--pprof-address") {
		args = append(args, "--metrics-address", b.metricsAddr)
	}
	return append(args, extra...)
}

func say(format string, args ...any) {
	if _, err := fmt.Printf(format+"\n", args...); errors.Is(err, syscall.EPIPE) {
		// The report's reader is gone (make killed, a pipe closed): stop
		// as an interrupt does, removing what the benchmark created
		// (stopOnSignal), rather than run on unread.
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
	}
}

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

// labelledNamespace makes a namespace with labels.
func (b *bench) labelledNamespace(name string, labels map[string]string) {
	b.namespace(name)
	cl := b.kube.Client.CoreV1().Namespaces()
	ns, err := cl.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		b.s.Fatal(err)
	}
	ns.Labels = labels
	if _, err := cl.Update(context.Background(), ns, metav1.UpdateOptions{}); err != nil {
		b.s.Fatal(err)
	}
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
