package topology

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
)

// DBGuardACLID is the RowIDKey of a node switch's database guard ACL.
const DBGuardACLID = "db-guard"

// ACLPriorityDBGuard is above every tier, ACLPriorityAlways included: no
// policy can let a pod reach the OVN databases.
const ACLPriorityDBGuard = 32000

// DBGuard is the ACL on node's switch dropping what its pods send to the
// OVN databases' endpoints (the NB and the SB the master was told of), nil
// when there are none. It applies after load balancing, so a Service whose
// endpoints name a database is no way around it. The databases also demand
// a client certificate; this keeps pods from their ports at all.
func DBGuard(node string, endpoints []netip.AddrPort) *nbdb.ACL {
	var clauses []string
	for _, ep := range endpoints {
		c := "(" + IPLayer(ep.Addr().Is6()) + ".dst == " + ep.Addr().Unmap().String() + " && tcp.dst == " + strconv.Itoa(int(ep.Port())) + ")"
		if !slices.Contains(clauses, c) {
			clauses = append(clauses, c)
		}
	}
	if len(clauses) == 0 {
		return nil
	}
	slices.Sort(clauses)
	ids := Owner{Type: OwnerNode, Name: node}.ExternalIDs()
	ids[RowIDKey] = DBGuardACLID
	return &nbdb.ACL{Direction: nbdb.ACLDirectionFromLport, Priority: ACLPriorityDBGuard, Match: strings.Join(clauses, " || "),
		Action: nbdb.ACLActionDrop, ExternalIDs: ids, Options: map[string]string{"apply-after-lb": "true"}}
}
