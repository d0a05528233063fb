// Package clustermanager is the cluster-wide part of zone mode (issue 38):
// what no zone can decide alone. It hands every node its host subnets
// (k8s.ovn.org/node-subnets, which each zone's master reads and never
// allocates), owns the interconnection NB's transit switch, which ovn-ic
// copies into every zone's NB, decides which node hosts each EgressIP's
// addresses (their status, which every zone programs), and relays what the
// cluster DNS answered pods for the names policies name (DNSNames: the
// cluster DNS's dnstap stream goes to one address). Everything else a
// zone derives from these: its nodes' transit and gateway join addresses
// from their host subnets (config.NodeAddrs), its rows from the cluster's
// objects.
package clustermanager

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	libovsdbclient "github.com/ovn-org/libovsdb/client"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/allocator"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnstap"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/egressip"
)

// Manager allocates host subnets and keeps the transit switch.
type Manager struct {
	eips     *egressip.Controller // nil: the API server serves no EgressIPs
	dns      *DNSNames            // nil: the cluster DNS's answers are not relayed
	eipAPI   *egressip.API
	kube     kubernetes.Interface
	nodes    corelisters.NodeLister
	synced   cache.InformerSynced
	started  atomic.Bool // host subnets restored, every node queued (Ready)
	queue    *controller.Queue
	ic       libovsdbclient.Client // nil: no interconnection NB to keep
	recorder record.EventRecorder
	log      logr.Logger
	families []bool // is6 of each cluster family
	subnets  *allocator.HostSubnets
}

// EgressIPs configures the assignment of EgressIPs (nil API: none).
type EgressIPs struct {
	API          *egressip.API
	JoinSubnets  []netip.Prefix
	ReachTimeout time.Duration
}

// New builds a manager over the cluster subnets; ic is the interconnection
// NB (nil when another keeps the transit switch). It assigns EgressIPs'
// addresses to nodes and writes their status; the zones program them.
func New(clusterSubnets []config.ClusterSubnet, kube kubernetes.Interface, factory informers.SharedInformerFactory, ic libovsdbclient.Client, eips EgressIPs, log logr.Logger) *Manager {
	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	nodes := factory.Core().V1().Nodes()
	m := &Manager{
		kube: kube, nodes: nodes.Lister(), synced: nodes.Informer().HasSynced, ic: ic, log: log,
		recorder: broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "ovnkube-cluster-manager"}),
		subnets:  allocator.NewHostSubnets(clusterSubnets),
	}
	for _, cs := range clusterSubnets {
		if is6 := cs.CIDR.Addr().Is6(); !slices.Contains(m.families, is6) {
			m.families = append(m.families, is6)
		}
	}
	m.queue = controller.NewQueue("cluster-manager-nodes", 30*time.Second, m.syncNode, log)
	if eips.API != nil {
		var cidrs []netip.Prefix
		for _, cs := range clusterSubnets {
			cidrs = append(cidrs, cs.CIDR)
		}
		m.eipAPI = eips.API
		m.eips = egressip.New(eips.API, factory, nil, nil, egressip.Options{Role: egressip.RoleAssign, ClusterSubnets: cidrs,
			JoinSubnets: eips.JoinSubnets, ReachTimeout: eips.ReachTimeout, Events: m.recorder}, log.WithName("egressip"), 30*time.Second)
	}
	_, _ = nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) { m.enqueue(obj) },
		UpdateFunc: func(old, obj any) {
			o, n := old.(*corev1.Node), obj.(*corev1.Node)
			if o.Annotations[annotations.NodeSubnets] != n.Annotations[annotations.NodeSubnets] || o.UID != n.UID {
				m.enqueue(obj)
			}
		},
		DeleteFunc: func(obj any) { m.enqueue(obj) },
	})
	return m
}

// RelayDNS has the manager take the cluster DNS's dnstap stream and relay
// its answers to the zones (DNSNames); call it before Run. An empty
// TapAddress, or an API server not serving DNSNameResolvers: nothing.
func (m *Manager) RelayDNS(opts DNSOptions) {
	if opts.TapAddress == "" {
		return
	}
	if opts.API == nil || !opts.API.DNSNameResolvers {
		m.log.Info("the cluster DNS's answers are not relayed to the zones (wildcard DNS names match nothing there): the API server serves no DNSNameResolvers (dist/kubernetes/05-crd-dnsnameresolvers.yaml)")
		return
	}
	m.dns = newDNSNames(opts, m.kube, m.log.WithName("dns-names"))
}

func (m *Manager) enqueue(obj any) {
	if key, err := cache.DeletionHandlingMetaNamespaceKeyFunc(obj); err == nil {
		m.queue.Add(key)
	}
}

// Run restores who holds which subnet from the nodes' annotations (in name
// order: of two nodes annotated with one subnet, the first keeps it), then
// syncs nodes and keeps the transit switch until ctx ends.
func (m *Manager) Run(ctx context.Context, workers int) error {
	if m.eipAPI != nil {
		if err := m.eipAPI.Start(ctx); err != nil {
			return err
		}
	}
	if m.dns != nil {
		l, err := dnstap.Listen(m.dns.opts.TapAddress)
		if err != nil {
			return err
		}
		go m.dns.run(ctx, l)
	}
	if !cache.WaitForCacheSync(ctx.Done(), m.synced) {
		return ctx.Err()
	}
	nodes, err := m.nodes.List(labels.Everything())
	if err != nil {
		return err
	}
	sort.Slice(nodes, func(i, j int) bool { return nodes[i].Name < nodes[j].Name })
	for _, n := range nodes {
		if err := m.claim(n); err != nil {
			m.log.V(1).Info("node's host subnet annotation not kept; it gets new ones", "node", n.Name, "reason", err.Error())
		}
	}
	for _, n := range nodes {
		m.queue.Add(n.Name)
	}
	m.started.Store(true)
	if m.ic != nil {
		go m.keepTransitSwitch(ctx)
	}
	if m.eips != nil {
		go m.eips.Run(ctx, 1)
	}
	m.queue.Run(ctx, workers)
	return nil
}

// Ready is nil once the nodes' subnets are restored and their first syncs
// queued, while the interconnection NB (when kept here) is connected.
func (m *Manager) Ready() error {
	switch {
	case !m.started.Load():
		return errors.New("restoring host subnets from the nodes")
	case m.ic != nil && !m.ICConnected():
		return errors.New("interconnection NB unreachable (reconnecting)")
	}
	return nil
}

// ICConnected says whether the interconnection NB is connected (false when
// not kept here).
func (m *Manager) ICConnected() bool { return m.ic != nil && m.ic.CurrentEndpoint() != "" }

// Idle says no node, EgressIP or DNS name is waiting to be synced (tests).
func (m *Manager) Idle() bool {
	return m.queue.Idle() && (m.eips == nil || m.eips.Idle()) && (m.dns == nil || m.dns.queue.Idle())
}

// Held is the node's host subnets (nil if none).
func (m *Manager) Held(node string) []netip.Prefix { return m.subnets.Held(node) }

// claim takes the subnets node's annotation names when they are one per
// cluster family, inside the cluster subnets and free.
func (m *Manager) claim(node *corev1.Node) error {
	v, ok := node.Annotations[annotations.NodeSubnets]
	if !ok {
		return errors.New("not annotated")
	}
	subnets, err := annotations.ParseNodeSubnets(v)
	if err != nil {
		return err
	}
	if len(subnets) != len(m.families) || slices.ContainsFunc(subnets, func(p netip.Prefix) bool { return !slices.Contains(m.families, p.Addr().Is6()) }) {
		return fmt.Errorf("%s=%q: want one host subnet of each cluster family", annotations.NodeSubnets, v)
	}
	return m.subnets.Claim(node.Name, subnets)
}

// syncNode gives a node host subnets and its annotation, or frees a gone
// node's.
func (m *Manager) syncNode(ctx context.Context, name string) error {
	node, err := m.nodes.Get(name)
	if apierrors.IsNotFound(err) {
		m.subnets.Release(name)
		return nil
	}
	if err != nil {
		return err
	}
	subnets := m.Held(name)
	if subnets == nil {
		if err := m.claim(node); err == nil {
			subnets = m.Held(name)
		} else if subnets, err = m.subnets.Allocate(name); err != nil {
			m.recorder.Eventf(node, corev1.EventTypeWarning, "SubnetAllocationFailed",
				"no host subnet for node %s: %v; add a --cluster-subnet or remove nodes", name, err)
			return fmt.Errorf("node %s: %w", name, err)
		}
	}
	want := annotations.FormatNodeSubnets(subnets)
	if node.Annotations[annotations.NodeSubnets] == want {
		return nil
	}
	patch := annotations.MergePatch(string(node.UID), annotations.NodeSubnets, want)
	if _, err := m.kube.CoreV1().Nodes().Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating node %s with %s=%s: %w", name, annotations.NodeSubnets, want, err)
	}
	return nil
}
