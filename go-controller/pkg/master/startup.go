package master

import (
	"context"
	"fmt"
	"io"
	"net/netip"
	"slices"
	"sort"

	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// rebuild restores address state before anything new is allocated: node
// subnets from annotations (or, for a node annotated by nobody yet, from the
// subnet its switch already has), then pod addresses. The NB's ports, which
// only the master writes, are trusted first: every pod whose port was made
// for its UID gets that port's addresses back. Only then are annotations
// written for the pod's UID honoured, and only for addresses no port holds:
// whoever may patch a pod (its owner, in a cluster without the admission
// policy of dist/kubernetes) cannot take a running pod's address by writing
// it into its own annotation. Where two annotations claim one address, the
// first in name order keeps it and the other is given a new one by its sync.
func (m *Master) rebuild() {
	nodes, _ := m.nodeLister.List(everything)
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, node := range nodes {
		m.restoreNodeSubnets(node.Name, node.Annotations)
	}
	// Join addresses of existing gateways are claimed before any is handed
	// out (zone mode numbers them instead: nothing to claim).
	for _, node := range nodes {
		if m.cfg.Zone != "" {
			break
		}
		if ps := m.existingJoinIPs(node.Name, node.Annotations); len(ps) > 0 {
			if _, err := m.ipam.gatewayJoinIPs(node.Name, ps); err != nil {
				m.log.V(2).Info("gateway join address not restored", "node", node.Name, "reason", err.Error())
			}
		}
	}
	pods := m.podLister.List("", everything)
	sort.Slice(pods, func(i, j int) bool {
		return pods[i].Namespace+"/"+pods[i].Name < pods[j].Namespace+"/"+pods[j].Name
	})
	// A node deleted while its pods run keeps its subnet (see deleteNode):
	// restore it from its rows so it is not handed to another node.
	for _, pod := range pods {
		if pod.Networked() && m.ipam.nodeSubnets(pod.NodeName) == nil {
			if _, err := m.nodeLister.Get(pod.NodeName); err != nil {
				m.restoreNodeSubnets(pod.NodeName, nil)
			}
		}
	}
	restored := map[string]bool{}
	for _, source := range []func(*slim.Pod, []netip.Prefix) ([]netip.Addr, error){m.portAddrs, m.annotatedAddrs} {
		for _, pod := range pods {
			key := pod.Namespace + "/" + pod.Name
			subnets := m.ipam.nodeSubnets(pod.NodeName)
			if restored[key] || !pod.Networked() || subnets == nil || !m.podMayBeOurs(pod) {
				continue
			}
			ips, err := source(pod, subnets)
			if err == nil {
				err = m.ipam.claimPod(key, string(pod.UID), pod.NodeName, ips)
			}
			if err != nil {
				m.log.V(2).Info("pod address not restored from this source", "pod", key, "reason", err.Error())
				continue
			}
			restored[key] = true
		}
	}
	m.log.Info("address state restored", "nodes", len(nodes), "pods", len(restored))
}

func (m *Master) restoreNodeSubnets(node string, ann map[string]string) {
	subnets, err := m.existingNodeSubnets(node, ann)
	if err == nil {
		err = m.ipam.claimNodeSubnets(node, subnets)
	}
	if err != nil {
		m.log.V(2).Info("node subnet not restored; it will be allocated", "node", node, "reason", err.Error())
	}
}

// existingNodeSubnets reads the node's subnets from its annotation, else
// (stopped between creating the switch and annotating, or a node deleted
// while its pods run) from its router port, which carries every family.
func (m *Master) existingNodeSubnets(node string, ann map[string]string) ([]netip.Prefix, error) {
	if v, ok := ann[annotations.NodeSubnets]; ok {
		return m.annotatedNodeSubnets(v)
	}
	lrp := &nbdb.LogicalRouterPort{Name: topology.NodeRouterToSwitchPort(node)}
	if err := m.nb.Get(context.Background(), lrp); err != nil || !topology.OwnedBy(lrp.ExternalIDs, topology.Owner{Type: topology.OwnerNode, Name: node}) {
		return nil, fmt.Errorf("no annotation and no router port of ours")
	}
	var subnets []netip.Prefix
	for _, n := range lrp.Networks {
		p, err := netip.ParsePrefix(n)
		if err != nil {
			return nil, fmt.Errorf("router port %s network %q: %w", lrp.Name, n, err)
		}
		subnets = append(subnets, p.Masked())
	}
	if len(subnets) == 0 {
		return nil, fmt.Errorf("router port %s has no networks", lrp.Name)
	}
	return m.ofClusterFamilies("router port "+lrp.Name, subnets)
}

// annotatedAddrs reads the addresses of the cluster's families of an
// annotation written for this pod incarnation (an annotation without the UID
// marker, hand-written or copied, is not honoured).
func (m *Master) annotatedAddrs(pod *slim.Pod, subnets []netip.Prefix) ([]netip.Addr, error) {
	if !pod.Annotated {
		return nil, fmt.Errorf("no annotation")
	}
	pn, err := annotations.ParsePodNetworks(pod.Networks)
	if err != nil {
		return nil, err
	}
	if !pn.WrittenFor(string(pod.UID)) {
		return nil, fmt.Errorf("the annotation was not written for UID %s", pod.UID)
	}
	return m.addrsOfClusterFamilies(pn.IPs, subnets)
}

// portAddrs reads the addresses of the pod's port, when the master made it
// for this pod incarnation.
func (m *Master) portAddrs(pod *slim.Pod, subnets []netip.Prefix) ([]netip.Addr, error) {
	lsp := &nbdb.LogicalSwitchPort{Name: topology.PodPort(pod.Namespace, pod.Name)}
	if err := m.nb.Get(context.Background(), lsp); err != nil {
		return nil, fmt.Errorf("no port")
	}
	owner := topology.Owner{Type: topology.OwnerPod, Name: pod.Namespace + "/" + pod.Name}
	if !topology.OwnedBy(lsp.ExternalIDs, owner) || lsp.Options["iface-id-ver"] != string(pod.UID) || len(lsp.Addresses) != 1 {
		return nil, fmt.Errorf("the port belongs to another incarnation or is not ours")
	}
	_, ips, ok := topology.ParseLSPAddress(lsp.Addresses[0])
	if !ok {
		return nil, fmt.Errorf("port address %q unreadable", lsp.Addresses[0])
	}
	// Each address with its family's subnet: a family the node has no
	// subnet of (the cluster lost it) is dropped.
	var prefixes []netip.Prefix
	for _, ip := range ips {
		if i := slices.IndexFunc(subnets, func(s netip.Prefix) bool { return s.Addr().Is4() == ip.Is4() }); i >= 0 {
			prefixes = append(prefixes, netip.PrefixFrom(ip, subnets[i].Bits()))
		}
	}
	return addrsInSubnets(prefixes, subnets)
}

// ownedKeysInNB lists the nodes and pods that rows of ours in the NB belong
// to: one scan at start, so rows of objects deleted while we were down are
// synced (and so removed) too.
func (m *Master) ownedKeysInNB() (nodes, pods []string) {
	nodes = append(ownerNames(m.nb, topology.OwnerNode, func(r *nbdb.LogicalSwitch) map[string]string { return r.ExternalIDs }),
		ownerNames(m.nb, topology.OwnerNode, func(r *nbdb.LogicalRouterPort) map[string]string { return r.ExternalIDs })...)
	pods = ownerNames(m.nb, topology.OwnerPod, func(r *nbdb.LogicalSwitchPort) map[string]string { return r.ExternalIDs })
	return nodes, pods
}

// ownerNames returns the owner names of the cached rows of one table that
// belong to owners of the given type.
func ownerNames[T any](nb libovsdbclient.Client, ownerType string, ids func(*T) map[string]string) []string {
	var rows []T
	_ = nb.WhereCache(func(r *T) bool {
		o, ok := topology.OwnerOf(ids(r))
		return ok && o.Type == ownerType
	}).List(context.Background(), &rows)
	names := make([]string, 0, len(rows))
	for i := range rows {
		o, _ := topology.OwnerOf(ids(&rows[i]))
		names = append(names, o.Name)
	}
	return names
}

// patchAnnotation sets one annotation with a merge patch. The UID in the
// patch makes the API server refuse it if the object was replaced meanwhile.
func (m *Master) patchAnnotation(ctx context.Context, obj runtime.Object, key, value string) error {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return err
	}
	patch := annotations.MergePatch(string(acc.GetUID()), key, value)
	var resource string
	switch obj.(type) {
	case *slim.Pod:
		resource = "pods"
	case *corev1.Node:
		resource = "nodes"
	default:
		return fmt.Errorf("cannot annotate %T", obj)
	}
	// The patched object the API server returns is neither decoded nor kept:
	// the informer's watch brings it anyway. Decoding it was half a lone
	// pod's PATCH cost, and reading it whole 3 % of the master's allocations
	// while a cluster grew (make bench-scale); it is drained through a pooled
	// buffer. Errors still arrive typed (Stream decodes a failure's Status).
	if rc, ok := m.kube.CoreV1().RESTClient().(*rest.RESTClient); ok && rc != nil {
		body, err := rc.Patch(types.MergePatchType).NamespaceIfScoped(acc.GetNamespace(), resource == "pods").
			Resource(resource).Name(acc.GetName()).Body(patch).Stream(ctx)
		if err != nil {
			return err
		}
		defer body.Close()
		_, err = io.Copy(io.Discard, body)
		return err
	}
	// Fake clientsets (unit tests) have no REST client.
	if resource == "pods" {
		_, err = m.kube.CoreV1().Pods(acc.GetNamespace()).Patch(ctx, acc.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	} else {
		_, err = m.kube.CoreV1().Nodes().Patch(ctx, acc.GetName(), types.MergePatchType, patch, metav1.PatchOptions{})
	}
	return err
}
