package topology

import "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"

// The columns ovn-k8s manages on each kind of row, as pointers into the
// desired row (what ovndb.Txn.Ensure compares and writes). The others belong
// to northd or the operator (up, dynamic_addresses, ...) and are left alone.

// LSPColumns of a logical switch port.
func LSPColumns(p *nbdb.LogicalSwitchPort) []any {
	return []any{&p.Type, &p.Addresses, &p.PortSecurity, &p.Options, &p.ExternalIDs}
}

// LRPColumns of a logical router port.
func LRPColumns(p *nbdb.LogicalRouterPort) []any {
	return []any{&p.MAC, &p.Networks, &p.ExternalIDs}
}

// RouteColumns of a static route.
func RouteColumns(r *nbdb.LogicalRouterStaticRoute) []any {
	return []any{&r.IPPrefix, &r.Nexthop, &r.OutputPort, &r.Policy, &r.ExternalIDs}
}

// PolicyColumns of a logical router policy.
func PolicyColumns(p *nbdb.LogicalRouterPolicy) []any {
	return []any{&p.Priority, &p.Match, &p.Action, &p.Nexthops, &p.Options, &p.ExternalIDs}
}

// NATColumns of a NAT rule.
func NATColumns(n *nbdb.NAT) []any {
	return []any{&n.Type, &n.LogicalIP, &n.ExternalIP, &n.ExternalIDs}
}

// QoSColumns of a QoS rule.
func QoSColumns(q *nbdb.QoS) []any {
	return []any{&q.Priority, &q.Match, &q.Action, &q.Direction, &q.Bandwidth, &q.ExternalIDs}
}

// ACLColumns of an ACL.
func ACLColumns(a *nbdb.ACL) []any {
	return []any{&a.Priority, &a.Match, &a.Action, &a.Direction, &a.Options, &a.Log, &a.Severity, &a.Meter, &a.Name, &a.ExternalIDs}
}
