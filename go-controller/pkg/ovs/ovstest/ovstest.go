// Package ovstest runs libovsdb's in-memory server on the vswitchd schema
// for unit tests: an initialised Open_vSwitch database with br-int, and an
// ovs.Client connected to it.
package ovstest

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
)

// New starts an in-memory vswitchd database holding the Open_vSwitch row
// and the bridge br-int, and returns a client connected to it.
func New(t testing.TB) *ovs.Client {
	t.Helper()
	c, _ := Start(t)
	return c
}

// Start is New, and also returns the database's address (unix:PATH) for
// code that dials it itself.
func Start(t testing.TB) (*ovs.Client, string) {
	t.Helper()
	address := "unix:" + serve(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovs.Connect(ctx, address, logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	root := &vswitchd.OpenvSwitch{UUID: "newroot"}
	ops, err := c.Create(root)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Transact(ctx, ops...); err != nil {
		t.Fatal(err)
	}
	if err := c.EnsureBridge(ctx, ovs.Bridge{Name: "br-int", FailMode: "secure"}); err != nil {
		t.Fatal(err)
	}
	return c, address
}

func serve(t testing.TB) string {
	t.Helper()
	clientModel, err := vswitchd.FullDatabaseModel()
	if err != nil {
		t.Fatal(err)
	}
	return ovndbtest.Serve(t, vswitchd.Schema(), clientModel, "db.sock")
}

// Port is an ovs.Port on br-int with these external ids.
func Port(t testing.TB, c *ovs.Client, name string, externalIDs map[string]string) {
	t.Helper()
	if err := c.EnsurePort(context.Background(), "br-int", ovs.Port{Name: name, ExternalIDs: externalIDs}); err != nil {
		t.Fatal(err)
	}
}

// PortNames lists the names of br-int's ports, sorted.
func PortNames(t testing.TB, c *ovs.Client) []string {
	t.Helper()
	ifaces, err := c.BridgeInterfaces(context.Background(), "br-int")
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, i := range ifaces {
		names = append(names, i.Name)
	}
	slices.Sort(names)
	return names
}
