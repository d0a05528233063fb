package v1

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/netip"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// DNSNameResolverResource is the resource DNSNameResolvers are served as
// (cluster-scoped; dist/kubernetes/05-crd-dnsnameresolvers.yaml).
var DNSNameResolverResource = GroupVersion.WithResource("dnsnameresolvers")

// DNSNameResolver is, in zone mode, what the cluster's DNS answered pods for
// one DNS name some policy names (an EgressFirewall's dnsName, an admin
// policy's domainNames; a wildcard covers every name under it): the cluster
// manager takes the cluster DNS's dnstap stream, and it alone writes these
// (RBAC); every zone's master reads them (a zone cannot take the stream,
// which goes to one address). Named DNSNameResolverName(spec.name); an
// object of another name is ignored.
type DNSNameResolver struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   DNSNameResolverSpec   `json:"spec"`
	Status DNSNameResolverStatus `json:"status,omitempty"`
}

// DNSNameResolverSpec is the name followed, normalized: lower case, no
// trailing dot, "*." first for a wildcard.
type DNSNameResolverSpec struct {
	Name string `json:"name"`
}

// DNSNameResolverStatus is each address the pods were answered for the name
// (for a wildcard: for names under it), until it expires: when it was last
// answered plus its TTL (at least the resolver's floor), rounded up to the
// second.
type DNSNameResolverStatus struct {
	ResolvedAddresses []ResolvedAddress `json:"resolvedAddresses,omitempty"`
}

// ResolvedAddress is an address and when it expires.
type ResolvedAddress struct {
	IP      string      `json:"ip"`
	Expires metav1.Time `json:"expires"`
}

// DNSNameResolverList is a list of DNSNameResolvers.
type DNSNameResolverList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	Items []DNSNameResolver `json:"items"`
}

func (l *DNSNameResolverList) setItems(items []DNSNameResolver) { l.Items = items }

// DNSNameResolverName is the object name of a normalized DNS name's
// DNSNameResolver: "dns-" and 32 hex digits of its SHA-256 (a wildcard's
// "*" is not allowed in an object name).
func DNSNameResolverName(name string) string {
	sum := sha256.Sum256([]byte(name))
	return "dns-" + hex.EncodeToString(sum[:16])
}

// Expiries is when each address of the status expires (the unparsable
// left out); an empty, non-nil map when there is none.
func (s DNSNameResolverStatus) Expiries() map[netip.Addr]time.Time {
	out := make(map[netip.Addr]time.Time, len(s.ResolvedAddresses))
	for _, r := range s.ResolvedAddresses {
		if a, err := netip.ParseAddr(r.IP); err == nil && r.Expires.After(out[a.Unmap()]) {
			out[a.Unmap()] = r.Expires.Time
		}
	}
	return out
}

// NewDNSNameResolverInformer follows the DNSNameResolvers through the
// dynamic client; its store holds *DNSNameResolver keyed by name, converted
// as NewEgressFirewallInformer says.
func NewDNSNameResolverInformer(client dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return newInformer[DNSNameResolver, DNSNameResolverList](client, DNSNameResolverResource, resync, cache.Indexers{})
}

// KnownAddresses reads a name's addresses from an informer's store of
// DNSNameResolvers (dnsname.Options.Known): nil when the name has no object
// of its own name.
func KnownAddresses(store cache.Store) func(name string) map[netip.Addr]time.Time {
	return func(name string) map[netip.Addr]time.Time {
		if o := GetDNSNameResolver(store, name); o != nil {
			return o.Status.Expiries()
		}
		return nil
	}
}

// GetDNSNameResolver is the DNSNameResolver of a normalized name in store
// (nil: none, or one naming another name).
func GetDNSNameResolver(store cache.Store, name string) *DNSNameResolver {
	obj, ok, err := store.GetByKey(DNSNameResolverName(name))
	if o, isDNS := obj.(*DNSNameResolver); ok && err == nil && isDNS && o.Spec.Name == name {
		return o
	}
	return nil
}

// CreateDNSNameResolver creates the DNSNameResolver of a normalized name,
// without a status.
func CreateDNSNameResolver(ctx context.Context, client dynamic.Interface, name string) (*DNSNameResolver, error) {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": GroupVersion.String(), "kind": "DNSNameResolver",
		"metadata": map[string]any{"name": DNSNameResolverName(name)},
		"spec":     map[string]any{"name": name},
	}}
	out, err := client.Resource(DNSNameResolverResource).Create(ctx, u, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	if o := fromUnstructured[DNSNameResolver](klog.FromContext(ctx), out); o != nil {
		return o, nil
	}
	return nil, fmt.Errorf("DNSNameResolver %s as created does not convert", out.GetName())
}

// DeleteDNSNameResolver deletes the object, only if it is still the one of
// this UID.
func DeleteDNSNameResolver(ctx context.Context, client dynamic.Interface, objName string, uid types.UID) error {
	return client.Resource(DNSNameResolverResource).Delete(ctx, objName, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// dnsStatusPatch replaces the whole list (null when empty, which removes it).
type dnsStatusPatch struct {
	ResolvedAddresses []ResolvedAddress `json:"resolvedAddresses"`
}

// WriteDNSNameResolverStatus sets the status of the DNSNameResolver objName
// to status, exactly (a merge patch of the status subresource: RBAC patch
// on dnsnameresolvers/status).
func WriteDNSNameResolverStatus(ctx context.Context, client dynamic.Interface, objName string, status DNSNameResolverStatus) error {
	return writeStatus(ctx, client.Resource(DNSNameResolverResource), objName, dnsStatusPatch(status))
}

// ServesDNSNameResolver says whether the API server serves k8s.ovn.org/v1
// dnsnameresolvers (05-crd-dnsnameresolvers.yaml is installed).
func ServesDNSNameResolver(d discovery.DiscoveryInterface) bool {
	return serves(d, DNSNameResolverResource)
}
