package master

import (
	"context"
	"net/netip"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// CommitFunc sends operations to the NB (directly, or through a Committer).
type CommitFunc func(context.Context, []ovsdb.Operation) error

// EnsureCluster creates or repairs ovn_cluster_router and the join switch.
func EnsureCluster(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, joinSubnets []netip.Prefix) error {
	rows := topology.Cluster(joinSubnets)
	t := ovndb.NewTxn(nb)
	rtoj := t.Ensure(rows.RouterToJoin, topology.LRPColumns(rows.RouterToJoin), nil)
	t.Ensure(rows.Router, []any{&rows.Router.ExternalIDs}, &rows.Router.Ports, rtoj)
	jtor := t.Ensure(rows.JoinToRouter, topology.LSPColumns(rows.JoinToRouter), nil)
	// The join switch's external_ids also hold the gateway join-address counter
	// (see node.GatewayInit), so only its ports are managed here.
	t.Ensure(rows.Join, nil, &rows.Join.Ports, jtor)
	t.Ensure(rows.LBGroup, nil, nil)
	t.Ensure(rows.SwitchLBGroup, nil, nil)
	if ovndb.Lookup(t, &nbdb.Meter{Name: topology.ACLLogMeter}) == nil {
		band := t.Create(rows.ACLLogMeterBand)
		t.Ensure(rows.ACLLogMeter, nil, &rows.ACLLogMeter.Bands, band)
	}
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return commit(ctx, ops)
}
