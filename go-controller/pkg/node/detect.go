package node

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
)

// BridgeAddresses reads what the gateway flags would otherwise say from the
// bridge itself, as the host uses it: its one global IPv4 address (the
// node's --physical-ip) and the next hop of the main table's default route
// through it (--default-gw; invalid when there is none). It runs in the
// network namespace it asks about.
func BridgeAddresses(bridge string) (netip.Prefix, netip.Addr, error) {
	link, err := netlink.LinkByName(bridge)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("bridge %s: %w (run nics-to-bridge first, or give --physical-ip)", bridge, err)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V4)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("bridge %s: listing addresses: %w", bridge, err)
	}
	var found []netip.Prefix
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP.To4())
		if !ok || !ip.IsGlobalUnicast() {
			continue
		}
		ones, _ := a.Mask.Size()
		found = append(found, netip.PrefixFrom(ip, ones))
	}
	if len(found) != 1 {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("bridge %s has %d global IPv4 addresses %v, not one: give --physical-ip", bridge, len(found), found)
	}
	routes, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{LinkIndex: link.Attrs().Index, Table: 0},
		netlink.RT_FILTER_OIF)
	if err != nil {
		return netip.Prefix{}, netip.Addr{}, fmt.Errorf("bridge %s: listing routes: %w", bridge, err)
	}
	var gw netip.Addr
	for _, r := range routes {
		if r.Dst != nil {
			if ones, _ := r.Dst.Mask.Size(); ones != 0 {
				continue
			}
		}
		if via, ok := netip.AddrFromSlice(r.Gw.To4()); ok && r.Gw != nil {
			gw = via
			break
		}
	}
	return found[0], gw, nil
}
