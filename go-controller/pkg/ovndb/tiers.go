package ovndb

import (
	"slices"
	"strconv"

	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/ovsdb"
)

// ACLTierKey is the external_id carrying the OVN ACL tier an ACL belongs
// in. The models are generated from the oldest supported schema, which has
// no ACL tier column, so the column is written from this key (see
// withACLTiers) and read back through it: an ACL whose key is right has the
// right tier, since nothing of ours writes one without the other.
const ACLTierKey = "k8s.ovn.org/acl-tier"

// HasACLTiers says whether the server's NB schema has ACL tiers (OVN 23.09
// and later).
func HasACLTiers(c client.Client) bool {
	s := c.Schema()
	t := s.Table("ACL")
	return t != nil && t.Column("tier") != nil
}

// HasQoSMark says whether the server's NB schema lets a QoS rule set the
// packet mark (schema 7.0.0, OVN 23.03's, has DSCP only).
func HasQoSMark(c client.Client) bool {
	t := c.Schema().Table("QoS")
	if t == nil || t.Column("action") == nil || t.Column("action").TypeObj == nil || t.Column("action").TypeObj.Key == nil {
		return false
	}
	return slices.Contains(t.Column("action").TypeObj.Key.Enum, any("mark"))
}

// withACLTiers sets the tier column of every ACL insert or update that
// writes external_ids, from their ACLTierKey (tier 0 without one), when the
// server has the column; elsewhere ops go unchanged.
func withACLTiers(c client.Client, ops []ovsdb.Operation) []ovsdb.Operation {
	for _, op := range ops {
		if aclWrite(op) {
			if HasACLTiers(c) {
				setACLTiers(ops)
			}
			break
		}
	}
	return ops
}

func aclWrite(op ovsdb.Operation) bool {
	if op.Table != "ACL" || (op.Op != ovsdb.OperationInsert && op.Op != ovsdb.OperationUpdate) {
		return false
	}
	_, ok := op.Row["external_ids"].(ovsdb.OvsMap)
	return ok
}

// setACLTiers sets the tier of each ACL write from its external_ids (a
// copy of the row: the operation's row may be shared).
func setACLTiers(ops []ovsdb.Operation) {
	for i := range ops {
		op := &ops[i]
		if !aclWrite(*op) {
			continue
		}
		tier := 0
		if v, ok := op.Row["external_ids"].(ovsdb.OvsMap).GoMap[ACLTierKey].(string); ok {
			tier, _ = strconv.Atoi(v)
		}
		row := make(ovsdb.Row, len(op.Row)+1)
		for k, v := range op.Row {
			row[k] = v
		}
		row["tier"] = tier
		op.Row = row
	}
}
