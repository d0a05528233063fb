// Command ovn_cni is the ovn-k8s CNI plugin; container runtimes call it for
// every pod sandbox. See docs/cni.md for its network configuration keys.
package main

import (
	"github.com/containernetworking/cni/pkg/skel"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/cni"
)

func main() {
	skel.PluginMainFuncs(skel.CNIFuncs{Add: cni.Add, Del: cni.Del, Check: cni.Check},
		cni.Versions, "ovn_cni: the ovn-k8s CNI plugin (OVN-Kubernetes style)")
}
