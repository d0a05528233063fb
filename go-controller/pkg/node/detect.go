package node

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// BridgeAddresses reads what the gateway flags would otherwise say from the
// bridge itself, as the host uses it: its global address of each family
// (the node's --physical-ip: IPv4 first; one per family) and the next hops
// of the main table's default routes through it (--default-gw; none for a
// family without one). It runs in the network namespace it asks about.
func BridgeAddresses(bridge string) ([]netip.Prefix, []netip.Addr, error) {
	link, err := netlink.LinkByName(bridge)
	if err != nil {
		return nil, nil, fmt.Errorf("bridge %s: %w (run nics-to-bridge first, or give --physical-ip)", bridge, err)
	}
	var ips []netip.Prefix
	var gws []netip.Addr
	for _, fam := range []int{netlink.FAMILY_V4, netlink.FAMILY_V6} {
		addrs, err := netlink.AddrList(link, fam)
		if err != nil {
			return nil, nil, fmt.Errorf("bridge %s: listing addresses: %w", bridge, err)
		}
		var found []netip.Prefix
		for _, a := range addrs {
			ip, ok := netip.AddrFromSlice(a.IP)
			// Temporary (privacy) and deprecated IPv6 addresses are not the node's.
			if !ok || !ip.Unmap().IsGlobalUnicast() || a.Flags&(unix.IFA_F_TEMPORARY|unix.IFA_F_DEPRECATED) != 0 {
				continue
			}
			ones, _ := a.Mask.Size()
			found = append(found, netip.PrefixFrom(ip.Unmap(), ones))
		}
		if len(found) > 1 {
			return nil, nil, fmt.Errorf("bridge %s has %d global addresses of one family %v, not one: give --physical-ip", bridge, len(found), found)
		}
		if len(found) == 0 {
			continue
		}
		ips = append(ips, found[0])
		routes, err := netlink.RouteListFiltered(fam, &netlink.Route{LinkIndex: link.Attrs().Index, Table: 0}, netlink.RT_FILTER_OIF)
		if err != nil {
			return nil, nil, fmt.Errorf("bridge %s: listing routes: %w", bridge, err)
		}
		for _, r := range routes {
			if r.Dst != nil {
				if ones, _ := r.Dst.Mask.Size(); ones != 0 {
					continue
				}
			}
			if via, ok := netip.AddrFromSlice(r.Gw); ok && r.Gw != nil {
				gws = append(gws, via.Unmap())
				break
			}
		}
	}
	if len(ips) == 0 {
		return nil, nil, fmt.Errorf("bridge %s has no global address: give --physical-ip", bridge)
	}
	return ips, gws, nil
}
