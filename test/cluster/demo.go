package cluster

import (
	"context"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const (
	demoNS     = "demo"
	agnhostImg = "registry.k8s.io/e2e-test-images/agnhost:2.56"
)

// Demo deploys a Deployment of two web servers (one per worker) behind a
// NodePort Service and a client pod, then reports what a user would look
// at: the pods with their addresses, DNS, every path through the network,
// and the OVN topology. It fails when a path fails.
func (c *Cluster) Demo(ctx context.Context) (string, error) {
	if err := c.demoObjects(ctx); err != nil {
		return "", err
	}
	if err := c.northSouthObjects(ctx); err != nil {
		return "", err
	}
	if err := poll(ctx, 120*time.Second, "demo pods Running", c.demoReady); err != nil {
		return "", err
	}
	svc, err := c.Client.CoreV1().Services(demoNS).Get(ctx, "web", metaGet)
	if err != nil {
		return "", err
	}
	pods, err := c.Client.CoreV1().Pods(demoNS).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
	if err != nil {
		return "", err
	}
	var b strings.Builder
	out, _ := c.Exec(c.ControlPlane(), c.bin("kubectl"), "--kubeconfig", Kubeconfig, "get", "nodes,pods", "-n", demoNS, "-o", "wide")
	fmt.Fprintf(&b, "\n=== kubectl get nodes,pods -n demo -o wide ===\n%s\n", out)
	out, err = c.kubectlExec("client", "nslookup", "web."+demoNS+".svc."+clusterDomain)
	fmt.Fprintf(&b, "=== DNS: nslookup web.demo.svc.cluster.local (from pod client) ===\n%s%v\n", answer(out), errOrEmpty(err))

	r := &report{ctx: ctx}
	for _, f := range c.families() {
		c.demoPaths(r, f, svc, pods.Items)
	}
	r.check("client", "web.demo:80 (DNS)", "CoreDNS, then the ClusterIP", func() (string, error) {
		return c.kubectlExec("client", "curl", "-s", "-m", "2", "http://web.demo/hostname")
	})
	if err := c.northSouthPaths(ctx, r); err != nil {
		return "", err
	}
	trace := c.demoTraces(r, svc, pods.Items)
	rows, failed := r.rows, r.failed
	verdict := "all paths OK"
	if failed {
		verdict = "SOME PATHS FAILED"
	}
	fmt.Fprintf(&b, "=== connectivity (%s) ===\n  %-32s %-44s %-38s %s\n%s\n\n", verdict, "from", "to", "path", "result", strings.Join(rows, "\n"))
	show, _ := c.Exec(c.ControlPlane(), "ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "show")
	fmt.Fprintf(&b, "=== ovn-nbctl show ===\n%s\n", show)
	fmt.Fprintf(&b, "=== ovnkube trace %s/client svc/%s/web ===\n%s\n", demoNS, demoNS, trace)
	fmt.Fprintf(&b, `=== poke around ===
  _output/bin/ovnk-cluster kubectl get pods -A -o wide
  _output/bin/ovnk-cluster kubectl exec -n demo client -- curl -s web.demo/hostname
  nsenter --mount=%s --net=/var/run/netns/%s ovn-nbctl --db=unix:/run/ovn/ovnnb_db.sock lb-list
  logs: %s/logs
stop it and remove everything: make demo-down
`, c.ControlPlane().MountNS, c.ControlPlane().NetNS, c.Dir)
	if failed {
		return b.String(), fmt.Errorf("connectivity check failed")
	}
	return b.String(), nil
}

// familyPolicy asks for a Service of every family of the cluster.
func (c *Cluster) familyPolicy() *corev1.IPFamilyPolicy {
	if c.IPFamily != Dual {
		return nil
	}
	p := corev1.IPFamilyPolicyPreferDualStack
	return &p
}

// demoPaths are the demo's east-west paths in one family: from the client
// pod to each web pod, to the ClusterIP, to each node's NodePort; from two
// nodes to the ClusterIP.
func (c *Cluster) demoPaths(r *report, f ipFamily, svc *corev1.Service, pods []corev1.Pod) {
	client := "client (" + c.Nodes[1].Name + ")" + f.tag
	fromClient := func(host string, port int32) func() (string, error) {
		return func() (string, error) {
			return c.kubectlExec("client", "curl", "-s", "-m", "2", "http://"+hostPort(host, port)+"/hostname")
		}
	}
	for _, p := range pods {
		path := "same node: switch " + p.Spec.NodeName
		if p.Spec.NodeName != "" && p.Spec.NodeName != c.Nodes[1].Name {
			path = "router, Geneve to " + p.Spec.NodeName
		}
		ip := f.of(podIPs(p))
		r.check(client, p.Name+" "+hostPort(ip, 8080), path, fromClient(ip, 8080))
	}
	vip := f.of(svc.Spec.ClusterIPs)
	r.check(client, "web "+hostPort(vip, 80), "ClusterIP: clusterLBGroup", func() (string, error) {
		return c.allBackends(fromClient(vip, 80))
	})
	nodePort := svc.Spec.Ports[0].NodePort
	for _, n := range c.Nodes {
		r.check(client, hostPort(f.node(n), nodePort), "NodePort: clusterSwitchLBGroup", fromClient(f.node(n), nodePort))
	}
	for _, n := range []*Node{c.ControlPlane(), c.Nodes[len(c.Nodes)-1]} {
		node := n
		r.check("node "+node.Name+f.tag, "web "+hostPort(vip, 80), "ovn-k8s-mp0, then the ClusterIP", func() (string, error) {
			return c.Exec(node, "curl", "-s", "-m", "2", "http://"+hostPort(vip, 80)+"/hostname")
		})
	}
}

// demoTraces tells the demo's paths with ovnkube trace, one packet each in
// the primary family (ovn-trace on the SB): the client to each web pod, to
// the web Service at each backend, to its node's NodePort, to its node, to
// the external host. Each must be delivered out of the right port. It
// returns the whole trace of the client to the web Service.
func (c *Cluster) demoTraces(r *report, svc *corev1.Service, pods []corev1.Pod) string {
	// The databases: central mode's on the control plane, in zone mode the
	// client's zone's, on its node (node-local paths in each node's mounts).
	cp, node := c.ControlPlane(), c.Nodes[1] // the client's
	at := cp
	if c.zoned() {
		at = node
	}
	dbs := []string{"--nb-address", "unix:" + at.hostPath("/run/ovn/ovnnb_db.sock"), "--sb-address", "unix:" + at.hostPath("/run/ovn/ovnsb_db.sock")}
	where := dbs
	if at == node { // the client's port is on this host: its OVS too
		where = append(append([]string{}, dbs...), "--ovs-vswitchd-ctl", ovsVswitchdCtl)
	}
	run := func(args ...string) (string, error) {
		return c.Exec(at, append(append([]string{c.bin("ovnkube"), "--loglevel", "0", "trace", "--kubeconfig", cp.hostPath(Kubeconfig)}, where...), args...)...)
	}
	var whole string
	check := func(to, wantPort string, args ...string) {
		r.check("client (ovnkube trace)", to, "delivered out of "+wantPort, func() (string, error) {
			out, err := run(args...)
			first, _, _ := strings.Cut(out, "\n")
			if err == nil && (!strings.HasPrefix(first, "DELIVERED") || !strings.Contains(first, "(out of port "+wantPort)) {
				err = fmt.Errorf("%s", first)
			}
			if len(args) == 2 && strings.HasPrefix(args[1], "svc/") {
				whole = out
			}
			return first, err
		})
	}
	client := demoNS + "/client"
	f := c.families()[0]
	for _, p := range pods {
		// In zone mode a pod of another zone is reached at the transit
		// switch's port of its node, where the packet leaves this zone.
		out := demoNS + "_" + p.Name
		if c.zoned() && p.Spec.NodeName != node.Name {
			out = topology.TransitSwitchPort(p.Spec.NodeName)
		}
		check(p.Name, out, client, demoNS+"/"+p.Name, "--tcp", "8080")
		check("svc/demo/web → "+p.Name, out, client, "svc/"+demoNS+"/web", "--backend", hostPort(f.of(podIPs(p)), 8080))
	}
	check("NodePort "+hostPort(f.node(node), svc.Spec.Ports[0].NodePort), demoNS+"_web", client, f.node(node), "--tcp", fmt.Sprint(svc.Spec.Ports[0].NodePort))
	check("node/"+node.Name, "k8s-"+node.Name, client, "node/"+node.Name, "--tcp", "10250")
	check("external "+f.external, gatewayBridge+"_"+node.Name+"_localnet", client, f.external, "--tcp", fmt.Sprint(externalWeb))
	check("svc/demo/web", demoNS+"_web", client, "svc/"+demoNS+"/web")
	// On the client's node, through its OVS too (ofproto/trace): the
	// databases and kubeconfig by their host paths.
	r.check("client (ovnkube trace on "+node.Name+")", pods[0].Name, "OVS delivers it", func() (string, error) {
		out, err := c.Exec(node, append(append([]string{c.bin("ovnkube"), "--loglevel", "0", "trace", "--kubeconfig", cp.hostPath(Kubeconfig)}, dbs...),
			"--ovs-vswitchd-ctl", ovsVswitchdCtl, client, demoNS+"/"+pods[0].Name, "--tcp", "8080")...)
		for _, line := range strings.Split(out, "\n") {
			if strings.HasPrefix(line, "ofproto/trace") {
				if !strings.Contains(line, ": DELIVERED") {
					err = fmt.Errorf("%s", line)
				}
				return line, err
			}
		}
		if err == nil {
			err = fmt.Errorf("no ofproto/trace line:\n%s", out)
		}
		return "", err
	})
	return whole
}

func podIPs(p corev1.Pod) []string {
	var out []string
	for _, ip := range p.Status.PodIPs {
		out = append(out, ip.IP)
	}
	return out
}

// report collects the connectivity rows: each path is polled until it
// answers (or 20 s pass) and shown with what it answered.
type report struct {
	ctx    context.Context
	rows   []string
	failed bool
}

func (r *report) check(from, to, path string, probe func() (string, error)) {
	var got string
	err := poll(r.ctx, 20*time.Second, to, func() error {
		var err error
		got, err = probe()
		return err
	})
	result := "OK   " + got
	if err != nil {
		result, r.failed = "FAIL "+err.Error(), true
	}
	r.rows = append(r.rows, fmt.Sprintf("  %-32s %-44s %-38s %s", from, to, path, result))
}

// allBackends calls probe until both web pods have answered.
func (c *Cluster) allBackends(probe func() (string, error)) (string, error) {
	seen := map[string]bool{}
	for i := 0; i < 30 && len(seen) < 2; i++ {
		if got, err := probe(); err == nil {
			seen[got] = true
		}
	}
	if len(seen) < 2 {
		return "", fmt.Errorf("backends reached: %v", seen)
	}
	return "both backends", nil
}

func (c *Cluster) kubectlExec(pod string, args ...string) (string, error) {
	out, err := c.Exec(c.ControlPlane(), append([]string{c.bin("kubectl"), "--kubeconfig", Kubeconfig, "exec", "-n", demoNS, pod, "--"}, args...)...)
	return strings.TrimSpace(out), err
}

func (c *Cluster) demoObjects(ctx context.Context) error {
	cs := c.Client
	labels := map[string]string{"app": "web"}
	replicas := int32(len(c.Nodes) - 1) // one per worker: the control plane is tainted
	for _, err := range []error{
		ignoreExists(cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: demoNS}}, metav1.CreateOptions{})),
		ignoreExists(cs.AppsV1().Deployments(demoNS).Create(ctx, &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Replicas: &replicas,
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						// One per worker, so the report shows both paths and
						// every node's ETP Local NodePort has a local endpoint.
						Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
							RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
								LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname",
							}},
						}},
						Containers: []corev1.Container{{Name: "web", Image: agnhostImg, Args: []string{"netexec", "--http-port=8080", "--udp-port=8081"},
							Ports: []corev1.ContainerPort{{ContainerPort: 8080}, {ContainerPort: 8081, Protocol: corev1.ProtocolUDP}}}},
					},
				},
			},
		}, metav1.CreateOptions{})),
		ignoreExists(cs.CoreV1().Services(demoNS).Create(ctx, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: "web"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort, Selector: labels, IPFamilyPolicy: c.familyPolicy(),
				Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)},
					{Name: "udp", Port: 81, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(8081)}}},
		}, metav1.CreateOptions{})),
		ignoreExists(cs.CoreV1().Pods(demoNS).Create(ctx, &corev1.Pod{
			// A web server too, so it can reach itself through a service (hairpin).
			ObjectMeta: metav1.ObjectMeta{Name: "client", Labels: map[string]string{"app": "client"}},
			Spec: corev1.PodSpec{NodeName: c.Nodes[1].Name,
				Containers: []corev1.Container{{Name: "client", Image: agnhostImg, Args: []string{"netexec", "--http-port=8080"}}}},
		}, metav1.CreateOptions{})),
	} {
		if err != nil {
			return fmt.Errorf("creating demo objects: %w", err)
		}
	}
	return nil
}

// ignoreExists passes on a Create's error unless the object already exists
// (Up and the demo may run again on a running cluster).
func ignoreExists(_ any, err error) error {
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

func (c *Cluster) demoReady() error {
	pods, err := c.Client.CoreV1().Pods(demoNS).List(bg, metav1.ListOptions{})
	if err != nil {
		return err
	}
	ready := 0
	var states []string
	for _, p := range pods.Items {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
				ready++
			}
		}
		states = append(states, p.Name+": "+string(p.Status.Phase))
	}
	if want := len(c.Nodes); ready < want { // a web pod per worker, and the client
		return fmt.Errorf("%d of %d pods ready: %v", ready, want, states)
	}
	return nil
}

// answer is nslookup's answer section: the lines from "Name:" on.
func answer(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "Name:") || (len(out) > 0 && strings.HasPrefix(l, "Address:")) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n") + "\n"
}

func errOrEmpty(err error) string {
	if err != nil {
		return "error: " + err.Error() + "\n"
	}
	return ""
}
