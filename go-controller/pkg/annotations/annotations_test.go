package annotations

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

func TestNodeSubnetsRoundTrip(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: `{"default":"10.244.1.0/24"}`, want: []string{"10.244.1.0/24"}},
		{in: `{"default":["10.244.1.0/24","fd00:10:244:1::/64"]}`, want: []string{"10.244.1.0/24", "fd00:10:244:1::/64"}},
		{in: `{"default":"10.244.1.5/24"}`, wantErr: "not a subnet"},
		{in: `{"default":[]}`, wantErr: "empty"},
		{in: `{"default":7}`, wantErr: "must be a CIDR string"},
		{in: `{"other":"10.244.1.0/24"}`, wantErr: `no "default"`},
		{in: `10.244.1.0/24`, wantErr: "not a JSON object"},
		{in: ``, wantErr: "not a JSON object"},
	}
	for _, tt := range tests {
		got, err := ParseNodeSubnets(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseNodeSubnets(%s) error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Fatalf("ParseNodeSubnets(%s): %v", tt.in, err)
		}
		var strs []string
		for _, p := range got {
			strs = append(strs, p.String())
		}
		if !reflect.DeepEqual(strs, tt.want) {
			t.Errorf("ParseNodeSubnets(%s) = %v, want %v", tt.in, strs, tt.want)
		}
		if back := FormatNodeSubnets(got); back != tt.in {
			t.Errorf("FormatNodeSubnets round trip = %s, want %s", back, tt.in)
		}
	}
}

func TestPodNetworksFormat(t *testing.T) {
	mac, _ := ParseMAC("0a:58:0a:f4:01:05")
	pn := PodNetwork{
		IPs:      []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")},
		MAC:      mac,
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		Routes:   []PodRoute{{Dest: netip.MustParsePrefix("10.96.0.0/16"), NextHop: netip.MustParseAddr("10.244.1.1")}},
	}
	want := `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"],"routes":[{"dest":"10.96.0.0/16","nextHop":"10.244.1.1"}],"ip_address":"10.244.1.5/24","gateway_ip":"10.244.1.1"}}`
	got := FormatPodNetworks(pn)
	if got != want {
		t.Fatalf("FormatPodNetworks =\n%s\nwant\n%s", got, want)
	}
	back, err := ParsePodNetworks(got)
	if err != nil || !reflect.DeepEqual(back, pn) {
		t.Fatalf("round trip = %+v, %v", back, err)
	}
}

func TestParsePodNetworks(t *testing.T) {
	tests := []struct {
		name, in, wantErr, wantIP string
	}{
		{name: "old single-stack fields", in: `{"default":{"ip_address":"10.244.1.5/24","mac_address":"0a:58:0a:f4:01:05","gateway_ip":"10.244.1.1"}}`, wantIP: "10.244.1.5/24"},
		{name: "no ip", in: `{"default":{"mac_address":"0a:58:0a:f4:01:05"}}`, wantErr: "no IP address"},
		{name: "bad ip", in: `{"default":{"ip_addresses":["10.244.1.500/24"],"mac_address":"0a:58:0a:f4:01:05"}}`, wantErr: "not an address"},
		{name: "bad mac", in: `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"zz"}}`, wantErr: "mac_address"},
		{name: "multicast mac", in: `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"01:00:5e:00:00:01"}}`, wantErr: "multicast"},
		{name: "bad gateway", in: `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["x"]}}`, wantErr: "gateway"},
		{name: "bad route", in: `{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","routes":[{"dest":"x","nextHop":"10.244.1.1"}]}}`, wantErr: "route destination"},
		{name: "foreign network only", in: `{"blue":{}}`, wantErr: `no "default"`},
		{name: "not json", in: `ovn`, wantErr: "not valid JSON"},
		{name: "wrong type", in: `{"default":"10.244.1.5"}`, wantErr: "not valid JSON"},
	}
	for _, tt := range tests {
		got, err := ParsePodNetworks(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: error = %v, want %q", tt.name, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.IPs[0].String() != tt.wantIP {
			t.Errorf("%s: got %+v, %v", tt.name, got, err)
		}
	}
}

func TestL3GatewayConfig(t *testing.T) {
	mac, _ := ParseMAC("02:00:00:00:00:01")
	c := L3GatewayConfig{Mode: "shared", InterfaceID: "breth0_n1", MAC: mac,
		IPs: []netip.Prefix{netip.MustParsePrefix("172.18.0.2/24")}, NextHops: []netip.Addr{netip.MustParseAddr("172.18.0.1")}, NodePortEnable: true}
	s := FormatL3GatewayConfig(c)
	want := `{"default":{"mode":"shared","interface-id":"breth0_n1","mac-address":"02:00:00:00:00:01","ip-addresses":["172.18.0.2/24"],"ip-address":"172.18.0.2/24","next-hops":["172.18.0.1"],"next-hop":"172.18.0.1","node-port-enable":"true"}}`
	if s != want {
		t.Fatalf("format:\n%s\nwant\n%s", s, want)
	}
	back, err := ParseL3GatewayConfig(s)
	if err != nil || !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip %+v %v", back, err)
	}
	for _, bad := range []string{``, `{}`, `{"default":{"ip-addresses":["x"]}}`, `{"default":{"next-hops":["x"]}}`, `{"default":{"mac-address":"x"}}`} {
		if _, err := ParseL3GatewayConfig(bad); err == nil {
			t.Errorf("accepted %s", bad)
		}
	}
}

func BenchmarkPodNetworksRoundTrip(b *testing.B) {
	mac, _ := ParseMAC("0a:58:0a:f4:01:05")
	pn := PodNetwork{IPs: []netip.Prefix{netip.MustParsePrefix("10.244.1.5/24")}, MAC: mac,
		Gateways: []netip.Addr{netip.MustParseAddr("10.244.1.1")},
		Routes:   []PodRoute{{Dest: netip.MustParsePrefix("100.64.0.0/16"), NextHop: netip.MustParseAddr("10.244.1.1")}}}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if _, err := ParsePodNetworks(FormatPodNetworks(pn)); err != nil {
			b.Fatal(err)
		}
	}
}

// referenceFormatPodNetworks is the encoding/json encoder FormatPodNetworks
// replaced; the annotation must stay byte for byte the same, since masters
// compare annotations as strings (a difference would re-PATCH every pod).
func referenceFormatPodNetworks(pn PodNetwork) string {
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

func TestFormatPodNetworksMatchesEncodingJSON(t *testing.T) {
	mac, _ := ParseMAC("0a:58:0a:f4:01:05")
	v4, v6 := netip.MustParsePrefix("10.244.1.5/24"), netip.MustParsePrefix("fd00:10:244:1::5/64")
	gw4, gw6 := netip.MustParseAddr("10.244.1.1"), netip.MustParseAddr("fd00:10:244:1::1")
	routes := []PodRoute{{Dest: netip.MustParsePrefix("100.64.0.0/16"), NextHop: gw4}, {Dest: netip.MustParsePrefix("10.96.0.0/16"), NextHop: gw4}}
	for name, pn := range map[string]PodNetwork{
		"empty":                {},
		"single stack":         {IPs: []netip.Prefix{v4}, MAC: mac, Gateways: []netip.Addr{gw4}, Routes: routes, PodUID: "8c9f0e8a-1b2c-4d5e-9f00-0123456789ab"},
		"dual stack":           {IPs: []netip.Prefix{v4, v6}, MAC: mac, Gateways: []netip.Addr{gw4, gw6}},
		"no gateway, no uid":   {IPs: []netip.Prefix{v6}, MAC: mac},
		"uid needing escapes":  {IPs: []netip.Prefix{v4}, MAC: mac, PodUID: "a\"b\\c<d>&e\n\u2028é"},
		"routes, no addresses": {Routes: routes},
	} {
		if got, want := FormatPodNetworks(pn), referenceFormatPodNetworks(pn); got != want {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

func TestMergePatch(t *testing.T) {
	value := `{"default":{"ip_addresses":["10.244.1.5/24"],"pod_uid":"a<b"}}`
	var got map[string]any
	if err := json.Unmarshal(MergePatch("uid-1", PodNetworks, value), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"metadata": map[string]any{"uid": "uid-1", "annotations": map[string]any{PodNetworks: value}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("patch %v, want %v", got, want)
	}
}

func TestParseACLLogging(t *testing.T) {
	if l, err := ParseACLLogging(`{"deny": "alert", "allow": "notice"}`); err != nil || l.Deny != "alert" || l.Allow != "notice" {
		t.Errorf("got %+v, %v", l, err)
	}
	if l, err := ParseACLLogging(`{"deny": "info"}`); err != nil || l.Allow != "" {
		t.Errorf("deny only: %+v, %v", l, err)
	}
	for _, bad := range []string{`{"deny": "loud"}`, `deny=alert`, `{"allow": 3}`} {
		if _, err := ParseACLLogging(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

// Join addresses in upstream's format, one per family; a family's key
// holding the other family, or nothing known, is refused.
func TestGatewayJoinIPs(t *testing.T) {
	for _, tt := range []struct {
		in, want, wantErr string
	}{
		{in: `{"ipv4":"100.64.0.2/16"}`, want: "[100.64.0.2/16]"},
		{in: `{"ipv6":"fd98::2/64","ipv4":"100.64.0.2/16"}`, want: "[100.64.0.2/16 fd98::2/64]"},
		{in: `{"ipv6":"fd98::2/64"}`, want: "[fd98::2/64]"},
		{in: `{"ipv4":"fd98::2/64"}`, wantErr: "not an address/length of that family"},
		{in: `{"ipv6":"100.64.0.2/16"}`, wantErr: "not an address/length of that family"},
		{in: `{"ipv6":"::ffff:100.64.0.2/112"}`, wantErr: "not an address/length of that family"},
		{in: `{}`, wantErr: "no \"ipv4\" or \"ipv6\""},
		{in: `x`, wantErr: "not valid JSON"},
	} {
		got, err := ParseGatewayJoinIPs(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%s: %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("%s: %v, %v; want %s", tt.in, got, err, tt.want)
			continue
		}
		if again, err := ParseGatewayJoinIPs(FormatGatewayJoinIPs(got)); err != nil || fmt.Sprint(again) != tt.want {
			t.Errorf("%s: formatted and parsed again %v, %v", tt.in, again, err)
		}
	}
}
