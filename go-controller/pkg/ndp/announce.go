package ndp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// Announcer sends unsolicited neighbour advertisements on one interface,
// from its IPv6 link-local address, through an AF_PACKET socket of the
// network namespace it was opened in (CAP_NET_RAW). It receives nothing.
type Announcer struct {
	iface string
	index int
	mac   net.HardwareAddr
	src   netip.Addr
	fd    int
}

// OpenAnnouncer opens an Announcer on the interface iface advertising mac:
// the interface must exist and have an IPv6 link-local address, its source.
func OpenAnnouncer(iface string, mac net.HardwareAddr) (*Announcer, error) {
	if len(mac) != 6 {
		return nil, fmt.Errorf("announcing on %s: MAC %q is not an Ethernet address (6 bytes)", iface, mac)
	}
	link, err := netlink.LinkByName(iface)
	if err != nil {
		return nil, fmt.Errorf("announcing on %s: no such interface: %w", iface, err)
	}
	src, err := linkLocal(link)
	if err != nil {
		return nil, err
	}
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, 0) // protocol 0: receives nothing
	if err != nil {
		return nil, fmt.Errorf("announcing on %s: opening a packet socket (needs CAP_NET_RAW): %w", iface, err)
	}
	return &Announcer{iface: iface, index: link.Attrs().Index, mac: mac, src: src, fd: fd}, nil
}

// linkLocal is link's IPv6 link-local address, one whose duplicate address
// detection has not failed, a settled one before a tentative one.
func linkLocal(link netlink.Link) (netip.Addr, error) {
	name := link.Attrs().Name
	addrs, err := netlink.AddrList(link, netlink.FAMILY_V6)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("announcing on %s: listing its IPv6 addresses: %w", name, err)
	}
	var tentative netip.Addr
	for _, a := range addrs {
		ip, ok := netip.AddrFromSlice(a.IP)
		if !ok || !ip.Is6() || !ip.IsLinkLocalUnicast() || a.Flags&unix.IFA_F_DADFAILED != 0 {
			continue
		}
		if a.Flags&unix.IFA_F_TENTATIVE == 0 {
			return ip, nil
		}
		if !tentative.IsValid() {
			tentative = ip
		}
	}
	if tentative.IsValid() {
		return tentative, nil
	}
	return netip.Addr{}, fmt.Errorf("announcing on %s: it has no IPv6 link-local address to send from (is IPv6 disabled on it, or addr_gen_mode none?)", name)
}

// Source is the address the advertisements are sent from.
func (a *Announcer) Source() netip.Addr { return a.src }

// Announce sends one unsolicited neighbour advertisement that target is at
// the Announcer's MAC.
func (a *Announcer) Announce(target netip.Addr) error {
	frame, err := UnsolicitedNA(a.mac, a.src, target)
	if err != nil {
		return fmt.Errorf("announcing on %s: %w", a.iface, err)
	}
	to := &unix.SockaddrLinklayer{Ifindex: a.index, Protocol: htons(unix.ETH_P_IPV6), Halen: 6}
	copy(to.Addr[:], AllNodesMAC)
	if err := unix.Sendto(a.fd, frame, 0, to); err != nil {
		return fmt.Errorf("announcing %s on %s: %w", target, a.iface, err)
	}
	return nil
}

// Close closes the socket.
func (a *Announcer) Close() error { return unix.Close(a.fd) }

// htons is v in network byte order, as sockaddr_ll's protocol wants it.
func htons(v uint16) uint16 {
	var b [2]byte
	binary.BigEndian.PutUint16(b[:], v)
	return binary.NativeEndian.Uint16(b[:])
}
