package node

import (
	"context"
	"fmt"
	"time"

	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
)

// BridgeName is the OVS bridge nics-to-bridge makes for a NIC.
func BridgeName(nic string) string { return "br" + nic }

// NICToBridge moves a NIC under an OVS bridge br<NIC>: the bridge takes the
// NIC's MAC, addresses and routes, so the host keeps its connectivity and
// the gateway's localnet port shares the wire. Running it again changes nothing.
func NICToBridge(ctx context.Context, nic, datapathType string, sw *ovs.Client, log logr.Logger) (string, error) {
	bridge := BridgeName(nic)
	link, err := netlink.LinkByName(nic)
	if err != nil {
		return "", fmt.Errorf("interface %s: %w", nic, err)
	}
	mac := link.Attrs().HardwareAddr.String()
	if err := sw.EnsureBridge(ctx, ovs.Bridge{Name: bridge, DatapathType: datapathType,
		OtherConfig: map[string]string{"hwaddr": mac, "disable-in-band": "true"}}); err != nil {
		return "", fmt.Errorf("creating bridge %s: %w", bridge, err)
	}
	if err := sw.EnsurePort(ctx, bridge, ovs.Port{Name: nic}); err != nil {
		return "", fmt.Errorf("adding %s to %s: %w", nic, bridge, err)
	}
	br, err := waitForLink(ctx, bridge, 10*time.Second)
	if err != nil {
		return "", err
	}
	if br.Attrs().HardwareAddr.String() != mac {
		if err := netlink.LinkSetHardwareAddr(br, link.Attrs().HardwareAddr); err != nil {
			return "", fmt.Errorf("giving %s the MAC of %s: %w", bridge, nic, err)
		}
	}
	if err := netlink.LinkSetUp(br); err != nil {
		return "", err
	}
	// Routes first (they go when their addresses go), then the addresses.
	routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
	if err != nil {
		return "", err
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		return "", err
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() {
			continue
		}
		moved := &netlink.Addr{IPNet: a.IPNet}
		if err := netlink.AddrReplace(br, moved); err != nil {
			return "", fmt.Errorf("adding %s to %s: %w", a.IPNet, bridge, err)
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return "", fmt.Errorf("removing %s from %s: %w", a.IPNet, nic, err)
		}
		log.V(2).Info("moved address", "address", a.IPNet.String(), "from", nic, "to", bridge)
	}
	for _, r := range routes {
		if r.Protocol == netlink.RouteProtocol(2) /* kernel */ || r.Dst != nil && r.Dst.IP.IsLinkLocalUnicast() {
			continue // connected routes come back with the addresses
		}
		r.LinkIndex = br.Attrs().Index
		if err := netlink.RouteReplace(&r); err != nil {
			return "", fmt.Errorf("moving route %s to %s: %w", r.String(), bridge, err)
		}
	}
	return bridge, nil
}
