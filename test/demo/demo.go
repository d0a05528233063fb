package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

func step(format string, args ...any) { fmt.Printf("==> "+format+"\n", args...) }

func ptr[T any](v T) *T { return &v }

// runDemo builds the cluster and returns the report shown to the user.
func runDemo(t *harness.Session, dir string) string {
	step("starting OVN central (NB, SB, ovn-northd), etcd, kube-apiserver and ovnkube master on the OVN %s stack (%s; OVN= chooses another)",
		harness.CurrentStack.Name, harness.CurrentStack.Versions())
	c := harness.NewCluster(t)
	step("starting nodes n1 and n2: a network namespace each with ovsdb-server, ovs-vswitchd (userspace datapath), ovn-controller and ovnkube node")
	c.AddNode("n1")
	c.AddNode("n2")
	c.EnsureNamespace("demo")
	step("creating pods web-1 (n1), web-2 (n2) and client (n1); ovn_cni wires each through libcni")
	web1 := c.RunPod("demo", "web-1", "n1", map[string]string{"app": "web"})
	web2 := c.RunPod("demo", "web-2", "n2", map[string]string{"app": "web"})
	client := c.RunPod("demo", "client", "n1", nil)
	for _, p := range []*harness.Pod{web1, web2} {
		harness.ServeTCP(t, p.NS, 8080, p.Name)
	}
	step("creating service web (port 80 -> 8080) with endpoints web-1 and web-2")
	ctx := context.Background()
	svc, err := c.Kube.Client.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "web"},
			Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(8080)}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	slice := &discovery.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Name: "web-1", Labels: map[string]string{discovery.LabelServiceName: "web"}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: ptr("http"), Protocol: ptr(corev1.ProtocolTCP), Port: ptr(int32(8080))}},
	}
	for _, p := range []*harness.Pod{web1, web2} {
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{p.IP.String()}, NodeName: ptr(p.Node),
			Conditions: discovery.EndpointConditions{Ready: ptr(true)}})
	}
	if _, err := c.Kube.Client.DiscoveryV1().EndpointSlices("demo").Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	vip := svc.Spec.ClusterIP

	step("checking connectivity")
	var rows []string
	check := func(from, to, path string, probe func() (string, error)) {
		var got string
		var err error
		for i := 0; i < 40; i++ {
			if got, err = probe(); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		result := "OK   " + got
		if err != nil {
			result = "FAIL " + err.Error()
		}
		rows = append(rows, fmt.Sprintf("  %-14s %-26s %-52s %s", from, to, path, result))
	}
	tcp := func(from harness.NetNS, addr string) func() (string, error) {
		return func() (string, error) { return harness.DialTCP(from, addr, 2*time.Second) }
	}
	check("client (n1)", "web-1 "+web1.IP.String()+":8080", "same node: switch n1", tcp(client.NS, web1.IP.String()+":8080"))
	check("client (n1)", "web-2 "+web2.IP.String()+":8080", "n1 -> ovn_cluster_router -> Geneve -> n2", tcp(client.NS, web2.IP.String()+":8080"))
	check("client (n1)", "web "+vip+":80", "ClusterIP: load balancer in clusterLBGroup", func() (string, error) {
		seen := map[string]bool{}
		for i := 0; i < 30 && len(seen) < 2; i++ {
			if got, err := harness.DialTCP(client.NS, vip+":80", 2*time.Second); err == nil {
				seen[got] = true
			}
		}
		if len(seen) < 2 {
			return "", fmt.Errorf("backends reached: %v", seen)
		}
		return "backends web-1 and web-2", nil
	})
	check("node n2", "web-1 "+web1.IP.String()+":8080", "ovn-k8s-mp0 -> router -> Geneve -> n1", tcp(c.Nodes["n2"].NS, web1.IP.String()+":8080"))
	check("node n1", "web "+vip+":80", "ovn-k8s-mp0 -> ClusterIP load balancer", tcp(c.Nodes["n1"].NS, vip+":80"))

	show, _ := c.OVN.NBCtl("show")
	env := fmt.Sprintf(`# source me: . %s
export NB=unix:%s SB=unix:%s
export KUBECONFIG=%s
alias nbctl="ovn-nbctl --db=$NB" sbctl="ovn-sbctl --db=$SB"
`, filepath.Join(dir, "env.sh"), c.OVN.NBSock, c.OVN.SBSock, c.Kube.Kubeconfig)
	if err := os.WriteFile(filepath.Join(dir, "env.sh"), []byte(env), 0o644); err != nil {
		t.Fatal(err)
	}
	ok := !strings.Contains(strings.Join(rows, "\n"), " FAIL ")
	verdict := "all paths OK"
	if !ok {
		verdict = "SOME PATHS FAILED (see above)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n=== ovn-nbctl show ===\n%s\n", show)
	fmt.Fprintf(&b, "=== connectivity (%s) ===\n  %-14s %-26s %-52s %s\n%s\n\n", verdict, "from", "to", "path", "result", strings.Join(rows, "\n"))
	fmt.Fprintf(&b, `=== poke around ===
  . %s                       # NB, SB, KUBECONFIG and nbctl/sbctl aliases
  nbctl show; nbctl lb-list; sbctl show
  ip netns exec %s ping -c1 %s        # client -> web-2 across nodes
  ip netns exec %s ip addr              # client's eth0
  ip netns list | grep ovnk-            # nodes, pods, underlay
  logs: %s
stop it and remove everything: make demo-down
`, filepath.Join(dir, "env.sh"), client.NS.Name, web2.IP, client.NS.Name, filepath.Join(dir, "demo.log")+" and "+filepath.Join(dir, "tmp"))
	if !ok {
		fmt.Print(b.String())
		t.Fatal("connectivity check failed")
	}
	return b.String()
}
