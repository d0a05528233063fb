// Command ovn_cni is the ovn-k8s CNI plugin. This build answers VERSION only;
// ADD, DEL and CHECK (veth, pod netns, br-int port) are the node-side work
// tracked separately and return a CNI error saying so, never a fake success.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/version"
)

func notYet(*skel.CmdArgs) error {
	return types.NewError(types.ErrInternal, "ovn_cni: ADD/DEL/CHECK are not implemented in this build", "use a build that includes the node-side CNI support")
}

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: notYet, Del: notYet, Check: notYet},
		version.PluginSupports("0.3.1", "0.4.0", "1.0.0"), "ovn_cni: the ovn-k8s CNI plugin")
}
