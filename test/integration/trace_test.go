package integration

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	networkingv1 "k8s.io/api/networking/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/trace"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// runTrace runs `ovnkube trace` against the cluster's NB and SB.
func (c *cluster) runTrace(args ...string) (trace.Result, int) {
	c.t.Helper()
	var r trace.Result
	code := c.runJSON(&r, append([]string{"trace", "--raw", "--kubeconfig", c.kube.Kubeconfig, "--nb-address", c.ovn.NBAddress(),
		"--sb-address", "unix:" + c.ovn.SBSock}, args...)...)
	return r, code
}

// decisions are a result's decisions as text, with their objects.
func decisions(r trace.Result) string {
	var out []string
	for _, d := range r.Decisions {
		out = append(out, d.Kind+": "+d.Text+" ← "+d.Object)
	}
	return strings.Join(out, "\n")
}

// Issue 36: `ovnkube trace` on the real southbound gives the verdict and
// names the objects: same node, across nodes (the route between), a
// ClusterIP to each backend (the Service), a NetworkPolicy drop (the
// policy), a Service without endpoints (the reject).
func TestTraceNamesTheObjects(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("ns", nil)
	c.createPod("ns", "a", "n1", withLabels("app", "client"))
	c.createPod("ns", "b", "n1", withLabels("app", "web"))
	c.createPod("ns", "c", "n2", withLabels("app", "web"))
	c.createPod("ns", "db", "n2", withLabels("app", "db"))
	pods := c.tracePods([3]string{"ns", "a", "n1"}, [3]string{"ns", "b", "n1"}, [3]string{"ns", "c", "n2"}, [3]string{"ns", "db", "n2"})
	web := c.createService("ns", "web")
	c.createService("ns", "empty")
	c.applySlice("ns", "web", "web-a", []discovery.EndpointPort{port("http", corev1.ProtocolTCP, 8080)},
		endpoint(pods["b"].ip, true), endpoint(pods["c"].ip, true))
	c.createPolicy("ns", "db-closed", networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "db")})

	expect := func(name string, want string, port string, args ...string) trace.Result {
		t.Helper()
		var r trace.Result
		harness.Eventually(t, 20*time.Second, name, func() error {
			var code int
			r, code = c.runTrace(args...)
			if r.Trace.Verdict != want || r.Trace.Port != port || (code == 0) != (want == trace.Delivered) {
				return fmt.Errorf("verdict %s at %q (exit %d), want %s at %q:\n%s\n%s", r.Trace.Verdict, r.Trace.Port, code, want, port, decisions(r), r.Raw)
			}
			return nil
		})
		return r
	}
	contains := func(name string, r trace.Result, wants ...string) {
		t.Helper()
		got := decisions(r)
		for _, w := range wants {
			if !strings.Contains(got, w) {
				t.Errorf("%s: no decision with %q:\n%s\n%s", name, w, got, r.Raw)
			}
		}
	}

	expect("same node", trace.Delivered, "ns_b", "ns/a", "ns/b", "--tcp", "8080")
	r := expect("across nodes", trace.Delivered, "ns_c", "ns/a", "ns/c", "--tcp", "8080")
	contains("across nodes", r, "datapath: enters n1", "route: ovn_cluster_router routes it", "tunnel: Geneve from n1's chassis to n2's", "datapath: enters n2")
	// Both ways: c's answer on the connection goes back by the tunnel to a.
	if r.Reply == nil || r.Reply.Trace.Verdict != trace.Delivered || r.Reply.Trace.Port != "ns_a" || r.Reply.From != "ns/c" {
		t.Errorf("across nodes: reply %+v, want delivered from ns/c out of ns_a", r.Reply)
	} else {
		contains("across nodes, the reply", *r.Reply, "datapath: enters n2", "tunnel: Geneve from n2's chassis to n1's", "datapath: enters n1")
		if !strings.Contains(r.Reply.Microflow, "tcp.src == 8080 && tcp.dst == 33333") {
			t.Errorf("reply microflow %s, want the ports swapped", r.Reply.Microflow)
		}
	}
	for _, backend := range []string{"b", "c"} {
		r = expect("ClusterIP to "+backend, trace.Delivered, "ns_"+backend, "ns/a", "svc/ns/web", "--backend", pods[backend].ip+":8080")
		contains("ClusterIP to "+backend, r, "balances "+web.Spec.ClusterIP+":80 (Service_ns/web_TCP_cluster) → backend "+pods[backend].ip+":8080", "← Service ns/web")
	}
	// db-closed selects db and allows nothing: the namespace's default deny
	// for the pods some policy isolates drops it.
	r = expect("NetworkPolicy drop", trace.Dropped, "", "ns/a", "ns/db", "--tcp", "5432")
	contains("NetworkPolicy drop", r, "acl: to-lport ACL [ingress/deny]: drop (outport == @ns.ns.ingressDefaultDeny); "+
		"ns/db isolated for ingress by NetworkPolicy ns/db-closed, whose rules allow none of it ← Namespace ns")
	// From a node's management port (the kubelet's probes): the closed pod
	// still takes it.
	expect("node to a pod", trace.Delivered, "ns_db", "node/n2", "ns/db", "--tcp", "5432")
	r = expect("Service without endpoints", trace.Rejected, "", "ns/a", "svc/ns/empty")
	contains("Service without endpoints", r, "has no backend for", "(Service_ns/empty_TCP_cluster) ← Service ns/empty")
}

// tenantDropNamed checks, with namespace isolation, that ovnkube trace
// names the tenant rule (the isolation ACL and the tenant owning it) of a
// drop from one tenant's pod to another's, and delivers within a tenant.
func tenantDropNamed(t *testing.T, c *cluster, from, to, sameTenant string) {
	t.Helper()
	var r trace.Result
	harness.Eventually(t, 20*time.Second, from+" → "+to+" dropped by the tenant rule", func() error {
		var code int
		r, code = c.runTrace(from, to, "--tcp", "80")
		if r.Trace.Verdict != trace.Dropped || code != 1 {
			return fmt.Errorf("verdict %s (exit %d):\n%s", r.Trace.Verdict, code, decisions(r))
		}
		return nil
	})
	tenant, _, _ := strings.Cut(to, "/")
	rule := ""
	for _, d := range r.Decisions {
		if d.Kind == "acl" && strings.Contains(d.Text, "drop") {
			rule = d.Text + " ← " + d.Object
		}
	}
	if !strings.Contains(rule, "ACL [isolation]: drop") || !strings.HasSuffix(rule, "← Tenant "+tenant) {
		t.Errorf("the drop names no tenant rule of %s: %q\n%s", tenant, rule, decisions(r))
	}
	if r, code := c.runTrace(sameTenant, to, "--tcp", "80"); r.Trace.Verdict != trace.Delivered || code != 0 {
		t.Errorf("%s → %s (same tenant): %s (exit %d)\n%s", sameTenant, to, r.Trace.Verdict, code, decisions(r))
	}
}
