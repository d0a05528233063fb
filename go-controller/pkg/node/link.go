package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// configureManagementLink gives ovn-k8s-mp0 (created by ovs-vswitchd) its
// MAC, MTU, the .2 address of each host subnet (one per family; IPv6 without
// duplicate address detection) and routes to the cluster and service
// ranges via that family's .1.
// ovs-vswitchd applies the port's MAC itself, and with the userspace datapath
// it brings the tap down and up to do so: the kernel then drops the link's
// routes (and IPv6 addresses), and a route added meanwhile fails with
// ENETUNREACH (IPv6: EHOSTUNREACH). So the MAC is left to vswitchd for a
// while, and a pass that fails as a settling link makes it fail is run
// again, whole (every step is a replace, so a second run changes nothing),
// until it holds or linkSettle has passed.
func configureManagementLink(ctx context.Context, subnets []netip.Prefix, mac net.HardwareAddr, mtu int, routed []netip.Prefix) error {
	if _, err := waitForLink(ctx, ManagementPortName, 10*time.Second); err != nil {
		return err
	}
	waitForMAC(ctx, mac, linkSettle/2)
	return whileSettling(ctx, linkSettle, func() error { return configureLinkOnce(subnets, mac, mtu, routed) })
}

// whileSettling runs pass again while it fails as a settling link makes it
// fail, for up to timeout; it returns pass's last error.
func whileSettling(ctx context.Context, timeout time.Duration, pass func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := pass()
		if err == nil || !settling(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w (while %s settled: %w)", ctx.Err(), ManagementPortName, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// linkSettle bounds how long configureManagementLink waits for ovs-vswitchd
// to have set the management link up.
const linkSettle = 10 * time.Second

// settling says whether err is what a link going down and up (or being
// replaced) meanwhile gives.
func settling(err error) bool {
	return errors.Is(err, unix.ENETUNREACH) || errors.Is(err, unix.EHOSTUNREACH) || // IPv4, IPv6
		errors.Is(err, unix.ENODEV) || errors.Is(err, unix.EADDRNOTAVAIL)
}

// waitForMAC waits up to timeout for the link to carry mac (ovs-vswitchd's
// work: a MAC set here first may be set again by vswitchd, taking the link
// down after it was configured). A link gone meanwhile ends the wait.
func waitForMAC(ctx context.Context, mac net.HardwareAddr, timeout time.Duration) {
	_ = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		link, err := netlink.LinkByName(ManagementPortName)
		return err != nil || link.Attrs().HardwareAddr.String() == mac.String(), nil
	})
}

// configureLinkOnce is one pass of configureManagementLink.
func configureLinkOnce(subnets []netip.Prefix, mac net.HardwareAddr, mtu int, routed []netip.Prefix) error {
	link, err := netlink.LinkByName(ManagementPortName)
	if err != nil {
		return fmt.Errorf("%s: %w", ManagementPortName, err)
	}
	if link.Attrs().HardwareAddr.String() != mac.String() {
		if err := netlink.LinkSetHardwareAddr(link, mac); err != nil {
			return fmt.Errorf("setting MAC of %s: %w", ManagementPortName, err)
		}
	}
	if mtu > 0 && link.Attrs().MTU != mtu {
		if err := netlink.LinkSetMTU(link, mtu); err != nil {
			return fmt.Errorf("setting MTU of %s: %w", ManagementPortName, err)
		}
	}
	for _, subnet := range subnets {
		mgmt := topology.ManagementIP(subnet)
		addr := &netlink.Addr{IPNet: &net.IPNet{IP: mgmt.AsSlice(), Mask: net.CIDRMask(subnet.Bits(), subnet.Addr().BitLen())}}
		if mgmt.Is6() {
			addr.Flags = unix.IFA_F_NODAD // the master gave it to this port alone; usable at once
		}
		if err := removeOtherAddrs(link, addr); err != nil {
			return err
		}
		if err := netlink.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("adding %s to %s: %w", addr.IPNet, ManagementPortName, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return fmt.Errorf("bringing %s up: %w", ManagementPortName, err)
	}
	for _, dst := range routed {
		gw, ok := gatewayOfFamily(subnets, dst.Addr().Is6())
		if !ok {
			continue // a family the node has no subnet of
		}
		r := &netlink.Route{
			LinkIndex: link.Attrs().Index,
			Dst:       &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(dst.Bits(), dst.Addr().BitLen())},
			Gw:        gw.AsSlice(),
			MTU:       mtu,
		}
		if err := netlink.RouteReplace(r); err != nil {
			return fmt.Errorf("route %s via %s dev %s: %w", dst, gw, ManagementPortName, err)
		}
	}
	return nil
}

// gatewayOfFamily is the cluster router's address on the node's subnet of a family.
func gatewayOfFamily(subnets []netip.Prefix, v6 bool) (netip.Addr, bool) {
	for _, s := range subnets {
		if s.Addr().Is6() == v6 {
			return topology.GatewayIP(s), true
		}
	}
	return netip.Addr{}, false
}

// removeOtherAddrs drops addresses of the same family left from an earlier
// host subnet, so an annotation change moves the port cleanly.
func removeOtherAddrs(link netlink.Link, keep *netlink.Addr) error {
	family := netlink.FAMILY_V4
	if keep.IP.To4() == nil {
		family = netlink.FAMILY_V6
	}
	addrs, err := netlink.AddrList(link, family)
	if err != nil {
		return err
	}
	for _, a := range addrs {
		if a.IP.IsLinkLocalUnicast() || a.IPNet.String() == keep.IPNet.String() {
			continue
		}
		if err := netlink.AddrDel(link, &a); err != nil {
			return fmt.Errorf("removing old address %s from %s: %w", a.IPNet, link.Attrs().Name, err)
		}
	}
	return nil
}

// waitForNoLink waits until the interface name is gone.
func waitForNoLink(name string, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		if _, err := netlink.LinkByName(name); err != nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("interface %s still there %s after its bridge was removed", name, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func waitForLink(ctx context.Context, name string, timeout time.Duration) (netlink.Link, error) {
	deadline := time.Now().Add(timeout)
	for {
		link, err := netlink.LinkByName(name)
		if err == nil {
			return link, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("interface %s did not appear within %s (is ovs-vswitchd running in this network namespace?): %w", name, timeout, err)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}
