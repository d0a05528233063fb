package e2e

import (
	"net"
	"net/netip"
)

type (
	netipPrefix = netip.Prefix
	netipAddr   = netip.Addr
)

func prefix(ip netip.Addr, bits int) netip.Prefix { return netip.PrefixFrom(ip, bits) }

func mustMAC(s string) net.HardwareAddr {
	m, _ := net.ParseMAC(s)
	return m
}
