package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// policyTracker follows, from the benchmark's NB watcher, when each policy's
// port group (created with its ACLs in one transaction) appears and when
// relabelled pods' addresses reach the peer address sets.
type policyTracker struct {
	mu      sync.Mutex
	pgSeen  map[string]time.Time // policy key → its port group first seen
	pending map[string]bool      // addresses waiting to enter a team peer set
	ipSeen  map[string]time.Time // address → first seen in a team peer set
}

func newPolicyTracker() *policyTracker {
	return &policyTracker{pgSeen: map[string]time.Time{}, pending: map[string]bool{}, ipSeen: map[string]time.Time{}}
}

// teamPeers marks the peer sets the label changes move pods into.
const teamPeers = "pods=[role=client]"

func (p *policyTracker) row(row model.Model) {
	if r, ok := row.(*nbdb.PortGroup); ok {
		if o, ok := topology.OwnerOf(r.ExternalIDs); ok && o.Type == policy.OwnerPolicy && len(r.ACLs) > 0 {
			now := time.Now()
			p.mu.Lock()
			if _, seen := p.pgSeen[o.Name]; !seen {
				p.pgSeen[o.Name] = now
			}
			p.mu.Unlock()
		}
	}
}

// setChanged takes setWatch's changes: relabelled pods' addresses reaching
// a team peer set.
func (p *policyTracker) setChanged(r *setRow, _ bool, now time.Time) {
	if r.table != nbdb.AddressSetTable || !strings.Contains(r.ids[policy.PeersKey], teamPeers) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for a := range p.pending {
		if _, ok := r.members[a]; ok {
			delete(p.pending, a)
			p.ipSeen[a] = now
		}
	}
}

func (p *policyTracker) programmed() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.pgSeen)
}

func (p *policyTracker) reset() {
	p.mu.Lock()
	p.pgSeen = map[string]time.Time{}
	p.mu.Unlock()
}

// benchPolicy is policy k of a namespace: it selects app=a<k>, takes
// ingress from its namespace's role=client-<k> pods, from role=client pods
// of a team's namespaces and from an ipBlock with an exception, on TCP 80,
// TCP 8000–8100 and UDP 53, and allows egress to 10/8 but the pod range on 443.
func benchPolicy(ns string, k, team int) *networkingv1.NetworkPolicy {
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	p80, p8000, p53, p443 := intstr.FromInt32(80), intstr.FromInt32(8000), intstr.FromInt32(53), intstr.FromInt32(443)
	end := int32(8100)
	sel := func(kv ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{kv[0]: kv[1]}}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("np%02d", k)},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: *sel("app", fmt.Sprintf("a%d", k%10)),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{PodSelector: sel("role", fmt.Sprintf("client-%d", k%10))},
					{NamespaceSelector: sel("team", fmt.Sprintf("t%d", team%10)), PodSelector: sel("role", "client")},
					{IPBlock: &networkingv1.IPBlock{CIDR: "172.16.0.0/12", Except: []string{"172.16.1.0/24"}}},
				},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p80}, {Protocol: &tcp, Port: &p8000, EndPort: &end}, {Protocol: &udp, Port: &p53}},
			}},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To:    []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.0.0.0/8", Except: []string{"10.244.0.0/16"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: &p443}},
			}},
		},
	}
}

// policies: NetworkPolicies over the burst pods at a steady rate (creation →
// ACLs committed), then pods relabelled into a shared peer set (label
// change → address set updated); rows and memory per policy.
func (b *bench) policies() Result {
	perNS := (b.o.policies + b.o.namespaces - 1) / b.o.namespaces
	say("== policies: %d policies (%d per namespace over %d namespaces) at %d/s over %d pods, then %d pods relabelled at %d/s",
		b.o.policies, perNS, b.o.namespaces, b.o.policyRate, b.podCount, b.o.labelChanges, b.o.policyRate)
	ctx := context.Background()
	rssBefore := procStatus(b.master.Cmd.Process.Pid, "VmRSS")
	stopProfile := b.profile("policies")
	created := map[string]time.Time{}
	var createCall []float64
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(b.o.policyRate)
	start, cpu := time.Now(), cpuSnapshot()
	for i := 0; i < b.o.policies; i++ {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		np := benchPolicy(burstNamespace(i%b.o.namespaces), i/b.o.namespaces, i)
		wg.Add(1)
		go func() {
			defer wg.Done()
			t0 := time.Now()
			if _, err := b.kube.Client.NetworkingV1().NetworkPolicies(np.Namespace).Create(ctx, np, metav1.CreateOptions{}); err != nil {
				b.s.Fatal(err)
			}
			mu.Lock()
			created[np.Namespace+"/"+np.Name] = t0
			createCall = append(createCall, float64(time.Since(t0).Microseconds())/1000)
			mu.Unlock()
		}()
	}
	wg.Wait()
	harness.Eventually(b.s, 120*time.Second, "every policy's port group and ACLs in the NB", func() error {
		if n := b.policyTrack.programmed(); n < b.o.policies {
			return fmt.Errorf("%d of %d", n, b.o.policies)
		}
		return nil
	})
	used, wall := cpuSnapshot().since(cpu), time.Since(start).Seconds()
	stopProfile()
	var lat []float64
	b.policyTrack.mu.Lock()
	for key, t0 := range created {
		lat = append(lat, float64(b.policyTrack.pgSeen[key].Sub(t0).Microseconds())/1000)
	}
	b.policyTrack.mu.Unlock()
	sort.Float64s(lat)
	sort.Float64s(createCall)
	m := map[string]float64{"policies": float64(b.o.policies), "pods": float64(b.podCount), "rate_per_s": float64(b.o.policyRate),
		"create_to_acls_p50_ms": pct(lat, 0.5), "create_to_acls_p99_ms": pct(lat, 0.99), "create_to_acls_max_ms": lat[len(lat)-1],
		"api_create_call_p50_ms": pct(createCall, 0.5), "api_create_call_p99_ms": pct(createCall, 0.99)}
	used.metrics(m, wall)
	say("  creation → port group with ACLs committed: p50 %.0f ms, p99 %.0f ms, max %.0f ms (the API's CREATE call alone: p50 %.0f ms, p99 %.0f ms)",
		m["create_to_acls_p50_ms"], m["create_to_acls_p99_ms"], m["create_to_acls_max_ms"], m["api_create_call_p50_ms"], m["api_create_call_p99_ms"])
	say("  CPU: %s", used.describe(wall))

	pgs, acls, sets := b.policyRows()
	m["port_groups"], m["acls"], m["address_sets"] = float64(pgs), float64(acls), float64(sets)
	m["rows_per_policy"] = float64(pgs+acls+sets) / float64(b.o.policies)
	m["acls_per_policy"] = float64(acls) / float64(b.o.policies)
	time.Sleep(2 * time.Second) // let the Go runtime settle before reading RSS
	b.policyRSS = procStatus(b.master.Cmd.Process.Pid, "VmRSS") - rssBefore
	m["kib_per_policy"] = b.policyRSS / float64(b.o.policies)
	say("  NB rows: %d port groups, %d ACLs, %d address sets = %.1f rows and %.1f ACLs per policy (none per selected pod); master RSS +%.1f KiB per policy",
		pgs, acls, sets, m["rows_per_policy"], m["acls_per_policy"], m["kib_per_policy"])

	b.labelChanges(m)
	b.policyCount = b.o.policies
	return Result{Scenario: "policies", Metrics: m,
		Notes: "latencies from the client sending CREATE/PATCH to the benchmark's NB watcher seeing the rows"}
}

// labelChanges relabels pods role=client at the policy rate: each enters
// the role=client peer set of its namespace's team, shared by the policies
// of every namespace selecting that team.
func (b *bench) labelChanges(m map[string]float64) {
	ctx := context.Background()
	type target struct {
		ns, name, ip string
	}
	var targets []target
	for i := 0; len(targets) < b.o.labelChanges && i < b.podCount; i++ {
		ns, name := burstNamespace(i%b.o.namespaces), fmt.Sprintf("p%05d", i)
		p, err := b.kube.Client.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			continue
		}
		pn, err := annotations.ParsePodNetworks(p.Annotations[annotations.PodNetworks])
		if err != nil || len(pn.IPs) == 0 {
			continue
		}
		targets = append(targets, target{ns, name, pn.IPs[0].Addr().String()})
	}
	started := map[string]time.Time{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	interval := time.Second / time.Duration(b.o.policyRate)
	start := time.Now()
	patch := []byte(`{"metadata":{"labels":{"role":"client"}}}`)
	for i, t := range targets {
		time.Sleep(time.Until(start.Add(time.Duration(i) * interval)))
		wg.Add(1)
		go func() {
			defer wg.Done()
			b.policyTrack.mu.Lock()
			b.policyTrack.pending[t.ip] = true
			b.policyTrack.mu.Unlock()
			mu.Lock()
			started[t.ip] = time.Now()
			mu.Unlock()
			if _, err := b.kube.Client.CoreV1().Pods(t.ns).Patch(ctx, t.name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
				b.s.Fatal(err)
			}
		}()
	}
	wg.Wait()
	harness.Eventually(b.s, 60*time.Second, "every relabelled pod in its team's peer set", func() error {
		b.policyTrack.mu.Lock()
		defer b.policyTrack.mu.Unlock()
		if n := len(b.policyTrack.pending); n > 0 {
			return fmt.Errorf("%d pods not yet in an address set", n)
		}
		return nil
	})
	var lat []float64
	b.policyTrack.mu.Lock()
	for ip, t0 := range started {
		lat = append(lat, float64(b.policyTrack.ipSeen[ip].Sub(t0).Microseconds())/1000)
	}
	b.policyTrack.mu.Unlock()
	sort.Float64s(lat)
	m["label_changes"] = float64(len(lat))
	m["label_to_address_set_p50_ms"], m["label_to_address_set_p99_ms"], m["label_to_address_set_max_ms"] = pct(lat, 0.5), pct(lat, 0.99), lat[len(lat)-1]
	say("  pod label change → address set updated: p50 %.0f ms, p99 %.0f ms, max %.0f ms (%d pods)",
		m["label_to_address_set_p50_ms"], m["label_to_address_set_p99_ms"], m["label_to_address_set_max_ms"], len(lat))
}

// policyRows counts the NB rows NetworkPolicy owns.
func (b *bench) policyRows() (pgs, acls, sets int) {
	ours := func(ids map[string]string) bool {
		o, ok := topology.OwnerOf(ids)
		return ok && (o.Type == policy.OwnerPolicy || o.Type == policy.OwnerNamespace || o.Type == policy.OwnerPeers)
	}
	var p []nbdb.PortGroup
	var a []nbdb.ACL
	var s []nbdb.AddressSet
	_ = b.nb.WhereCache(func(r *nbdb.PortGroup) bool { return ours(r.ExternalIDs) }).List(context.Background(), &p)
	_ = b.nb.WhereCache(func(r *nbdb.ACL) bool { return ours(r.ExternalIDs) }).List(context.Background(), &a)
	_ = b.nb.WhereCache(func(r *nbdb.AddressSet) bool { return ours(r.ExternalIDs) }).List(context.Background(), &s)
	return len(p), len(a), len(s)
}
