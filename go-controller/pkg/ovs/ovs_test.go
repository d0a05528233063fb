package ovs_test

import (
	"context"
	"slices"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs/ovstest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
)

// An interface without the key never matches, not even the value "": a
// query for sandbox="" must not return the management port or the NIC.
func TestInterfacesWithExternalIDMatchesByPresence(t *testing.T) {
	c := ovstest.New(t)
	ovstest.Port(t, c, "ovn-k8s-mp0", map[string]string{"iface-id": "k8s-node1"})
	ovstest.Port(t, c, "eth1", nil)
	ovstest.Port(t, c, "ovn0123456789ab", map[string]string{"iface-id": "default_web", "sandbox": "c1"})
	ovstest.Port(t, c, "ovnemptysandbox", map[string]string{"iface-id": "default_db", "sandbox": ""})
	ctx := context.Background()
	for _, tt := range []struct {
		key, value string
		want       []string
	}{
		{"sandbox", "", []string{"ovnemptysandbox"}},
		{"sandbox", "c1", []string{"ovn0123456789ab"}},
		{"iface-id", "", nil},
		{"no-such-key", "", nil},
	} {
		got, err := c.InterfacesWithExternalID(ctx, tt.key, tt.value)
		if err != nil {
			t.Fatal(err)
		}
		if names := names(got); !slices.Equal(names, tt.want) {
			t.Errorf("InterfacesWithExternalID(%q, %q) = %v, want %v", tt.key, tt.value, names, tt.want)
		}
	}
}

func names(ifaces []vswitchd.Interface) []string {
	var out []string
	for _, i := range ifaces {
		out = append(out, i.Name)
	}
	slices.Sort(out)
	return out
}
