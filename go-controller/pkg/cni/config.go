// Package cni is ovn_cni, the CNI plugin (spec 1.0.0) that wires a pod into
// OVN: it reads the address the master annotated, creates the veth, sets up
// the pod side, plugs the host side into br-int and waits for OVN to bind it.
package cni

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
	"github.com/containernetworking/cni/pkg/version"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovs"
)

// NetConf is the plugin's network configuration (stdin).
type NetConf struct {
	types.NetConf
	Kubeconfig               string `json:"kubeconfig"`
	OVSAddress               string `json:"ovsAddress"`
	MTU                      int    `json:"mtu"`
	AnnotationTimeout        string `json:"annotationTimeout"`
	OVNInstalledTimeout      string `json:"ovnInstalledTimeout"`
	DisableTxChecksumOffload bool   `json:"disableTxChecksumOffload"`
	// CNIServerSocket hands every request to the node daemon's CNI server
	// (ovnkube node --cni-server-socket) instead of doing the work here.
	CNIServerSocket string `json:"cniServerSocket"`

	annotationTimeout   time.Duration
	ovnInstalledTimeout time.Duration
}

// Defaults of the optional keys.
const (
	DefaultMTU                 = 1400
	DefaultAnnotationTimeout   = 30 * time.Second
	DefaultOVNInstalledTimeout = 20 * time.Second
)

// parseConf decodes and validates stdin; errors carry the spec's codes.
func parseConf(stdin []byte) (*NetConf, error) {
	conf := &NetConf{}
	if err := json.Unmarshal(stdin, conf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "ovn_cni: cannot decode the network configuration", err.Error())
	}
	if err := checkNameAndVersion(conf); err != nil {
		return nil, err
	}
	if conf.OVSAddress == "" {
		conf.OVSAddress = ovs.DefaultAddress
	}
	if conf.MTU == 0 {
		conf.MTU = DefaultMTU
	}
	if conf.MTU < 576 || conf.MTU > 65535 {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "ovn_cni: invalid network configuration", fmt.Sprintf("mtu %d is outside 576..65535", conf.MTU))
	}
	if !strings.HasPrefix(conf.OVSAddress, "unix:") && !strings.HasPrefix(conf.OVSAddress, "tcp:") {
		return nil, types.NewError(types.ErrInvalidNetworkConfig, "ovn_cni: invalid network configuration", fmt.Sprintf("ovsAddress %q must be unix:PATH or tcp:HOST:PORT", conf.OVSAddress))
	}
	var err error
	if conf.annotationTimeout, err = duration("annotationTimeout", conf.AnnotationTimeout, DefaultAnnotationTimeout); err != nil {
		return nil, err
	}
	if conf.ovnInstalledTimeout, err = duration("ovnInstalledTimeout", conf.OVNInstalledTimeout, DefaultOVNInstalledTimeout); err != nil {
		return nil, err
	}
	if err := version.ParsePrevResult(&conf.NetConf); err != nil {
		return nil, types.NewError(types.ErrDecodingFailure, "ovn_cni: cannot decode prevResult", err.Error())
	}
	return conf, nil
}

// checkNameAndVersion: a network name of skel's characters, a spec version
// ovn_cni answers (skel's checks, repeated for requests through the socket).
func checkNameAndVersion(conf *NetConf) error {
	if err := utils.ValidateNetworkName(conf.Name); err != nil {
		return types.NewError(types.ErrInvalidNetworkConfig, "ovn_cni: invalid network configuration",
			fmt.Sprintf("name %q: a network name is a letter or digit followed by letters, digits, '_', '.' or '-'", conf.Name))
	}
	if !slices.Contains(Versions.SupportedVersions(), conf.CNIVersion) {
		return types.NewError(types.ErrIncompatibleCNIVersion, "ovn_cni: unsupported cniVersion "+strconv.Quote(conf.CNIVersion),
			"ovn_cni answers "+strings.Join(Versions.SupportedVersions(), ", "))
	}
	return nil
}

func duration(key, value string, def time.Duration) (time.Duration, error) {
	if value == "" {
		return def, nil
	}
	d, err := time.ParseDuration(value)
	if err != nil || d < 0 {
		return 0, types.NewError(types.ErrInvalidNetworkConfig, "ovn_cni: invalid network configuration", fmt.Sprintf("%s %q is not a Go duration such as 30s", key, value))
	}
	return d, nil
}

// PodArgs are the Kubernetes CNI_ARGS the runtime passes.
type PodArgs struct {
	types.CommonArgs
	K8S_POD_NAMESPACE          types.UnmarshallableString //nolint:revive // names fixed by the runtimes
	K8S_POD_NAME               types.UnmarshallableString //nolint:revive
	K8S_POD_UID                types.UnmarshallableString //nolint:revive
	K8S_POD_INFRA_CONTAINER_ID types.UnmarshallableString //nolint:revive
}

func parseArgs(args string, needPod bool) (*PodArgs, error) {
	a := &PodArgs{}
	if err := types.LoadArgs(args, a); err != nil {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "ovn_cni: cannot parse CNI_ARGS", err.Error())
	}
	if needPod && (a.K8S_POD_NAMESPACE == "" || a.K8S_POD_NAME == "") {
		return nil, types.NewError(types.ErrInvalidEnvironmentVariables, "ovn_cni: CNI_ARGS lacks K8S_POD_NAMESPACE or K8S_POD_NAME",
			"the container runtime must pass the pod's namespace and name")
	}
	return a, nil
}

// HostVethName is the host end's name: "ovn" and 12 hex digits of the
// SHA-256 of the container ID, so DEL finds it without any state, and no
// container ID (the CNI library accepts "eth0" or "ovn-k8s-mp0") can name
// an interface the plugin did not make.
func HostVethName(containerID string) string {
	sum := sha256.Sum256([]byte(containerID))
	return "ovn" + hex.EncodeToString(sum[:])[:12]
}

// hostVethAlias marks a host end as made by ovn_cni for this container: ADD
// and DEL remove only links that carry it.
func hostVethAlias(containerID string) string { return "ovn_cni:" + containerID }

// Versions are the CNI spec versions ovn_cni answers.
var Versions = version.PluginSupports("0.3.1", "0.4.0", "1.0.0")

// parseInput checks a call as skel does before running a plugin (whether it
// came from the runtime or through the CNI server's socket), then reads the
// network config from stdin and the runtime's CNI_ARGS.
func parseInput(command string, args *skel.CmdArgs) (*NetConf, *PodArgs, error) {
	if err := validateArgs(command, args); err != nil {
		return nil, nil, err
	}
	conf, err := parseConf(args.StdinData)
	if err != nil {
		return nil, nil, err
	}
	if command == "CHECK" && conf.CNIVersion == "0.3.1" {
		return nil, nil, types.NewError(types.ErrIncompatibleCNIVersion, "ovn_cni CHECK: cniVersion 0.3.1 has no CHECK", "use cniVersion 0.4.0 or later")
	}
	pa, err := parseArgs(args.Args, command != "DEL")
	if err != nil {
		return nil, nil, err
	}
	return conf, pa, nil
}

// validateArgs applies skel's rules to the CNI_* variables: a known command,
// a container ID of skel's characters, a valid interface name, and a netns
// path for ADD and CHECK. An empty container ID would make DEL match ports
// by an empty sandbox id.
func validateArgs(command string, args *skel.CmdArgs) error {
	bad := func(field, value, why string) error {
		return types.NewError(types.ErrInvalidEnvironmentVariables, fmt.Sprintf("ovn_cni %s: invalid %s %q", command, field, value), why)
	}
	ifErr := utils.ValidateInterfaceName(args.IfName)
	switch {
	case command != "ADD" && command != "CHECK" && command != "DEL":
		return bad("CNI_COMMAND", command, "ovn_cni answers ADD, CHECK, DEL and VERSION")
	case args.ContainerID == "":
		return bad("CNI_CONTAINERID", "", "the runtime must pass the sandbox's container ID")
	case utils.ValidateContainerID(args.ContainerID) != nil:
		return bad("CNI_CONTAINERID", args.ContainerID, "a container ID is a letter or digit followed by letters, digits, '_', '.' or '-'")
	case ifErr != nil:
		return bad("CNI_IFNAME", args.IfName, ifErr.Msg+": an interface name has 1 to 15 bytes, no '/', ':' or whitespace, and is not '.' or '..'")
	case args.Netns == "" && command != "DEL":
		return bad("CNI_NETNS", "", command+" needs the path of the sandbox's network namespace")
	}
	return nil
}
