// Package annotations encodes and decodes the k8s.ovn.org annotations that
// ovn-k8s shares with nodes, the CNI plugin and upstream OVN-Kubernetes tools.
// Decoders never trust their input: every error names what was wrong.
package annotations

import (
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
)

const (
	// PodNetworks is the pod's address assignment, written by the master, read by ovn_cni.
	PodNetworks = "k8s.ovn.org/pod-networks"
	// NodeSubnets is the node's host subnet(s), written by the master.
	NodeSubnets = "k8s.ovn.org/node-subnets"
	// NodeZone is the zone the node is in (zone mode, OVN interconnection):
	// each zone's master programs the nodes of its zone (upstream's name).
	NodeZone = "k8s.ovn.org/zone-name"
	// NodeChassisID is the node's OVS system-id, written by the node.
	NodeChassisID = "k8s.ovn.org/node-chassis-id"
	// NodeMgmtPortMAC is the MAC of the node's ovn-k8s-mp0, written by the node.
	NodeMgmtPortMAC = "k8s.ovn.org/node-mgmt-port-mac-address"
	// NodeL3GatewayConfig describes the node's gateway, written by gateway-init.
	NodeL3GatewayConfig = "k8s.ovn.org/l3-gateway-config"
	// NodeGatewayJoinIP is the join address of the node's gateway router,
	// written by the master (upstream's name).
	NodeGatewayJoinIP = "k8s.ovn.org/node-gateway-router-lrp-ifaddr"
	// NamespaceACLLogging asks for the namespace's NetworkPolicy verdicts to
	// be logged (upstream's name and format): {"deny": "alert", "allow": "notice"}.
	NamespaceACLLogging = "k8s.ovn.org/acl-logging"

	// DefaultNetwork is the key of the default network in every per-network map.
	DefaultNetwork = "default"
)

// ParseNodeSubnets decodes {"default":"10.244.1.0/24"} or, for dual-stack,
// {"default":["10.244.1.0/24","fd00:10:244:1::/64"]}.
func ParseNodeSubnets(value string) ([]netip.Prefix, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(value), &raw); err != nil {
		return nil, fmt.Errorf("%s: not a JSON object: %v", NodeSubnets, err)
	}
	def, ok := raw[DefaultNetwork]
	if !ok {
		return nil, fmt.Errorf("%s: no %q network", NodeSubnets, DefaultNetwork)
	}
	var list []string
	var one string
	if err := json.Unmarshal(def, &one); err == nil {
		list = []string{one}
	} else if err := json.Unmarshal(def, &list); err != nil {
		return nil, fmt.Errorf("%s: %q must be a CIDR string or a list of them", NodeSubnets, DefaultNetwork)
	}
	if len(list) == 0 {
		return nil, fmt.Errorf("%s: empty subnet list", NodeSubnets)
	}
	out := make([]netip.Prefix, 0, len(list))
	for _, s := range list {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Masked() != p {
			return nil, fmt.Errorf("%s: %q is not a subnet", NodeSubnets, s)
		}
		out = append(out, p)
	}
	return out, nil
}

// FormatNodeSubnets encodes subnets the way upstream does: a string for one, a list for several.
func FormatNodeSubnets(subnets []netip.Prefix) string {
	var v any
	if len(subnets) == 1 {
		v = subnets[0].String()
	} else {
		list := make([]string, len(subnets))
		for i, s := range subnets {
			list[i] = s.String()
		}
		v = list
	}
	b, _ := json.Marshal(map[string]any{DefaultNetwork: v})
	return string(b)
}

// ParseMAC parses a unicast Ethernet MAC such as the management port's.
func ParseMAC(value string) (net.HardwareAddr, error) {
	mac, err := net.ParseMAC(value)
	if err != nil || len(mac) != 6 {
		return nil, fmt.Errorf("%q is not an Ethernet MAC address", value)
	}
	if mac[0]&1 == 1 {
		return nil, fmt.Errorf("%q is a multicast MAC address", value)
	}
	return mac, nil
}
