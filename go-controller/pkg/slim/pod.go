// Package slim holds the pod as the master's informer keeps it: only what its
// controllers read, in 320 bytes. A corev1.Pod is 1,144 bytes before any of
// its strings, maps and slices; with 16,000 pods in place the informer's
// copies were a third of the master's live heap (docs/performance.md,
// "Memory").
package slim

import (
	"net/netip"
	"slices"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
)

// Pod is a pod reduced to its identity (name, namespace, UID, resource
// version, labels; the rest of ObjectMeta is left empty), where it runs, its
// phase, its named container ports and the pod-networks annotation.
type Pod struct {
	metav1.ObjectMeta
	NodeName    string
	HostNetwork bool
	Phase       corev1.PodPhase
	// Networks is the k8s.ovn.org/pod-networks annotation; Annotated says
	// whether the pod has it at all (an empty one is malformed, not absent).
	Networks   string
	Annotated  bool
	NamedPorts []NamedPort

	// parsed is Networks decoded, on first use (Addresses): an update of
	// the pod is a new Pod, so it is parsed once per version.
	parsed atomic.Pointer[parsedNetworks]
}

// parsedNetworks is a pod-networks annotation's pod UID ("" when malformed)
// and addresses.
type parsedNetworks struct {
	uid   string
	addrs []netip.Addr
}

// Addresses are the addresses of the pod-networks annotation when it was
// written for this pod (its UID), nil otherwise (absent, malformed, or
// copied from another pod). The annotation is parsed once per pod version.
func (p *Pod) Addresses() []netip.Addr {
	if !p.Annotated {
		return nil
	}
	n := p.parsed.Load()
	if n == nil {
		n = &parsedNetworks{}
		if pn, err := annotations.ParsePodNetworks(p.Networks); err == nil {
			n.uid = pn.PodUID
			for _, ip := range pn.IPs {
				n.addrs = append(n.addrs, ip.Addr())
			}
		}
		p.parsed.Store(n)
	}
	if n.uid == "" || n.uid != string(p.UID) {
		return nil
	}
	return n.addrs
}

// KnowAddresses records the pod UID and addresses its pod-networks
// annotation holds, for a caller that knows them without parsing it: the
// master, seeing the echo of the annotation it wrote (exactly the text it
// would write for uid and addrs). Addresses then answers without parsing;
// a pod already parsed keeps its answer.
func (p *Pod) KnowAddresses(uid string, addrs []netip.Addr) {
	p.parsed.CompareAndSwap(nil, &parsedNetworks{uid: uid, addrs: slices.Clone(addrs)})
}

// NamedPort is a container port with a name, which NetworkPolicies may use.
type NamedPort struct {
	Name     string
	Protocol corev1.Protocol
	Port     int32
}

// FromPod keeps of pod what Pod holds.
func FromPod(pod *corev1.Pod) *Pod {
	p := &Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Labels: pod.Labels,
		},
		NodeName:    pod.Spec.NodeName,
		HostNetwork: pod.Spec.HostNetwork,
		Phase:       pod.Status.Phase,
	}
	p.Networks, p.Annotated = pod.Annotations[annotations.PodNetworks]
	for _, c := range pod.Spec.Containers {
		for _, cp := range c.Ports {
			if cp.Name != "" {
				p.NamedPorts = append(p.NamedPorts, NamedPort{Name: cp.Name, Protocol: cp.Protocol, Port: cp.ContainerPort})
			}
		}
	}
	return p
}

// Transform is the informer transform that stores pods as Pods. Objects it
// has already reduced, and anything else, pass unchanged.
func Transform(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		return FromPod(pod), nil
	}
	return obj, nil
}

// Networked says whether ovn-k8s networks the pod, and so whether it has a
// port and pod-networks annotation: scheduled, on the pod network, and not
// finished (a finished pod's address goes back to the pool).
func (p *Pod) Networked() bool {
	return p.NodeName != "" && !p.HostNetwork && p.Phase != corev1.PodSucceeded && p.Phase != corev1.PodFailed
}

// ContainerPort resolves a named port for proto (TCP when a port names none).
func (p *Pod) ContainerPort(name string, proto corev1.Protocol) (int32, bool) {
	for _, np := range p.NamedPorts {
		pp := np.Protocol
		if pp == "" {
			pp = corev1.ProtocolTCP
		}
		if np.Name == name && pp == proto {
			return np.Port, true
		}
	}
	return 0, false
}

// Ref is the pod's reference for Events: a Pod has no kind the API
// machinery's scheme knows, so an event recorder cannot find it by itself.
func (p *Pod) Ref() *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: p.Namespace, Name: p.Name,
		UID: p.UID, ResourceVersion: p.ResourceVersion}
}

// GetObjectKind: a Pod carries no type metadata.
func (p *Pod) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject copies p; the informer's readers never modify what it holds.
func (p *Pod) DeepCopyObject() runtime.Object {
	c := &Pod{NodeName: p.NodeName, HostNetwork: p.HostNetwork, Phase: p.Phase, Networks: p.Networks, Annotated: p.Annotated,
		NamedPorts: append([]NamedPort(nil), p.NamedPorts...)}
	p.ObjectMeta.DeepCopyInto(&c.ObjectMeta)
	return c
}

// Lister reads the Pods an informer holds (see Transform).
type Lister struct{ indexer cache.Indexer }

// NewLister reads informer's store, which must hold Pods.
func NewLister(informer cache.SharedIndexInformer) Lister {
	return Lister{indexer: informer.GetIndexer()}
}

// Get is the pod ns/name, nil when the informer holds none.
func (l Lister) Get(ns, name string) *Pod {
	obj, ok, _ := l.indexer.GetByKey(ns + "/" + name)
	if !ok {
		return nil
	}
	p, _ := obj.(*Pod)
	return p
}

// List is the pods of namespace ns (every namespace for "") sel matches.
func (l Lister) List(ns string, sel labels.Selector) []*Pod {
	var out []*Pod
	_ = cache.ListAllByNamespace(l.indexer, ns, sel, func(obj any) {
		if p, ok := obj.(*Pod); ok {
			out = append(out, p)
		}
	})
	return out
}

// ByIndex is the pods the informer's index holds under value.
func (l Lister) ByIndex(index, value string) []*Pod {
	objs, _ := l.indexer.ByIndex(index, value)
	out := make([]*Pod, 0, len(objs))
	for _, obj := range objs {
		if p, ok := obj.(*Pod); ok {
			out = append(out, p)
		}
	}
	return out
}

// lastApplied is kubectl apply's copy of the whole object, which no
// controller of ours reads.
const lastApplied = "kubectl.kubernetes.io/last-applied-configuration"

// DropManagedFields is the informer transform for the objects the
// controllers keep whole: it drops the server-side apply bookkeeping
// (metadata.managedFields, often larger than the object) and kubectl apply's
// copy of the object, which no controller reads. An update sent with the
// cached object (a status) carries no managedFields, and the API server
// then keeps the ones it has.
func DropManagedFields(obj any) (any, error) {
	if o, ok := obj.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a != nil {
			delete(a, lastApplied)
		}
	}
	return obj, nil
}
