package annotations

import (
	"reflect"
	"strings"
	"testing"
)

// The decoders take user-writable annotations: whatever the input, they
// return a value or an error naming the annotation, never panic, and what
// they accept re-encodes to the same value.

func FuzzParsePodNetworks(f *testing.F) {
	f.Add(`{"default":{"ip_addresses":["10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05","gateway_ips":["10.244.1.1"],"routes":[{"dest":"10.96.0.0/16","nextHop":"10.244.1.1"}],"pod_uid":"u1"}}`)
	f.Add(`{"default":{"ip_address":"10.244.1.5/24","mac_address":"0a:58:0a:f4:01:05","gateway_ip":"10.244.1.1"}}`)
	f.Add(`{"default":{"ip_addresses":["fd00::5/64","10.244.1.5/24"],"mac_address":"0a:58:0a:f4:01:05"}}`)
	f.Add(`{"default":{}}`)
	f.Add(`{"default":null}`)
	f.Add(`[]`)
	f.Fuzz(func(t *testing.T, in string) {
		pn, err := ParsePodNetworks(in)
		if err != nil {
			if !strings.Contains(err.Error(), PodNetworks) {
				t.Fatalf("error %q does not name %s", err, PodNetworks)
			}
			return
		}
		if got, want := FormatPodNetworks(pn), referenceFormatPodNetworks(pn); got != want {
			t.Fatalf("encoding of %+v differs from encoding/json's:\n got %s\nwant %s", pn, got, want)
		}
		back, err := ParsePodNetworks(FormatPodNetworks(pn))
		if err != nil {
			t.Fatalf("re-encoded %+v does not parse: %v", pn, err)
		}
		if !reflect.DeepEqual(back, pn) {
			t.Fatalf("round trip changed %+v into %+v", pn, back)
		}
	})
}

func FuzzParseNodeSubnets(f *testing.F) {
	f.Add(`{"default":"10.244.1.0/24"}`)
	f.Add(`{"default":["10.244.1.0/24","fd00:10:244:1::/64"]}`)
	f.Add(`{"default":[]}`)
	f.Add(`{"default":"10.244.1.1/24"}`)
	f.Add(`{"default":7}`)
	f.Fuzz(func(t *testing.T, in string) {
		subnets, err := ParseNodeSubnets(in)
		if err != nil {
			if !strings.Contains(err.Error(), NodeSubnets) {
				t.Fatalf("error %q does not name %s", err, NodeSubnets)
			}
			return
		}
		back, err := ParseNodeSubnets(FormatNodeSubnets(subnets))
		if err != nil || !reflect.DeepEqual(back, subnets) {
			t.Fatalf("round trip of %v: %v, %v", subnets, back, err)
		}
	})
}

func FuzzParseL3GatewayConfig(f *testing.F) {
	f.Add(`{"default":{"mode":"shared","interface-id":"breth0_n1_localnet","mac-address":"02:00:00:00:00:01","ip-addresses":["172.18.0.2/24"],"next-hops":["172.18.0.1"],"node-port-enable":"true"}}`)
	f.Add(`{"default":{"mode":"local"}}`)
	f.Add(`{"default":{"ip-address":"172.18.0.2/24","next-hop":"172.18.0.1"}}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, in string) {
		c, err := ParseL3GatewayConfig(in)
		if err != nil {
			return
		}
		back, err := ParseL3GatewayConfig(FormatL3GatewayConfig(c))
		if err != nil || !reflect.DeepEqual(back, c) {
			t.Fatalf("round trip of %+v: %+v, %v", c, back, err)
		}
	})
}

func FuzzParseMAC(f *testing.F) {
	f.Add("0a:58:0a:f4:01:05")
	f.Add("0A-58-0A-F4-01-05")
	f.Add("0a:58:0a:f4:01")
	f.Add("")
	f.Fuzz(func(t *testing.T, in string) {
		mac, err := ParseMAC(in)
		if err != nil {
			return
		}
		back, err := ParseMAC(mac.String())
		if err != nil || back.String() != mac.String() {
			t.Fatalf("round trip of %s: %s, %v", mac, back, err)
		}
	})
}
