package v1

import (
	"context"
	"encoding/json"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
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
	ri := client.Resource(EgressFirewallResource)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			ul, err := ri.List(ctx, opts)
			if err != nil {
				return nil, err
			}
			return typedList(klog.FromContext(ctx), ul), nil
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			w, err := ri.Watch(ctx, opts)
			if err != nil {
				return nil, err
			}
			log := klog.FromContext(ctx)
			return watch.Filter(w, func(e watch.Event) (watch.Event, bool) { return typedEvent(log, e) }), nil
		},
	}
	return cache.NewSharedIndexInformer(listOnly{lw}, &EgressFirewall{}, resync,
		cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
}

// listOnly has client-go's reflector list, then watch, as it always did,
// rather than stream the initial list as watch events (its WatchListClient
// feature, on by default since v0.35): one path, the one the dynamic fake
// (which does not stream) tests, as slim.ListOnly for pods.
type listOnly struct{ *cache.ListWatch }

// IsWatchListSemanticsUnSupported is what the reflector asks.
func (listOnly) IsWatchListSemanticsUnSupported() bool { return true }

// fromUnstructured converts u, nil if it does not convert.
func fromUnstructured(log klog.Logger, u *unstructured.Unstructured) *EgressFirewall {
	ef := new(EgressFirewall)
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ef); err != nil {
		log.Error(err, "an EgressFirewall that does not convert is left out of the store", "namespace", u.GetNamespace(), "name", u.GetName())
		return nil
	}
	return ef
}

// typedList is ul with the items that convert.
func typedList(log klog.Logger, ul *unstructured.UnstructuredList) *EgressFirewallList {
	list := &EgressFirewallList{Items: make([]EgressFirewall, 0, len(ul.Items))}
	list.SetResourceVersion(ul.GetResourceVersion())
	list.SetContinue(ul.GetContinue())
	list.SetRemainingItemCount(ul.GetRemainingItemCount())
	for i := range ul.Items {
		if ef := fromUnstructured(log, &ul.Items[i]); ef != nil {
			list.Items = append(list.Items, *ef)
		}
	}
	return list
}

// typedEvent is e with its object converted (see NewEgressFirewallInformer
// for one that does not convert). An error event is passed on as it is: its
// object is a Status, for the reflector.
func typedEvent(log klog.Logger, e watch.Event) (watch.Event, bool) {
	u, ok := e.Object.(*unstructured.Unstructured)
	if e.Type == watch.Error || !ok {
		return e, true
	}
	if ef := fromUnstructured(log, u); ef != nil {
		e.Object = ef
		return e, true
	}
	switch e.Type {
	case watch.Added:
		return e, false
	case watch.Modified, watch.Deleted:
		return watch.Event{Type: watch.Deleted, Object: metadataOnly(u)}, true
	default: // a bookmark: only its resource version (and annotations) count
		return watch.Event{Type: e.Type, Object: metadataOnly(u)}, true
	}
}

// metadataOnly is an EgressFirewall with u's identity and nothing else.
func metadataOnly(u *unstructured.Unstructured) *EgressFirewall {
	return &EgressFirewall{
		TypeMeta: metav1.TypeMeta{APIVersion: u.GetAPIVersion(), Kind: u.GetKind()},
		ObjectMeta: metav1.ObjectMeta{Namespace: u.GetNamespace(), Name: u.GetName(), UID: u.GetUID(),
			ResourceVersion: u.GetResourceVersion(), Annotations: u.GetAnnotations()},
	}
}

// statusPatch is a JSON merge patch setting an EgressFirewall's whole status:
// a field left empty is null, which removes what was there.
type statusPatch struct {
	Status struct {
		Status   *string  `json:"status"`
		Messages []string `json:"messages"`
	} `json:"status"`
}

// WriteEgressFirewallStatus sets the status of the EgressFirewall
// namespace/name to status, exactly (a merge patch of the status
// subresource: RBAC patch on egressfirewalls/status; the spec is not
// touched).
func WriteEgressFirewallStatus(ctx context.Context, client dynamic.Interface, namespace, name string, status EgressFirewallStatus) error {
	var p statusPatch
	if status.Status != "" {
		p.Status.Status = &status.Status
	}
	if len(status.Messages) > 0 {
		p.Status.Messages = status.Messages
	}
	body, err := json.Marshal(p)
	if err != nil {
		return err
	}
	_, err = client.Resource(EgressFirewallResource).Namespace(namespace).
		Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{}, "status")
	return err
}

// ServesEgressFirewall says whether the API server serves k8s.ovn.org/v1
// egressfirewalls (05-crd-egressfirewalls.yaml is installed).
func ServesEgressFirewall(d discovery.DiscoveryInterface) bool {
	list, err := d.ServerResourcesForGroupVersion(GroupVersion.String())
	return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool {
		return r.Name == EgressFirewallResource.Resource
	})
}
