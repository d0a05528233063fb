// Package trace is `ovnkube trace`: one packet through the logical network,
// as ovn-trace follows it in the southbound's logical flows, told in the
// cluster's terms. The pure part is here: the microflow for a packet, the
// parse of ovn-trace's output, and the decisions mapped back to the NB rows
// that made them (ACLs to the policies that own them, balancers to their
// Services).
package trace

import (
	"fmt"
	"net/netip"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// Packet is the first packet of a connection from a pod's port.
type Packet struct {
	Datapath string // the logical switch it enters: the source pod's node
	InPort   string // the source pod's port
	SrcMAC   string
	DstMAC   string // the destination pod's on the same switch, else the node's router port's
	Src, Dst netip.Addr
	Proto    string // tcp, udp or icmp
	DstPort  int    // tcp and udp
	// Reply: the answer of the destination on the connection the first
	// packet opened (its ports swapped, an echo reply).
	Reply bool
}

// clientPort is the source port of the first packet.
const clientPort = 33333

// ports are the packet's source and destination ports.
func (p Packet) ports() (src, dst int) {
	if p.Reply {
		return p.DstPort, clientPort
	}
	return clientPort, p.DstPort
}

// icmpTypes are the echo request's (or reply's) ICMP type in the packet's
// family.
func (p Packet) icmpType() int {
	switch {
	case p.Dst.Is6() && p.Reply:
		return 129
	case p.Dst.Is6():
		return 128
	case p.Reply:
		return 0
	}
	return 8
}

// Microflow is the packet as ovn-trace takes it.
func (p Packet) Microflow() string {
	ip := "ip4"
	if p.Dst.Is6() {
		ip = "ip6"
	}
	m := fmt.Sprintf(`inport == %q && eth.src == %s && eth.dst == %s && %s.src == %s && %s.dst == %s && ip.ttl == 64`,
		p.InPort, p.SrcMAC, p.DstMAC, ip, p.Src, ip, p.Dst)
	switch p.Proto {
	case "tcp", "udp":
		src, dst := p.ports()
		m += fmt.Sprintf(" && %s && %s.src == %d && %s.dst == %d", p.Proto, p.Proto, src, p.Proto, dst)
	default:
		icmp := "icmp4"
		if p.Dst.Is6() {
			icmp = "icmp6"
		}
		m += fmt.Sprintf(" && %s && %s.type == %d && %s.code == 0", icmp, icmp, p.icmpType(), icmp)
	}
	return m
}

// Step is one logical flow the packet matched.
type Step struct {
	Datapath string   `json:"datapath"`
	Pipeline string   `json:"pipeline"` // ingress or egress
	Stage    string   `json:"stage"`
	Match    string   `json:"match"`
	Priority int      `json:"priority"`
	Actions  []string `json:"actions,omitempty"`
}

// Verdicts of a trace.
const (
	Delivered = "delivered"
	Dropped   = "dropped"
	Rejected  = "rejected"
)

// Trace is ovn-trace's output, parsed.
type Trace struct {
	Steps   []Step `json:"steps"`
	Verdict string `json:"verdict"`
	// Port is where a delivered packet left the logical network: a pod's
	// port, a management port, a gateway's localnet port.
	Port string `json:"port,omitempty"`
}

var (
	pipelineLine = regexp.MustCompile(`^(ingress|egress)\(dp="([^"]+)"`)
	stageLine    = regexp.MustCompile(`^\s*\d+\. (\w+)(?: \([^)]*\))?: (.*), priority (\d+)(?:, uuid [0-9a-f]+)?$`)
	outputLine   = regexp.MustCompile(`/\* output to "([^"]+)", type "([^"]*)" \*/`)
)

// Parse reads ovn-trace's detailed output (its default).
func Parse(out string) Trace {
	var t Trace
	var dp, pipeline string
	var cur *Step
	for _, line := range strings.Split(out, "\n") {
		if m := pipelineLine.FindStringSubmatch(line); m != nil {
			pipeline, dp, cur = m[1], m[2], nil
			continue
		}
		if m := stageLine.FindStringSubmatch(line); m != nil {
			prio, _ := strconv.Atoi(m[3])
			t.Steps = append(t.Steps, Step{Datapath: dp, Pipeline: pipeline, Stage: m[1], Match: m[2], Priority: prio})
			cur = &t.Steps[len(t.Steps)-1]
			continue
		}
		a := strings.TrimSpace(line)
		if m := outputLine.FindStringSubmatch(a); m != nil && m[2] != "patch" && m[2] != "l3gateway" && m[2] != "router" {
			t.Port = m[1]
		}
		if cur == nil || a == "" || strings.HasPrefix(a, "---") {
			continue
		}
		cur.Actions = append(cur.Actions, a)
	}
	// A reject answers the source (a TCP reset, an ICMP unreachable):
	// what ovn-trace then follows out of a port is that answer.
	t.Verdict = Dropped
	switch {
	case rejected(t.Steps):
		t.Verdict, t.Port = Rejected, ""
	case t.Port != "":
		t.Verdict = Delivered
	}
	return t
}

func rejected(steps []Step) bool {
	for _, s := range steps {
		for _, a := range s.Actions {
			if strings.HasPrefix(a, "reject") || strings.HasPrefix(a, "tcp_reset") || strings.HasPrefix(a, "icmp4 {") || strings.HasPrefix(a, "icmp6 {") {
				return true
			}
		}
	}
	return false
}

// NB is what Explain reads of the Northbound database.
type NB struct {
	ACLs []nbdb.ACL
	LBs  []nbdb.LoadBalancer
	// Nodes are the node switches' names: the packet crosses a Geneve
	// tunnel when it goes from one to another.
	Nodes map[string]bool
}

// Decision is one step that decided where the packet went, in the
// cluster's terms.
type Decision struct {
	Kind   string `json:"kind"` // datapath, tunnel, acl, balancer, route, snat, zone
	Text   string `json:"text"`
	Object string `json:"object,omitempty"` // the owner: Service ns/name, NetworkPolicy ns/name, …
	// ACL is the ACL of an acl decision.
	ACL *nbdb.ACL `json:"-"`
}

var vipMatch = regexp.MustCompile(`ip[46]\.dst == ([0-9a-fA-F.:]+) && (tcp|udp|sctp)\.dst == (\d+)`)

// Explain maps the trace's steps back to the rows (and the objects owning
// them) that decided them.
func Explain(t Trace, nb NB) []Decision {
	var out []Decision
	lastDP, lastNode := "", ""
	for _, s := range t.Steps {
		if s.Datapath != lastDP && s.Pipeline == "ingress" {
			if nb.Nodes[s.Datapath] && lastNode != "" && lastNode != s.Datapath {
				out = append(out, Decision{Kind: "tunnel", Text: "Geneve from " + lastNode + "'s chassis to " + s.Datapath + "'s"})
			}
			if nb.Nodes[s.Datapath] {
				lastNode = s.Datapath
			}
			out = append(out, Decision{Kind: "datapath", Text: "enters " + s.Datapath})
			lastDP = s.Datapath
		}
		acts := strings.Join(s.Actions, " ")
		switch {
		case strings.Contains(s.Stage, "_acl"):
			if acl := findACL(nb.ACLs, s); acl != nil {
				out = append(out, Decision{Kind: "acl", Text: fmt.Sprintf("%s ACL %s: %s (%s)", acl.Direction, aclLabel(acl), acl.Action, acl.Match),
					Object: ownerOf(acl.ExternalIDs), ACL: acl})
			} else if strings.Contains(s.Match, "ct.inv") && strings.Contains(acts, "reg8[17] = 1") {
				out = append(out, Decision{Kind: "acl", Text: "dropped: invalid conntrack state"})
			}
		case vipMatch.MatchString(s.Match) && (strings.Contains(acts, "ct_lb") || strings.Contains(acts, "reject")):
			// One balancing can take two flows (a VIP's pre-stateful and
			// its balancer stage): told once.
			if d := lbDecision(s, nb.LBs); len(out) == 0 || out[len(out)-1] != d {
				out = append(out, d)
			}
		case strings.Contains(s.Stage, "ip_routing") && !strings.Contains(s.Stage, "pre") && !strings.Contains(s.Stage, "ecmp"):
			out = append(out, Decision{Kind: "route", Text: fmt.Sprintf("%s routes it (%s)%s", s.Datapath, s.Match, nextHop(s.Actions))})
		case strings.Contains(s.Stage, "lr_in_policy") && strings.Contains(acts, "reg0 ="):
			out = append(out, Decision{Kind: "route", Text: fmt.Sprintf("%s policy (%s)%s", s.Datapath, s.Match, nextHop(s.Actions))})
		case strings.Contains(s.Stage, "snat") && strings.Contains(acts, "ct_snat("):
			out = append(out, Decision{Kind: "snat", Text: fmt.Sprintf("%s SNATs it: %s", s.Datapath, firstWith(s.Actions, "ct_snat("))})
		}
	}
	return out
}

// findACL is the ACL behind an ACL stage's flow: northd puts the ACL's match
// in parentheses into the flow's and its priority 1000 higher.
func findACL(acls []nbdb.ACL, s Step) *nbdb.ACL {
	for i := range acls {
		a := &acls[i]
		if a.Priority+1000 == s.Priority && strings.Contains(s.Match, "("+a.Match+")") {
			return a
		}
	}
	return nil
}

func aclLabel(a *nbdb.ACL) string {
	label := ""
	if a.Name != nil {
		label = *a.Name
	}
	if id := a.ExternalIDs[topology.RowIDKey]; id != "" {
		label += " [" + id + "]"
	}
	return strings.TrimSpace(label)
}

func ownerOf(ids map[string]string) string {
	if o, ok := topology.OwnerOf(ids); ok {
		return o.Type + " " + o.Name
	}
	return ""
}

// lbDecision names the balancer (and its Service) of a step that balances
// a VIP, or rejects it for want of backends.
func lbDecision(s Step, lbs []nbdb.LoadBalancer) Decision {
	what := "balances"
	if r := firstWith(s.Actions, "reject"); r != "" {
		what = "has no backend for"
	}
	d := Decision{Kind: "balancer", Text: fmt.Sprintf("%s %s it", s.Datapath, what)}
	m := vipMatch.FindStringSubmatch(s.Match)
	if m == nil {
		return d
	}
	ip, err := netip.ParseAddr(m[1])
	if err != nil {
		return d
	}
	port, _ := strconv.Atoi(m[3])
	vip := netip.AddrPortFrom(ip, uint16(port)).String()
	var names []string
	for _, lb := range lbs {
		if _, ok := lb.Vips[vip]; ok {
			names = append(names, lb.Name)
			if d.Object == "" {
				d.Object = ownerOf(lb.ExternalIDs)
			}
		}
	}
	sort.Strings(names)
	d.Text = fmt.Sprintf("%s %s %s", s.Datapath, what, vip)
	if len(names) > 0 {
		d.Text += " (" + strings.Join(names, ", ") + ")"
	}
	return d
}

func nextHop(actions []string) string {
	var parts []string
	for _, a := range actions {
		if strings.HasPrefix(a, "outport = ") || strings.HasPrefix(a, "reg0 = ") || strings.HasPrefix(a, "xxreg0 = ") {
			parts = append(parts, strings.TrimSuffix(a, ";"))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, ", ")
}

func firstWith(actions []string, prefix string) string {
	for _, a := range actions {
		if strings.HasPrefix(a, prefix) {
			return strings.TrimSuffix(a, ";")
		}
	}
	return ""
}
