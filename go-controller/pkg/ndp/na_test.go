package ndp

import (
	"encoding/binary"
	"encoding/hex"
	"net"
	"net/netip"
	"strings"
	"testing"
)

var (
	testMAC    = net.HardwareAddr{0x0a, 0x58, 0x0a, 0x00, 0x00, 0x01}
	testSrc    = netip.MustParseAddr("fe80::858:aff:fe00:1")
	testTarget = netip.MustParseAddr("2001:db8::33")
)

// The frame, field by field; its checksum (0x8480) computed apart from
// this package (a Python sum over the same pseudo-header and message).
func TestUnsolicitedNAFrame(t *testing.T) {
	f, err := UnsolicitedNA(testMAC, testSrc, testTarget)
	if err != nil {
		t.Fatal(err)
	}
	want := strings.Join([]string{
		"333300000001", "0a580a000001", "86dd", // Ethernet: all nodes, from the MAC, IPv6
		"60000000", "0020", "3a", "ff", // IPv6: version 6, payload 32, ICMPv6, hop limit 255
		"fe8000000000000008580afffe000001", // source: the link-local address
		"ff020000000000000000000000000001", // destination: all nodes
		"88", "00", "8480",                 // ICMPv6: type 136, code 0, checksum
		"a0000000",                         // Router, not Solicited, Override
		"20010db8000000000000000000000033", // target
		"0201", "0a580a000001",             // option: Target Link-Layer Address, 1 × 8 octets, the MAC
	}, "")
	if got := hex.EncodeToString(f); got != want {
		t.Fatalf("frame\n got %s\nwant %s", got, want)
	}
	if len(f) != FrameLen {
		t.Errorf("length %d, FrameLen %d", len(f), FrameLen)
	}
	if flags := f[ethHeaderLen+ipv6HeaderLen+4]; flags&flagRouter == 0 || flags&flagSolicited != 0 || flags&flagOverride == 0 {
		t.Errorf("flags %#x, want Router and Override, not Solicited", flags)
	}
}

// verifies sums the frame's IPv6 pseudo-header, built here from the
// frame's own header, and its ICMPv6 message, checksum included: a correct
// checksum makes the ones' complement sum all ones.
func verifies(f []byte) bool {
	ip := f[ethHeaderLen : ethHeaderLen+ipv6HeaderLen]
	msg := f[ethHeaderLen+ipv6HeaderLen:]
	pseudo := make([]byte, 0, 40+len(msg))
	pseudo = append(pseudo, ip[8:40]...) // source and destination
	pseudo = binary.BigEndian.AppendUint32(pseudo, uint32(binary.BigEndian.Uint16(ip[4:6])))
	pseudo = append(pseudo, 0, 0, 0, ip[6])
	pseudo = append(pseudo, msg...)
	var sum uint64
	for i := 0; i < len(pseudo); i += 2 {
		sum += uint64(binary.BigEndian.Uint16(pseudo[i:]))
	}
	for sum > 0xffff {
		sum = sum&0xffff + sum>>16
	}
	return sum == 0xffff && int(binary.BigEndian.Uint16(ip[4:6])) == len(msg)
}

// The checksum is right for any addresses and MAC, and a frame with any
// one bit of its pseudo-header or message flipped no longer verifies.
func TestUnsolicitedNAChecksum(t *testing.T) {
	for _, c := range []struct{ mac, src, target string }{
		{"0a:58:0a:00:00:01", "fe80::858:aff:fe00:1", "2001:db8::33"},
		{"ff:ff:ff:ff:ff:fe", "fe80::ffff:ffff:ffff:ffff", "fdff:ffff:ffff:ffff:ffff:ffff:ffff:fffe"},
		{"00:00:00:00:00:00", "fe80::1", "fd00::1"},
		{"02:42:ac:12:00:02", "fc00:f853:ccd:e793::2", "fc00:f853:ccd:e793::33"},
	} {
		mac, _ := net.ParseMAC(c.mac)
		f, err := UnsolicitedNA(mac, netip.MustParseAddr(c.src), netip.MustParseAddr(c.target))
		if err != nil {
			t.Fatalf("%v: %v", c, err)
		}
		if !verifies(f) {
			t.Errorf("%v: checksum %#04x does not verify", c, binary.BigEndian.Uint16(f[56:58]))
		}
		for bit := (ethHeaderLen + 8) * 8; bit < len(f)*8; bit++ {
			g := append([]byte(nil), f...)
			g[bit/8] ^= 1 << (bit % 8)
			if verifies(g) {
				t.Errorf("%v: bit %d flipped still verifies", c, bit)
			}
		}
	}
}

// What cannot be advertised is refused, naming the address: an IPv4
// target (announced by ARP), IPv4-mapped, multicast or unspecified, a
// source that is not IPv6 unicast, a MAC that is not Ethernet's.
func TestUnsolicitedNARefuses(t *testing.T) {
	for _, c := range []struct {
		mac         net.HardwareAddr
		src, target string
		want        string
	}{
		{testMAC, "fe80::1", "192.0.2.33", "192.0.2.33: not an IPv6 address"},
		{testMAC, "fe80::1", "::ffff:192.0.2.33", "not an IPv6 address"},
		{testMAC, "fe80::1", "ff02::1", "not a unicast address"},
		{testMAC, "fe80::1", "::", "not a unicast address"},
		{testMAC, "192.0.2.1", "2001:db8::33", "source 192.0.2.1 is not a unicast IPv6 address"},
		{testMAC, "ff02::2", "2001:db8::33", "not a unicast IPv6 address"},
		{net.HardwareAddr{1, 2, 3}, "fe80::1", "2001:db8::33", "not an Ethernet address"},
	} {
		f, err := UnsolicitedNA(c.mac, netip.MustParseAddr(c.src), netip.MustParseAddr(c.target))
		if err == nil || !strings.Contains(err.Error(), c.want) || f != nil {
			t.Errorf("UnsolicitedNA(%s, %s, %s) = %x, %v; want an error containing %q", c.mac, c.src, c.target, f, err, c.want)
		}
	}
	if _, err := UnsolicitedNA(testMAC, netip.Addr{}, testTarget); err == nil {
		t.Errorf("no source address: no error")
	}
}

func TestHtons(t *testing.T) {
	var b [2]byte
	binary.NativeEndian.PutUint16(b[:], htons(0x86dd))
	if b != [2]byte{0x86, 0xdd} {
		t.Errorf("htons(0x86dd) is %x in memory, want 86dd", b)
	}
}
