package integration

import (
	"context"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// Chaos: churn of pods, services and node delete/re-add while the master is
// killed with SIGKILL at random moments, the NB restarts, the NB is replaced
// by an empty database and kube-apiserver restarts. Within 15 s of the last fault the
// NB holds exactly the desired rows: no stale or duplicate row, no
// duplicate address, no pod without its port.
func TestChaosConvergesAfterFaults(t *testing.T) {
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewSource(seed))
	c := newCluster(t)
	c.startMaster()
	c.waitSynced()
	kube := c.kube.Client
	ctx := context.Background()
	nodes := []string{"n1", "n2", "n3"}
	for _, n := range nodes {
		c.createNode(n, nil)
	}
	pods, services := map[string]bool{}, map[string]bool{}
	seq := 0
	faults := map[int]string{}
	for _, round := range rng.Perm(30)[:6] {
		faults[round] = "kill"
	}
	faults[7], faults[10], faults[20] = "nb-restart", "nb-replaced", "apiserver"
	var lastFault time.Time
	for round := 0; round < 30; round++ {
		for i := 0; i < 4; i++ {
			seq++
			switch op := rng.Intn(10); {
			case op < 5:
				name := fmt.Sprintf("p%d", seq)
				c.createPod("default", name, nodes[rng.Intn(len(nodes))])
				pods[name] = true
			case op < 7 && len(pods) > 0:
				name := anyKey(rng, pods)
				_ = kube.CoreV1().Pods("default").Delete(ctx, name, *metav1.NewDeleteOptions(0)) // no kubelet to finish a graceful one
				delete(pods, name)
			case op < 8:
				name := fmt.Sprintf("s%d", seq)
				createChaosService(t, c, name, seq)
				services[name] = true
			case op < 9 && len(services) > 0:
				name := anyKey(rng, services)
				_ = kube.CoreV1().Services("default").Delete(ctx, name, metav1.DeleteOptions{})
				_ = kube.DiscoveryV1().EndpointSlices("default").Delete(ctx, name, metav1.DeleteOptions{})
				delete(services, name)
			default: // the kubelet re-registers its node while pods run
				n := nodes[rng.Intn(len(nodes))]
				c.deleteNode(n)
				c.createNode(n, nil)
			}
		}
		if faults[round] != "" {
			lastFault = time.Now()
		}
		switch faults[round] {
		case "kill":
			c.master.Kill()
			c.startMaster()
		case "nb-restart": // the same database back after an outage
			c.ovn.StopNB()
			c.ovn.StartNB()
		case "nb-replaced": // an empty database (a restore, a new central)
			c.ovn.ResetNB()
		case "apiserver":
			c.kube.RestartAPIServer(t)
		}
		time.Sleep(time.Duration(rng.Intn(150)) * time.Millisecond) // let the master get part-way
	}
	// 15 s from the last fault; the churn after it is short, but at least one look.
	remaining := max(15*time.Second-time.Since(lastFault), time.Second)
	harness.Eventually(t, remaining, "the NB to hold exactly the desired rows", func() error {
		return checkConverged(c, nodes, pods, services)
	})
	t.Logf("converged %v after the last fault (%d pods, %d services)", time.Since(lastFault).Round(time.Millisecond), len(pods), len(services))
}

func anyKey(rng *rand.Rand, m map[string]bool) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys[rng.Intn(len(keys))]
}

func createChaosService(t *testing.T, c *cluster, name string, seq int) {
	t.Helper()
	ctx := context.Background()
	ip := fmt.Sprintf("10.96.%d.%d", 100+seq/250, seq%250+1)
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{ClusterIP: ip, ClusterIPs: []string{ip}, Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}}}}
	if _, err := c.kube.Client.CoreV1().Services("default").Create(ctx, svc, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	port, proto, pname, ready := int32(8080), corev1.ProtocolTCP, "http", true
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: discovery.AddressTypeIPv4, Ports: []discovery.EndpointPort{{Name: &pname, Protocol: &proto, Port: &port}},
		Endpoints: []discovery.Endpoint{{Addresses: []string{fmt.Sprintf("10.244.0.%d", seq%250+3)}, Conditions: discovery.EndpointConditions{Ready: &ready}}}}
	if _, err := c.kube.Client.DiscoveryV1().EndpointSlices("default").Create(ctx, slice, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// checkConverged compares the NB with what the API objects want.
func checkConverged(c *cluster, nodes []string, pods, services map[string]bool) error {
	ctx := context.Background()
	var problems []string
	// No two rows of ours share a name.
	for table, names := range map[string][]string{"Logical_Switch": switchNames(c), "Logical_Router": routerNames(c), "Load_Balancer": lbNames(c)} {
		seen := map[string]bool{}
		for _, n := range names {
			if seen[n] {
				problems = append(problems, fmt.Sprintf("two %s rows named %s", table, n))
			}
			seen[n] = true
		}
	}
	// Every pod annotated for its UID, with its port; no address twice.
	ips := map[string]string{}
	for name := range pods {
		pod, err := c.kube.Client.CoreV1().Pods("default").Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pn, err := annotations.ParsePodNetworks(pod.Annotations[annotations.PodNetworks])
		if err != nil || !pn.WrittenFor(string(pod.UID)) {
			problems = append(problems, fmt.Sprintf("pod %s not annotated for its UID (%v)", name, err))
			continue
		}
		ip := pn.IPs[0].Addr().String()
		if other, dup := ips[ip]; dup {
			problems = append(problems, fmt.Sprintf("pods %s and %s share %s", other, name, ip))
		}
		ips[ip] = name
		lsp := &nbdb.LogicalSwitchPort{Name: topology.PodPort("default", name)}
		if err := c.nb.Get(ctx, lsp); err != nil || len(lsp.Addresses) != 1 || !strings.HasSuffix(lsp.Addresses[0], " "+ip) {
			problems = append(problems, fmt.Sprintf("pod %s (%s) has port %v (%v)", name, ip, lsp.Addresses, err))
		}
	}
	// No pod port, node switch or service balancer of an object that is gone.
	var lsps []nbdb.LogicalSwitchPort
	_ = c.nb.WhereCache(func(l *nbdb.LogicalSwitchPort) bool { return l.ExternalIDs[topology.OwnerTypeKey] == topology.OwnerPod }).List(ctx, &lsps)
	for _, l := range lsps {
		if _, name, _ := strings.Cut(l.ExternalIDs[topology.OwnerNameKey], "/"); !pods[name] {
			problems = append(problems, "stale port "+l.Name)
		}
	}
	wantSwitches := map[string]bool{"join": true}
	for _, n := range nodes {
		wantSwitches[n] = true
	}
	for _, n := range switchNames(c) {
		if !wantSwitches[n] {
			problems = append(problems, "stale switch "+n)
		}
	}
	for n := range wantSwitches {
		if !contains(switchNames(c), n) {
			problems = append(problems, "missing switch "+n)
		}
	}
	wantLBs := map[string]bool{}
	svcs, err := c.kube.Client.CoreV1().Services("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, s := range svcs.Items { // ours and the API server's own "kubernetes"
		if strings.HasPrefix(s.Name, "s") && !services[s.Name] {
			problems = append(problems, "service "+s.Name+" not deleted yet")
		}
		wantLBs[fmt.Sprintf("Service_%s/%s_TCP_cluster", s.Namespace, s.Name)] = true
	}
	for _, n := range lbNames(c) {
		if !wantLBs[n] {
			problems = append(problems, "stale load balancer "+n)
		}
		delete(wantLBs, n)
	}
	for n := range wantLBs {
		problems = append(problems, "missing load balancer "+n)
	}
	if len(problems) > 0 {
		sort.Strings(problems)
		if len(problems) > 8 {
			problems = append(problems[:8], fmt.Sprintf("… %d more", len(problems)-8))
		}
		return fmt.Errorf("%s", strings.Join(problems, "; "))
	}
	return nil
}

func switchNames(c *cluster) []string {
	return rowNames(c, func(r *nbdb.LogicalSwitch) string { return r.Name })
}

func routerNames(c *cluster) []string {
	return rowNames(c, func(r *nbdb.LogicalRouter) string { return r.Name })
}

func lbNames(c *cluster) []string {
	return rowNames(c, func(r *nbdb.LoadBalancer) string { return r.Name })
}

// rowNames lists the names of every cached row of one table.
func rowNames[T any](c *cluster, name func(*T) string) []string {
	var rows []T
	_ = c.nb.List(context.Background(), &rows)
	out := make([]string, 0, len(rows))
	for i := range rows {
		out = append(out, name(&rows[i]))
	}
	return out
}
