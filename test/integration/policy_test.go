package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func (c *cluster) namespace(name string, lbls map[string]string) {
	c.t.Helper()
	c.kube.EnsureNamespace(c.t, name)
	ns, err := c.kube.Client.CoreV1().Namespaces().Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	ns.Labels = lbls
	if _, err := c.kube.Client.CoreV1().Namespaces().Update(c.ctx(), ns, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func (c *cluster) createPolicy(ns, name string, spec networkingv1.NetworkPolicySpec) {
	c.t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
	if _, err := c.kube.Client.NetworkingV1().NetworkPolicies(ns).Create(c.ctx(), np, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func withLabels(kv ...string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Labels = map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

// relabelPod sets a pod's labels to kv.
func (c *cluster) relabelPod(ns, name string, kv ...string) {
	c.t.Helper()
	pod, err := c.kube.Client.CoreV1().Pods(ns).Get(c.ctx(), name, metav1.GetOptions{})
	if err != nil {
		c.t.Fatal(err)
	}
	withLabels(kv...)(pod)
	if _, err := c.kube.Client.CoreV1().Pods(ns).Update(c.ctx(), pod, metav1.UpdateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

func withNamedPort(name string, n int32) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: n, Protocol: corev1.ProtocolTCP})
	}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// tracePod is what ovn-trace needs of a pod's port.
type tracePod struct {
	port, node, mac, ip string
	ip6                 string // on a dual-stack cluster
}

// flow is one TCP packet for ovn-trace: from a pod's port to an address,
// expected at toPort.
type flow struct {
	from                  tracePod
	dstIP, dstMAC, toPort string
	dport                 int
	ct, lbDst             string
}

// tracer runs ovn-trace against the cluster's SB for a set of pods.
type tracer struct {
	t         *testing.T
	c         *cluster
	pods      map[string]tracePod
	routerMAC map[string]string
}

func newTracer(c *cluster, pods map[string]tracePod) *tracer {
	return &tracer{t: c.t, c: c, pods: pods, routerMAC: map[string]string{"n1": c.lrp("rtos-n1").MAC, "n2": c.lrp("rtos-n2").MAC}}
}

// tracePods waits for the pods' addresses and ports, in the NB and then in
// the SB: ovn-trace aborts on a port northd has not bound yet, and on a
// loaded machine (or the older stack's full recomputes) it lags the NB.
func (c *cluster) tracePods(specs ...[3]string) map[string]tracePod {
	pods := map[string]tracePod{}
	for _, p := range specs {
		ns, name, node := p[0], p[1], p[2]
		pn := c.podNetwork(ns, name)
		port := ns + "_" + name
		c.waitPort(node, port, nil)
		tp := tracePod{port: port, node: node, mac: pn.MAC.String(), ip: pn.IPs[0].Addr().String()}
		for _, ip := range pn.IPs[1:] {
			if ip.Addr().Is6() {
				tp.ip6 = ip.Addr().String()
			}
		}
		pods[name] = tp
	}
	c.waitSB()
	return pods
}

// waitSB waits until northd has written the NB as it is now into the SB.
func (c *cluster) waitSB() {
	c.t.Helper()
	if out, err := c.ovn.NBCtl("--timeout=60", "--wait=sb", "sync"); err != nil {
		c.t.Fatalf("northd did not catch up with the NB in 60 s: %v\n%s", err, out)
	}
}

// trace sends the packet and reports whether it reaches its port.
func (tr *tracer) trace(f flow) (bool, string) {
	dstMAC := f.dstMAC
	if dstMAC == "" {
		dstMAC = tr.routerMAC[f.from.node]
	}
	ip, src := "ip4", f.from.ip
	if strings.Contains(f.dstIP, ":") {
		ip, src = "ip6", f.from.ip6
	}
	match := fmt.Sprintf(`inport == "%s" && eth.src == %s && eth.dst == %s && %s.src == %s && %s.dst == %s && ip.ttl == 64 && tcp && tcp.src == 33333 && tcp.dst == %d`,
		f.from.port, f.from.mac, dstMAC, ip, src, ip, f.dstIP, f.dport)
	// Each conntrack zone the packet passes (one per port) takes the next
	// --ct; past the last one ovn-trace assumes an established flow.
	args := []string{"ovn-trace", "--db=unix:" + tr.c.ovn.SBSock}
	for i := 0; i < 8; i++ {
		args = append(args, "--ct="+f.ct)
	}
	if f.lbDst != "" {
		args = append(args, "--lb-dst="+f.lbDst)
	}
	out, err := harness.Run(append(args, f.from.node, match)...)
	if err != nil {
		tr.t.Fatalf("ovn-trace: %v\n%s", err, out)
	}
	return strings.Contains(out, fmt.Sprintf(`output to "%s"`, f.toPort)), out
}

// to is a new connection from one pod to another's port.
func (tr *tracer) to(from, dst string, dport int) flow {
	d := tr.pods[dst]
	f := flow{from: tr.pods[from], dstIP: d.ip, toPort: d.port, dport: dport, ct: "new"}
	if d.node == f.from.node {
		f.dstMAC = d.mac
	}
	return f
}

// expect waits until the flow gets the verdict.
func (tr *tracer) expect(name string, f flow, allowed bool) {
	tr.t.Helper()
	harness.Eventually(tr.t, 20*time.Second, name, func() error {
		if got, out := tr.trace(f); got != allowed {
			return fmt.Errorf("allowed=%v, want %v; last trace:\n%s", got, allowed, out)
		}
		return nil
	})
}

// TestOVNTracePolicyVerdicts checks NetworkPolicy verdicts in the logical
// flows northd generated in the real SB, for a matrix of pods, policies
// and ports: allowed, dropped, established return traffic, the management
// port, and egress judged on the service backend after load balancing.
func TestOVNTracePolicyVerdicts(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("db", nil)
	c.namespace("front", map[string]string{"team": "a"})
	c.namespace("other", map[string]string{"team": "b"})
	c.createPod("db", "server", "n2", withLabels("app", "db"), withNamedPort("pg", 5432))
	c.createPod("db", "web", "n1", withLabels("app", "web"))
	c.createPod("front", "client", "n1", withLabels("role", "client"))
	c.createPod("other", "stranger", "n1", withLabels("role", "client"))
	pods := c.tracePods([3]string{"db", "server", "n2"}, [3]string{"db", "web", "n1"}, [3]string{"front", "client", "n1"}, [3]string{"other", "stranger", "n1"})
	tcp := corev1.ProtocolTCP
	// db/server takes team a's clients on its named port "pg", and 172.18/16
	// but 172.18.1/24 on 5432.
	c.createPolicy("db", "server", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "db"),
		Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "a"), PodSelector: sel("role", "client")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromString("pg"))}}},
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "172.18.0.0/16", Except: []string{"172.18.1.0/24"}}}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(5432))}}},
		},
	})
	// front/client takes nothing and may only reach app=db pods on 5432.
	c.createPolicy("front", "client", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("role", "client"),
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		Egress: []networkingv1.NetworkPolicyEgressRule{{
			To:    []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}, PodSelector: sel("app", "db")}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromInt32(5432))}},
		}},
	})
	// Services whose backends are db/server:5432 and db/web:8080.
	dbSvc := c.createService("db", "db")
	webSvc := c.createService("db", "web")
	c.applySlice("db", "db", "db-a", []discovery.EndpointPort{port("http", "TCP", 5432)}, endpoint(pods["server"].ip, true))
	c.applySlice("db", "web", "web-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint(pods["web"].ip, true))
	c.waitLB("Service_db/db_TCP_cluster", map[string]string{dbSvc.Spec.ClusterIP + ":80": pods["server"].ip + ":5432"}, nil)
	c.waitLB("Service_db/web_TCP_cluster", map[string]string{webSvc.Spec.ClusterIP + ":80": pods["web"].ip + ":8080"}, nil)

	tr := newTracer(c, pods)
	mgmt := c.lsp("k8s-n2")
	mgmtMAC, mgmtIP, _ := strings.Cut(mgmt.Addresses[0], " ")
	routerMAC := tr.routerMAC
	trace, to, expect := tr.trace, tr.to, tr.expect
	// Both policies must be in force before an "allowed" verdict means
	// anything (with no policy everything passes).
	expect("stranger → server:5432 dropped (namespace not selected)", to("stranger", "server", 5432), false)
	expect("server → client new connection dropped (client isolated for ingress)", to("server", "client", 40000), false)

	cases := []struct {
		name    string
		f       flow
		allowed bool
	}{
		{"client → server on the named port pg=5432", to("client", "server", 5432), true},
		{"client → server on another port", to("client", "server", 5433), false},
		{"web → server (same namespace, not a peer)", to("web", "server", 5432), false},
		{"client → web:8080 (egress allows only app=db)", to("client", "web", 8080), false},
		{"stranger → web:8080 (web is not isolated)", to("stranger", "web", 8080), true},
		{"server → client reply of an established connection", func() flow { f := to("server", "client", 33333); f.ct = "est,rpl"; return f }(), true},
		{"node n2's management port → server (kubelet probes)", flow{from: tracePod{port: "k8s-n2", node: "n2", mac: mgmtMAC, ip: mgmtIP},
			dstIP: pods["server"].ip, dstMAC: pods["server"].mac, toPort: "db_server", dport: 9999, ct: "new"}, true},
		{"client → db service VIP, balanced to server:5432 (egress judged after load balancing)",
			flow{from: pods["client"], dstIP: dbSvc.Spec.ClusterIP, toPort: "db_server", dport: 80, ct: "new", lbDst: pods["server"].ip + ":5432"}, true},
		{"client → web service VIP, balanced to web:8080", flow{from: pods["client"], dstIP: webSvc.Spec.ClusterIP, dstMAC: routerMAC["n1"],
			toPort: "db_web", dport: 80, ct: "new", lbDst: pods["web"].ip + ":8080"}, false},
	}
	for _, tc := range cases {
		if got, out := trace(tc.f); got != tc.allowed {
			t.Errorf("%s: allowed=%v, want %v\n%s", tc.name, got, tc.allowed, out)
		}
	}

	// ACL logging: northd turns the namespace's annotation into logging,
	// metered logical flows.
	ns, err := c.kube.Client.CoreV1().Namespaces().Get(c.ctx(), "db", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ns.Annotations = map[string]string{"k8s.ovn.org/acl-logging": `{"deny": "alert", "allow": "notice"}`}
	if _, err := c.kube.Client.CoreV1().Namespaces().Update(c.ctx(), ns, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 20*time.Second, "logging ACL flows in the SB", func() error {
		flows, err := c.ovn.SBCtl("lflow-list", "n2")
		if err != nil {
			return err
		}
		for _, want := range []string{`severity=alert, verdict=drop, meter="acl-logging`, `severity=notice, verdict=allow, meter="acl-logging`} {
			if !strings.Contains(flows, want) {
				return fmt.Errorf("no flow with %q", want)
			}
		}
		return nil
	})
}

// to6 is to over IPv6 (dual-stack clusters).
func (tr *tracer) to6(from, dst string, dport int) flow {
	f := tr.to(from, dst, dport)
	f.dstIP = tr.pods[dst].ip6
	return f
}

// TestOVNTraceDualStackPolicyAndIsolation: on a dual-stack cluster, the
// verdicts of namespace isolation and NetworkPolicy in the real SB are the
// same over IPv6 as over IPv4: another tenant's pod is dropped (not let
// through, as when only IPv4 was matched), an allowed peer is let in (not
// dropped), and a pod that is no peer is dropped.
func TestOVNTraceDualStackPolicyAndIsolation(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--namespace-isolation", "--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64")
	c.createNode("n1", nil)
	c.createNode("n2", nil) // the tracer knows both nodes' routers
	c.namespace("a", nil)
	c.namespace("c", nil)
	c.createPod("a", "a1", "n1", withLabels("app", "a1"))
	c.createPod("a", "a2", "n1", withLabels("role", "client"))
	c.createPod("a", "a3", "n1")
	c.createPod("c", "c1", "n1", withLabels("role", "client"))
	pods := c.tracePods([3]string{"a", "a1", "n1"}, [3]string{"a", "a2", "n1"}, [3]string{"a", "a3", "n1"}, [3]string{"c", "c1", "n1"})
	for name, p := range pods {
		if p.ip6 == "" {
			t.Fatalf("pod %s has no IPv6 address: %+v", name, p)
		}
	}
	c.createPolicy("a", "clients", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "a1"),
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("role", "client")}}}},
	})
	tr := newTracer(c, pods)
	// Both isolation and the policy must be in force before a verdict means anything.
	tr.expect("c1 → a1 over IPv6 dropped (other tenant)", tr.to6("c1", "a1", 80), false)
	tr.expect("a3 → a1 over IPv6 dropped (not a peer)", tr.to6("a3", "a1", 80), false)
	cases := []struct {
		name    string
		f       flow
		allowed bool
	}{
		{"a2 → a1 over IPv6 (a peer)", tr.to6("a2", "a1", 80), true},
		{"a2 → a1 over IPv4 (a peer)", tr.to("a2", "a1", 80), true},
		{"c1 → a1 over IPv4 dropped (other tenant)", tr.to("c1", "a1", 80), false},
		{"a3 → a1 over IPv4 dropped (not a peer)", tr.to("a3", "a1", 80), false},
		{"a1 → a3 over IPv6 (same tenant, a3 not isolated)", tr.to6("a1", "a3", 80), true},
		{"a1 → c1 over IPv6 dropped (other tenant)", tr.to6("a1", "c1", 80), false},
	}
	for _, tc := range cases {
		if got, out := tr.trace(tc.f); got != tc.allowed {
			t.Errorf("%s: allowed=%v, want %v\n%s", tc.name, got, tc.allowed, out)
		}
	}
}

// TestOVNTraceIsolationWithoutGlobalNamespace: isolation holds in a cluster
// with no global namespace (every isolation ACL names the global tenant's
// address set, which must exist, empty, for OVN to apply the ACL).
func TestOVNTraceIsolationWithoutGlobalNamespace(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--namespace-isolation")
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", nil)
	c.namespace("b", nil)
	c.createPod("a", "a1", "n1")
	c.createPod("b", "b1", "n1")
	c.createPod("a", "a2", "n1")
	pods := c.tracePods([3]string{"a", "a1", "n1"}, [3]string{"b", "b1", "n1"}, [3]string{"a", "a2", "n1"})
	tr := newTracer(c, pods)
	tr.expect("b1 → a1 dropped (other tenant)", tr.to("b1", "a1", 80), false)
	tr.expect("a1 → b1 dropped (other tenant)", tr.to("a1", "b1", 80), false)
	tr.expect("a2 → a1 allowed (same tenant)", tr.to("a2", "a1", 80), true)
	tenantDropNamed(t, c, "b/b1", "a/a1", "a/a2") // issue 36: ovnkube trace names the tenant rule
}

// TestOVNTraceDatabaseGuard: a pod's packets to the databases' endpoints
// are dropped on its node switch whatever the policies allow (issue 31 item
// 8); the same address on another port is not.
func TestOVNTraceDatabaseGuard(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--sb-address", "tcp:172.18.0.10:6642")
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", nil)
	c.createPod("a", "a1", "n1")
	pods := c.tracePods([3]string{"a", "a1", "n1"})
	tr := newTracer(c, pods)
	guarded := func(port int) (bool, string) {
		f := flow{from: pods["a1"], dstIP: "172.18.0.10", dport: port, ct: "new"}
		_, out := tr.trace(f)
		// Dropped by the guard: its match in the trace, and no output after it.
		return strings.Contains(out, "tcp.dst == 6642))") && !strings.Contains(out, "output"), out
	}
	harness.Eventually(t, 20*time.Second, "a1 → 172.18.0.10:6642 dropped by the guard", func() error {
		if ok, out := guarded(6642); !ok {
			return fmt.Errorf("not dropped by the guard:\n%s", out)
		}
		return nil
	})
	if ok, out := guarded(6643); ok || !strings.Contains(out, "output") {
		t.Errorf("a1 → 172.18.0.10:6643 does not leave the switch:\n%s", out)
	}
}

// TestOVNTraceNamespaceIsolation checks namespace isolation (multitenant
// mode) verdicts in the real SB: tenants, a joined namespace, a global one,
// services, and NetworkPolicy applying only within what isolation allows.
func TestOVNTraceNamespaceIsolation(t *testing.T) {
	c := newCluster(t)
	c.startMaster("--namespace-isolation")
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", nil)
	c.namespace("c", nil)
	for ns, v := range map[string]string{"b": "join:a", "g": "global"} {
		c.namespace(ns, nil)
		n, err := c.kube.Client.CoreV1().Namespaces().Get(c.ctx(), ns, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		n.Annotations = map[string]string{"k8s.ovn.org/tenant": v}
		if _, err := c.kube.Client.CoreV1().Namespaces().Update(c.ctx(), n, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	c.createPod("a", "a1", "n1", withLabels("app", "a1"))
	c.createPod("b", "b1", "n2")
	c.createPod("c", "c1", "n1")
	c.createPod("g", "g1", "n2")
	pods := c.tracePods([3]string{"a", "a1", "n1"}, [3]string{"b", "b1", "n2"}, [3]string{"c", "c1", "n1"}, [3]string{"g", "g1", "n2"})
	// A policy letting every namespace reach a1: isolation still decides first.
	c.createPolicy("a", "from-anywhere", networkingv1.NetworkPolicySpec{
		PodSelector: *sel("app", "a1"),
		Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{}}}}},
	})
	svc := c.createService("c", "c")
	c.applySlice("c", "c", "c-a", []discovery.EndpointPort{port("http", "TCP", 8080)}, endpoint(pods["c1"].ip, true))
	c.waitLB("Service_c/c_TCP_cluster", map[string]string{svc.Spec.ClusterIP + ":80": pods["c1"].ip + ":8080"}, nil)

	tr := newTracer(c, pods)
	mgmt := c.lsp("k8s-n2")
	mgmtMAC, mgmtIP, _ := strings.Cut(mgmt.Addresses[0], " ")
	tr.expect("c1 → a1 dropped (other tenant, whatever the policy allows)", tr.to("c1", "a1", 80), false)
	tr.expect("a1 → c1 dropped (other tenant)", tr.to("a1", "c1", 80), false)
	cases := []struct {
		name    string
		f       flow
		allowed bool
	}{
		{"b1 → a1 (b joined a's tenant; the policy allows)", tr.to("b1", "a1", 80), true},
		{"a1 → b1 (same tenant, no policy on b1)", tr.to("a1", "b1", 80), true},
		{"g1 → c1 (global reaches everyone)", tr.to("g1", "c1", 80), true},
		{"c1 → g1 (everyone reaches global)", tr.to("c1", "g1", 80), true},
		{"b1 → c1 (other tenant)", tr.to("b1", "c1", 80), false},
		{"a1 → service of c, balanced to c1 (services are isolated too)",
			flow{from: pods["a1"], dstIP: svc.Spec.ClusterIP, toPort: "c_c1", dport: 80, ct: "new", lbDst: pods["c1"].ip + ":8080"}, false},
		{"g1 → service of c, balanced to c1", flow{from: pods["g1"], dstIP: svc.Spec.ClusterIP, toPort: "c_c1", dport: 80, ct: "new", lbDst: pods["c1"].ip + ":8080"}, true},
		{"node n2's management port → c1 on n1 (nodes reach every tenant, across nodes too)", flow{from: tracePod{port: "k8s-n2", node: "n2", mac: mgmtMAC, ip: mgmtIP},
			dstIP: pods["c1"].ip, dstMAC: tr.routerMAC["n2"], toPort: "c_c1", dport: 80, ct: "new"}, true},
	}
	for _, tc := range cases {
		if got, out := tr.trace(tc.f); got != tc.allowed {
			t.Errorf("%s: allowed=%v, want %v\n%s", tc.name, got, tc.allowed, out)
		}
	}
}
