package cni

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"
	"github.com/containernetworking/plugins/pkg/ip"
	"github.com/containernetworking/plugins/pkg/ns"
	"github.com/containernetworking/plugins/pkg/utils/sysctl"
	"github.com/go-logr/logr"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/vswitchd"
)

const integrationBridge = "br-int"

// PodNetworkFunc returns the address the master annotated for this
// incarnation of the pod, waiting up to timeout for it.
type PodNetworkFunc func(ctx context.Context, pa *PodArgs, timeout time.Duration) (annotations.PodNetwork, error)

// OpenOVSFunc returns an OVS client and what to call when done with it.
type OpenOVSFunc func() (*ovs.Client, func(), error)

// dialOVS opens a connection per call (the standalone plugin).
func dialOVS(address string) OpenOVSFunc {
	return func() (*ovs.Client, func(), error) {
		sw, err := connectOVS(address)
		if err != nil {
			return nil, nil, err
		}
		return sw, sw.Close, nil
	}
}

// Add is CNI ADD: standalone, or handed to the node daemon (cniServerSocket).
func Add(args *skel.CmdArgs) error {
	conf, pa, err := parseInput("ADD", args)
	if err != nil {
		return err
	}
	if conf.CNIServerSocket != "" {
		return forward(args, conf, "ADD")
	}
	res, err := add(context.Background(), args, conf, pa, apiPodNetwork(conf.Kubeconfig), dialOVS(conf.OVSAddress))
	if err != nil {
		return err
	}
	return types.PrintResult(res, conf.CNIVersion)
}

// add wires the pod in and returns the CNI result; errors are *types.Error.
func add(ctx context.Context, args *skel.CmdArgs, conf *NetConf, pa *PodArgs, podNetwork PodNetworkFunc, openOVS OpenOVSFunc) (types.Result, error) {
	podKey := string(pa.K8S_POD_NAMESPACE) + "/" + string(pa.K8S_POD_NAME)
	fail := func(code uint, msg string, err error) error {
		return types.NewError(code, fmt.Sprintf("ovn_cni ADD for pod %s: %s", podKey, msg), errString(err))
	}
	pn, err := podNetwork(ctx, pa, conf.annotationTimeout)
	if err != nil {
		var te *types.Error
		if errors.As(err, &te) {
			return nil, fail(te.Code, te.Msg, errors.New(te.Details))
		}
		return nil, fail(types.ErrTryAgainLater, fmt.Sprintf("timed out after %s waiting for the %s annotation (is ovnkube master running?)", conf.annotationTimeout, annotations.PodNetworks), err)
	}
	netns, err := ns.GetNS(args.Netns)
	if err != nil {
		return nil, fail(types.ErrInvalidNetNS, "cannot open the network namespace "+args.Netns, err)
	}
	defer netns.Close()
	hostNS, err := ns.GetCurrentNS()
	if err != nil {
		return nil, fail(types.ErrInternal, "cannot open the host network namespace", err)
	}
	defer hostNS.Close()
	sw, done, err := openOVS()
	if err != nil {
		return nil, fail(types.ErrIOFailure, "cannot reach OVS at "+conf.OVSAddress, err)
	}
	defer done()
	// On OVS's userspace datapath a veth with TX checksum offload sends TCP
	// and UDP with bad checksums: it is turned off there whatever the conf says.
	datapath, err := sw.DatapathType(ctx, integrationBridge)
	if err != nil {
		return nil, fail(types.ErrIOFailure, "reading "+integrationBridge+" (is ovnkube node running?)", err)
	}
	disableTxCsum := conf.DisableTxChecksumOffload || datapath == "netdev"
	hostName := HostVethName(args.ContainerID)
	// A host end left by an earlier attempt for this container: start over.
	if err := deleteOurHostEnd(hostName, args.ContainerID); err != nil {
		return nil, fail(types.ErrInternal, "removing the host end of an earlier attempt", err)
	}
	var hostIface, contIface net.Interface
	err = netns.Do(func(ns.NetNS) error {
		if old, err := netlink.LinkByName(args.IfName); err == nil {
			_ = netlink.LinkDel(old) // a retried ADD starts over
		}
		hostIface, contIface, err = ip.SetupVethWithName(args.IfName, hostName, conf.MTU, pn.MAC.String(), hostNS)
		if err != nil {
			return fmt.Errorf("creating veth %s/%s: %w", args.IfName, hostName, err)
		}
		return configurePodSide(args.IfName, pn, disableTxCsum)
	})
	if err != nil {
		return nil, fail(types.ErrInternal, "setting up the pod interface", err)
	}
	if err := markHostEnd(hostName, args.ContainerID); err != nil {
		return nil, fail(types.ErrInternal, "configuring "+hostName, err)
	}
	ifaceID := topology.PodPort(string(pa.K8S_POD_NAMESPACE), string(pa.K8S_POD_NAME))
	if err := removeStalePorts(ctx, sw, ifaceID, string(pa.K8S_POD_UID), hostName); err != nil {
		return nil, fail(types.ErrIOFailure, "removing a stale OVS port", err)
	}
	var ipStrs []string
	for _, p := range pn.IPs {
		ipStrs = append(ipStrs, p.String())
	}
	if err := sw.EnsurePort(ctx, integrationBridge, ovs.Port{Name: hostName, ExternalIDs: map[string]string{
		"iface-id":        ifaceID,
		"iface-id-ver":    string(pa.K8S_POD_UID),
		"sandbox":         args.ContainerID,
		"attached_mac":    pn.MAC.String(),
		"ip_addresses":    strings.Join(ipStrs, ","),
		"k8s.ovn.org/pod": podKey,
	}}); err != nil {
		return nil, fail(types.ErrIOFailure, "plugging "+hostName+" into "+integrationBridge, err)
	}
	if conf.ovnInstalledTimeout > 0 {
		wctx, cancel := context.WithTimeout(ctx, conf.ovnInstalledTimeout)
		err := sw.WaitInterface(wctx, hostName, func(i *vswitchd.Interface) bool { return i.ExternalIDs["ovn-installed"] == "true" })
		cancel()
		if err != nil {
			return nil, fail(types.ErrTryAgainLater, fmt.Sprintf("timed out after %s waiting for ovn-controller to mark %s ovn-installed (is ovn-controller running and the LSP %s in the NB?)", conf.ovnInstalledTimeout, hostName, ifaceID), err)
		}
	}
	return buildResult(conf, hostIface, contIface, args.Netns, pn), nil
}

// configurePodSide runs inside the pod namespace: addresses, routes, offload.
func configurePodSide(ifName string, pn annotations.PodNetwork, disableTxCsum bool) error {
	link, err := netlink.LinkByName(ifName)
	if err != nil {
		return err
	}
	for _, p := range pn.IPs {
		addr := &netlink.Addr{IPNet: prefixToIPNet(p)}
		if p.Addr().Is6() {
			// Usable at once: the master gave the address to this pod
			// alone, and duplicate address detection would keep it
			// tentative (unusable as a source) for a second or more.
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := netlink.AddrAdd(link, addr); err != nil {
			return fmt.Errorf("adding %s: %w", p, err)
		}
	}
	if err := netlink.LinkSetUp(link); err != nil {
		return err
	}
	if disableTxCsum {
		if err := disableTxChecksum(ifName); err != nil {
			return err
		}
	}
	for _, gw := range pn.Gateways {
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if gw.Is6() {
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		if err := netlink.RouteAdd(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixToIPNet(dst), Gw: gw.AsSlice()}); err != nil {
			return fmt.Errorf("default route via %s: %w", gw, err)
		}
	}
	for _, r := range pn.Routes {
		if err := netlink.RouteReplace(&netlink.Route{LinkIndex: link.Attrs().Index, Dst: prefixToIPNet(r.Dest), Gw: r.NextHop.AsSlice()}); err != nil {
			return fmt.Errorf("route %s via %s: %w", r.Dest, r.NextHop, err)
		}
	}
	return nil
}

// quietHostEnd keeps the node's own IP stack off the host end of the veth.
// On OVS's userspace datapath the port is read through a packet socket, so
// the kernel sees the pod's frames too and would answer ARP for the node's
// addresses (ovn-k8s-mp0's .2) with the veth's MAC, black-holing the traffic.
func quietHostEnd(name string) error {
	if _, err := sysctl.Sysctl("net/ipv4/conf/"+name+"/arp_ignore", "8"); err != nil {
		return err
	}
	_, _ = sysctl.Sysctl("net/ipv6/conf/"+name+"/disable_ipv6", "1") // absent without IPv6
	return nil
}

// markHostEnd quiets the host end and marks it as ovn_cni's for this container.
func markHostEnd(name, containerID string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return err
	}
	if err := netlink.LinkSetAlias(link, hostVethAlias(containerID)); err != nil {
		return err
	}
	return quietHostEnd(name)
}

// deleteOurHostEnd removes the host link name if ovn_cni made it for this
// container (a veth carrying our alias); anything else is left alone.
func deleteOurHostEnd(name, containerID string) error {
	link, err := netlink.LinkByName(name)
	if err != nil {
		return nil // gone already
	}
	if link.Type() != "veth" || link.Attrs().Alias != hostVethAlias(containerID) {
		return nil
	}
	return netlink.LinkDel(link)
}

// removeStalePorts drops the ports of earlier sandboxes of this pod
// incarnation (same iface-id and iface-id-ver, another name), so
// ovn-controller binds only the new one. A port of another pod UID is left
// alone: the ADD cannot tell whether that incarnation is older or newer (a
// slow ADD of a deleted pod must not unplug its re-created successor), that
// port's own sandbox DEL removes it, and ovn-controller binds only the
// interface whose iface-id-ver is the UID on the logical port.
func removeStalePorts(ctx context.Context, sw *ovs.Client, ifaceID, podUID, keep string) error {
	ifaces, err := sw.InterfacesWithExternalID(ctx, "iface-id", ifaceID)
	if err != nil {
		return err
	}
	for _, i := range ifaces {
		uid, ok := i.ExternalIDs["iface-id-ver"]
		if i.Name == keep || !ok || uid != podUID {
			continue
		}
		if err := sw.DeletePort(ctx, i.Name); err != nil {
			return err
		}
	}
	return nil
}

func buildResult(conf *NetConf, hostIface, contIface net.Interface, netnsPath string, pn annotations.PodNetwork) *current.Result {
	res := &current.Result{CNIVersion: current.ImplementedSpecVersion}
	if conf.PrevResult != nil {
		if prev, err := current.NewResultFromResult(conf.PrevResult); err == nil {
			res = prev
		}
	}
	base := len(res.Interfaces)
	res.Interfaces = append(res.Interfaces,
		&current.Interface{Name: hostIface.Name, Mac: hostIface.HardwareAddr.String()},
		&current.Interface{Name: contIface.Name, Mac: pn.MAC.String(), Sandbox: netnsPath})
	for _, p := range pn.IPs {
		ipc := &current.IPConfig{Interface: current.Int(base + 1), Address: *prefixToIPNet(p)}
		for _, gw := range pn.Gateways {
			if gw.Is4() == p.Addr().Is4() {
				ipc.Gateway = gw.AsSlice()
			}
		}
		res.IPs = append(res.IPs, ipc)
	}
	for _, gw := range pn.Gateways {
		dst := netip.PrefixFrom(netip.IPv4Unspecified(), 0)
		if gw.Is6() {
			dst = netip.PrefixFrom(netip.IPv6Unspecified(), 0)
		}
		res.Routes = append(res.Routes, &types.Route{Dst: *prefixToIPNet(dst), GW: gw.AsSlice()})
	}
	for _, r := range pn.Routes {
		res.Routes = append(res.Routes, &types.Route{Dst: *prefixToIPNet(r.Dest), GW: r.NextHop.AsSlice()})
	}
	return res
}

// Del is CNI DEL: idempotent; a missing netns, port or pod is fine.
func Del(args *skel.CmdArgs) error {
	conf, _, err := parseInput("DEL", args)
	if err != nil {
		return err
	}
	if conf.CNIServerSocket != "" {
		return forward(args, conf, "DEL")
	}
	return del(context.Background(), args, dialOVS(conf.OVSAddress), conf.OVSAddress)
}

func del(ctx context.Context, args *skel.CmdArgs, openOVS OpenOVSFunc, ovsAddress string) error {
	hostName := HostVethName(args.ContainerID)
	sw, done, err := openOVS()
	if err != nil {
		return types.NewError(types.ErrIOFailure, "ovn_cni DEL: cannot reach OVS at "+ovsAddress, err.Error())
	}
	defer done()
	// Only ports ADD made for this sandbox (external_ids:sandbox), whatever
	// their name (an older version named them after the container ID).
	ours, err := sw.InterfacesWithExternalID(ctx, "sandbox", args.ContainerID)
	if err != nil {
		return types.NewError(types.ErrIOFailure, "ovn_cni DEL: listing OVS ports of sandbox "+args.ContainerID, err.Error())
	}
	for _, i := range ours {
		if err := sw.DeletePort(ctx, i.Name); err != nil {
			return types.NewError(types.ErrIOFailure, "ovn_cni DEL: removing OVS port "+i.Name, err.Error())
		}
		if link, err := netlink.LinkByName(i.Name); err == nil && link.Type() == "veth" && i.Name != hostName {
			_ = netlink.LinkDel(link) // an older version's host end, known by its port
		}
	}
	if args.Netns != "" {
		err := ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
			if link, err := netlink.LinkByName(args.IfName); err == nil {
				return netlink.LinkDel(link)
			}
			return nil
		})
		var notExist ns.NSPathNotExistErr
		if err != nil && !errors.As(err, &notExist) && !os.IsNotExist(err) {
			if _, ok := err.(ns.NSPathNotNSErr); !ok {
				return types.NewError(types.ErrIOFailure, "ovn_cni DEL: removing "+args.IfName, err.Error())
			}
		}
	}
	// With the netns gone the veth is gone too; make sure of the host end.
	if err := deleteOurHostEnd(hostName, args.ContainerID); err != nil {
		return types.NewError(types.ErrIOFailure, "ovn_cni DEL: removing host end "+hostName, err.Error())
	}
	return nil
}

// Check is CNI CHECK: the pod interface and the OVS port are as ADD left them.
func Check(args *skel.CmdArgs) error {
	conf, pa, err := parseInput("CHECK", args)
	if err != nil {
		return err
	}
	if conf.CNIServerSocket != "" {
		return forward(args, conf, "CHECK")
	}
	return check(context.Background(), args, conf, pa, dialOVS(conf.OVSAddress))
}

func check(ctx context.Context, args *skel.CmdArgs, conf *NetConf, pa *PodArgs, openOVS OpenOVSFunc) error {
	if conf.PrevResult == nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "ovn_cni CHECK: no prevResult", "CHECK needs the result of ADD")
	}
	prev, err := current.NewResultFromResult(conf.PrevResult)
	if err != nil {
		return types.NewError(types.ErrDecodingFailure, "ovn_cni CHECK: cannot read prevResult", err.Error())
	}
	var want *current.Interface
	for _, i := range prev.Interfaces {
		if i.Sandbox != "" && i.Name == args.IfName {
			want = i
		}
	}
	if want == nil {
		return types.NewError(types.ErrInternal, "ovn_cni CHECK: prevResult has no interface "+args.IfName, "")
	}
	err = ns.WithNetNSPath(args.Netns, func(ns.NetNS) error {
		link, err := netlink.LinkByName(args.IfName)
		if err != nil {
			return fmt.Errorf("interface %s missing: %w", args.IfName, err)
		}
		if link.Attrs().HardwareAddr.String() != want.Mac {
			return fmt.Errorf("interface %s has MAC %s, want %s", args.IfName, link.Attrs().HardwareAddr, want.Mac)
		}
		addrs, err := netlink.AddrList(link, netlink.FAMILY_ALL)
		if err != nil {
			return err
		}
		for _, ipc := range prev.IPs {
			found := false
			for _, a := range addrs {
				found = found || a.IPNet.String() == ipc.Address.String()
			}
			if !found {
				return fmt.Errorf("interface %s lacks address %s", args.IfName, ipc.Address.String())
			}
		}
		return nil
	})
	if err != nil {
		return types.NewError(types.ErrInternal, "ovn_cni CHECK for pod "+string(pa.K8S_POD_NAMESPACE)+"/"+string(pa.K8S_POD_NAME), err.Error())
	}
	sw, done, err := openOVS()
	if err != nil {
		return types.NewError(types.ErrIOFailure, "ovn_cni CHECK: cannot reach OVS at "+conf.OVSAddress, err.Error())
	}
	defer done()
	iface, err := sw.Interface(ctx, HostVethName(args.ContainerID))
	wantID := topology.PodPort(string(pa.K8S_POD_NAMESPACE), string(pa.K8S_POD_NAME))
	if err != nil || iface.ExternalIDs["iface-id"] != wantID {
		return types.NewError(types.ErrInternal, "ovn_cni CHECK: OVS port "+HostVethName(args.ContainerID)+" missing or not bound to "+wantID, errString(err))
	}
	if iface.Error != nil && *iface.Error != "" {
		return types.NewError(types.ErrInternal, "ovn_cni CHECK: OVS reports an error on "+iface.Name, *iface.Error)
	}
	return nil
}

// apiPodNetwork polls the API for the pod (the standalone plugin; the node
// daemon's CNI server waits on its pod informer instead).
func apiPodNetwork(kubeconfig string) PodNetworkFunc {
	return func(ctx context.Context, pa *PodArgs, timeout time.Duration) (annotations.PodNetwork, error) {
		kube, err := kubeClient(kubeconfig)
		if err != nil {
			return annotations.PodNetwork{}, types.NewError(types.ErrInvalidNetworkConfig, "cannot build a Kubernetes client from kubeconfig", err.Error())
		}
		deadline := time.Now().Add(timeout)
		for {
			pod, err := kube.CoreV1().Pods(string(pa.K8S_POD_NAMESPACE)).Get(ctx, string(pa.K8S_POD_NAME), metav1.GetOptions{})
			var pn annotations.PodNetwork
			if err == nil {
				if pn, err = PodNetworkOf(pod, pa); err == nil {
					return pn, nil
				}
			}
			if time.Now().After(deadline) {
				return annotations.PodNetwork{}, err
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// PodNetworkOf is the master's annotation for this incarnation of the pod
// (same UID when the runtime passed one), or why there is none yet.
func PodNetworkOf(pod *corev1.Pod, pa *PodArgs) (annotations.PodNetwork, error) {
	if pa.K8S_POD_UID != "" && string(pod.UID) != string(pa.K8S_POD_UID) {
		return annotations.PodNetwork{}, fmt.Errorf("pod has UID %s, the runtime asked for %s", pod.UID, pa.K8S_POD_UID)
	}
	v, ok := pod.Annotations[annotations.PodNetworks]
	if !ok {
		return annotations.PodNetwork{}, errors.New("no annotation yet")
	}
	pn, err := annotations.ParsePodNetworks(v)
	switch {
	case err != nil:
		return pn, err
	case !pn.WrittenFor(string(pod.UID)):
		// Copied from an earlier incarnation (a re-applied manifest): not
		// the master's word for this pod.
		return annotations.PodNetwork{}, fmt.Errorf("the %s annotation was written for pod UID %q, not this pod's %s; waiting for the master's", annotations.PodNetworks, pn.PodUID, pod.UID)
	}
	return pn, nil
}

func kubeClient(kubeconfig string) (kubernetes.Interface, error) {
	if kubeconfig == "" {
		return nil, errors.New("the network configuration has no kubeconfig key")
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	rc.UserAgent = "ovn_cni"
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}

func prefixToIPNet(p netip.Prefix) *net.IPNet {
	return &net.IPNet{IP: p.Addr().AsSlice(), Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen())}
}

// connectOVS dials OVS, giving up after 10 s: the runtime retries failed calls.
func connectOVS(address string) (*ovs.Client, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return ovs.Connect(ctx, address, logr.Discard())
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
