package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
)

// BridgeName is the OVS bridge nics-to-bridge makes for a NIC.
func BridgeName(nic string) string { return "br" + nic }

// NICMove is a nics-to-bridge request.
type NICMove struct {
	NIC          string
	DatapathType string
	// FailAfter, when set, is called after each step with the step's name;
	// an error aborts the move, which is then rolled back. Tests inject
	// failures through it.
	FailAfter func(step string) error
}

// The steps of a move, in order.
const (
	StepBridge           = "bridge-created"
	StepAddressesCopied  = "addresses-copied"
	StepNICAttached      = "nic-attached"
	StepRoutesMoved      = "routes-moved"
	StepAddressesRemoved = "addresses-removed"
)

// NICToBridge moves a NIC under an OVS bridge br<NIC>: the bridge takes the
// NIC's MAC, addresses (with their flags and lifetimes) and routes, so the
// host keeps its connectivity and the gateway's localnet port shares the
// wire. A NIC that is a port of another bridge, or enslaved to another
// device, is refused. Any failure rolls every step back. Running it again
// changes nothing.
func NICToBridge(ctx context.Context, nic, datapathType string, sw *ovs.Client, log logr.Logger) (string, error) {
	return MoveNICToBridge(ctx, NICMove{NIC: nic, DatapathType: datapathType}, sw, log)
}

// MoveNICToBridge is NICToBridge with the request spelled out.
func MoveNICToBridge(ctx context.Context, m NICMove, sw *ovs.Client, log logr.Logger) (bridge string, err error) {
	bridge = BridgeName(m.NIC)
	link, err := netlink.LinkByName(m.NIC)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", m.NIC, err)
	}
	owner, err := checkNICFree(ctx, link, bridge, sw)
	if err != nil {
		return "", err
	}
	mv := &nicMover{ctx: ctx, m: m, sw: sw, log: log, nic: link, bridge: bridge, attached: owner == bridge}
	defer func() {
		if err != nil {
			if rbErr := mv.rollback(); rbErr != nil {
				err = fmt.Errorf("%w; rolling back also failed: %v (check %s and %s by hand)", err, rbErr, m.NIC, bridge)
			} else {
				err = fmt.Errorf("%w (rolled back: %s is as it was)", err, m.NIC)
			}
		}
	}()
	return bridge, mv.run()
}

// checkNICFree refuses a NIC that belongs to something else: a port of
// another OVS bridge, or a device enslaved to a Linux bridge or bond. It
// returns the OVS bridge holding it ("" or our own).
func checkNICFree(ctx context.Context, link netlink.Link, bridge string, sw *ovs.Client) (string, error) {
	nic := link.Attrs().Name
	owner, err := sw.PortBridge(ctx, nic)
	if err != nil {
		return "", err
	}
	if owner != "" && owner != bridge {
		return "", fmt.Errorf("%s is a port of OVS bridge %s; remove it there first (nics-to-bridge moves it only to %s)", nic, owner, bridge)
	}
	if idx := link.Attrs().MasterIndex; idx != 0 {
		master, err := netlink.LinkByIndex(idx)
		if err == nil && master.Attrs().Name != "ovs-system" {
			return "", fmt.Errorf("%s is enslaved to %s; release it first", nic, master.Attrs().Name)
		}
	}
	return owner, nil
}

// nicMover carries out one move and remembers how to undo each step.
type nicMover struct {
	ctx      context.Context
	m        NICMove
	sw       *ovs.Client
	log      logr.Logger
	nic      netlink.Link
	bridge   string
	attached bool // the NIC was on our bridge already (a re-run)
	undo     []func() error
}

func (mv *nicMover) step(name string) error {
	if mv.m.FailAfter != nil {
		if err := mv.m.FailAfter(name); err != nil {
			return fmt.Errorf("after step %s: %w", name, err)
		}
	}
	return nil
}

func (mv *nicMover) run() error {
	br, err := mv.createBridge()
	if err != nil {
		return err
	}
	if err := mv.step(StepBridge); err != nil {
		return err
	}
	addrs, err := movableAddrs(mv.nic)
	if err != nil {
		return err
	}
	routes, err := netlink.RouteList(mv.nic, netlink.FAMILY_ALL)
	if err != nil {
		return err
	}
	// The bridge gets the addresses before the NIC is attached, so the host
	// has them on one side or the other at every moment.
	for _, a := range addrs {
		if err := mv.addAddr(br, a); err != nil {
			return fmt.Errorf("adding %s to %s: %w", a.IPNet, mv.bridge, err)
		}
	}
	if err := mv.step(StepAddressesCopied); err != nil {
		return err
	}
	if err := mv.attachNIC(); err != nil {
		return err
	}
	if err := mv.isolateNIC(); err != nil {
		return err
	}
	if err := mv.step(StepNICAttached); err != nil {
		return err
	}
	if err := mv.waitConnected(br, addrs); err != nil {
		return err
	}
	if err := mv.moveRoutes(br, routes); err != nil {
		return err
	}
	if err := mv.step(StepRoutesMoved); err != nil {
		return err
	}
	// Newest first: removing a primary address takes its secondaries with it.
	for i := len(addrs) - 1; i >= 0; i-- {
		if err := mv.removeAddr(addrs[i]); err != nil {
			return fmt.Errorf("removing %s from %s: %w", addrs[i].IPNet, mv.m.NIC, err)
		}
	}
	if err := mv.quietNICv6(); err != nil {
		return err
	}
	return mv.step(StepAddressesRemoved)
}

// quietNICv6 turns IPv6 off on the NIC under a userspace bridge once its
// addresses are on the bridge (see isolateNIC): IPv6 has no reverse-path
// filter, so the host's stack would take the frames for the bridge's IPv6
// addresses off the NIC too and reset the gateway router's connections.
func (mv *nicMover) quietNICv6() error {
	if mv.m.DatapathType != "netdev" {
		return nil
	}
	path := "/proc/sys/net/ipv6/conf/" + mv.m.NIC + "/disable_ipv6"
	old, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil // a kernel without IPv6
	}
	if err != nil {
		return fmt.Errorf("reading %s: %w", path, err)
	}
	if strings.TrimSpace(string(old)) == "1" {
		return nil
	}
	if err := os.WriteFile(path, []byte("1"), 0o644); err != nil {
		return fmt.Errorf("setting %s: %w", path, err)
	}
	mv.undo = append(mv.undo, func() error { return os.WriteFile(path, old, 0o644) })
	return nil
}

func (mv *nicMover) createBridge() (netlink.Link, error) {
	existed := mv.sw.Get(mv.ctx, &vswitchd.Bridge{Name: mv.bridge}) == nil
	mac := mv.nic.Attrs().HardwareAddr
	if err := mv.sw.EnsureBridge(mv.ctx, ovs.Bridge{Name: mv.bridge, DatapathType: mv.m.DatapathType,
		OtherConfig: map[string]string{"hwaddr": mac.String(), "disable-in-band": "true"}}); err != nil {
		return nil, fmt.Errorf("creating bridge %s: %w", mv.bridge, err)
	}
	if !existed {
		mv.undo = append(mv.undo, func() error {
			if err := mv.sw.DeleteBridge(context.Background(), mv.bridge); err != nil {
				return err
			}
			return waitForNoLink(mv.bridge, 10*time.Second) // vswitchd removes it a moment later
		})
	}
	br, err := waitForLink(mv.ctx, mv.bridge, 10*time.Second)
	if err != nil {
		return nil, err
	}
	if br.Attrs().HardwareAddr.String() != mac.String() {
		if err := netlink.LinkSetHardwareAddr(br, mac); err != nil {
			return nil, fmt.Errorf("giving %s the MAC of %s: %w", mv.bridge, mv.m.NIC, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return nil, err
	}
	return br, nil
}

func (mv *nicMover) addAddr(br netlink.Link, a netlink.Addr) error {
	copied := a
	copied.LinkIndex = br.Attrs().Index
	copied.Label = "" // labels are prefixed with the NIC's name
	if err := netlink.AddrReplace(br, &copied); err != nil {
		return err
	}
	mv.undo = append(mv.undo, func() error { return ignoreMissing(netlink.AddrDel(br, &copied)) })
	mv.log.V(2).Info("address copied", "address", a.IPNet.String(), "to", mv.bridge)
	return nil
}

func (mv *nicMover) attachNIC() error {
	if mv.attached {
		return nil
	}
	if err := mv.sw.EnsurePort(mv.ctx, mv.bridge, ovs.Port{Name: mv.m.NIC}); err != nil {
		return fmt.Errorf("adding %s to %s: %w", mv.m.NIC, mv.bridge, err)
	}
	mv.undo = append(mv.undo, func() error { return mv.sw.DeletePort(context.Background(), mv.m.NIC) })
	return nil
}

// isolateNIC keeps the host's own IP stack off the NIC under a userspace
// bridge. The kernel datapath takes a port's frames away from the stack;
// the userspace one reads them through a packet socket, which leaves the
// kernel seeing them too, and it would answer ARP for the bridge's
// addresses and reset the connections meant for the gateway router (the
// frames carry the shared MAC, which is the NIC's). ARP on the NIC is
// ignored and IPv4 from it fails the strict reverse-path check (its
// sources are routed through the bridge).
func (mv *nicMover) isolateNIC() error {
	if mv.m.DatapathType != "netdev" {
		return nil
	}
	for key, value := range map[string]string{"arp_ignore": "8", "rp_filter": "1"} {
		path := "/proc/sys/net/ipv4/conf/" + mv.m.NIC + "/" + key
		old, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("reading %s: %w", path, err)
		}
		if strings.TrimSpace(string(old)) == value {
			continue
		}
		if err := os.WriteFile(path, []byte(value), 0o644); err != nil {
			return fmt.Errorf("setting %s: %w", path, err)
		}
		mv.undo = append(mv.undo, func() error { return os.WriteFile(path, old, 0o644) })
	}
	return nil
}

// waitConnected waits until the bridge is up with a connected route for
// every copied address, which routes through a gateway on it need. The
// userspace datapath may still be cycling the bridge's tap device when the
// NIC is attached (seen with OVS 3.5), which takes its routes away: the
// bridge is set up again while it waits.
func (mv *nicMover) waitConnected(br netlink.Link, addrs []netlink.Addr) error {
	var missing string
	err := wait.PollUntilContextTimeout(mv.ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		link, err := netlink.LinkByIndex(br.Attrs().Index)
		if err != nil {
			return false, err
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			missing = mv.bridge + " is down"
			return false, netlink.LinkSetUp(link)
		}
		connected, err := netlink.RouteListFiltered(netlink.FAMILY_ALL, &netlink.Route{LinkIndex: link.Attrs().Index}, netlink.RT_FILTER_OIF)
		if err != nil {
			return false, err
		}
		for _, a := range addrs {
			if !slices.ContainsFunc(connected, func(r netlink.Route) bool {
				return r.Protocol == unix.RTPROT_KERNEL && r.Dst != nil && r.Dst.Contains(a.IP)
			}) {
				missing = "no connected route for " + a.IPNet.String()
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("%s not ready for routes (%s): %w", mv.bridge, missing, err)
	}
	return nil
}

func (mv *nicMover) moveRoutes(br netlink.Link, routes []netlink.Route) error {
	for _, r := range routes {
		if r.Protocol == unix.RTPROT_KERNEL || r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() {
			continue // connected routes come and go with their addresses
		}
		orig, moved := r, r
		moved.LinkIndex = br.Attrs().Index
		if err := netlink.RouteReplace(&moved); err != nil {
			return fmt.Errorf("moving route %s to %s: %w", r.String(), mv.bridge, err)
		}
		mv.undo = append(mv.undo, func() error {
			_ = netlink.RouteDel(&moved)
			return netlink.RouteReplace(&orig)
		})
	}
	return nil
}

func (mv *nicMover) removeAddr(a netlink.Addr) error {
	if err := netlink.AddrDel(mv.nic, &a); err != nil {
		return err
	}
	mv.undo = append(mv.undo, func() error { return netlink.AddrReplace(mv.nic, &a) })
	mv.log.V(2).Info("address moved", "address", a.IPNet.String(), "from", mv.m.NIC, "to", mv.bridge)
	return nil
}

// rollback undoes the steps taken, newest first, and reports the first failure.
func (mv *nicMover) rollback() error {
	var first error
	for i := len(mv.undo) - 1; i >= 0; i-- {
		if err := mv.undo[i](); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// movableAddrs are the NIC's addresses other than link-local ones, with the
// flags a new address may carry (lifetimes are kept as they are).
func movableAddrs(link netlink.Link) ([]netlink.Addr, error) {
	all, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return nil, err
	}
	var out []netlink.Addr
	for _, a := range all {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		// State the kernel keeps for itself is not for a new address.
		a.Flags &^= unix.IFA_F_PERMANENT | unix.IFA_F_TENTATIVE | unix.IFA_F_DADFAILED | unix.IFA_F_DEPRECATED | unix.IFA_F_OPTIMISTIC
		out = append(out, a)
	}
	return out, nil
}

func ignoreMissing(err error) error {
	if errors.Is(err, unix.EADDRNOTAVAIL) || errors.Is(err, unix.ESRCH) || errors.Is(err, unix.ENODEV) {
		return nil
	}
	return err
}
