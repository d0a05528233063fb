package node

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// The gateway bridge's conntrack zone and marks: connections the gateway
// router made (or answered) carry gwMark, the host's hostMark.
const (
	gatewayCTZone = 64000
	gwMark        = 1
	hostMark      = 2
)

// ServiceFlow is a service address that new connections from outside reach
// through the gateway router: a NodePort on the node's addresses (IP
// invalid), or an ExternalIP / LoadBalancer ingress IP with its port.
type ServiceFlow struct {
	Protocol corev1.Protocol
	IP       netip.Addr
	Port     int32
}

// BridgeFlows is what the gateway bridge's flows depend on.
type BridgeFlows struct {
	NICPort   int // OpenFlow port of the physical NIC
	PatchPort int // of the patch port to br-int; 0 until ovn-controller made it
	MAC       net.HardwareAddr
	IPs       []netip.Addr // the node's addresses, shared with the gateway router
	Services  []ServiceFlow
}

// Flows renders the bridge's complete flow table. The host and the gateway
// router share the NIC's MAC and address, so nothing is MAC-learned:
//
//   - tunnels (Geneve, VXLAN) go between the NIC and the host untracked;
//   - new connections to service addresses go to the gateway router;
//   - everything the gateway router or the host sends is committed to
//     conntrack with its mark and leaves through the NIC; the router may
//     only send with the shared MAC;
//   - the rest from the NIC is looked up in conntrack: replies to the
//     gateway router's connections go back to it, all else to the host;
//   - ARP/ND requests for the shared address are answered by the host
//     alone; other ARP/ND (replies the router waits for) reach both.
func (b BridgeFlows) Flows() []string {
	nic, patch, mac := b.NICPort, b.PatchPort, b.MAC.String()
	var f []string
	add := func(format string, a ...any) { f = append(f, fmt.Sprintf(format, a...)) }
	fams := families(b.IPs)
	for _, ip := range b.IPs {
		for _, port := range []int{6081, 4789} {
			add("table=0,priority=500,in_port=%d,%s,%s=%s,tp_dst=%d,actions=LOCAL", nic, udpOf(ip), nwDst(ip), ip, port)
		}
	}
	for _, fam := range fams {
		for _, port := range []int{6081, 4789} {
			add("table=0,priority=500,in_port=LOCAL,%s,tp_dst=%d,actions=output:%d", udpFam(fam), port, nic)
		}
		add("table=0,priority=100,in_port=LOCAL,%s,actions=ct(commit,zone=%d,exec(load:%d->NXM_NX_CT_MARK[])),output:%d", fam, gatewayCTZone, hostMark, nic)
	}
	add("table=0,priority=10,in_port=LOCAL,actions=output:%d", nic)
	for _, ip := range b.IPs {
		if ip.Is4() {
			add("table=0,priority=20,in_port=%d,arp,arp_op=1,arp_tpa=%s,actions=LOCAL", nic, ip)
		} else {
			add("table=0,priority=70,in_port=%d,icmp6,icmp_type=135,nd_target=%s,actions=LOCAL", nic, ip)
		}
	}
	if patch == 0 {
		add("table=0,priority=10,in_port=%d,arp,actions=LOCAL", nic)
	} else {
		add("table=0,priority=10,in_port=%d,arp,actions=LOCAL,output:%d", nic, patch)
		for _, fam := range fams {
			if fam == "ipv6" {
				for _, typ := range []int{135, 136} {
					add("table=0,priority=60,in_port=%d,icmp6,icmp_type=%d,actions=LOCAL,output:%d", nic, typ, patch)
				}
			}
			add("table=0,priority=100,in_port=%d,dl_src=%s,%s,actions=ct(commit,zone=%d,exec(load:%d->NXM_NX_CT_MARK[])),output:%d", patch, mac, fam, gatewayCTZone, gwMark, nic)
			add("table=1,priority=100,ct_state=+est+trk,ct_mark=%d,%s,actions=output:%d", gwMark, fam, patch)
			add("table=1,priority=100,ct_state=+rel+trk,ct_mark=%d,%s,actions=output:%d", gwMark, fam, patch)
		}
		add("table=0,priority=10,in_port=%d,dl_src=%s,actions=output:%d", patch, mac, nic)
		add("table=0,priority=9,in_port=%d,actions=drop", patch)
		for _, s := range b.Services {
			ips := b.IPs
			if s.IP.IsValid() {
				ips = []netip.Addr{s.IP}
			}
			for _, ip := range ips {
				add("table=0,priority=110,in_port=%d,%s,%s=%s,tp_dst=%d,actions=output:%d", nic, protoOf(s.Protocol, ip), nwDst(ip), ip, s.Port, patch)
			}
		}
	}
	for _, fam := range fams {
		add("table=0,priority=50,in_port=%d,%s,actions=ct(zone=%d,table=1)", nic, fam, gatewayCTZone)
	}
	add("table=0,priority=0,in_port=%d,actions=LOCAL", nic)
	add("table=1,priority=0,actions=LOCAL")
	sort.Strings(f)
	return dedupe(f)
}

func families(ips []netip.Addr) []string {
	var v4, v6 bool
	for _, ip := range ips {
		v4, v6 = v4 || ip.Is4(), v6 || ip.Is6()
	}
	var out []string
	if v4 {
		out = append(out, "ip")
	}
	if v6 {
		out = append(out, "ipv6")
	}
	return out
}

func nwDst(ip netip.Addr) string {
	if ip.Is4() {
		return "nw_dst"
	}
	return "ipv6_dst"
}

func udpOf(ip netip.Addr) string { return protoOf(corev1.ProtocolUDP, ip) }

func udpFam(fam string) string {
	if fam == "ip" {
		return "udp"
	}
	return "udp6"
}

func protoOf(p corev1.Protocol, ip netip.Addr) string {
	s := strings.ToLower(string(p))
	if s == "" {
		s = "tcp"
	}
	if ip.Is6() {
		s += "6"
	}
	return s
}

func dedupe(sorted []string) []string {
	out := sorted[:0]
	for i, s := range sorted {
		if i == 0 || s != sorted[i-1] {
			out = append(out, s)
		}
	}
	return out
}

// FlowTable replaces the flows of one bridge with ovs-ofctl.
type FlowTable struct {
	Bridge string
	// Target is what ovs-ofctl connects to: the bridge's management socket.
	Target string
}

// NewFlowTable finds the bridge's management socket next to the OVS
// database socket (OVS keeps both in its run directory).
func NewFlowTable(bridge, ovsAddress string) FlowTable {
	target := bridge
	if path, ok := strings.CutPrefix(ovsAddress, "unix:"); ok {
		target = "unix:" + filepath.Join(filepath.Dir(path), bridge+".mgmt")
	}
	return FlowTable{Bridge: bridge, Target: target}
}

// Drift reports how the bridge's flows differ from want ("" when they are
// exactly want).
func (ft FlowTable) Drift(ctx context.Context, want []string) (string, error) {
	return ft.withFile(want, func(file string) (string, error) {
		return ofctl(ctx, "diff-flows", ft.Target, file)
	})
}

// Replace makes want the bridge's whole flow table in one atomic bundle.
func (ft FlowTable) Replace(ctx context.Context, want []string) error {
	_, err := ft.withFile(want, func(file string) (string, error) {
		return ofctl(ctx, "--bundle", "replace-flows", ft.Target, file)
	})
	if err != nil {
		return fmt.Errorf("replacing the flows of %s: %w", ft.Bridge, err)
	}
	return nil
}

func (ft FlowTable) withFile(flows []string, do func(string) (string, error)) (string, error) {
	f, err := os.CreateTemp("", "ovnkube-flows-*")
	if err != nil {
		return "", err
	}
	defer os.Remove(f.Name())
	_, err = f.WriteString(strings.Join(flows, "\n") + "\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", err
	}
	return do(f.Name())
}

func ofctl(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "ovs-ofctl", append([]string{"-O", "OpenFlow14"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("ovs-ofctl %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return strings.TrimSpace(string(out)), nil
}
