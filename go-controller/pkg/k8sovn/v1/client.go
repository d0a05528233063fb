package v1

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
)

// NewEgressFirewallInformer follows the EgressFirewalls of every namespace
// through the dynamic client; its store holds *EgressFirewall, indexed by
// namespace (cache.NamespaceIndex). Each object listed or watched is
// converted from its unstructured form; one that does not convert (its
// fields of other types than the schema's: never from an API server serving
// 05-crd-egressfirewalls.yaml) is logged and left out of the store, as if
// absent: a watch event changing an object into one, or deleting one, is
// passed on as a deletion carrying only the object's metadata (so a
// handler's OnDelete may get an EgressFirewall with an empty spec, or one
// it was never told of).
func NewEgressFirewallInformer(client dynamic.Interface, resync time.Duration) cache.SharedIndexInformer {
	return newInformer[EgressFirewall, EgressFirewallList](client, EgressFirewallResource, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

func (l *EgressFirewallList) setItems(items []EgressFirewall) { l.Items = items }

// statusPatch is a JSON merge patch setting an EgressFirewall's whole status:
// a field left empty is null, which removes what was there.
type statusPatch struct {
	Status   *string  `json:"status"`
	Messages []string `json:"messages"`
}

// WriteEgressFirewallStatus sets the status of the EgressFirewall
// namespace/name to status, exactly (a merge patch of the status
// subresource: RBAC patch on egressfirewalls/status; the spec is not
// touched).
func WriteEgressFirewallStatus(ctx context.Context, client dynamic.Interface, namespace, name string, status EgressFirewallStatus) error {
	var p statusPatch
	if status.Status != "" {
		p.Status = &status.Status
	}
	if len(status.Messages) > 0 {
		p.Messages = status.Messages
	}
	return writeStatus(ctx, client.Resource(EgressFirewallResource).Namespace(namespace), name, p)
}

// ServesEgressFirewall says whether the API server serves k8s.ovn.org/v1
// egressfirewalls (05-crd-egressfirewalls.yaml is installed).
func ServesEgressFirewall(d discovery.DiscoveryInterface) bool {
	return serves(d, EgressFirewallResource)
}

// What every kind of this package shares: its informer (newInformer), its
// status writer (writeStatus) and whether it is served (serves).

// objectPtr is a pointer to a kind of this package, T: what an informer's
// store holds.
type objectPtr[T any] interface {
	*T
	runtime.Object
	metav1.Object
}

// listPtr is a pointer to the list type L of a kind whose items are T.
type listPtr[T, L any] interface {
	*L
	runtime.Object
	metav1.ListInterface
	setItems([]T)
}

// newInformer follows gvr's objects (of every namespace) through the
// dynamic client, converted into T (a store of PT, with indexers), as
// NewEgressFirewallInformer says.
func newInformer[T, L any, PT objectPtr[T], PL listPtr[T, L]](client dynamic.Interface, gvr schema.GroupVersionResource,
	resync time.Duration, indexers cache.Indexers) cache.SharedIndexInformer {
	ri := client.Resource(gvr)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			ul, err := ri.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return typedList[T, L, PT, PL](klog.FromContext(ctx), ul), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			log := klog.FromContext(ctx)
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return typedEvent[T, PT](log, e) }), nil
		},
	}
	return cache.NewSharedIndexInformer(listOnly{lw}, PT(new(T)), resync, indexers)
}

// listOnly has client-go's reflector list, then watch, as it always did,
// rather than stream the initial list as watch events (its WatchListClient
// feature, on by default since v0.35): one path, the one the dynamic fake
// (which does not stream) tests, as slim.ListOnly for pods.
type listOnly struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is what the reflector asks.
func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// fromUnstructured converts u, nil if it does not convert.
func fromUnstructured[T any, PT objectPtr[T]](log klog.Logger, u *unstructured.Unstructured) PT {
	o := PT(new(T))
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, o); err != nil {
		log.Error(err, "an object that does not convert is left out of the store", "kind", u.GetKind(), "namespace", u.GetNamespace(), "name", u.GetName())
		return nil
	}
	return o
}

// typedList is ul with the items that convert.
func typedList[T, L any, PT objectPtr[T], PL listPtr[T, L]](log klog.Logger, ul *unstructured.UnstructuredList) PL {
	l := PL(new(L))
	l.SetResourceVersion(ul.GetResourceVersion())
	l.SetContinue(ul.GetContinue())
	l.SetRemainingItemCount(ul.GetRemainingItemCount())
	items := make([]T, 0, len(ul.Items))
	for i := range ul.Items {
		if o := fromUnstructured[T, PT](log, &ul.Items[i]); o != nil {
			items = append(items, *o)
		}
	}
	l.setItems(items)
	return l
}

// typedEvent is e with its object converted (see NewEgressFirewallInformer
// for one that does not convert). An error event is passed on as it is: its
// object is a Status, for the reflector.
func typedEvent[T any, PT objectPtr[T]](log klog.Logger, e watch.Event) (watch.Event, bool) {
	u, ok := e.Object.(*unstructured.Unstructured)
	if e.Type == watch.Error || !ok {
		return e, true
	}
	if o := fromUnstructured[T, PT](log, u); o != nil {
		e.Object = o
		return e, true
	}
	switch e.Type {
	case watch.Added:
		return e, false
	case watch.Modified, watch.Deleted:
		return watch.Event{Type: watch.Deleted, Object: metadataOnly[T, PT](u)}, true
	default: // a bookmark: only its resource version (and annotations) count
		return watch.Event{Type: e.Type, Object: metadataOnly[T, PT](u)}, true
	}
}

// metadataOnly is a T with u's identity and nothing else.
func metadataOnly[T any, PT objectPtr[T]](u *unstructured.Unstructured) PT {
	o := PT(new(T))
	o.GetObjectKind().SetGroupVersionKind(u.GroupVersionKind())
	o.SetNamespace(u.GetNamespace())
	o.SetName(u.GetName())
	o.SetUID(u.GetUID())
	o.SetResourceVersion(u.GetResourceVersion())
	o.SetAnnotations(u.GetAnnotations())
	return o
}

// writeStatus sets the status of the object name of ri with a JSON merge
// patch of its status subresource, {"status": status}: RBAC patch on the
// resource's /status; nothing but the status is touched.
func writeStatus(ctx context.Context, ri dynamic.ResourceInterface, name string, status any) error {
	body, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = ri.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// serves says whether the API server serves gvr.
func serves(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	rl, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	return err == nil && slices.ContainsFunc(rl.APIResources, func(r metav1.APIResource) bool {
		return r.Name == gvr.Resource
	})
}
