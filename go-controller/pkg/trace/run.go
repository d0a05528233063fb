package trace

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"

	"github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Options are what a trace reads and how it is sent.
type Options struct {
	Kube kubernetes.Interface
	NB   client.Client // a client of the NB (ConnectNB): ACLs, balancers, router ports
	// OVNTrace is the ovn-trace command with its database options
	// (["ovn-trace", "--db=unix:/run/ovn/ovnsb_db.sock"]).
	OVNTrace []string
	Proto    string // tcp, udp or icmp
	Port     int    // tcp and udp: the destination port (a Service's port)
	Backend  string // a balanced destination: the backend to follow (IP:PORT); "" the first
	Family   int    // 4 or 6: the IP family to trace; 0: the source's first that the destination has
	// OVS, when set, also traces the packet through the OpenFlow tables of
	// this host's OVS, when the source's port is there (ofproto/trace).
	OVS OVS
}

// Result is a trace told in the cluster's terms.
type Result struct {
	From      string     `json:"from"`
	To        string     `json:"to"`
	Microflow string     `json:"microflow"`
	Trace     Trace      `json:"trace"`
	Decisions []Decision `json:"decisions"`
	Raw       string     `json:"raw,omitempty"`
	// OFProto is the packet through the source node's OVS, when it is this
	// host's; OFProtoNote says why there is none.
	OFProto     *OFProtoTrace `json:"ofproto,omitempty"`
	OFProtoNote string        `json:"ofprotoNote,omitempty"`
	// Reply is the destination's answer on the connection (when the
	// destination is a pod): an established connection's reply in every
	// conntrack zone.
	Reply *Result `json:"reply,omitempty"`
}

// Run traces a packet from src (namespace/pod, or node/NAME: the node's
// management port) to dst (namespace/pod, svc/namespace/name, node/NAME: its
// address, or an IP address); when dst is a pod, its reply too.
func Run(ctx context.Context, opts Options, src, dst string) (Result, error) {
	from, err := source(ctx, opts, src)
	if err != nil {
		return Result{}, err
	}
	to, err := destination(ctx, opts, dst)
	if err != nil {
		return Result{}, err
	}
	p, err := packet(ctx, opts, from, to)
	if err != nil {
		return Result{}, err
	}
	nb, err := readNB(ctx, opts)
	if err != nil {
		return Result{}, err
	}
	r, err := follow(ctx, opts, nb, p, from, to)
	if err != nil {
		return Result{}, err
	}
	r.From, r.To = src, dst
	if to.remote && r.Trace.Port == topology.TransitSwitchPort(to.node) {
		r.Decisions = append(r.Decisions, Decision{Kind: "zone", Text: fmt.Sprintf("leaves this zone over the transit switch for node %s's zone, where %s/%s's port is: trace the rest there", to.node, to.pod.Namespace, to.pod.Name)})
	}
	if to.lsp == "" {
		return r, nil // no port to answer from: an address, a node, a Service, a pod of another zone
	}
	rp, err := replyPacket(ctx, opts, p, from, to)
	if err != nil {
		return Result{}, err
	}
	reply, err := follow(ctx, opts, nb, rp, to, from)
	if err != nil {
		return Result{}, err
	}
	reply.From, reply.To = dst, src
	r.Reply = &reply
	return r, nil
}

// readNB reads the rows Explain maps decisions to, and the nodes.
func readNB(ctx context.Context, opts Options) (NB, error) {
	var nb NB
	if err := opts.NB.List(ctx, &nb.ACLs); err != nil {
		return nb, err
	}
	if err := opts.NB.List(ctx, &nb.LBs); err != nil {
		return nb, err
	}
	nb.Nodes = map[string]bool{}
	if list, err := opts.Kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{}); err == nil {
		for _, n := range list.Items {
			nb.Nodes[n.Name] = true
		}
	}
	return nb, nil
}

// follow traces one packet from one end to the other: ovn-trace, the
// decisions, and ofproto/trace where this host holds its port.
func follow(ctx context.Context, opts Options, nb NB, p Packet, from, to end) (Result, error) {
	out, err := ovnTrace(ctx, opts, p)
	if err != nil {
		return Result{}, err
	}
	t := Parse(out)
	ds := Explain(t, nb)
	isolatedBy(ctx, opts.Kube, ds, from, to)
	for i := range ds {
		if ds[i].Kind == "balancer" && opts.Backend != "" && !strings.Contains(ds[i].Text, "no backend") {
			ds[i].Text += " → backend " + opts.Backend
		}
	}
	r := Result{Microflow: p.Microflow(), Trace: t, Decisions: ds, Raw: out}
	r.OFProto, r.OFProtoNote = ofprotoTrace(ctx, opts.OVS, p)
	return r, nil
}

// replyPacket is the destination's answer to the first packet p, on the
// connection p opened.
func replyPacket(ctx context.Context, opts Options, p Packet, from, to end) (Packet, error) {
	r := Packet{Datapath: to.node, InPort: to.lsp, SrcMAC: to.mac, Src: p.Dst, Dst: p.Src, Proto: p.Proto, DstPort: p.DstPort, Reply: true}
	if from.node == to.node {
		r.DstMAC = from.mac
		return r, nil
	}
	var err error
	r.DstMAC, err = routerMAC(ctx, opts.NB, to.node)
	return r, err
}

// packet is the first packet of a connection from one end to the other:
// the destination's address of the source's family, the MAC of the
// destination when on the same switch, else the node's router port's.
func packet(ctx context.Context, opts Options, from, to end) (Packet, error) {
	p := Packet{Datapath: from.node, InPort: from.lsp, SrcMAC: from.mac, Proto: opts.Proto, DstPort: opts.Port}
	var err error
	if p.Dst, err = to.addrLike(from, opts.Family); err != nil {
		return p, err
	}
	if p.Src, err = from.addrOf(p.Dst.Is6()); err != nil {
		return p, err
	}
	if to.mac != "" && to.node == from.node {
		p.DstMAC = to.mac
	} else if p.DstMAC, err = routerMAC(ctx, opts.NB, from.node); err != nil {
		return p, err
	}
	if p.Proto != "icmp" && p.DstPort == 0 {
		p.DstPort = to.port
	}
	if p.Proto != "icmp" && p.DstPort == 0 {
		return p, fmt.Errorf("no destination port: give --tcp PORT or --udp PORT")
	}
	return p, nil
}

// ovnTrace runs ovn-trace for the packet, a new connection in every
// conntrack zone it passes, and returns its output.
func ovnTrace(ctx context.Context, opts Options, p Packet) (string, error) {
	args := append([]string{}, opts.OVNTrace...)
	for i := 0; i < 8; i++ {
		args = append(args, "--ct="+ctState(p, "new", "est,rpl"))
	}
	if opts.Backend != "" && !p.Reply {
		args = append(args, "--lb-dst="+opts.Backend)
	}
	args = append(args, p.Datapath, p.Microflow())
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(args[:len(args)-2], " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

// end is one end of the packet.
type end struct {
	node, mac string
	lsp       string // a source's logical switch port
	ips       []netip.Addr
	port      int         // a Service's port of the protocol
	pod       *corev1.Pod // a pod's
	remote    bool        // a pod in another zone (no port here)
}

// isolatedBy names, on a namespace's default deny, the NetworkPolicies that
// isolate the pod it applies to (the destination for ingress, the source
// for egress): the rule that dropped the packet is "nothing allows it",
// and these are the policies whose rules did not.
func isolatedBy(ctx context.Context, kube kubernetes.Interface, ds []Decision, from, to end) {
	for i, d := range ds {
		if d.ACL == nil || d.ACL.Action != nbdb.ACLActionDrop {
			continue
		}
		pod, dir := to.pod, networkingv1.PolicyTypeIngress
		if d.ACL.Direction == nbdb.ACLDirectionFromLport {
			pod, dir = from.pod, networkingv1.PolicyTypeEgress
		}
		if pod == nil {
			continue
		}
		list, err := kube.NetworkingV1().NetworkPolicies(pod.Namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			continue
		}
		var names []string
		for _, np := range list.Items {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			if err == nil && sel.Matches(labels.Set(pod.Labels)) && hasType(np, dir) {
				names = append(names, np.Namespace+"/"+np.Name)
			}
		}
		if len(names) > 0 {
			ds[i].Text += fmt.Sprintf("; %s isolated for %s by NetworkPolicy %s, whose rules allow none of it", pod.Namespace+"/"+pod.Name,
				strings.ToLower(string(dir)), strings.Join(names, ", "))
		}
	}
}

// hasType says whether a policy isolates its pods for dir, as the API
// defines policyTypes when they are left out.
func hasType(np networkingv1.NetworkPolicy, dir networkingv1.PolicyType) bool {
	if len(np.Spec.PolicyTypes) == 0 {
		return dir == networkingv1.PolicyTypeIngress || len(np.Spec.Egress) > 0
	}
	for _, t := range np.Spec.PolicyTypes {
		if t == dir {
			return true
		}
	}
	return false
}

func source(ctx context.Context, opts Options, src string) (end, error) {
	if node, ok := strings.CutPrefix(src, "node/"); ok {
		return portEnd(ctx, opts.NB, node, topology.ManagementPort(node))
	}
	ns, name, ok := strings.Cut(src, "/")
	if !ok || strings.Contains(name, "/") {
		return end{}, fmt.Errorf("source %q: want NAMESPACE/POD or node/NAME", src)
	}
	return podEnd(ctx, opts, ns, name)
}

// portEnd is the logical switch port lsp on node's switch, with the MAC and
// addresses the master gave it (its first addresses entry).
func portEnd(ctx context.Context, nb client.Client, node, lsp string) (end, error) {
	var lsps []nbdb.LogicalSwitchPort
	if err := nb.WhereCache(func(p *nbdb.LogicalSwitchPort) bool { return p.Name == lsp }).List(ctx, &lsps); err != nil {
		return end{}, err
	}
	if len(lsps) == 0 || len(lsps[0].Addresses) == 0 {
		return end{}, fmt.Errorf("no port %s with addresses in the NB: the master has not set it up (yet)", lsp)
	}
	fields := strings.Fields(lsps[0].Addresses[0])
	e := end{node: node, lsp: lsp, mac: fields[0]}
	for _, f := range fields[1:] {
		if ip, err := netip.ParseAddr(f); err == nil {
			e.ips = append(e.ips, ip)
		}
	}
	return e, nil
}

// podEnd is a pod on the pod network: its port as the master made it (the
// NB, which only the master writes, not the pod's annotation, which its
// owner may be able to write), its node and its labels.
func podEnd(ctx context.Context, opts Options, ns, name string) (end, error) {
	pod, err := opts.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return end{}, fmt.Errorf("pod %s/%s: %w", ns, name, err)
	}
	if pod.Spec.HostNetwork {
		return end{}, fmt.Errorf("pod %s/%s is on its node's network, not the pod network", ns, name)
	}
	e, err := portEnd(ctx, opts.NB, pod.Spec.NodeName, topology.PodPort(ns, name))
	if err != nil && remoteNode(ctx, opts.NB, pod.Spec.NodeName) {
		err = fmt.Errorf("pod %s/%s runs on node %s, in another zone (zone mode): its port is in that zone's NB; trace from there (on node %s: --nb-address unix:/run/ovn/ovnnb_db.sock --sb-address unix:/run/ovn/ovnsb_db.sock)",
			ns, name, pod.Spec.NodeName, pod.Spec.NodeName)
	}
	e.pod = pod
	return e, err
}

// remoteNode says whether node is in another zone than this NB's (zone
// mode): the transit switch holds its port as a remote one.
func remoteNode(ctx context.Context, nb client.Client, node string) bool {
	var lsps []nbdb.LogicalSwitchPort
	err := nb.WhereCache(func(p *nbdb.LogicalSwitchPort) bool { return p.Name == topology.TransitSwitchPort(node) }).List(ctx, &lsps)
	return err == nil && len(lsps) == 1 && lsps[0].Type == "remote"
}

// remotePod is a destination pod in another zone (zone mode): this NB has
// no port of it, so its addresses are those its node's kubelet reports;
// the trace ends where the packet leaves this zone, at the transit switch.
func remotePod(ctx context.Context, opts Options, ns, name string) (end, bool) {
	pod, err := opts.Kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil || pod.Spec.HostNetwork || !remoteNode(ctx, opts.NB, pod.Spec.NodeName) {
		return end{}, false
	}
	e := end{node: pod.Spec.NodeName, pod: pod, remote: true}
	for _, a := range pod.Status.PodIPs {
		if ip, err := netip.ParseAddr(a.IP); err == nil {
			e.ips = append(e.ips, ip)
		}
	}
	return e, len(e.ips) > 0
}

func destination(ctx context.Context, opts Options, dst string) (end, error) {
	if ip, err := netip.ParseAddr(dst); err == nil {
		return end{ips: []netip.Addr{ip}}, nil
	}
	if rest, ok := strings.CutPrefix(dst, "svc/"); ok {
		ns, name, ok := strings.Cut(rest, "/")
		if !ok {
			return end{}, fmt.Errorf("destination %q: want svc/NAMESPACE/NAME", dst)
		}
		svc, err := opts.Kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return end{}, fmt.Errorf("service %s/%s: %w", ns, name, err)
		}
		e := end{}
		for _, s := range svc.Spec.ClusterIPs {
			if ip, err := netip.ParseAddr(s); err == nil {
				e.ips = append(e.ips, ip)
			}
		}
		for _, sp := range svc.Spec.Ports {
			if strings.EqualFold(string(sp.Protocol), opts.Proto) || (sp.Protocol == "" && opts.Proto == "tcp") {
				e.port = int(sp.Port)
				break
			}
		}
		if len(e.ips) == 0 {
			return end{}, fmt.Errorf("service %s/%s has no ClusterIP", ns, name)
		}
		return e, nil
	}
	if name, ok := strings.CutPrefix(dst, "node/"); ok {
		node, err := opts.Kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return end{}, fmt.Errorf("node %s: %w", name, err)
		}
		e := end{}
		for _, a := range node.Status.Addresses {
			if ip, err := netip.ParseAddr(a.Address); err == nil && a.Type == corev1.NodeInternalIP {
				e.ips = append(e.ips, ip)
			}
		}
		if len(e.ips) == 0 {
			return end{}, fmt.Errorf("node %s reports no InternalIP", name)
		}
		return e, nil
	}
	ns, name, ok := strings.Cut(dst, "/")
	if !ok {
		return end{}, fmt.Errorf("destination %q: want NAMESPACE/POD, svc/NAMESPACE/NAME, node/NAME or an IP address", dst)
	}
	if e, ok := remotePod(ctx, opts, ns, name); ok {
		return e, nil
	}
	return podEnd(ctx, opts, ns, name)
}

// addrLike is the destination's address of the source's first family it
// has (of family, 4 or 6, only, unless 0).
func (e end) addrLike(from end, family int) (netip.Addr, error) {
	for _, f := range from.ips {
		if family != 0 && f.Is6() != (family == 6) {
			continue
		}
		for _, ip := range e.ips {
			if ip.Is6() == f.Is6() {
				return ip, nil
			}
		}
	}
	if family != 0 {
		return netip.Addr{}, fmt.Errorf("no IPv%d address at both ends (source %v, destination %v)", family, from.ips, e.ips)
	}
	return netip.Addr{}, fmt.Errorf("no address of the source's families (%v) at the destination (%v)", from.ips, e.ips)
}

func (e end) addrOf(v6 bool) (netip.Addr, error) {
	for _, ip := range e.ips {
		if ip.Is6() == v6 {
			return ip, nil
		}
	}
	return netip.Addr{}, fmt.Errorf("the source has no address of that family")
}

func routerMAC(ctx context.Context, nb client.Client, node string) (string, error) {
	var lrps []nbdb.LogicalRouterPort
	name := topology.NodeRouterToSwitchPort(node)
	if err := nb.WhereCache(func(p *nbdb.LogicalRouterPort) bool { return p.Name == name }).List(ctx, &lrps); err != nil {
		return "", err
	}
	if len(lrps) == 0 {
		return "", fmt.Errorf("no router port %s in the NB: node %s is not set up", name, node)
	}
	return lrps[0].MAC, nil
}
