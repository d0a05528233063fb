package cni

import (
	"context"
	"slices"
	"testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs/ovstest"
)

// A pod deleted and re-created with the same name: the old incarnation's
// slow ADD (UID old) runs after the new one's (UID new) plugged its port.
// It may replace its own earlier sandboxes' ports, never the new pod's; and
// the new pod's ADD leaves the old incarnation's port to its own DEL.
func TestRemoveStalePortsKeepsOtherIncarnations(t *testing.T) {
	sw := ovstest.New(t)
	port := func(name, uid string) {
		ovstest.Port(t, sw, name, map[string]string{"iface-id": "default_web", "iface-id-ver": uid, "sandbox": name})
	}
	port("ovnold1", "old")                                                        // an earlier sandbox of the old incarnation
	port("ovnnew1", "new")                                                        // the re-created pod, wired already
	port("ovnold2", "old")                                                        // the slow ADD's own port
	ovstest.Port(t, sw, "ovnnover", map[string]string{"iface-id": "default_web"}) // not ours to judge
	ovstest.Port(t, sw, "ovnother", map[string]string{"iface-id": "default_db", "iface-id-ver": "old"})
	ctx := context.Background()

	if err := removeStalePorts(ctx, sw, "default_web", "old", "ovnold2"); err != nil {
		t.Fatal(err)
	}
	want := []string{"br-int", "ovnnew1", "ovnnover", "ovnold2", "ovnother"}
	if got := ovstest.PortNames(t, sw); !slices.Equal(got, want) {
		t.Fatalf("after the old incarnation's ADD: ports %v, want %v (only its earlier sandbox ovnold1 removed)", got, want)
	}
	if err := removeStalePorts(ctx, sw, "default_web", "new", "ovnnew1"); err != nil {
		t.Fatal(err)
	}
	if got := ovstest.PortNames(t, sw); !slices.Equal(got, want) {
		t.Fatalf("after the new incarnation's ADD: ports %v, want %v (the old UID's port left to its DEL)", got, want)
	}
}
