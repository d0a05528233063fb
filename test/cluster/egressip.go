package cluster

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/dynamic"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
)

// The EgressIP of the north-south checks: one address per family from the
// underlay, which no node and no external host uses (the nodes are .2 to
// .4, the external host .100).
const (
	eipName    = "egress-demo"
	egressIPv4 = underlayPrefix + "50"
	egressIPv6 = underlayPrefix6 + "50"
	// externalProbe is the port of the external host's logging server: it
	// records the time and source address of every request (the failover's
	// measure) and answers the source address.
	externalProbe = 8082
	// failoverTarget is how long an egress IP may be unusable when its node
	// dies (the target: the reachability probes' two misses one
	// second apart, the move, the announcement: OVN's gratuitous ARP for
	// IPv4, the node daemon's unsolicited neighbour advertisement for
	// IPv6); failoverDeadline is when traffic that has not resumed is a
	// failure.
	failoverTarget   = 5 * time.Second
	failoverDeadline = 30 * time.Second
)

// egressIP is f's egress IP.
func (f ipFamily) egressIP() string {
	if f.v6 {
		return egressIPv6
	}
	return egressIPv4
}

// eipPod is a pod the EgressIP selects, pinned to a worker.
type eipPod struct {
	name string
	node *Node
}

func (p eipPod) label(f ipFamily) string { return p.name + " (" + p.node.Name + ")" + f.tag }

// egressIP proves the EgressIP egress-demo with packets from pods to the
// external host, in every family of the cluster, as rows of r:
//
//   - set-up: both workers labelled egress-assignable (by the admin), a pod
//     selected by the EgressIP on each worker (eip-a, eip-b; the demo's
//     client pod is not selected), the external host given on-link routes to
//     the egress IPs (as to the nodes' addresses), the EgressIP created with
//     one address per family; its status puts each on a worker (one
//     EgressIP never puts two of its addresses on one node: on a dual-stack
//     cluster the IPv4 address is on one worker, the IPv6 one on the other);
//   - both pods reach the external host with the egress IP of the family as
//     their source, whichever node they run on and whichever node holds the
//     address; the client pod still with its node's address; the web
//     Service's ClusterIP (pods) still answers the selected pods; the
//     external host reaches each selected pod through a NodePort with
//     externalTrafficPolicy Local on the pod's node, its own address kept
//     (the reply goes back through that node, not the egress node);
//   - failover, family by family (IPv6 first): the EgressIP is edited to
//     that family's address alone (with two egress nodes and both
//     families, the other worker holds the other family's address, so
//     neither could move), a loop of requests runs from the pod on the other
//     worker to the external host's logging server, the node holding the
//     address is killed (kubelet, ovn-controller and the node daemon
//     stopped, its underlay link down), the master's reachability probes
//     move the address to the other worker, and the external host sees the
//     same source again: the gap between the last request it received
//     before the kill and the first after is measured against the 5 s
//     target (only traffic not resuming within 30 s fails); the node is
//     restored (link up, its daemons started again) and Ready;
//   - both addresses again: the restored node hosts one, both pods leave
//     with the egress IPs;
//   - deleted: the pods leave with their own nodes' addresses again.
//
// Every verdict is polled until it holds or its deadline passes.
func (c *Cluster) egressIP(ctx context.Context, r *report) error {
	if len(c.Nodes) < 3 {
		return fmt.Errorf("the EgressIP checks need two workers")
	}
	stop, err := c.serveExternal()
	if err != nil {
		return err
	}
	defer stop()
	probes, err := c.serveProbeLog()
	if err != nil {
		return err
	}
	defer probes.close()
	dyn, err := c.dynamicClient()
	if err != nil {
		return err
	}
	eips := dyn.Resource(k8sovnv1.EgressIPResource)
	svc, err := c.Client.CoreV1().Services(demoNS).Get(ctx, "web", metaGet)
	if err != nil {
		return err
	}
	workers := []*Node{c.Nodes[1], c.Nodes[len(c.Nodes)-1]}
	pods := []eipPod{{"eip-a", workers[0]}, {"eip-b", workers[1]}}
	defer c.eipCleanup(eips, workers, pods)

	// Set-up.
	if err := c.labelEgressAssignable(ctx, workers, true); err != nil {
		return err
	}
	if err := c.eipExternalRoutes(true); err != nil {
		return err
	}
	if err := c.createEIPPods(ctx, pods); err != nil {
		return err
	}
	if err := c.createEIPLocalService(ctx); err != nil {
		return err
	}
	all := c.perFamily(egressIPv4, egressIPv6)
	if err := c.setEgressIP(ctx, eips, all); err != nil {
		return err
	}
	var at map[string]string // egress IP -> node, from the status
	r.check("master", "EgressIP "+eipName+" "+strings.Join(all, ", "), "status.items", func() (string, error) {
		var err error
		at, err = c.eipAssigned(ctx, eips, all, nil)
		return describeAssignment(at, all), err
	})
	c.eipPaths(r, pods, at, svc, "")

	// Failover, one family at a time, IPv6 first: the EgressIP edited to
	// its IPv6 address alone keeps it where it is, and the IPv4 address,
	// placed anew when the EgressIP is edited to it alone, goes back to the
	// worker it was on (both are free then, the lower name wins): so the
	// IPv6 address moves only when its node is killed.
	fams := c.families()
	slices.Reverse(fams)
	for _, f := range fams {
		if err := c.eipFailover(ctx, r, eips, probes, pods, workers, f); err != nil {
			return err
		}
	}

	// Both addresses again, the restored node among the egress nodes.
	if err := c.setEgressIP(ctx, eips, all); err != nil {
		return err
	}
	r.check("master", "EgressIP "+eipName+" "+strings.Join(all, ", "), "every address again, after the failovers", func() (string, error) {
		var err error
		at, err = c.eipAssigned(ctx, eips, all, nil)
		return describeAssignment(at, all), err
	})
	c.eipPaths(r, pods, at, svc, ", after the failovers")

	// Deleted.
	if err := eips.Delete(ctx, eipName, metav1.DeleteOptions{}); err != nil {
		return fmt.Errorf("deleting EgressIP %s: %w", eipName, err)
	}
	r.check("master", "EgressIP "+eipName+" deleted", "object gone", func() (string, error) {
		if _, err := eips.Get(ctx, eipName, metaGet); !apierrors.IsNotFound(err) {
			return "", fmt.Errorf("still there (%v)", err)
		}
		return "gone", nil
	})
	for _, f := range c.families() {
		for _, p := range pods {
			r.check(p.label(f), "external "+hostPort(f.external, externalWeb), "EgressIP deleted: GR_"+p.node.Name+" SNAT", func() (string, error) {
				return c.podSeen(p.name, f, externalWeb, f.node(p.node))
			})
		}
	}
	return nil
}

// eipPaths are the rows of the EgressIP at work: both selected pods leave
// with the egress IP of each family, the client pod with its node's
// address, the selected pods still reach the ClusterIP.
func (c *Cluster) eipPaths(r *report, pods []eipPod, at map[string]string, svc *corev1.Service, when string) {
	for _, f := range c.families() {
		ip := f.egressIP()
		for _, p := range pods {
			r.checkWithin(failoverDeadline, p.label(f), "external "+hostPort(f.external, externalWeb), "reroute → GR_"+at[ip]+" SNAT "+ip+when, func() (string, error) {
				return c.podSeen(p.name, f, externalWeb, ip)
			})
		}
		worker := c.Nodes[1]
		r.check("client ("+worker.Name+")"+f.tag, "external "+hostPort(f.external, externalWeb), "not selected: GR_"+worker.Name+" SNAT"+when, func() (string, error) {
			return c.podSeen("client", f, externalWeb, f.node(worker))
		})
		vip := f.of(svc.Spec.ClusterIPs)
		r.check(pods[0].label(f), "web "+hostPort(vip, 80), "no reroute inside the cluster"+when, func() (string, error) {
			return c.kubectlExec(pods[0].name, "curl", "-s", "-m", "2", "http://"+hostPort(vip, 80)+"/hostname")
		})
		// A NodePort with externalTrafficPolicy Local on each pod's node:
		// the reply goes back through that node's gateway router (which
		// undoes the DNAT), not to the egress node, also where the node
		// does not hold the egress IP.
		np, err := c.nodePort(eipLocalService, 0)
		for _, p := range pods {
			r.check("external "+f.external, eipLocalService+" NodePort "+hostPort(f.node(p.node), np), "ETP=Local reply from "+p.name+": back through GR_"+p.node.Name+when, func() (string, error) {
				if err != nil {
					return "", err
				}
				got, err := c.externalGet("http://" + hostPort(f.node(p.node), np) + "/clientip")
				if host, _, _ := net.SplitHostPort(strings.TrimSpace(got)); err == nil && host != f.external {
					return got, fmt.Errorf("answered %q: not the external host's address %s", got, f.external)
				}
				return got, err
			})
		}
	}
}

// eipLocalService is a NodePort Service with externalTrafficPolicy Local
// in front of the selected pods.
const eipLocalService = "eip-local"

func (c *Cluster) createEIPLocalService(ctx context.Context) error {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: eipLocalService}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeNodePort,
		Selector: map[string]string{"app": "egress"}, IPFamilyPolicy: c.familyPolicy(), ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal,
		Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	if err := ignoreExists(c.Client.CoreV1().Services(demoNS).Create(ctx, s, metav1.CreateOptions{})); err != nil {
		return fmt.Errorf("creating service %s: %w", eipLocalService, err)
	}
	return nil
}

// eipFailover kills the node holding f's egress IP while the pod on the
// other worker sends requests to the external host's logging server, and
// measures the gap the external host saw; then restores the node.
func (c *Cluster) eipFailover(ctx context.Context, r *report, eips dynamic.ResourceInterface, probes *probeLog,
	pods []eipPod, workers []*Node, f ipFamily) error {
	ip := f.egressIP()
	if err := c.setEgressIP(ctx, eips, []string{ip}); err != nil {
		return err
	}
	var at map[string]string
	r.check("master", "EgressIP "+eipName+" "+ip+" alone", "failover"+f.tag+": one address", func() (string, error) {
		var err error
		at, err = c.eipAssigned(ctx, eips, []string{ip}, nil)
		return describeAssignment(at, []string{ip}), err
	})
	var dead, other *Node
	for _, n := range workers {
		if n.Name == at[ip] {
			dead = n
		} else {
			other = n
		}
	}
	if dead == nil || other == nil {
		r.rows = append(r.rows, fmt.Sprintf("  %-32s %-44s %-38s %s", "master", "EgressIP "+ip, "failover"+f.tag,
			fmt.Sprintf("FAIL on %q, not on a worker: no failover", at[ip])))
		r.failed = true
		return nil
	}
	var from eipPod
	for _, p := range pods {
		if p.node == other {
			from = p
		}
	}
	target := "external " + hostPort(f.external, externalProbe)
	loop, err := c.startProbeLoop(from.name, f)
	if err != nil {
		return err
	}
	defer loop.stop(probes)
	r.checkWithin(failoverDeadline, from.label(f), target, "probe loop (curl -m 1, every 200 ms) via "+dead.Name, func() (string, error) {
		if err := loop.ensure(); err != nil {
			return "", err
		}
		n := probes.count(ip, time.Time{})
		if n < 3 {
			return "", fmt.Errorf("%d requests from %s so far", n, ip)
		}
		return fmt.Sprintf("%d requests from %s", n, ip), nil
	})

	// Kill the egress node.
	down, err := c.killNode(dead)
	restored := false
	defer func() {
		if !restored {
			_ = c.restoreNode(ctx, dead, pods)
		}
	}()
	result := "at " + down.Format("15:04:05.000")
	if err != nil {
		result = "FAIL " + err.Error()
		r.failed = true
	} else {
		result = "OK   " + result
	}
	r.rows = append(r.rows, fmt.Sprintf("  %-32s %-44s %-38s %s", "node "+dead.Name, "killed", "kubelet, ovnkube node, ovn-controller; ul0 down", result))
	if err != nil {
		return nil
	}
	r.checkWithin(failoverDeadline, "master", "EgressIP "+ip+" moved", "reachability probes: 2 misses, 1 s apart", func() (string, error) {
		got, err := c.eipAssigned(ctx, eips, []string{ip}, func(node string) error {
			if node != other.Name {
				return fmt.Errorf("on %s", node)
			}
			return nil
		})
		if err != nil {
			return "", err
		}
		return fmt.Sprintf("%s → %s, seen %.1f s after the link went down", dead.Name, got[ip], time.Since(down).Seconds()), nil
	})
	path := "failover " + dead.Name + " → " + other.Name + ", same source"
	r.checkWithin(failoverDeadline, from.label(f), target, path, func() (string, error) {
		got, err := probes.gap(ip, down)
		if err != nil {
			if lerr := loop.ensure(); lerr != nil {
				err = fmt.Errorf("%w; %v", err, lerr)
			}
		}
		return got, err
	})
	loop.stop(probes)

	// Restore it.
	restored = true
	start := time.Now()
	err = c.restoreNode(ctx, dead, pods)
	result = fmt.Sprintf("OK   Ready, its pods served: %.1f s later, %.1f s after the kill", time.Since(start).Seconds(), time.Since(down).Seconds())
	if err != nil {
		result, r.failed = "FAIL "+err.Error(), true
	}
	r.rows = append(r.rows, fmt.Sprintf("  %-32s %-44s %-38s %s", "node "+dead.Name, "restored", "ul0 up; ovn-controller, ovnkube node, kubelet", result))
	return nil
}

// checkWithin is check with its own deadline.
func (r *report) checkWithin(timeout time.Duration, from, to, path string, probe func() (string, error)) {
	var got string
	err := poll(r.ctx, timeout, to, func() error {
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

// describeAssignment is "ip on node, ..." in the order of ips.
func describeAssignment(at map[string]string, ips []string) string {
	var out []string
	for _, ip := range ips {
		if n, ok := at[ip]; ok {
			out = append(out, ip+" on "+n)
		}
	}
	return strings.Join(out, ", ")
}

// labelEgressAssignable sets (or removes) the label
// k8s.ovn.org/egress-assignable on nodes, as the administrator.
func (c *Cluster) labelEgressAssignable(ctx context.Context, nodes []*Node, set bool) error {
	value := `""`
	if !set {
		value = "null"
	}
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, k8sovnv1.EgressAssignableLabel, value)
	for _, n := range nodes {
		if _, err := c.Client.CoreV1().Nodes().Patch(ctx, n.Name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return fmt.Errorf("labelling node %s: %w", n.Name, err)
		}
	}
	return nil
}

// eipExternalRoutes adds (or removes) the external host's on-link routes
// to the egress IPs: the underlay network reaches them as it reaches the
// nodes' addresses (the host has a route to each, no on-link subnet).
func (c *Cluster) eipExternalRoutes(add bool) error {
	verb := "replace"
	if !add {
		verb = "del"
	}
	for _, f := range c.families() {
		args := []string{"ip", "-n", c.externalNS()}
		if f.v6 {
			args = append(args, "-6")
		}
		if _, err := run(append(args, "route", verb, f.egressIP()+hostLen(f), "dev", "eth0")...); err != nil && add {
			return err
		}
	}
	return nil
}

// hostLen is the prefix length of one address of f.
func hostLen(f ipFamily) string {
	if f.v6 {
		return "/128"
	}
	return "/32"
}

// createEIPPods creates the pods the EgressIP selects (app=egress; the
// client pod's image, which has curl) and waits until they run with their
// addresses.
func (c *Cluster) createEIPPods(ctx context.Context, pods []eipPod) error {
	for _, p := range pods {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: p.name, Labels: map[string]string{"app": "egress"}},
			Spec: corev1.PodSpec{NodeName: p.node.Name, TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{Name: "eip", Image: agnhostImg, Args: []string{"netexec", "--http-port=8080"}}}}}
		if err := ignoreExists(c.Client.CoreV1().Pods(demoNS).Create(ctx, pod, metav1.CreateOptions{})); err != nil {
			return fmt.Errorf("creating pod %s: %w", p.name, err)
		}
	}
	return poll(ctx, 120*time.Second, "pods eip-a, eip-b Running", func() error {
		for _, p := range pods {
			pod, err := c.Client.CoreV1().Pods(demoNS).Get(ctx, p.name, metaGet)
			if err != nil {
				return err
			}
			if pod.Status.Phase != corev1.PodRunning || len(pod.Status.PodIPs) < len(c.families()) {
				return fmt.Errorf("pod %s: %s, addresses %v", p.name, pod.Status.Phase, podIPs(*pod))
			}
		}
		return nil
	})
}

// setEgressIP creates the EgressIP with ips, or sets its ips: the demo
// namespace's pods labelled app=egress.
func (c *Cluster) setEgressIP(ctx context.Context, eips dynamic.ResourceInterface, ips []string) error {
	u, err := eips.Get(ctx, eipName, metaGet)
	if apierrors.IsNotFound(err) {
		e := &k8sovnv1.EgressIP{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressIP"},
			ObjectMeta: metav1.ObjectMeta{Name: eipName},
			Spec: k8sovnv1.EgressIPSpec{EgressIPs: ips,
				NamespaceSelector: metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": demoNS}},
				PodSelector:       metav1.LabelSelector{MatchLabels: map[string]string{"app": "egress"}}}}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(e)
		if err != nil {
			return err
		}
		if _, err := eips.Create(ctx, &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating EgressIP %s: %w", eipName, err)
		}
		return nil
	}
	if err != nil {
		return err
	}
	list := make([]any, len(ips))
	for i, ip := range ips {
		list[i] = ip
	}
	if err := unstructured.SetNestedSlice(u.Object, list, "spec", "egressIPs"); err != nil {
		return err
	}
	if _, err := eips.Update(ctx, u, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating EgressIP %s: %w", eipName, err)
	}
	return nil
}

// eipAssigned reads the EgressIP's status: it must list exactly ips, each
// on a node (that node accepts, when node is not nil).
func (c *Cluster) eipAssigned(ctx context.Context, eips dynamic.ResourceInterface, ips []string, node func(string) error) (map[string]string, error) {
	u, err := eips.Get(ctx, eipName, metaGet)
	if err != nil {
		return nil, err
	}
	e := new(k8sovnv1.EgressIP)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, e); err != nil {
		return nil, err
	}
	at := map[string]string{}
	var got []string
	for _, it := range e.Status.Items {
		at[it.EgressIP] = it.Node
		got = append(got, it.EgressIP+" on "+it.Node)
	}
	if len(at) != len(ips) {
		return at, fmt.Errorf("status items %v, want %v", got, ips)
	}
	for _, ip := range ips {
		n, ok := at[ip]
		if !ok || n == "" {
			return at, fmt.Errorf("status items %v, want %v", got, ips)
		}
		if node != nil {
			if err := node(n); err != nil {
				return at, fmt.Errorf("%s: %w", ip, err)
			}
		}
	}
	return at, nil
}

// podSeen is a probe: curl from the pod to the external host's port in f,
// which must have seen want as the source.
func (c *Cluster) podSeen(pod string, f ipFamily, port int32, want string) (string, error) {
	got, err := c.kubectlExec(pod, "curl", "-s", "-m", "2", "http://"+hostPort(f.external, port)+"/")
	if err == nil && got != want {
		err = fmt.Errorf("the external server saw %q, not %s", got, want)
	}
	return "server saw " + got, err
}

// eipCleanup removes what the checks added: the EgressIP, the pods, the
// labels, the external host's routes.
func (c *Cluster) eipCleanup(eips dynamic.ResourceInterface, workers []*Node, pods []eipPod) {
	_ = eips.Delete(bg, eipName, metav1.DeleteOptions{})
	_ = c.Client.CoreV1().Services(demoNS).Delete(bg, eipLocalService, metav1.DeleteOptions{})
	for _, p := range pods {
		_ = c.Client.CoreV1().Pods(demoNS).Delete(bg, p.name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
	}
	_ = c.labelEgressAssignable(bg, workers, false)
	_ = c.eipExternalRoutes(false)
}

// killNode kills a worker as far as the cluster can tell: its kubelet,
// node daemon and ovn-controller stopped (the processes the cluster
// started, SIGTERM), then its underlay link down (ul0, the NIC in OVS's
// gateway bridge): from then on nothing reaches it or leaves it. OVS and
// containerd keep running, cut off, and so do the pods (stopping OVS
// would take brul0, the node's addresses with it, and need more than
// restarting to come back). It returns when the link went down.
func (c *Cluster) killNode(n *Node) (time.Time, error) {
	for _, p := range [][2]string{kubeletProc(c), nodeDaemonProc(c), ovnControllerProc} {
		if err := c.stopProcess(n, p[0], p[1]); err != nil {
			return time.Now(), err
		}
	}
	if err := poll(bg, 10*time.Second, "ovn-controller's monitor gone", func() error {
		for _, pid := range cgroupPIDs(n.Cgroup + "/daemons") {
			if strings.HasPrefix(cmdline(pid), "ovn-controller") {
				return fmt.Errorf("pid %d: %s", pid, cmdline(pid))
			}
		}
		return nil
	}); err != nil {
		return time.Now(), err
	}
	if _, err := run("ip", "-n", n.NetNS, "link", "set", "ul0", "down"); err != nil {
		return time.Now(), err
	}
	return time.Now(), nil
}

// The processes killNode stops, in its order, as stopProcess finds them:
// the binary and one of its arguments. ovn-controller is the daemon; its
// monitor, renamed "ovn-controller: monitoring pid …", exits with it.
var ovnControllerProc = [2]string{"ovn-controller", "--monitor"}

func kubeletProc(c *Cluster) [2]string {
	return [2]string{c.bin("kubelet"), "--config=/var/lib/kubelet/config.yaml"}
}
func nodeDaemonProc(c *Cluster) [2]string { return [2]string{c.bin("ovnkube"), "node"} }

// running says whether the node runs p (one the cluster started).
func (c *Cluster) running(n *Node, p [2]string) bool {
	for _, pid := range cgroupPIDs(n.Cgroup + "/daemons") {
		if args := strings.Fields(cmdline(pid)); len(args) > 0 && args[0] == p[0] && slices.Contains(args, p[1]) {
			return true
		}
	}
	return false
}

// restoreNode undoes killNode, also one that stopped part way: the link
// up, ovn-controller and the node daemon (startOVNNode, or the node daemon
// alone) and the kubelet started as Up starts them, those stopped; it
// waits until the node is Ready with a heartbeat of the new kubelet, and
// that kubelet serves the node's pods among pods again (an exec into one
// works: until it has synced its pods it answers "pod does not exist").
func (c *Cluster) restoreNode(ctx context.Context, n *Node, pods []eipPod) error {
	if _, err := run("ip", "-n", n.NetNS, "link", "set", "ul0", "up"); err != nil {
		return err
	}
	switch {
	case !c.running(n, ovnControllerProc): // stopped last: the node daemon too
		if err := c.startOVNNode(n); err != nil {
			return err
		}
	case !c.running(n, nodeDaemonProc(c)):
		if err := c.startNodeDaemon(n); err != nil {
			return err
		}
	}
	start := time.Now().Truncate(time.Second) // heartbeats are in seconds
	if !c.running(n, kubeletProc(c)) {
		if err := c.startKubelet(n); err != nil {
			return err
		}
	}
	return poll(ctx, 120*time.Second, "node "+n.Name+" Ready", func() error {
		if err := c.nodeReady(n.Name); err != nil {
			return err
		}
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metaGet)
		if err != nil {
			return err
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.LastHeartbeatTime.Time.Before(start) {
				return fmt.Errorf("node %s: last heartbeat %s, before the restart", n.Name, cond.LastHeartbeatTime.Format("15:04:05"))
			}
		}
		for _, p := range pods {
			if p.node == n {
				if _, err := c.kubectlExec(p.name, "true"); err != nil {
					return fmt.Errorf("exec into %s: %w", p.name, err)
				}
			}
		}
		return nil
	})
}

// probeLoop is a loop of requests run in a pod to the external host's
// logging server: curl -m 1, every 200 ms, until the server answers "stop"
// (or 120 s pass). Its kubectl exec may fail (a kubelet just restarted
// answers "pod does not exist" until it has synced its pods): ensure starts
// it again.
type probeLoop struct {
	c      *Cluster
	pod    string
	script string
	mu     sync.Mutex
	cmd    *exec.Cmd
	stderr *strings.Builder
	done   chan struct{}
	once   sync.Once
}

func (c *Cluster) startProbeLoop(pod string, f ipFamily) (*probeLoop, error) {
	url := "http://" + hostPort(f.external, externalProbe) + "/"
	l := &probeLoop{c: c, pod: pod, script: `end=$((SECONDS+120)); while [ $SECONDS -lt $end ]; do ` +
		`[ "$(curl -s -m 1 ` + url + `)" = stop ] && exit 0; sleep 0.2; done`}
	return l, l.ensure()
}

// ensure starts the loop unless it runs; it returns what the last one
// said if it ended.
func (l *probeLoop) ensure() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var ended string
	if l.done != nil {
		select {
		case <-l.done:
			ended = strings.TrimSpace(l.stderr.String())
		default:
			return nil // running
		}
	}
	cmd := l.c.Command(l.c.ControlPlane(), l.c.bin("kubectl"), "--kubeconfig", Kubeconfig, "exec", "-n", demoNS, l.pod, "--", "bash", "-c", l.script)
	stderr := &strings.Builder{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the probe loop in %s: %w", l.pod, err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	l.cmd, l.stderr, l.done = cmd, stderr, done
	if ended != "" {
		return fmt.Errorf("the probe loop in %s ended (%s), started again", l.pod, ended)
	}
	return nil
}

// stop has the server answer "stop" until the loop ended (its kubectl
// exec returned), or kills the kubectl it started after 10 s.
func (l *probeLoop) stop(probes *probeLog) {
	l.once.Do(func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		probes.setStop(true)
		defer probes.setStop(false)
		select {
		case <-l.done:
		case <-time.After(10 * time.Second):
			_ = l.cmd.Process.Kill()
			<-l.done
		}
	})
}

// probeLog is the external host's logging server: every request's arrival
// time and source address.
type probeLog struct {
	srv      *http.Server
	mu       sync.Mutex
	arrivals []arrival
	stopping bool
}

type arrival struct {
	at  time.Time
	src string
}

// serveProbeLog starts the logging server on the external host's address
// of each family, port externalProbe.
func (c *Cluster) serveProbeLog() (*probeLog, error) {
	p := &probeLog{}
	p.srv = &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		p.mu.Lock()
		p.arrivals = append(p.arrivals, arrival{time.Now(), host})
		stopping := p.stopping
		p.mu.Unlock()
		if stopping {
			fmt.Fprintln(w, "stop")
			return
		}
		fmt.Fprintln(w, host)
	})}
	for _, f := range c.families() {
		var l net.Listener
		err := c.inExternal(func() error {
			var err error
			l, err = net.Listen("tcp", hostPort(f.external, externalProbe))
			return err
		})
		if err != nil {
			_ = p.srv.Close()
			return nil, fmt.Errorf("external logging server: %w", err)
		}
		go func() { _ = p.srv.Serve(l) }()
	}
	return p, nil
}

func (p *probeLog) close() { _ = p.srv.Close() }

func (p *probeLog) setStop(v bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stopping = v
}

// count is how many requests came from src after since.
func (p *probeLog) count(src string, since time.Time) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, a := range p.arrivals {
		if a.src == src && a.at.After(since) {
			n++
		}
	}
	return n
}

// gap is a probe: a request from src arrived after down; it reports the
// gap between the last one before down and the first after, against
// failoverTarget, and the requests from other sources in between.
func (p *probeLog) gap(src string, down time.Time) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var last, first time.Time
	var others []string
	for _, a := range p.arrivals {
		switch {
		case a.src == src && !a.at.After(down):
			last = a.at
		case a.src == src && first.IsZero():
			first = a.at
		case a.src != src && a.at.After(down) && first.IsZero():
			others = append(others, a.src)
		}
	}
	if last.IsZero() {
		return "", fmt.Errorf("no request from %s before the kill", src)
	}
	if first.IsZero() {
		return "", fmt.Errorf("no request from %s since the kill (%.1f s ago); last one %.1f s before it; other sources since: %v",
			src, time.Since(down).Seconds(), down.Sub(last).Seconds(), others)
	}
	g := first.Sub(last)
	verdict := fmt.Sprintf("target %.0f s met", failoverTarget.Seconds())
	if g > failoverTarget {
		verdict = fmt.Sprintf("target %.0f s MISSED", failoverTarget.Seconds())
	}
	slices.Sort(others)
	return fmt.Sprintf("gap %.1f s (%s): last %s, first %s (%.1f s after the link went down); other sources between: %d %v",
		g.Seconds(), verdict, last.Format("15:04:05.000"), first.Format("15:04:05.000"), first.Sub(down).Seconds(), len(others), slices.Compact(others)), nil
}
