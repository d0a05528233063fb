// Package node is the node side of ovn-k8s: it points the local OVS at OVN
// (Geneve encapsulation, the southbound address, br-int), creates the
// management port ovn-k8s-mp0 and builds the node's gateway.
package node

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

const (
	// IntegrationBridge is the bridge ovn-controller programs.
	IntegrationBridge = "br-int"
	// ManagementPortName is the node's interface into its own switch.
	ManagementPortName = "ovn-k8s-mp0"
)

// Config is what minion-init needs.
type Config struct {
	NodeName       string
	ClusterSubnets []netip.Prefix
	ServiceCIDRs   []netip.Prefix
	// HostSubnet, if valid, is used instead of the node's annotation.
	HostSubnet   netip.Prefix
	EncapType    string // geneve or vxlan
	EncapIP      string
	SBAddress    string   // becomes ovn-remote
	SBSSL        SSLFiles // for an ssl: SBAddress: what ovn-controller presents
	DatapathType string   // "netdev" where the kernel has no OVS module
	MTU          int
	// SubnetTimeout bounds the wait for the master to annotate the node.
	SubnetTimeout time.Duration
	// Zone, in zone mode, is the node's zone (k8s.ovn.org/zone-name, which
	// that zone's master programs it by); its chassis is then an
	// interconnection gateway (ovn-is-interconn), which ovn-ic binds the
	// zone's transit router ports to.
	Zone string
}

// SSLFiles are the PEM files ovn-controller uses for an ssl: SB; they go to
// OVS's SSL table. Empty: none (unix: or tcp:).
type SSLFiles struct{ PrivateKey, Certificate, CACert string }

// Result is what minion-init configured.
type Result struct {
	SystemID string
	Subnets  []netip.Prefix // the node's host subnets, one per family, the primary first
	MAC      net.HardwareAddr
}

// MinionInit configures OVS and the management port and publishes the
// node's chassis id and management MAC. Running it again changes nothing.
func MinionInit(ctx context.Context, cfg Config, sw *ovs.Client, kube kubernetes.Interface, log logr.Logger) (Result, error) {
	var res Result
	// The SSL table first: ovn-controller connects as soon as ovn-remote is
	// set, and an ssl: remote without certificates fails its first try.
	if cfg.SBSSL.PrivateKey != "" {
		if err := sw.EnsureSSL(ctx, cfg.SBSSL.PrivateKey, cfg.SBSSL.Certificate, cfg.SBSSL.CACert); err != nil {
			return res, fmt.Errorf("setting OVS's SSL table for ovn-controller's ssl: SB connection: %w", err)
		}
	}
	want := map[string]string{
		"system-id":      uuid.NewString(),
		"hostname":       cfg.NodeName,
		"ovn-remote":     cfg.SBAddress,
		"ovn-encap-type": cfg.EncapType,
		"ovn-encap-ip":   cfg.EncapIP,
		"ovn-bridge":     IntegrationBridge,
	}
	if cfg.Zone != "" {
		want["ovn-is-interconn"] = "true"
	}
	ids, err := sw.SetExternalIDs(ctx, want, "system-id")
	if err != nil {
		return res, fmt.Errorf("setting Open_vSwitch external_ids: %w", err)
	}
	res.SystemID = ids["system-id"]
	if err := sw.EnsureBridge(ctx, ovs.Bridge{
		Name: IntegrationBridge, DatapathType: cfg.DatapathType, FailMode: "secure",
		OtherConfig: map[string]string{"disable-in-band": "true"},
	}); err != nil {
		return res, fmt.Errorf("creating %s: %w", IntegrationBridge, err)
	}
	if cfg.Zone != "" && kube != nil {
		// First: the zone's master waits for it, the host subnet does not.
		if err := annotateNode(ctx, kube, cfg.NodeName, map[string]string{annotations.NodeZone: cfg.Zone}); err != nil {
			return res, err
		}
	}
	subnets := []netip.Prefix{cfg.HostSubnet}
	if !cfg.HostSubnet.IsValid() {
		if kube == nil {
			return res, fmt.Errorf("no host subnet given and no Kubernetes client to read node %s's %s annotation", cfg.NodeName, annotations.NodeSubnets)
		}
		if subnets, err = waitForSubnets(ctx, kube, cfg.NodeName, cfg.SubnetTimeout); err != nil {
			return res, err
		}
	}
	res.Subnets = subnets
	res.MAC = topology.MACFromIP(topology.ManagementIP(subnets[0])) // as the master derives it
	if err := sw.EnsurePort(ctx, IntegrationBridge, ovs.Port{
		Name: ManagementPortName, Type: "internal", MAC: res.MAC.String(), MTU: cfg.MTU,
		ExternalIDs: map[string]string{"iface-id": topology.ManagementPort(cfg.NodeName)},
	}); err != nil {
		return res, fmt.Errorf("creating %s: %w", ManagementPortName, err)
	}
	// The hairpin address too: the node reaching its own host-network
	// endpoint through a service gets the connection from it (see
	// services.NodeGateway.atMgmt), and answers through OVN.
	routed := append(append([]netip.Prefix{}, cfg.ClusterSubnets...), cfg.ServiceCIDRs...)
	routed = append(routed, netip.PrefixFrom(netip.MustParseAddr(topology.HairpinSNATIP), 32),
		netip.PrefixFrom(netip.MustParseAddr(topology.HairpinSNATIPv6), 128))
	if err := configureManagementLink(ctx, subnets, res.MAC, cfg.MTU, routed); err != nil {
		return res, err
	}
	if kube != nil {
		if err := annotateNode(ctx, kube, cfg.NodeName, map[string]string{
			annotations.NodeChassisID:   res.SystemID,
			annotations.NodeMgmtPortMAC: res.MAC.String(),
		}); err != nil {
			return res, err
		}
	}
	log.V(2).Info("node configured", "node", cfg.NodeName, "systemID", res.SystemID, "subnets", subnets, "mgmtMAC", res.MAC)
	return res, nil
}

// waitForSubnets waits (bounded) for the master to annotate the node.
func waitForSubnets(ctx context.Context, kube kubernetes.Interface, node string, timeout time.Duration) ([]netip.Prefix, error) {
	var subnets []netip.Prefix
	var last error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		n, err := kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		v, ok := n.Annotations[annotations.NodeSubnets]
		if !ok {
			last = fmt.Errorf("no %s annotation yet", annotations.NodeSubnets)
			return false, nil
		}
		if subnets, err = annotations.ParseNodeSubnets(v); err != nil {
			last = err
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, fmt.Errorf("waited %s for node %s's host subnet (is ovnkube master running?): %v", timeout, node, last)
	}
	return subnets, nil
}

// annotateNode sets annotations with a merge patch, only if one differs.
func annotateNode(ctx context.Context, kube kubernetes.Interface, name string, values map[string]string) error {
	node, err := kube.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading node %s: %w", name, err)
	}
	return patchNodeAnnotations(ctx, kube, node, values)
}

func patchNodeAnnotations(ctx context.Context, kube kubernetes.Interface, node *corev1.Node, values map[string]string) error {
	changed := map[string]any{}
	for k, v := range values {
		have, ok := node.Annotations[k]
		switch {
		case v == "" && ok:
			changed[k] = nil // an empty value removes the annotation
		case v != "" && have != v:
			changed[k] = v
		}
	}
	if len(changed) == 0 {
		return nil
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": changed}})
	if _, err := kube.CoreV1().Nodes().Patch(ctx, node.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("annotating node %s: %w", node.Name, err)
	}
	return nil
}
