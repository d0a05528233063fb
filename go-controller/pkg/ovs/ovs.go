// Package ovs configures the local Open vSwitch through its database
// (libovsdb on the vswitch schema): bridges, ports and the external_ids
// ovn-controller reads. Nothing here execs ovs-vsctl.
package ovs

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
)

// DefaultAddress is where Debian's ovsdb-server listens.
const DefaultAddress = "unix:/var/run/openvswitch/db.sock"

// Client is a connection to one vswitchd database.
type Client struct {
	client.Client
}

// Connect dials the OVS database, retrying until ctx ends.
func Connect(ctx context.Context, address string, log logr.Logger) (*Client, error) {
	m, err := vswitchd.FullDatabaseModel()
	if err != nil {
		return nil, err
	}
	c, err := ovndb.Connect(ctx, []string{address}, m, nil, log)
	if err != nil {
		return nil, err
	}
	return &Client{c}, nil
}

func (c *Client) transact(ctx context.Context, ops []ovsdb.Operation) error {
	if len(ops) == 0 {
		return nil
	}
	if err := ovndb.Transact(ctx, c.Client, ops); err != nil {
		return fmt.Errorf("OVS transaction: %w", err)
	}
	return nil
}

// update writes the listed fields of a row (its UUID set); nothing when none.
func (c *Client) update(ctx context.Context, row model.Model, fields []any) error {
	if len(fields) == 0 {
		return nil
	}
	ops, err := c.Where(row).Update(row, fields...)
	if err != nil {
		return err
	}
	return c.transact(ctx, ops)
}

// Root returns the single Open_vSwitch row.
func (c *Client) Root(ctx context.Context) (*vswitchd.OpenvSwitch, error) {
	var rows []vswitchd.OpenvSwitch
	if err := c.List(ctx, &rows); err != nil {
		return nil, err
	}
	if len(rows) != 1 {
		return nil, fmt.Errorf("OVS database has %d Open_vSwitch rows, want 1 (is it initialised? `ovs-vsctl init`)", len(rows))
	}
	return &rows[0], nil
}

// SetExternalIDs sets keys of Open_vSwitch external_ids; a key in keepIfSet
// is only written when absent (system-id must never change once chosen).
// Nothing is written when every key already has its value.
func (c *Client) SetExternalIDs(ctx context.Context, values map[string]string, keepIfSet ...string) (map[string]string, error) {
	root, err := c.Root(ctx)
	if err != nil {
		return nil, err
	}
	merged := map[string]string{}
	for k, v := range root.ExternalIDs {
		merged[k] = v
	}
	changed := false
	for k, v := range values {
		if slices.Contains(keepIfSet, k) && merged[k] != "" {
			continue
		}
		if merged[k] != v {
			merged[k] = v
			changed = true
		}
	}
	if !changed {
		return merged, nil
	}
	root.ExternalIDs = merged
	return merged, c.update(ctx, root, []any{&root.ExternalIDs})
}

// DatapathType is a bridge's datapath_type ("netdev" for the userspace datapath).
func (c *Client) DatapathType(ctx context.Context, bridge string) (string, error) {
	b := &vswitchd.Bridge{Name: bridge}
	if err := c.Get(ctx, b); err != nil {
		return "", fmt.Errorf("bridge %s: %w", bridge, err)
	}
	return b.DatapathType, nil
}

// Bridge describes a bridge to ensure.
type Bridge struct {
	Name         string
	DatapathType string // "netdev" for the userspace datapath, "" for the kernel's
	FailMode     string // "secure" for br-int
	OtherConfig  map[string]string
}

// EnsureBridge creates the bridge (with its local internal port) or fixes
// its settings; it writes nothing when the bridge is already as described.
func (c *Client) EnsureBridge(ctx context.Context, b Bridge) error {
	want := &vswitchd.Bridge{Name: b.Name, DatapathType: b.DatapathType, OtherConfig: b.OtherConfig}
	if b.FailMode != "" {
		fm := vswitchd.BridgeFailMode(b.FailMode)
		want.FailMode = &fm
	}
	have := &vswitchd.Bridge{Name: b.Name}
	err := c.Get(ctx, have)
	if err == nil {
		var fields []any
		if have.DatapathType != want.DatapathType {
			fields = append(fields, &want.DatapathType)
		}
		if !reflect.DeepEqual(have.FailMode, want.FailMode) {
			fields = append(fields, &want.FailMode)
		}
		// Only our keys: other tools (and operators) set their own on br-int.
		if merged, changed := mergeKeys(have.OtherConfig, want.OtherConfig); changed {
			want.OtherConfig = merged
			fields = append(fields, &want.OtherConfig)
		}
		want.UUID = have.UUID
		return c.update(ctx, want, fields)
	}
	if !errors.Is(err, client.ErrNotFound) {
		return err
	}
	root, err := c.Root(ctx)
	if err != nil {
		return err
	}
	iface := &vswitchd.Interface{UUID: "newiface", Name: b.Name, Type: "internal"}
	port := &vswitchd.Port{UUID: "newport", Name: b.Name, Interfaces: []string{iface.UUID}}
	want.UUID = "newbridge"
	want.Ports = []string{port.UUID}
	ops, err := c.Create(iface, port, want)
	if err != nil {
		return err
	}
	mut, err := c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationInsert, Value: []string{want.UUID}})
	if err != nil {
		return err
	}
	return c.transact(ctx, append(ops, mut...))
}

// EnsureSSL points OVS's SSL table (read by ovn-controller and
// ovs-vswitchd for ssl: remotes) at these PEM files; nothing is written when
// it already does.
func (c *Client) EnsureSSL(ctx context.Context, privateKey, certificate, caCert string) error {
	root, err := c.Root(ctx)
	if err != nil {
		return err
	}
	want := &vswitchd.SSL{PrivateKey: privateKey, Certificate: certificate, CaCert: caCert}
	if root.SSL != nil {
		have := &vswitchd.SSL{UUID: *root.SSL}
		if err := c.Get(ctx, have); err == nil {
			if have.PrivateKey == want.PrivateKey && have.Certificate == want.Certificate && have.CaCert == want.CaCert {
				return nil
			}
			want.UUID = have.UUID
			return c.update(ctx, want, []any{&want.PrivateKey, &want.Certificate, &want.CaCert})
		}
	}
	want.UUID = "newssl"
	ops, err := c.Create(want)
	if err != nil {
		return err
	}
	ref := want.UUID
	root.SSL = &ref
	upd, err := c.Where(root).Update(root, &root.SSL)
	if err != nil {
		return err
	}
	return c.transact(ctx, append(ops, upd...))
}

// DeleteBridge removes a bridge (its ports go with it); a missing bridge is
// not an error.
func (c *Client) DeleteBridge(ctx context.Context, name string) error {
	br := &vswitchd.Bridge{Name: name}
	if err := c.Get(ctx, br); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil
		}
		return err
	}
	root, err := c.Root(ctx)
	if err != nil {
		return err
	}
	ops, err := c.Where(root).Mutate(root, model.Mutation{Field: &root.Bridges, Mutator: ovsdb.MutateOperationDelete, Value: []string{br.UUID}})
	if err != nil {
		return err
	}
	return c.transact(ctx, ops)
}

// PortBridge names the bridge holding the port called name, or "" if none does.
func (c *Client) PortBridge(ctx context.Context, name string) (string, error) {
	port := &vswitchd.Port{Name: name}
	if err := c.Get(ctx, port); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return "", nil
		}
		return "", err
	}
	var bridges []vswitchd.Bridge
	if err := c.WhereCache(func(b *vswitchd.Bridge) bool { return slices.Contains(b.Ports, port.UUID) }).List(ctx, &bridges); err != nil {
		return "", err
	}
	if len(bridges) == 0 {
		return "", nil
	}
	return bridges[0].Name, nil
}

// Port describes a single-interface port to ensure on a bridge.
type Port struct {
	Name        string
	Type        string // "internal", "" for a system device such as a veth
	MAC         string // internal ports only
	MTU         int    // internal ports only; 0 leaves it alone
	ExternalIDs map[string]string
	Options     map[string]string
}

// EnsurePort creates the port on bridge or brings its interface settings in
// line; nothing is written when it already matches.
func (c *Client) EnsurePort(ctx context.Context, bridge string, p Port) error {
	want := &vswitchd.Interface{Name: p.Name, Type: p.Type, ExternalIDs: p.ExternalIDs, Options: p.Options}
	if p.MAC != "" {
		want.MAC = &p.MAC
	}
	if p.MTU > 0 {
		want.MTURequest = &p.MTU
	}
	br := &vswitchd.Bridge{Name: bridge}
	if err := c.Get(ctx, br); err != nil {
		return fmt.Errorf("bridge %s: %w", bridge, err)
	}
	have := &vswitchd.Interface{Name: p.Name}
	port := &vswitchd.Port{Name: p.Name}
	if c.Get(ctx, have) == nil && c.Get(ctx, port) == nil && slices.Contains(br.Ports, port.UUID) {
		var fields []any
		if have.Type != want.Type {
			fields = append(fields, &want.Type)
		}
		// Only our keys are compared and written: ovn-controller adds its own
		// (ovn-installed) to the same map, and they must survive.
		if merged, changed := mergeKeys(have.ExternalIDs, p.ExternalIDs); changed {
			want.ExternalIDs = merged
			fields = append(fields, &want.ExternalIDs)
		}
		if merged, changed := mergeKeys(have.Options, p.Options); changed {
			want.Options = merged
			fields = append(fields, &want.Options)
		}
		if want.MAC != nil && !reflect.DeepEqual(have.MAC, want.MAC) {
			fields = append(fields, &want.MAC)
		}
		if want.MTURequest != nil && !reflect.DeepEqual(have.MTURequest, want.MTURequest) {
			fields = append(fields, &want.MTURequest)
		}
		want.UUID = have.UUID
		return c.update(ctx, want, fields)
	}
	// Missing, or half-there: replace whatever port holds the name.
	var ops []ovsdb.Operation
	if c.Get(ctx, port) == nil {
		del, err := c.removePortOps(ctx, port.UUID)
		if err != nil {
			return err
		}
		ops = append(ops, del...)
	}
	want.UUID = "newiface"
	newPort := &vswitchd.Port{UUID: "newport", Name: p.Name, Interfaces: []string{want.UUID}}
	create, err := c.Create(want, newPort)
	if err != nil {
		return err
	}
	mut, err := c.Where(br).Mutate(br, model.Mutation{Field: &br.Ports, Mutator: ovsdb.MutateOperationInsert, Value: []string{newPort.UUID}})
	if err != nil {
		return err
	}
	ops = append(append(ops, create...), mut...)
	return c.transact(ctx, ops)
}

// DeletePort removes a port (by name) from whichever bridge holds it; a
// missing port is not an error.
func (c *Client) DeletePort(ctx context.Context, name string) error {
	port := &vswitchd.Port{Name: name}
	if err := c.Get(ctx, port); err != nil {
		if errors.Is(err, client.ErrNotFound) {
			return nil
		}
		return err
	}
	ops, err := c.removePortOps(ctx, port.UUID)
	if err != nil {
		return err
	}
	return c.transact(ctx, ops)
}

// removePortOps detaches a port from its bridges; ports and interfaces are
// not root rows, so the server garbage-collects them.
func (c *Client) removePortOps(ctx context.Context, portUUID string) ([]ovsdb.Operation, error) {
	var bridges []vswitchd.Bridge
	if err := c.WhereCache(func(b *vswitchd.Bridge) bool { return slices.Contains(b.Ports, portUUID) }).List(ctx, &bridges); err != nil {
		return nil, err
	}
	var ops []ovsdb.Operation
	for i := range bridges {
		b := &bridges[i]
		mut, err := c.Where(b).Mutate(b, model.Mutation{Field: &b.Ports, Mutator: ovsdb.MutateOperationDelete, Value: []string{portUUID}})
		if err != nil {
			return nil, err
		}
		ops = append(ops, mut...)
	}
	return ops, nil
}

// InterfacesWithExternalID returns the interfaces whose external_ids hold
// key with this value. A missing key never matches, not even the value "":
// asking for sandbox="" must not return every port that has no sandbox
// (br-int's own, the management port, the bridge's NIC).
func (c *Client) InterfacesWithExternalID(ctx context.Context, key, value string) ([]vswitchd.Interface, error) {
	var out []vswitchd.Interface
	err := c.WhereCache(func(i *vswitchd.Interface) bool {
		v, ok := i.ExternalIDs[key]
		return ok && v == value
	}).List(ctx, &out)
	return out, err
}

// Interface returns the named interface from the cache.
func (c *Client) Interface(ctx context.Context, name string) (*vswitchd.Interface, error) {
	i := &vswitchd.Interface{Name: name}
	if err := c.Get(ctx, i); err != nil {
		return nil, err
	}
	return i, nil
}

// WaitInterface polls the cache until cond holds for the named interface.
func (c *Client) WaitInterface(ctx context.Context, name string, cond func(*vswitchd.Interface) bool) error {
	for {
		if i, err := c.Interface(ctx, name); err == nil && cond(i) {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// mergeKeys returns have with the keys of want set, and whether that changed anything.
func mergeKeys(have, want map[string]string) (map[string]string, bool) {
	changed := false
	merged := make(map[string]string, len(have)+len(want))
	for k, v := range have {
		merged[k] = v
	}
	for k, v := range want {
		if hv, ok := have[k]; !ok || hv != v {
			merged[k] = v
			changed = true
		}
	}
	return merged, changed
}

// BridgeInterfaces returns the interfaces of every port on the bridge.
func (c *Client) BridgeInterfaces(ctx context.Context, bridge string) ([]vswitchd.Interface, error) {
	b := &vswitchd.Bridge{Name: bridge}
	if err := c.Get(ctx, b); err != nil {
		return nil, fmt.Errorf("bridge %s: %w", bridge, err)
	}
	var out []vswitchd.Interface
	for _, pu := range b.Ports {
		p := &vswitchd.Port{UUID: pu}
		if c.Get(ctx, p) != nil {
			continue
		}
		for _, iu := range p.Interfaces {
			i := &vswitchd.Interface{UUID: iu}
			if c.Get(ctx, i) == nil {
				out = append(out, *i)
			}
		}
	}
	return out, nil
}
