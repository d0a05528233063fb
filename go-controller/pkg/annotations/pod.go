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

// FormatPodNetworks encodes the pod's default network in the upstream
// format. It runs for every pod sync, so it appends the bytes itself instead
// of going through encoding/json's reflection; the output is byte for byte
// what json.Marshal of podNetworkJSON gives (the tests hold it to that),
// since the master compares annotations as strings.
func FormatPodNetworks(pn PodNetwork) string {
	b := make([]byte, 0, 256)
	b = append(b, `{"default":{"ip_addresses":`...)
	if len(pn.IPs) == 0 {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, ip := range pn.IPs {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, ip.String())
		}
		b = append(b, ']')
	}
	b = append(b, `,"mac_address":`...)
	b = appendJSONString(b, pn.MAC.String())
	if len(pn.Gateways) > 0 {
		b = append(b, `,"gateway_ips":[`...)
		for i, gw := range pn.Gateways {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, gw.String())
		}
		b = append(b, ']')
	}
	if len(pn.Routes) > 0 {
		b = append(b, `,"routes":[`...)
		for i, r := range pn.Routes {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"dest":`...)
			b = appendJSONString(b, r.Dest.String())
			b = append(b, `,"nextHop":`...)
			b = appendJSONString(b, r.NextHop.String())
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if len(pn.IPs) == 1 {
		b = append(b, `,"ip_address":`...)
		b = appendJSONString(b, pn.IPs[0].String())
	}
	if len(pn.Gateways) == 1 {
		b = append(b, `,"gateway_ip":`...)
		b = appendJSONString(b, pn.Gateways[0].String())
	}
	if pn.PodUID != "" {
		b = append(b, `,"pod_uid":`...)
		b = appendJSONString(b, pn.PodUID)
	}
	b = append(b, "}}"...)
	return string(b)
}

// MergePatch is the merge patch {"metadata":{"uid":U,"annotations":{K:V}}}
// that sets one annotation of the object with that UID (the API server
// refuses it for a replaced object), built without encoding/json's map
// reflection: it is sent for every new pod.
func MergePatch(uid, key, value string) []byte {
	b := append(make([]byte, 0, 64+len(value)*5/4), `{"metadata":{"uid":`...)
	b = appendJSONString(b, uid)
	b = append(b, `,"annotations":{`...)
	b = appendJSONString(b, key)
	b = append(b, ':')
	b = appendJSONString(b, value)
	return append(b, "}}}"...)
}

// appendJSONString appends s as a JSON string. Addresses and UIDs need no
// escaping; anything else goes through encoding/json, which escapes it.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
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
