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
func EnsureCluster(ctx context.Context, nb libovsdbclient.Client, commit CommitFunc, joinSubnet netip.Prefix) error {
	rows := topology.Cluster(joinSubnet)
	t := ovndb.NewTxn(nb)
	rtoj := t.Ensure(rows.RouterToJoin, lrpFields(rows.RouterToJoin), nil)
	t.Ensure(rows.Router, []any{&rows.Router.ExternalIDs}, &rows.Router.Ports, rtoj)
	jtor := t.Ensure(rows.JoinToRouter, lspFields(rows.JoinToRouter), nil)
	t.Ensure(rows.Join, []any{&rows.Join.ExternalIDs}, &rows.Join.Ports, jtor)
	t.Ensure(rows.LBGroup, nil, nil)
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return commit(ctx, ops)
}

// lspFields are the LSP columns ovn-k8s manages; the rest (up, dynamic
// addresses, ...) belong to northd and are left alone.
func lspFields(p *nbdb.LogicalSwitchPort) []any {
	return []any{&p.Type, &p.Addresses, &p.PortSecurity, &p.Options, &p.ExternalIDs}
}

func lrpFields(p *nbdb.LogicalRouterPort) []any {
	return []any{&p.MAC, &p.Networks, &p.ExternalIDs}
}
