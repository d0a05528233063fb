package v1

import (
	"context"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
)

// EgressIPResource is the resource EgressIPs are served as (cluster-scoped;
// the CustomResourceDefinition is dist/kubernetes/05-crd-egressips.yaml).
var EgressIPResource = GroupVersion.WithResource("egressips")

// EgressAssignableLabel on a Node makes it a candidate to host egress IPs
// (its value does not matter): the traffic of the pods an EgressIP selects,
// whichever tenant's, leaves the cluster through the node its address is
// assigned to. Only a cluster administrator sets it
// (dist/kubernetes/12-admission-policies.yaml, ovn-k8s-egress-assignable):
// never a node's own identity, its kubelet or node daemon.
const EgressAssignableLabel = "k8s.ovn.org/egress-assignable"

// EgressIP gives the traffic leaving the cluster from the pods it selects a
// fixed source address: one of its egress IPs, each assigned to an egress
// assignable node.
type EgressIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   EgressIPSpec   `json:"spec"`
	Status EgressIPStatus `json:"status,omitempty"`
}

// EgressIPSpec is the addresses and the pods that leave with them: those
// PodSelector selects (every one when empty) in the namespaces
// NamespaceSelector selects.
type EgressIPSpec struct {
	// IPv4 and IPv6 addresses, at least one.
	EgressIPs         []string             `json:"egressIPs"`
	NamespaceSelector metav1.LabelSelector `json:"namespaceSelector"`
	PodSelector       metav1.LabelSelector `json:"podSelector,omitempty"`
}

// EgressIPStatus is what the master reports of an EgressIP: which node each
// assigned egress IP is on (an address not listed is not assigned).
type EgressIPStatus struct {
	Items []EgressIPStatusItem `json:"items"`
}

// EgressIPStatusItem is an egress IP and the node it is assigned to.
type EgressIPStatusItem struct {
	Node     string `json:"node"`
	EgressIP string `json:"egressIP"`
}

// EgressIPList is a list of EgressIPs.
type EgressIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []EgressIP `json:"items"`
}

// NewEgressIPInformer follows the EgressIPs through the dynamic client; its
// store holds *EgressIP (keyed by name: they are cluster-scoped), converted
// and with the same treatment of one that does not convert as
// NewEgressFirewallInformer's.
func NewEgressIPInformer(client dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return newInformer[EgressIP, EgressIPList](client, EgressIPResource, resync, cache.Indexers{})
}

func (l *EgressIPList) setItems(items []EgressIP) { l.Items = items }

// WriteEgressIPStatus sets the status of the EgressIP name to status,
// exactly (a merge patch of the status subresource replacing the whole
// list of items, an empty one when there are none: RBAC patch on
// egressips/status; the spec is not touched).
func WriteEgressIPStatus(ctx context.Context, client dynamic.Interface, name string, status EgressIPStatus) error {
	if status.Items == nil {
		status.Items = []EgressIPStatusItem{} // the CRD requires items in a status
	}
	return writeStatus(ctx, client.Resource(EgressIPResource), name, status)
}

// ServesEgressIP says whether the API server serves k8s.ovn.org/v1
// egressips (05-crd-egressips.yaml is installed).
func ServesEgressIP(d discovery.DiscoveryInterface) bool {
	return serves(d, EgressIPResource)
}
