package annotations

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

// L3GatewayConfig is the default-network entry of k8s.ovn.org/l3-gateway-config.
type L3GatewayConfig struct {
	Mode           string // "shared" or "local"
	InterfaceID    string // the localnet port, breth0_<node>_localnet
	MAC            net.HardwareAddr
	IPs            []netip.Prefix // the node's address(es) on the external network
	NextHops       []netip.Addr
	NodePortEnable bool
}

type l3GatewayJSON struct {
	Mode           string   `json:"mode"`
	InterfaceID    string   `json:"interface-id,omitempty"`
	MACAddress     string   `json:"mac-address,omitempty"`
	IPAddresses    []string `json:"ip-addresses,omitempty"`
	IPAddress      string   `json:"ip-address,omitempty"`
	NextHops       []string `json:"next-hops,omitempty"`
	NextHop        string   `json:"next-hop,omitempty"`
	NodePortEnable string   `json:"node-port-enable,omitempty"`
}

// FormatL3GatewayConfig encodes the gateway config in the upstream format.
func FormatL3GatewayConfig(c L3GatewayConfig) string {
	j := l3GatewayJSON{Mode: c.Mode, InterfaceID: c.InterfaceID, NodePortEnable: fmt.Sprint(c.NodePortEnable)}
	if c.MAC != nil {
		j.MACAddress = c.MAC.String()
	}
	for _, ip := range c.IPs {
		j.IPAddresses = append(j.IPAddresses, ip.String())
	}
	for _, nh := range c.NextHops {
		j.NextHops = append(j.NextHops, nh.String())
	}
	if len(j.IPAddresses) == 1 {
		j.IPAddress = j.IPAddresses[0]
	}
	if len(j.NextHops) == 1 {
		j.NextHop = j.NextHops[0]
	}
	b, _ := json.Marshal(map[string]l3GatewayJSON{DefaultNetwork: j})
	return string(b)
}

// ParseL3GatewayConfig decodes k8s.ovn.org/l3-gateway-config, accepting the
// list fields and the old single ones.
func ParseL3GatewayConfig(value string) (L3GatewayConfig, error) {
	var all map[string]l3GatewayJSON
	if err := json.Unmarshal([]byte(value), &all); err != nil {
		return L3GatewayConfig{}, fmt.Errorf("%s: not valid JSON: %v", NodeL3GatewayConfig, err)
	}
	j, ok := all[DefaultNetwork]
	if !ok {
		return L3GatewayConfig{}, fmt.Errorf("%s: no %q network", NodeL3GatewayConfig, DefaultNetwork)
	}
	c := L3GatewayConfig{Mode: j.Mode, InterfaceID: j.InterfaceID, NodePortEnable: j.NodePortEnable == "true"}
	if j.MACAddress != "" {
		mac, err := ParseMAC(j.MACAddress)
		if err != nil {
			return L3GatewayConfig{}, fmt.Errorf("%s: mac-address: %v", NodeL3GatewayConfig, err)
		}
		c.MAC = mac
	}
	ips := j.IPAddresses
	if len(ips) == 0 && j.IPAddress != "" {
		ips = []string{j.IPAddress}
	}
	for _, s := range ips {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return L3GatewayConfig{}, fmt.Errorf("%s: %q is not an address/length", NodeL3GatewayConfig, s)
		}
		c.IPs = append(c.IPs, p)
	}
	hops := j.NextHops
	if len(hops) == 0 && j.NextHop != "" {
		hops = []string{j.NextHop}
	}
	for _, s := range hops {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return L3GatewayConfig{}, fmt.Errorf("%s: next hop %q is not an IP address", NodeL3GatewayConfig, s)
		}
		c.NextHops = append(c.NextHops, a)
	}
	return c, nil
}

// FormatGatewayJoinIPs encodes a gateway router's join addresses as
// upstream does: {"ipv4":"100.64.0.2/16","ipv6":"fd98::2/64"}.
func FormatGatewayJoinIPs(ps []netip.Prefix) string {
	m := map[string]string{}
	for _, p := range ps {
		m[joinIPKey(p.Addr().Is6())] = p.String()
	}
	b, _ := json.Marshal(m)
	return string(b)
}

func joinIPKey(v6 bool) string {
	if v6 {
		return "ipv6"
	}
	return "ipv4"
}

// ParseGatewayJoinIPs decodes k8s.ovn.org/node-gateway-router-lrp-ifaddr:
// the addresses of the families it has, IPv4 first.
func ParseGatewayJoinIPs(value string) ([]netip.Prefix, error) {
	var m map[string]string
	if err := json.Unmarshal([]byte(value), &m); err != nil {
		return nil, fmt.Errorf("%s: not valid JSON: %v", NodeGatewayJoinIP, err)
	}
	var out []netip.Prefix
	for _, v6 := range []bool{false, true} {
		s, ok := m[joinIPKey(v6)]
		if !ok {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Is6() != v6 || p.Addr().Is4In6() {
			return nil, fmt.Errorf("%s: %s %q is not an address/length of that family", NodeGatewayJoinIP, joinIPKey(v6), s)
		}
		out = append(out, p)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no \"ipv4\" or \"ipv6\" address", NodeGatewayJoinIP)
	}
	return out, nil
}
