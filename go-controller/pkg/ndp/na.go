// Package ndp announces IPv6 addresses on a link with unsolicited Neighbour
// Advertisements (RFC 4861 §4.4, §7.2.6): what a node sends when it takes an
// address over, so that its neighbours' caches point at its MAC at once
// instead of when their entries go stale. UnsolicitedNA builds the frame
// (pure); an Announcer writes such frames on an interface through an
// AF_PACKET socket.
package ndp

import (
	"encoding/binary"
	"fmt"
	"net"
	"net/netip"
)

const (
	ethHeaderLen  = 14
	ipv6HeaderLen = 40
	naLen         = 32 // ICMPv6 header 4, flags 4, target 16, TLLA option 8

	etherTypeIPv6   = 0x86dd
	protoICMPv6     = 58
	typeNA          = 136
	optTargetLLAddr = 2

	flagRouter    = 0x80
	flagSolicited = 0x40
	flagOverride  = 0x20
)

// AllNodes is where an unsolicited advertisement goes (ff02::1), and
// AllNodesMAC its Ethernet address (33:33 and the group's low 32 bits).
var (
	AllNodes    = netip.MustParseAddr("ff02::1")
	AllNodesMAC = net.HardwareAddr{0x33, 0x33, 0x00, 0x00, 0x00, 0x01}
)

// FrameLen is the length of the frame UnsolicitedNA builds (no FCS).
const FrameLen = ethHeaderLen + ipv6HeaderLen + naLen

// UnsolicitedNA is the Ethernet frame of an unsolicited neighbour
// advertisement that target is at mac: from mac and src (the sending
// interface's link-local address) to all nodes, hop limit 255, flags
// Router and Override (not Solicited), with one Target Link-Layer Address
// option holding mac, and its ICMPv6 checksum over the IPv6 pseudo-header.
// target must be a unicast IPv6 address (an IPv4 one is announced by ARP).
func UnsolicitedNA(mac net.HardwareAddr, src, target netip.Addr) ([]byte, error) {
	if err := checkArgs(mac, src, target); err != nil {
		return nil, err
	}
	f := make([]byte, FrameLen)
	copy(f[0:6], AllNodesMAC)
	copy(f[6:12], mac)
	binary.BigEndian.PutUint16(f[12:14], etherTypeIPv6)
	ip := f[ethHeaderLen : ethHeaderLen+ipv6HeaderLen]
	ip[0] = 6 << 4 // version; traffic class and flow label 0
	binary.BigEndian.PutUint16(ip[4:6], naLen)
	ip[6] = protoICMPv6
	ip[7] = 255 // hop limit: a receiver drops any other (§7.1.2)
	s16, d16 := src.As16(), AllNodes.As16()
	copy(ip[8:24], s16[:])
	copy(ip[24:40], d16[:])
	na := f[ethHeaderLen+ipv6HeaderLen:]
	na[0] = typeNA // code 0
	na[4] = flagRouter | flagOverride
	t16 := target.As16()
	copy(na[8:24], t16[:])
	na[24], na[25] = optTargetLLAddr, 1 // length in units of 8 octets
	copy(na[26:32], mac)
	binary.BigEndian.PutUint16(na[2:4], checksum(src, AllNodes, na))
	return f, nil
}

// checkArgs says what of UnsolicitedNA's arguments cannot be announced.
func checkArgs(mac net.HardwareAddr, src, target netip.Addr) error {
	if len(mac) != 6 {
		return fmt.Errorf("neighbour advertisement of %s: MAC %q is not an Ethernet address (6 bytes)", target, mac)
	}
	if !target.Is6() || target.Is4In6() {
		return fmt.Errorf("neighbour advertisement of %s: not an IPv6 address (IPv4 addresses are announced by ARP)", target)
	}
	if target.IsUnspecified() || target.IsMulticast() {
		return fmt.Errorf("neighbour advertisement of %s: not a unicast address", target)
	}
	if !src.Is6() || src.Is4In6() || src.IsMulticast() {
		return fmt.Errorf("neighbour advertisement of %s: source %s is not a unicast IPv6 address (give the interface's link-local one)", target, src)
	}
	return nil
}

// checksum is the ICMPv6 checksum of msg (its checksum field zero) sent
// from src to dst: the ones' complement of the ones' complement sum of the
// IPv6 pseudo-header (RFC 8200 §8.1) and msg.
func checksum(src, dst netip.Addr, msg []byte) uint16 {
	s16, d16 := src.As16(), dst.As16()
	var sum uint32
	sum = add16(sum, s16[:])
	sum = add16(sum, d16[:])
	sum += uint32(len(msg)>>16) + uint32(len(msg)&0xffff) // upper-layer length, 32 bits
	sum += protoICMPv6                                    // three zero bytes, next header
	sum = add16(sum, msg)
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return ^uint16(sum)
}

// add16 adds b to sum as big-endian 16-bit words (an odd last byte padded
// with zero), folding the carries as it goes.
func add16(sum uint32, b []byte) uint32 {
	for i := 0; i+1 < len(b); i += 2 {
		sum += uint32(b[i])<<8 | uint32(b[i+1])
	}
	if len(b)%2 == 1 {
		sum += uint32(b[len(b)-1]) << 8
	}
	for sum > 0xffff {
		sum = sum>>16 + sum&0xffff
	}
	return sum
}
