package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"testing"
	"time"

	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// ovs-vswitchd takes the management tap down and up to set its MAC (the
// userspace datapath), dropping the link's routes: a route added meanwhile
// fails with ENETUNREACH (seen once in CI as minion-init's exit). The pass
// that meets the link down is run again and the link ends configured; an
// error of another kind is returned at once.
func TestManagementLinkConfiguredAfterVswitchdTookItDown(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: creates a network namespace")
	}
	netns := harness.NewNetNS(t, "mp")
	subnets := []netip.Prefix{netip.MustParsePrefix("10.244.1.0/24"), netip.MustParsePrefix("fd00:10:244:1::/64")}
	routed := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("10.96.0.0/16"), netip.MustParsePrefix("fd00:10:96::/112")}
	mac, _ := net.ParseMAC("0a:58:0a:f4:01:02")
	err := ns.WithNetNSPath(netns.Path(), func(ns.NetNS) error {
		// A veth stands in for vswitchd's tap (no dummy links on every kernel).
		if err := netlink.LinkAdd(&netlink.Veth{LinkAttrs: netlink.LinkAttrs{Name: ManagementPortName, HardwareAddr: mac}, PeerName: "mp0-peer"}); err != nil {
			return err
		}
		if peer, err := netlink.LinkByName("mp0-peer"); err != nil || netlink.LinkSetUp(peer) != nil {
			return fmt.Errorf("the veth's peer: %v", err)
		}
		if err := configureLinkOnce(subnets, mac, 1400, routed); err != nil {
			return err
		}
		link, err := netlink.LinkByName(ManagementPortName)
		if err != nil {
			return err
		}
		passes := 0
		err = whileSettling(context.Background(), 5*time.Second, func() error {
			passes++
			if passes > 1 {
				return configureLinkOnce(subnets, mac, 1400, routed)
			}
			// vswitchd's reset, between our link up and our routes.
			if err := netlink.LinkSetDown(link); err != nil {
				return err
			}
			err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index,
				Dst: &net.IPNet{IP: net.IPv4(10, 244, 0, 0), Mask: net.CIDRMask(16, 32)}, Gw: net.IPv4(10, 244, 1, 1)})
			if !errors.Is(err, unix.ENETUNREACH) {
				t.Errorf("an IPv4 route over the link taken down: %v, want ENETUNREACH", err)
			}
			err6 := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index,
				Dst: &net.IPNet{IP: net.ParseIP("fd00:10:96::"), Mask: net.CIDRMask(112, 128)}, Gw: net.ParseIP("fd00:10:244:1::1")})
			if !errors.Is(err6, unix.EHOSTUNREACH) || !settling(err6) {
				t.Errorf("an IPv6 route over the link taken down: %v, want EHOSTUNREACH, a settling link's error", err6)
			}
			return err
		})
		if err != nil {
			t.Fatalf("after %d passes: %v", passes, err)
		}
		if passes != 2 {
			t.Errorf("%d passes, want 2", passes)
		}
		checkManagementLink(t, link.Attrs().Index, routed)

		other := errors.New("not a settling link")
		passes = 0
		if err := whileSettling(context.Background(), 5*time.Second, func() error { passes++; return other }); err != other || passes != 1 {
			t.Errorf("another error: %v after %d passes, want it at once", err, passes)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// checkManagementLink fails t unless the link is up with both .2 addresses
// and a route to each routed prefix.
func checkManagementLink(t *testing.T, index int, routed []netip.Prefix) {
	t.Helper()
	link, err := netlink.LinkByIndex(index)
	if err != nil {
		t.Fatal(err)
	}
	if link.Attrs().Flags&net.FlagUp == 0 {
		t.Errorf("%s is down", ManagementPortName)
	}
	addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	have := map[string]bool{}
	for _, a := range addrs {
		have[a.IPNet.String()] = true
	}
	for _, want := range []string{"10.244.1.2/24", "fd00:10:244:1::2/64"} {
		if !have[want] {
			t.Errorf("%s lacks %s (has %v)", ManagementPortName, want, have)
		}
	}
	routes, err := netlink.RouteList(link, netlink.FAMILY_ALL)
	if err != nil {
		t.Fatal(err)
	}
	dsts := map[string]bool{}
	for _, r := range routes {
		if r.Dst != nil {
			dsts[r.Dst.String()] = true
		}
	}
	for _, p := range routed {
		if !dsts[p.String()] {
			t.Errorf("no route to %s over %s (routes to %v)", p, ManagementPortName, dsts)
		}
	}
}
