package integration

import (
	"fmt"
	"strings"
	"testing"

	"github.com/containernetworking/plugins/pkg/ns"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The gateway's address and next hop read from the bridge (a DaemonSet's
// nodes share one set of flags): its one global IPv4 address and the default
// route through it; a bridge with two addresses, or none, is an error that
// says to give --physical-ip.
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
			ip, gw, err := node.BridgeAddresses("brdet0")
			got = fmt.Sprint(ip, " ", gw)
			return err
		})
		return got, err
	}
	if got, err := read(); err != nil || got != "192.0.2.7/24 192.0.2.1" {
		t.Fatalf("one address and a default route: %q %v, want 192.0.2.7/24 192.0.2.1", got, err)
	}
	if out, err := n.Exec("ip", "addr", "add", "198.51.100.7/24", "dev", "brdet0"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	if _, err := read(); err == nil || !strings.Contains(err.Error(), "2 global IPv4 addresses") || !strings.Contains(err.Error(), "--physical-ip") {
		t.Fatalf("two addresses: %v, want an error counting them and naming --physical-ip", err)
	}
	if _, err := n.Exec("ip", "addr", "flush", "dev", "brdet0"); err != nil {
		t.Fatal(err)
	}
	if _, err := read(); err == nil || !strings.Contains(err.Error(), "0 global IPv4 addresses") {
		t.Fatalf("no address: %v, want an error", err)
	}
}
