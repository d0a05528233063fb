package trace

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
)

// OVS reaches the Open vSwitch of the host the trace runs on.
type OVS struct {
	Vsctl  []string // ovs-vsctl with its options (["ovs-vsctl", "--timeout=5"])
	Appctl []string // ovs-appctl with its options (["ovs-appctl", "--timeout=10"])
	Bridge string   // the integration bridge, br-int
}

// OFProtoTrace is the packet through the source node's OpenFlow tables
// (ovs-appctl ofproto/trace), when that node's OVS is this host's.
type OFProtoTrace struct {
	Bridge string `json:"bridge"`
	Flow   string `json:"flow"`
	// DatapathActions are the last actions OVS would take (after every
	// conntrack recirculation): an output to a port, a tunnel, or drop.
	DatapathActions string `json:"datapathActions"`
	Verdict         string `json:"verdict"` // delivered (an output or a tunnel), dropped, or Unfollowed
	Tunnel          string `json:"tunnel,omitempty"`
	Raw             string `json:"raw,omitempty"`
}

var (
	datapathActions = regexp.MustCompile(`(?m)^Datapath actions: (.*)$`)
	// The tunnel's remote end: set(tunnel(...,dst=IP,...)) in the kernel
	// datapath, tnl_push(...,header(...,ipv4(src=IP,dst=IP,...))) in the
	// userspace one.
	tunnelDst    = regexp.MustCompile(`(?:set\(tunnel\([^)]*\bdst=|tnl_push\(.*?\bipv[46]\(src=[^,]+,dst=)([0-9a-fA-F.:]+)`)
	outputAction = regexp.MustCompile(`(^|,)\d+($|,)`) // a datapath port number
	// A recirculation ofproto/trace does not follow (--ct-next follows
	// conntrack's): a select group's dp_hash, a load balancer choosing a
	// backend.
	hashRecirc = regexp.MustCompile(`hash\([^)]*\)\),recirc\(0x[0-9a-f]+\)$`)
)

// Unfollowed is an ofproto/trace verdict: the packet recirculates after a
// hash (a load balancer's select group), which ofproto/trace does not
// follow; ovn-trace's verdict (--backend) stands alone.
const Unfollowed = "not followed past a select group's hash"

// ofprotoTrace runs ofproto/trace for the packet on the bridge of this
// host's OVS, in at the OVS interface of the packet's logical port. Nil,
// with the reason, when that port is not on this host or OVS cannot be
// asked (ovn-trace's answer stands alone then); nil and no reason when ovs
// is not set.
func ofprotoTrace(ctx context.Context, ovs OVS, p Packet) (*OFProtoTrace, string) {
	if len(ovs.Vsctl) == 0 || len(ovs.Appctl) == 0 {
		return nil, ""
	}
	out, err := run(ctx, append(ovs.Vsctl, "--bare", "--columns=ofport", "find", "Interface", "external_ids:iface-id="+p.InPort))
	if err != nil {
		return nil, "this host's OVS cannot be read (" + firstLine(err.Error()) + ")"
	}
	ofport := strings.TrimSpace(out)
	if ofport == "" || ofport == "-1" || strings.Contains(ofport, "\n") {
		return nil, "the port " + p.InPort + " is not on this host's OVS: run the trace on the pod's node"
	}
	flow := p.OpenFlow(ofport)
	args := append([]string{}, ovs.Appctl...)
	args = append(args, "ofproto/trace")
	for i := 0; i < 8; i++ {
		args = append(args, "--ct-next", ctState(p, "trk,new", "trk,est,rpl"))
	}
	out, err = run(ctx, append(args, ovs.Bridge, flow))
	if err != nil {
		return nil, "ofproto/trace failed: " + err.Error()
	}
	t, err := parseOFProto(out)
	if err != nil {
		return nil, err.Error()
	}
	t.Bridge, t.Flow = ovs.Bridge, flow
	return t, ""
}

// parseOFProto reads ofproto/trace's output: its last datapath actions
// (after every recirculation) and what they do with the packet.
func parseOFProto(out string) (*OFProtoTrace, error) {
	all := datapathActions.FindAllStringSubmatch(out, -1)
	if len(all) == 0 {
		return nil, fmt.Errorf("ofproto/trace printed no datapath actions:\n%s", out)
	}
	t := &OFProtoTrace{Raw: out, Verdict: Dropped, DatapathActions: strings.TrimSpace(all[len(all)-1][1])}
	if m := tunnelDst.FindStringSubmatch(t.DatapathActions); m != nil {
		t.Tunnel = m[1]
	}
	switch {
	case t.Tunnel != "" || outputAction.MatchString(t.DatapathActions):
		t.Verdict = Delivered
	case hashRecirc.MatchString(t.DatapathActions):
		t.Verdict = Unfollowed
	}
	return t, nil
}

// OpenFlow is the packet as ofproto/trace takes it, in at the OpenFlow
// port ofport.
func (p Packet) OpenFlow(ofport string) string {
	v6 := p.Dst.Is6()
	var f string
	switch {
	case p.Proto == "tcp" || p.Proto == "udp":
		proto := p.Proto
		if v6 {
			proto += "6"
		}
		src, dst := p.ports()
		f = fmt.Sprintf("%s,tp_src=%d,tp_dst=%d", proto, src, dst)
	case v6:
		f = fmt.Sprintf("icmp6,icmpv6_type=%d,icmpv6_code=0", p.icmpType())
	default:
		f = fmt.Sprintf("icmp,icmp_type=%d,icmp_code=0", p.icmpType())
	}
	src, dst := "nw_src", "nw_dst"
	if v6 {
		src, dst = "ipv6_src", "ipv6_dst"
	}
	return fmt.Sprintf("in_port=%s,%s,dl_src=%s,dl_dst=%s,%s=%s,%s=%s,nw_ttl=64", ofport, f, p.SrcMAC, p.DstMAC, src, p.Src, dst, p.Dst)
}

func run(ctx context.Context, args []string) (string, error) {
	out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// ctState is the conntrack state the packet meets in every zone: a new
// connection's first packet, or a reply on an established one.
func ctState(p Packet, first, reply string) string {
	if p.Reply {
		return reply
	}
	return first
}
