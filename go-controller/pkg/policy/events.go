package policy

import (
	"slices"
	"strings"

	"github.com/ovn-org/libovsdb/model"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func (c *Controller) policyChanged(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		c.queue.Add(policyKey + key)
	}
}

// podChanged queues the keys whose rows a pod change can alter: the
// members of the port groups of the policies of its namespace selecting it
// (before or after) and of its namespace's default-deny groups, the
// policies naming a port it declares, and the peer sets it enters, leaves
// or changes the address of.
func (c *Controller) podChanged(old, cur *slim.Pod) {
	pod := cur
	if pod == nil {
		pod = old
	}
	if pod != nil {
		c.memo.changed(pod.Namespace) // before the early returns: the memo is conservative
	}
	if !c.started.Load() {
		return
	}
	if pod == nil || !c.concerns(pod.Namespace) || old != nil && cur != nil && samePolicyView(old, cur) {
		return
	}
	if c.opts.Isolation {
		c.queue.Add(tenantKey + c.tenantOf(pod.Namespace))
	}
	nsLabels := c.nsLabels(pod.Namespace)
	c.mu.RLock()
	defer c.mu.RUnlock()
	nsQueued := false
	for key := range c.nsPolicies[pod.Namespace] {
		if p := c.policies[key]; selects(p.pods, old) || selects(p.pods, cur) {
			c.queue.Add(membersKey + policyKey + key)
			if !nsQueued {
				c.queue.Add(membersKey + namespaceKey + pod.Namespace)
				nsQueued = true
			}
		}
	}
	for _, key := range c.policiesNamingPortsOf(old, cur) {
		c.queue.Add(queueKeyOf(key)) // a number may appear or vanish
	}
	c.adminPodChanged(old, cur, nsLabels)
	if len(c.nsSets[pod.Namespace]) == 0 && len(c.crossSets) == 0 {
		return
	}
	oldIPs, curIPs := old != nil && len(podAddrs(old)) > 0, cur != nil && len(podAddrs(cur)) > 0
	check := func(name string) {
		e := c.sets[name]
		was := oldIPs && e.set.Selects(old, nsLabels)
		is := curIPs && e.set.Selects(cur, nsLabels)
		if was || is {
			c.queue.Add(peersKey + name)
		}
	}
	for name := range c.nsSets[pod.Namespace] {
		check(name)
	}
	for name := range c.crossSets {
		check(name)
	}
}

// policiesNamingPortsOf lists the policies naming a port one of these pods
// declares by name (c.mu held).
// queueKeyOf is the queue key of a policy registered under key (a
// NetworkPolicy's is namespace/name, an admin policy's its queue key).
func queueKeyOf(key string) string {
	if strings.HasPrefix(key, adminKey) {
		return key
	}
	return policyKey + key
}

func (c *Controller) policiesNamingPortsOf(pods ...*slim.Pod) []string {
	var out []string
	for _, p := range pods {
		if p == nil {
			continue
		}
		for _, np := range p.NamedPorts {
			for key := range c.namedPorts[NamedPortKey(np.Protocol, np.Name)] {
				if !slices.Contains(out, key) {
					out = append(out, key)
				}
			}
		}
	}
	return out
}

// concerns says whether a change of a pod in namespace ns can alter any row:
// not when no policy lives there, no peer set can hold its pods, no policy
// names a port and namespaces are not isolated (a cluster without
// policies pays nothing for pod events). A policy registered after this
// answer reads the pod from the informer in its own sync.
func (c *Controller) concerns(ns string) bool {
	if c.opts.Isolation {
		return true
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	return len(c.nsPolicies[ns]) > 0 || len(c.nsSets[ns]) > 0 || len(c.crossSets) > 0 || len(c.namedPorts) > 0 || len(c.admins) > 0
}

func selects(s labels.Selector, p *slim.Pod) bool {
	return p != nil && s.Matches(labels.Set(p.Labels))
}

// samePolicyView says two versions of a pod look the same to policies.
func samePolicyView(a, b *slim.Pod) bool {
	return labels.Equals(a.Labels, b.Labels) && sameIPs(a, b) && portsEqual(a, b)
}

// sameIPs says two versions of a pod have the same podIPs, without parsing
// the annotation when nothing podIPs reads has changed.
func sameIPs(a, b *slim.Pod) bool {
	if a.UID == b.UID && a.NodeName == b.NodeName && a.HostNetwork == b.HostNetwork && a.Phase == b.Phase &&
		a.Annotated == b.Annotated && a.Networks == b.Networks {
		return true
	}
	return slices.Equal(podAddrs(a), podAddrs(b))
}

func portsEqual(a, b *slim.Pod) bool { return slices.Equal(a.NamedPorts, b.NamedPorts) }

func (c *Controller) nsLabels(ns string) labels.Set {
	n, err := c.nsLister.Get(ns)
	if err != nil {
		return nil
	}
	return n.Labels
}

// namespaceChanged queues the peer sets whose namespace selector the change
// flips, and the namespace's own rows.
func (c *Controller) namespaceChanged(old, cur *corev1.Namespace) {
	if old == nil || cur == nil || old.Annotations[TenantAnnotation] != cur.Annotations[TenantAnnotation] {
		c.forgetTenants()
	}
	if !c.started.Load() {
		return
	}
	ns := cur
	if ns == nil {
		ns = old
	}
	if ns == nil {
		return
	}
	c.queue.Add(namespaceKey + ns.Name)
	if c.opts.Isolation && (old == nil || cur == nil || old.Annotations[TenantAnnotation] != cur.Annotations[TenantAnnotation]) {
		c.enqueueTenants() // joins may move other namespaces too
	}
	if old != nil && cur != nil && old.Annotations[annotations.NamespaceACLLogging] != cur.Annotations[annotations.NamespaceACLLogging] {
		nps, _ := c.npLister.NetworkPolicies(ns.Name).List(labels.Everything())
		for _, np := range nps {
			c.queue.Add(policyKey + np.Namespace + "/" + np.Name)
		}
		if c.getAdmin(KindEF, ns.Name) != nil {
			c.queue.Add(adminKey + KindEF + "/" + ns.Name)
		}
	}
	var oldL, curL labels.Set
	if old != nil {
		oldL = old.Labels
	}
	if cur != nil {
		curL = cur.Labels
	}
	if old != nil && cur != nil && labels.Equals(oldL, curL) {
		return
	}
	c.mu.RLock()
	defer c.mu.RUnlock()
	// Only the sets spanning namespaces, not every set; and only those the
	// namespace's own pods move: a namespace created empty (or any whose
	// pods the set's pod selector picks none of) changes no member, and a
	// set of thousands of namespaces synced for each of them made a growing
	// cluster's namespaces cost namespaces² (make bench-scale). A pod that
	// comes later queues the set itself (podChanged).
	for name := range c.crossSets {
		e := c.sets[name]
		if e == nil || (old != nil && cur != nil && e.set.Namespaces.Matches(oldL) == e.set.Namespaces.Matches(curL)) {
			continue
		}
		if len(c.podsInNamespace(e.set, ns.Name)) > 0 {
			c.queue.Add(peersKey + name)
		}
	}
	c.adminNamespaceChanged(oldL, curL)
}

// nbRowChanged follows pod ports coming and going (a pod's port appears
// after its address, and port groups hold ports) and rows of ours deleted
// behind our back.
func (c *Controller) nbRowChanged(m model.Model, deleted bool) {
	if !c.started.Load() {
		return
	}
	switch row := m.(type) {
	case *nbdb.LogicalSwitchPort:
		o, ok := topology.OwnerOf(row.ExternalIDs)
		if !ok || o.Type != topology.OwnerPod {
			return
		}
		ns, name, _ := strings.Cut(o.Name, "/")
		c.memo.changed(ns) // the subjects' port lists of its namespace
		if deleted {       // it leaves port groups by itself
			c.podPorts.forget(o.Name, row.UUID)
			return
		}
		c.podPorts.store(o.Name, row.UUID)
		if pod := c.podLister.Get(ns, name); pod != nil {
			c.podChanged(nil, pod)
		}
	case *nbdb.PortGroup:
		if k, ok := ownerKey(row.ExternalIDs); ok && deleted {
			c.queue.Add(k)
		}
	case *nbdb.AddressSet:
		if k, ok := ownerKey(row.ExternalIDs); ok && deleted {
			c.queue.Add(k)
		}
	}
}

func podOf(obj any) *slim.Pod { return controller.ObjectOf[*slim.Pod](obj) }

func nsOf(obj any) *corev1.Namespace { return controller.ObjectOf[*corev1.Namespace](obj) }
