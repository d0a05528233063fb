package annotations

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

// PodRoute is one extra route a pod gets besides its default route.
type PodRoute struct {
	Dest    netip.Prefix
	NextHop netip.Addr
}

// PodNetwork is the decoded default-network entry of k8s.ovn.org/pod-networks.
type PodNetwork struct {
	IPs      []netip.Prefix // pod address with the host subnet's length
	MAC      net.HardwareAddr
	Gateways []netip.Addr
	Routes   []PodRoute
	// PodUID is the UID of the pod incarnation the master wrote this for
	// (JSON "pod_uid", which upstream readers ignore). An annotation whose
	// PodUID is not the pod's own was copied from an earlier incarnation (a
	// re-applied manifest) and is not the master's word: the CNI waits for the
	// master's, and the master does not honour it.
	PodUID string
}

// WrittenFor says whether the master wrote this assignment for the pod with uid.
func (pn PodNetwork) WrittenFor(uid string) bool { return pn.PodUID != "" && pn.PodUID == uid }

// podNetworkJSON is the upstream wire format, including the old single-stack
// fields (ip_address, gateway_ip) that older readers still look at.
type podNetworkJSON struct {
	IPAddresses []string       `json:"ip_addresses"`
	MACAddress  string         `json:"mac_address"`
	GatewayIPs  []string       `json:"gateway_ips,omitempty"`
	Routes      []podRouteJSON `json:"routes,omitempty"`
	IPAddress   string         `json:"ip_address,omitempty"`
	GatewayIP   string         `json:"gateway_ip,omitempty"`
	PodUID      string         `json:"pod_uid,omitempty"`
}

type podRouteJSON struct {
	Dest    string `json:"dest"`
	NextHop string `json:"nextHop"`
}

// FormatPodNetworks encodes the pod's default network in the upstream format.
func FormatPodNetworks(pn PodNetwork) string {
	j := podNetworkJSON{MACAddress: pn.MAC.String(), PodUID: pn.PodUID}
	for _, ip := range pn.IPs {
		j.IPAddresses = append(j.IPAddresses, ip.String())
	}
	for _, gw := range pn.Gateways {
		j.GatewayIPs = append(j.GatewayIPs, gw.String())
	}
	for _, r := range pn.Routes {
		j.Routes = append(j.Routes, podRouteJSON{Dest: r.Dest.String(), NextHop: r.NextHop.String()})
	}
	if len(j.IPAddresses) == 1 {
		j.IPAddress = j.IPAddresses[0]
	}
	if len(j.GatewayIPs) == 1 {
		j.GatewayIP = j.GatewayIPs[0]
	}
	b, _ := json.Marshal(map[string]podNetworkJSON{DefaultNetwork: j})
	return string(b)
}

// ParsePodNetworks decodes the default network of k8s.ovn.org/pod-networks.
// It accepts both the list fields and the old single-stack fields.
func ParsePodNetworks(value string) (PodNetwork, error) {
	var all map[string]podNetworkJSON
	if err := json.Unmarshal([]byte(value), &all); err != nil {
		return PodNetwork{}, fmt.Errorf("%s: not valid JSON: %v", PodNetworks, err)
	}
	j, ok := all[DefaultNetwork]
	if !ok {
		return PodNetwork{}, fmt.Errorf("%s: no %q network", PodNetworks, DefaultNetwork)
	}
	pn := PodNetwork{PodUID: j.PodUID}
	ips := j.IPAddresses
	if len(ips) == 0 && j.IPAddress != "" {
		ips = []string{j.IPAddress}
	}
	if len(ips) == 0 {
		return PodNetwork{}, fmt.Errorf("%s: no IP address", PodNetworks)
	}
	for _, s := range ips {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return PodNetwork{}, fmt.Errorf("%s: %q is not an address/length", PodNetworks, s)
		}
		pn.IPs = append(pn.IPs, p)
	}
	mac, err := ParseMAC(j.MACAddress)
	if err != nil {
		return PodNetwork{}, fmt.Errorf("%s: mac_address: %v", PodNetworks, err)
	}
	pn.MAC = mac
	gws := j.GatewayIPs
	if len(gws) == 0 && j.GatewayIP != "" {
		gws = []string{j.GatewayIP}
	}
	for _, s := range gws {
		a, err := netip.ParseAddr(s)
		if err != nil {
			return PodNetwork{}, fmt.Errorf("%s: gateway %q is not an IP address", PodNetworks, s)
		}
		pn.Gateways = append(pn.Gateways, a)
	}
	for _, r := range j.Routes {
		d, err := netip.ParsePrefix(r.Dest)
		if err != nil {
			return PodNetwork{}, fmt.Errorf("%s: route destination %q is not a CIDR", PodNetworks, r.Dest)
		}
		nh, err := netip.ParseAddr(r.NextHop)
		if err != nil {
			return PodNetwork{}, fmt.Errorf("%s: route next hop %q is not an IP address", PodNetworks, r.NextHop)
		}
		pn.Routes = append(pn.Routes, PodRoute{Dest: d, NextHop: nh})
	}
	return pn, nil
}
