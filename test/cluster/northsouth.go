package cluster

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// northSouthServices are the demo's services that outside clients use.
func (c *Cluster) northSouthServices() []*corev1.Service {
	web := map[string]string{"app": "web"}
	http := []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}
	svc := func(name string, typ corev1.ServiceType, sel map[string]string, mutate func(*corev1.ServiceSpec)) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.ServiceSpec{Type: typ, Selector: sel, Ports: http,
			IPFamilyPolicy: c.familyPolicy()}}
		if mutate != nil {
			mutate(&s.Spec)
		}
		return s
	}
	return []*corev1.Service{
		svc("web-local", corev1.ServiceTypeNodePort, web, func(s *corev1.ServiceSpec) {
			s.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}),
		svc("web-ext", corev1.ServiceTypeClusterIP, web, func(s *corev1.ServiceSpec) { s.ExternalIPs = c.perFamily(externalIPs, externalIPs6) }),
		svc("web-lb", corev1.ServiceTypeLoadBalancer, web, nil),
		svc("web-affinity", corev1.ServiceTypeNodePort, web, func(s *corev1.ServiceSpec) { s.SessionAffinity = corev1.ServiceAffinityClientIP }),
		svc("client-self", corev1.ServiceTypeNodePort, map[string]string{"app": "client"}, nil),
	}
}

// northSouthObjects creates them; the LoadBalancer gets its ingress IPs (one
// per family) as a cloud controller would give them.
func (c *Cluster) northSouthObjects(ctx context.Context) error {
	for _, s := range c.northSouthServices() {
		if err := ignoreExists(c.Client.CoreV1().Services(demoNS).Create(ctx, s, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("creating service %s: %w", s.Name, err)
		}
	}
	lb, err := c.Client.CoreV1().Services(demoNS).Get(ctx, "web-lb", metaGet)
	if err != nil {
		return err
	}
	lb.Status.LoadBalancer.Ingress = nil
	for _, ip := range c.perFamily(ingressIP, ingressIP6) {
		lb.Status.LoadBalancer.Ingress = append(lb.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	_, err = c.Client.CoreV1().Services(demoNS).UpdateStatus(ctx, lb, metav1.UpdateOptions{})
	return err
}

func (c *Cluster) nodePort(name string, i int) (int32, error) {
	s, err := c.Client.CoreV1().Services(demoNS).Get(bg, name, metaGet)
	if err != nil {
		return 0, err
	}
	return s.Spec.Ports[i].NodePort, nil
}

// northSouthPaths adds the paths through the nodes' gateways to the report,
// in every family of the cluster: from the external host to NodePorts (TCP,
// UDP), ExternalIPs, LoadBalancer ingress IPs and the nodes' own listeners;
// from pods out of the cluster and back in through a node address; from the
// nodes to NodePorts.
func (c *Cluster) northSouthPaths(ctx context.Context, r *report) error {
	stop, err := c.serveExternal()
	if err != nil {
		return err
	}
	defer stop()
	p := nsPorts{tcp: map[string]int32{}}
	for _, name := range []string{"web", "web-local", "web-affinity", "client-self"} {
		if p.tcp[name], err = c.nodePort(name, 0); err != nil {
			return err
		}
	}
	if p.udp, err = c.nodePort("web", 1); err != nil {
		return err
	}
	for _, f := range c.families() {
		c.northSouthFamily(r, f, p)
	}
	return nil
}

// nsPorts are the NodePorts of the demo's services, TCP by service name and
// web's UDP one.
type nsPorts struct {
	tcp map[string]int32
	udp int32
}

func (c *Cluster) northSouthFamily(r *report, f ipFamily, p nsPorts) {
	ext := "external " + f.external
	worker, last := c.Nodes[1], c.Nodes[len(c.Nodes)-1]
	get := func(host string, port int32, path string) func() (string, error) {
		return func() (string, error) { return c.externalGet("http://" + hostPort(host, port) + path) }
	}
	for _, n := range c.Nodes {
		np := hostPort(f.node(n), p.tcp["web"])
		r.check(ext, "NodePort "+np, gatewayBridge+" → GR_"+n.Name+", backends local+remote", func() (string, error) {
			return c.allBackends(get(f.node(n), p.tcp["web"], "/hostname"))
		})
		udp := hostPort(f.node(n), p.udp)
		r.check(ext, "NodePort "+udp+"/udp", gatewayBridge+" → GR_"+n.Name+" (UDP)", func() (string, error) { return c.externalUDP(udp, "hostname") })
	}
	r.check(ext, "ExternalIP "+hostPort(f.serviceExternalIP, 80), "routed to "+worker.Name+" → GR", get(f.serviceExternalIP, 80, "/hostname"))
	r.check(ext, "LB ingress "+hostPort(f.ingressIP, 80), "routed to "+last.Name+" → GR", get(f.ingressIP, 80, "/hostname"))
	local := hostPort(f.node(worker), p.tcp["web-local"])
	r.check(ext, "ETP Local "+local, "GR_"+worker.Name+", no SNAT", func() (string, error) {
		got, err := get(f.node(worker), p.tcp["web-local"], "/clientip")()
		if host, _, _ := net.SplitHostPort(got); err == nil && host != f.external {
			err = fmt.Errorf("the pod saw %s, not the client %s", got, f.external)
		}
		return "pod saw " + got, err
	})
	aff := hostPort(f.node(worker), p.tcp["web-affinity"])
	r.check(ext, "affinity "+aff, "sessionAffinity ClientIP on GR", func() (string, error) {
		seen := map[string]bool{}
		for i := 0; i < 10; i++ {
			got, err := get(f.node(worker), p.tcp["web-affinity"], "/hostname")()
			if err != nil {
				return "", err
			}
			seen[got] = true
		}
		if len(seen) != 1 {
			return "", fmt.Errorf("10 requests reached %d backends", len(seen))
		}
		return "10 requests, one backend", nil
	})
	for _, n := range c.Nodes {
		addr := hostPort(f.node(n), 10250)
		r.check(ext, "kubelet "+addr, gatewayBridge+" → host (host traffic intact)", func() (string, error) { return c.externalConnect(addr) })
	}
	client := "client (" + worker.Name + ")" + f.tag
	r.check(client, "external "+hostPort(f.external, externalWeb), "GR_"+worker.Name+" SNAT → "+gatewayBridge, func() (string, error) {
		got, err := c.kubectlExec("client", "curl", "-s", "-m", "2", "http://"+hostPort(f.external, externalWeb)+"/")
		if err == nil && got != f.node(worker) {
			err = fmt.Errorf("the external server saw %q, not node address %s", got, f.node(worker))
		}
		return "server saw " + got, err
	})
	self := hostPort(f.node(worker), p.tcp["client-self"])
	r.check(client, "itself via "+self, "hairpin through a node address", func() (string, error) {
		got, err := c.kubectlExec("client", "curl", "-s", "-m", "2", "http://"+self+"/hostname")
		if err == nil && got != "client" {
			err = fmt.Errorf("answered by %q", got)
		}
		return got, err
	})
	for _, n := range []*Node{worker, last} {
		node := n
		for _, target := range []*Node{worker, last} {
			np := hostPort(f.node(target), p.tcp["web"])
			path := "OVN-KUBE-NODEPORT → ClusterIP"
			if target != node {
				path = gatewayBridge + " → GR_" + target.Name
			}
			r.check("node "+node.Name+f.tag, "NodePort "+np, path, func() (string, error) {
				return c.Exec(node, "curl", "-s", "-m", "2", "http://"+np+"/hostname")
			})
		}
	}
	// The control plane runs no web pod: its own Local NodePort is
	// kube-proxy's short-circuit, and the pod sees the node's address.
	cp := c.Nodes[0]
	own := hostPort(f.node(cp), p.tcp["web-local"])
	r.check("node "+cp.Name+f.tag, "its own ETP Local "+own, "OVN-KUBE-NODEPORT → a node with endpoints, no SNAT", func() (string, error) {
		got, err := c.Exec(cp, "curl", "-s", "-m", "2", "http://"+own+"/clientip")
		if host, _, _ := net.SplitHostPort(got); err == nil && host != f.node(cp) {
			err = fmt.Errorf("the pod saw %s, not the node's address %s", got, f.node(cp))
		}
		return "pod saw " + got, err
	})
}

// NorthSouth runs the demo's paths, then proves the demo namespace's
// EgressFirewall with packets to the external host (egressfirewall.go),
// then an EgressIP, its failover when the node holding an address is
// killed, and the node restored (egressip.go), then removes the last
// worker's gateway (its node daemon stopped, `gateway-init --remove`) and
// checks that the host's own traffic is intact, and puts the gateway back.
// It fails when a path fails.
func (c *Cluster) NorthSouth(ctx context.Context) (string, error) {
	out, err := c.Demo(ctx)
	if err != nil {
		return out, err
	}
	r := &report{ctx: ctx}
	start := time.Now()
	if err := c.egressFirewall(ctx, r); err != nil {
		return out, err
	}
	efTime := time.Since(start).Round(time.Second)
	efRows := len(r.rows)
	start = time.Now()
	if err := c.egressIP(ctx, r); err != nil {
		return out, err
	}
	eipTime := time.Since(start).Round(time.Second)
	eipRows := len(r.rows) - efRows
	n := c.Nodes[len(c.Nodes)-1]
	if err := c.stopProcess(n, c.bin("ovnkube"), "node"); err != nil {
		return out, err
	}
	r.check("node "+n.Name, "gateway-init --remove", "annotation, bridge mapping, flows", func() (string, error) {
		o, err := c.Exec(n, c.bin("ovnkube"), "gateway-init", "--remove", "--node-name", n.Name, "--bridge-interface", gatewayBridge,
			"--physical-ip", c.physicalIPs(n), "--kubeconfig", Kubeconfig)
		return lastLine(o), err
	})
	r.check("master", "GR_"+n.Name+" removed", "the master owns the rows", func() (string, error) {
		o, err := c.Exec(c.ControlPlane(), "ovn-nbctl", "--db=unix:/run/ovn/ovnnb_db.sock", "--bare", "--columns=name", "find", "logical_router", "name=GR_"+n.Name)
		if err == nil && strings.TrimSpace(o) != "" {
			err = fmt.Errorf("still there")
		}
		return "gone", err
	})
	for _, f := range c.families() {
		r.check("external "+f.external, "kubelet "+hostPort(f.node(n), 10250), "brul0 without a gateway", func() (string, error) {
			return c.externalConnect(hostPort(f.node(n), 10250))
		})
	}
	r.check("node "+n.Name, "API server "+c.ControlPlane().IP, "brul0 without a gateway", func() (string, error) {
		return c.Exec(n, "curl", "-sk", "-m", "2", "-o", "/dev/null", "-w", "HTTP %{http_code}", c.APIServer()+"/healthz")
	})
	if err := c.startNodeDaemon(n); err != nil {
		return out, err
	}
	port, err := c.nodePort("web", 0)
	if err != nil {
		return out, err
	}
	for _, f := range c.families() {
		r.check("external "+f.external, "NodePort "+hostPort(f.node(n), port), "gateway back", func() (string, error) {
			return c.externalGet("http://" + hostPort(f.node(n), port) + "/hostname")
		})
	}
	verdict := "all paths OK"
	if r.failed {
		verdict = "SOME PATHS FAILED"
	}
	out += fmt.Sprintf("=== egress firewall of namespace %s (%d checks in %s), EgressIP %s with a node killed (%d checks in %s), then gateway removed and restored on %s (%s) ===\n%s\n",
		demoNS, efRows, efTime, eipName, eipRows, eipTime, n.Name, verdict, strings.Join(r.rows, "\n"))
	if r.failed {
		return out, fmt.Errorf("north-south check failed")
	}
	return out, nil
}

// stopProcess stops the node's daemon run as binary with the argument arg,
// found among the processes the cluster started in the node's cgroup.
func (c *Cluster) stopProcess(n *Node, binary, arg string) error {
	cmd := binary + " " + arg
	for _, pid := range cgroupPIDs(n.Cgroup + "/daemons") {
		if args := strings.Fields(cmdline(pid)); len(args) > 0 && args[0] == binary && slices.Contains(args, arg) {
			if err := killPID(pid); err != nil {
				return err
			}
			return poll(bg, 10*time.Second, cmd+" stopped", func() error {
				if cmdline(pid) != "" {
					return fmt.Errorf("pid %d still running", pid)
				}
				return nil
			})
		}
	}
	return fmt.Errorf("no %q running on %s", cmd, n.Name)
}
