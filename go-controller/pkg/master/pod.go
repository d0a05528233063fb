package master

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/allocator"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

var everything = labels.Everything()

// syncPod makes the pod's LSP and annotation match the pod (or its absence).
func (m *Master) syncPod(ctx context.Context, key string) error {
	ns, name, err := splitKey(key)
	if err != nil {
		return nil // malformed keys cannot become valid by retrying
	}
	pod := m.podLister.Get(ns, name)
	if pod == nil || !pod.Networked() {
		return m.deletePod(ctx, key)
	}
	node := pod.NodeName
	if m.cfg.Zone != "" {
		if n, err := m.nodeLister.Get(node); err != nil || !m.inZone(n) {
			return m.deletePod(ctx, key) // another zone's
		}
	}
	subnets := m.ipam.nodeSubnets(node)
	if subnets == nil {
		// Retried with backoff (and queued at once when the node's sync
		// succeeds): no path waits for an event that may never come.
		return fmt.Errorf("pod %s: node %s has no host subnet yet", key, node)
	}
	pn, err := m.podNetwork(pod, subnets)
	if err != nil {
		if errors.Is(err, allocator.ErrExhausted) {
			// Retried with backoff; the address freed by a deleted pod goes
			// to the next retry. Repeats are counted into one Event.
			m.recorder.Eventf(pod.Ref(), corev1.EventTypeWarning, "AddressAllocationFailed",
				"no address for the pod on node %s: %v; it waits until a pod on that node is deleted (nodes get larger host subnets from a smaller HOSTLEN in --cluster-subnet CIDR/HOSTLEN)", node, err)
		}
		return fmt.Errorf("pod %s: %w", key, err)
	}
	// The NB commit and the annotation PATCH are independent round trips, so
	// they run at once: a new pod waits for the slower of the two, not their
	// sum. Either may land without the other (a failure, a crash); the retry
	// or the restart rebuild (annotation, else the LSP) completes the pair, and
	// the CNI waits for ovn-controller to install the port, not for the LSP.
	annotated := make(chan error, 1)
	if annotationMatches(pod, pn) {
		annotated <- nil
	} else {
		go func() { annotated <- m.annotatePod(ctx, pod, pn) }()
	}
	portErr := m.ensurePodPort(ctx, pod, pn)
	if portErr == nil {
		m.latency.lspCommitted(pod.UID)
	}
	annotateErr := <-annotated
	if portErr != nil {
		return fmt.Errorf("pod %s: %w", key, portErr)
	}
	return annotateErr
}

// annotatePod writes the pod-networks annotation. A pod that is gone or was
// replaced is not an error: its own events follow.
func (m *Master) annotatePod(ctx context.Context, pod *slim.Pod, pn annotations.PodNetwork) error {
	err := m.patchAnnotation(ctx, pod, annotations.PodNetworks, annotations.FormatPodNetworks(pn))
	if err == nil {
		m.latency.annotatedPod(pod.UID)
	}
	if err == nil || apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return fmt.Errorf("annotating pod %s/%s: %w", pod.Namespace, pod.Name, err)
}

// podNetwork decides the pod's addresses: what this pod incarnation already
// holds, else those of the cluster's families of a valid annotation written
// for its UID that no other pod holds, else fresh ones. An annotation that
// held a family the cluster lacks is reported.
func (m *Master) podNetwork(pod *slim.Pod, subnets []netip.Prefix) (annotations.PodNetwork, error) {
	key := pod.Namespace + "/" + pod.Name
	uid := string(pod.UID)
	annotated := m.podAnnotation(pod, key)
	ips, err := m.podAddrs(pod, key, annotated, subnets)
	if err != nil {
		return annotations.PodNetwork{}, err
	}
	pn := m.buildPodNetwork(uid, ips, subnets)
	if annotated != nil && m.otherFamily(annotated.IPs) {
		m.reportFamilyDrop(pod.Ref(), familyDrop{holder: "pod", name: key, annotation: annotations.PodNetworks,
			noun: "address", had: annotated.IPs, now: pn.IPs, note: macNote(annotated.MAC, pn.MAC)})
	}
	return pn, nil
}

// podAnnotation is the pod's pod-networks annotation when it is valid and
// the master wrote it for this pod incarnation, else nil.
func (m *Master) podAnnotation(pod *slim.Pod, key string) *annotations.PodNetwork {
	if !pod.Annotated {
		return nil
	}
	pn, err := annotations.ParsePodNetworks(pod.Networks)
	if err != nil {
		m.log.Info("ignoring malformed pod annotation; allocating a new address", "pod", key, "reason", err.Error())
		return nil
	}
	if !pn.WrittenFor(string(pod.UID)) {
		m.log.Info("ignoring a pod annotation the master did not write for this pod (copied from an earlier incarnation, or written by hand)",
			"pod", key, "annotationUID", pn.PodUID, "uid", pod.UID)
		return nil
	}
	return &pn
}

// podAddrs are the pod's addresses: held, else claimed from annotated, else
// allocated.
func (m *Master) podAddrs(pod *slim.Pod, key string, annotated *annotations.PodNetwork, subnets []netip.Prefix) ([]netip.Addr, error) {
	uid := string(pod.UID)
	if held, ok := m.ipam.pod(key); ok && held.uid == uid && held.node == pod.NodeName {
		return held.ips, nil
	}
	if annotated != nil {
		want, err := m.addrsOfClusterFamilies(annotated.IPs, subnets)
		if err == nil {
			err = m.ipam.claimPod(key, uid, pod.NodeName, want)
		}
		if err == nil {
			return want, nil
		}
		m.log.Info("pod annotation cannot be honoured; allocating a new address", "pod", key, "reason", err.Error())
	}
	return m.ipam.allocatePod(key, uid, pod.NodeName)
}

// addrsOfClusterFamilies is addrsInSubnets of the addresses of the
// cluster's families (an annotation may hold others; they are dropped).
func (m *Master) addrsOfClusterFamilies(ips, subnets []netip.Prefix) ([]netip.Addr, error) {
	kept, err := m.ofClusterFamilies(annotations.PodNetworks, ips)
	if err != nil {
		return nil, err
	}
	return addrsInSubnets(kept, subnets)
}

// buildPodNetwork is the annotation for addresses the master holds. The MAC
// follows from the address, never from the annotation: anyone who may patch
// a pod could otherwise choose it.
func (m *Master) buildPodNetwork(uid string, ips []netip.Addr, subnets []netip.Prefix) annotations.PodNetwork {
	pn := annotations.PodNetwork{MAC: topology.MACFromIP(ips[0]), PodUID: uid}
	for i, ip := range ips {
		gw := topology.GatewayIP(subnets[i])
		pn.IPs = append(pn.IPs, netip.PrefixFrom(ip, subnets[i].Bits()))
		pn.Gateways = append(pn.Gateways, gw)
		for _, dst := range m.podRoutes() {
			if dst.Addr().Is4() == ip.Is4() {
				pn.Routes = append(pn.Routes, annotations.PodRoute{Dest: dst, NextHop: gw})
			}
		}
	}
	return pn
}

// podRoutes are the destinations a pod reaches through its gateway beyond its
// default route, as upstream annotates them: the join subnets and services.
func (m *Master) podRoutes() []netip.Prefix {
	return append(append([]netip.Prefix{}, m.cfg.JoinSubnets...), m.cfg.ServiceCIDRs...)
}

// addrsInSubnets orders annotated addresses like the node's subnets and
// checks each belongs to its subnet with the subnet's length.
func addrsInSubnets(ips []netip.Prefix, subnets []netip.Prefix) ([]netip.Addr, error) {
	if len(ips) != len(subnets) {
		return nil, fmt.Errorf("%d addresses for %d host subnets", len(ips), len(subnets))
	}
	out := make([]netip.Addr, len(subnets))
	for i, s := range subnets {
		found := false
		for _, ip := range ips {
			if s.Contains(ip.Addr()) && ip.Bits() == s.Bits() {
				out[i], found = ip.Addr(), true
			}
		}
		if !found {
			return nil, fmt.Errorf("no annotated address in host subnet %s", s)
		}
	}
	return out, nil
}

func annotationMatches(pod *slim.Pod, want annotations.PodNetwork) bool {
	return pod.Annotated && pod.Networks == annotations.FormatPodNetworks(want)
}

// ensurePodPort creates or repairs the pod's LSP on its node's switch.
func (m *Master) ensurePodPort(ctx context.Context, pod *slim.Pod, pn annotations.PodNetwork) error {
	info := topology.PodInfo{Namespace: pod.Namespace, Name: pod.Name, UID: string(pod.UID), Node: pod.NodeName, MAC: pn.MAC}
	for _, ip := range pn.IPs {
		info.IPs = append(info.IPs, ip.Addr())
	}
	lsp := topology.Pod(info)
	t := ovndb.NewTxn(m.nb)
	if old := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: lsp.Name}); old != nil && old.Options["requested-chassis"] != info.Node {
		// Same name, other node (pod recreated elsewhere): drop the old port first,
		// as a port name is unique and must live on one switch.
		if err := m.removePodPort(ctx, info.Key()); err != nil {
			return err
		}
		t = ovndb.NewTxn(m.nb)
	}
	sw := ovndb.Require(t, &nbdb.LogicalSwitch{Name: info.Node})
	uuid := t.Ensure(lsp, topology.LSPColumns(lsp), nil)
	if t.Err() == nil {
		t.AddChildren(sw, &sw.Ports, uuid)
	}
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return m.committer.Commit(ctx, ops)
}

// deletePod removes the LSP of a pod that is gone or finished, then frees its address.
// A deleted node kept for its pods is looked at again when one goes.
func (m *Master) deletePod(ctx context.Context, key string) error {
	if err := m.removePodPort(ctx, key); err != nil {
		return fmt.Errorf("removing port of pod %s: %w", key, err)
	}
	held, ok := m.ipam.pod(key)
	m.ipam.releasePod(key)
	m.forgetFamilyDrops("pod", key, annotations.PodNetworks)
	if ok {
		if _, err := m.nodeLister.Get(held.node); apierrors.IsNotFound(err) {
			m.nodeQueue.Add(held.node)
		}
	}
	return nil
}

func (m *Master) removePodPort(ctx context.Context, key string) error {
	ns, name, _ := splitKey(key)
	t := ovndb.NewTxn(m.nb)
	lsp := ovndb.Lookup(t, &nbdb.LogicalSwitchPort{Name: topology.PodPort(ns, name)})
	if lsp == nil || !topology.OwnedBy(lsp.ExternalIDs, topology.Owner{Type: topology.OwnerPod, Name: key}) {
		return t.Err()
	}
	// Whichever switch holds it: normally its node's, but rows may have been
	// edited by hand.
	sw := &nbdb.LogicalSwitch{}
	t.Detach(sw, &sw.Ports, lsp.UUID)
	ops, err := t.Ops()
	if err != nil {
		return err
	}
	return m.committer.Commit(ctx, ops)
}

func (m *Master) podUpdated(old, cur any) {
	o, ok1 := old.(*slim.Pod)
	n, ok2 := cur.(*slim.Pod)
	if ok1 && ok2 && o.UID == n.UID && o.NodeName == n.NodeName && o.Networked() == n.Networked() &&
		(o.Annotated == n.Annotated && o.Networks == n.Networks || m.annotationIsHeld(n)) {
		return
	}
	m.enqueuePod(cur)
}

// annotationIsHeld says whether the pod's pod-networks annotation is exactly
// what the master holds for it: the echo of its own PATCH, which needs no
// sync (the sync that wrote it also committed the port, or failed and is
// retrying). It changes nothing but the pod's parsed addresses, which it
// knows then (slim.Pod.KnowAddresses).
func (m *Master) annotationIsHeld(pod *slim.Pod) bool {
	held, ok := m.ipam.pod(pod.Namespace + "/" + pod.Name)
	if !ok || held.uid != string(pod.UID) || held.node != pod.NodeName {
		return false
	}
	subnets := m.ipam.nodeSubnets(held.node)
	if len(subnets) != len(held.ips) || !annotationMatches(pod, m.buildPodNetwork(held.uid, held.ips, subnets)) {
		return false
	}
	// The annotation is the text written for these addresses: whoever reads
	// them next (a peer set's sync) need not parse it (the first admin
	// policies after a burst parsed 10,000 pods' annotations, make bench).
	pod.KnowAddresses(held.uid, held.ips)
	return true
}

func splitKey(key string) (string, string, error) {
	for i := 0; i < len(key); i++ {
		if key[i] == '/' {
			return key[:i], key[i+1:], nil
		}
	}
	return "", "", fmt.Errorf("malformed key %q", key)
}
