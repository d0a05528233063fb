package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The gateway's addresses and next hops read from the bridge (a
// DaemonSet's nodes share one set of flags): its global address of each
// family and the default routes through it (the IPv6 link-local address
// is not the node's); two of a family, or none at all, is an
// error that says to give --physical-ip.
func TestBridgeAddresses(t *testing.T) {
	n := harness.NewNetNS(t, "br")
	for _, args := range [][]string{
		{"link", "add", "brdet0", "type", "veth", "peer", "name", "brdet1"},
		{"link", "set", "brdet1", "up"},
		{"link", "set", "brdet0", "up"},
		{"addr", "add", "192.0.2.7/24", "dev", "brdet0"},
		{"route", "add", "default", "via", "192.0.2.1", "dev", "brdet0"},
	} {
		if out, err := n.Exec(append([]string{"ip"}, args...)...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	read := func() (string, error) {
		var got string
		err := ns.WithNetNSPath(n.Path(), func(ns.NetNS) error {
			ips, gws, err := node.BridgeAddresses("brdet0")
			got = fmt.Sprint(ips, " ", gws)
			return err
		})
		return got, err
	}
	if got, err := read(); err != nil || got != "[192.0.2.7/24] [192.0.2.1]" {
		t.Fatalf("one address and a default route: %q %v, want [192.0.2.7/24] [192.0.2.1]", got, err)
	}
	for _, args := range [][]string{
		{"-6", "addr", "add", "2001:db8::7/64", "dev", "brdet0", "nodad"},
		{"-6", "route", "add", "default", "via", "2001:db8::1", "dev", "brdet0"},
	} {
		if out, err := n.Exec(append([]string{"ip"}, args...)...); err != nil {
			t.Fatalf("%v: %v %s", args, err, out)
		}
	}
	if got, err := read(); err != nil || got != "[192.0.2.7/24 2001:db8::7/64] [192.0.2.1 2001:db8::1]" {
		t.Fatalf("dual-stack: %q %v, want [192.0.2.7/24 2001:db8::7/64] [192.0.2.1 2001:db8::1]", got, err)
	}
	if out, err := n.Exec("ip", "addr", "add", "198.51.100.7/24", "dev", "brdet0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := read(); err == nil || !strings.Contains(err.Error(), "2 global addresses of one family") || !strings.Contains(err.Error(), "--physical-ip") {
		t.Fatalf("two addresses: %v, want an error counting them and naming --physical-ip", err)
	}
	if _, err := n.Exec("ip", "addr", "flush", "dev", "brdet0"); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); err == nil || !strings.Contains(err.Error(), "no global address") {
		t.Fatalf("no address: %v, want an error", err)
	}
}
