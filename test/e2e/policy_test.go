package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func (e *env) namespace(name string, lbls map[string]string) {
	e.t.Helper()
	e.c.EnsureNamespace(name)
	cl := e.c.Kube.Client.CoreV1().Namespaces()
	n, err := cl.Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		e.t.Fatal(err)
	}
	n.Labels = lbls
	if _, err := cl.Update(context.Background(), n, metav1.UpdateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func (e *env) policy(namespace, name string, spec networkingv1.NetworkPolicySpec) {
	e.t.Helper()
	np := &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}, Spec: spec}
	if _, err := e.c.Kube.Client.NetworkingV1().NetworkPolicies(namespace).Create(context.Background(), np, metav1.CreateOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

// blocked waits until a TCP connection to addr fails (it was answered
// before the policy that should block it).
func blocked(t *testing.T, from harness.NetNS, addr string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, "TCP "+addr+" from "+from.Name+" blocked", func() error {
		if got, err := harness.DialTCP(from, addr, time.Second); err == nil {
			return fmt.Errorf("answered %q", got)
		}
		return nil
	})
}

func namedPort(name string, port int32, proto corev1.Protocol) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{Name: name, ContainerPort: port, Protocol: proto})
	}
}

func selector(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

// TestNetworkPolicy sends packets through NetworkPolicies on the userspace
// datapath: a default-deny namespace, an allow-from-namespace rule on a
// named port, an egress ipBlock with an exception, and egress to services
// whose backend is allowed or not.
func TestNetworkPolicy(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("e2e needs root (network namespaces, OVS); CI runs as root")
	}
	c := harness.NewCluster(t)
	e := &env{t: t, c: c}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("master log:\n%s", c.Master.Tail(40))
		}
	})
	c.AddNode("n1")
	n2 := c.AddNode("n2")
	e.namespace("np-db", nil)
	e.namespace("np-front", map[string]string{"team": "a"})
	e.namespace("np-other", nil)
	serve := namedPort("serve", tcpPort, corev1.ProtocolTCP)
	db1 := c.RunPod("np-db", "db1", "n2", map[string]string{"app": "db"}, serve)
	db2 := c.RunPod("np-db", "db2", "n1", map[string]string{"app": "db"}, serve)
	front := c.RunPod("np-front", "front", "n1", map[string]string{"role": "client"})
	other := c.RunPod("np-other", "other", "n2", map[string]string{"role": "client"})
	for _, p := range []*harness.Pod{db1, db2, front, other} {
		runServers(t, p)
	}
	at := func(p *harness.Pod, port int) string { return fmt.Sprintf("%s:%d", p.IP, port) }
	db1TCP, db1UDP := at(db1, tcpPort), at(db1, udpPort)
	db2TCP := at(db2, tcpPort)
	svcDB1 := e.serviceIn("np-db", "db1", db1)
	svcDB2 := e.serviceIn("np-db", "db2", db2)

	t.Run("no-policy/everything-reachable", func(t *testing.T) {
		reach(t, other.NS, db1TCP)
		reach(t, front.NS, db2TCP)
		reachUDP(t, front.NS, db1UDP)
	})
	t.Run("default-deny-namespace/blocks-every-source", func(t *testing.T) {
		e.policy("np-db", "default-deny", networkingv1.NetworkPolicySpec{})
		blocked(t, other.NS, db1TCP)
		blocked(t, front.NS, db1TCP)
	})
	t.Run("default-deny-namespace/node-still-reaches-its-pods", func(t *testing.T) {
		if got := reach(t, n2.NS, db1TCP); got != "db1" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("allow-from-namespace/on-named-port", func(t *testing.T) {
		tcp := corev1.ProtocolTCP
		e.policy("np-db", "allow-front", networkingv1.NetworkPolicySpec{
			PodSelector: *selector("app", "db"),
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  []networkingv1.NetworkPolicyPeer{{NamespaceSelector: selector("team", "a")}},
				Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr(intstr.FromString("serve"))}},
			}},
		})
		if got := reach(t, front.NS, db1TCP); got != "db1" {
			t.Fatalf("answer %q", got)
		}
		if got := reach(t, front.NS, db2TCP); got != "db2" {
			t.Fatalf("answer %q", got)
		}
		blocked(t, other.NS, db1TCP)
		if got, err := harness.DialUDP(front.NS, db1UDP, time.Second); err == nil {
			t.Fatalf("UDP to a port the rule does not name answered %q", got)
		}
	})
	t.Run("egress-ipblock-with-except", func(t *testing.T) {
		e.policy("np-front", "egress", networkingv1.NetworkPolicySpec{
			PodSelector: *selector("role", "client"),
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{
					CIDR: "10.244.0.0/16", Except: []string{db2.IP.String() + "/32"}}}},
			}},
		})
		blocked(t, front.NS, db2TCP)
		if got := reach(t, front.NS, db1TCP); got != "db1" {
			t.Fatalf("answer %q", got)
		}
	})
	t.Run("egress-to-service/judged-on-the-backend", func(t *testing.T) {
		if got := reach(t, front.NS, svcDB1+":80"); got != "db1" {
			t.Fatalf("answer %q", got)
		}
		blocked(t, front.NS, svcDB2+":80")
	})
}
