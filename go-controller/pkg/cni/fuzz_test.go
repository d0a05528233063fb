package cni

import (
	"bytes"
	"encoding/base64"
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/skel"
	"github.com/containernetworking/cni/pkg/types"
	"github.com/containernetworking/cni/pkg/utils"
)

// ovn_cni's stdin and CNI_ARGS come from the runtime: whatever they hold,
// the parser returns a config or a CNI error with one of the spec's codes,
// never panics.

func FuzzParseConf(f *testing.F) {
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"ovn-k8s","type":"ovn_cni","kubeconfig":"/etc/kubernetes/kubeconfig","mtu":1400}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","annotationTimeout":"soon"}`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","mtu":50}`))
	f.Add([]byte(`{"cniVersion":"9.9.9","name":"n","type":"ovn_cni"}`))
	f.Add([]byte(`{not json`))
	f.Add([]byte(`{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","prevResult":{"interfaces":[{"name":"eth0"}]}}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		conf, err := parseConf(in)
		if err != nil {
			checkCNIError(t, err)
			return
		}
		if conf.MTU < 0 {
			t.Fatalf("accepted MTU %d", conf.MTU)
		}
	})
}

func FuzzParseArgs(f *testing.F) {
	f.Add("K8S_POD_NAMESPACE=default;K8S_POD_NAME=web;K8S_POD_UID=1234", true)
	f.Add("IgnoreUnknown=1", true)
	f.Add("K8S_POD_NAMESPACE=default", false)
	f.Add(";;==;", true)
	f.Fuzz(func(t *testing.T, in string, needPod bool) {
		a, err := parseArgs(in, needPod)
		if err != nil {
			checkCNIError(t, err)
			return
		}
		if needPod && (a.K8S_POD_NAMESPACE == "" || a.K8S_POD_NAME == "") {
			t.Fatalf("accepted %q without the pod", in)
		}
	})
}

// A request on the CNI server's socket: whatever its bytes, it is refused
// with a CNI error or has passed skel's checks.
func FuzzServerRequest(f *testing.F) {
	conf := base64.StdEncoding.EncodeToString([]byte(`{"cniVersion":"1.0.0","name":"ovn-k8s","type":"ovn_cni"}`))
	f.Add([]byte(`{"command":"DEL","containerID":"c1","ifName":"eth0","stdin":"` + conf + `"}`))
	f.Add([]byte(`{"command":"DEL","containerID":"","ifName":"eth0","stdin":"` + conf + `"}`))
	f.Add([]byte(`{"command":"ADD","containerID":"c1","netns":"/var/run/netns/p","ifName":"eth0:1","args":"K8S_POD_NAMESPACE=a;K8S_POD_NAME=b","stdin":"` + conf + `"}`))
	f.Add([]byte(`{"command":"CHECK","containerID":"c1","ifName":"eth0"}{}`))
	f.Add([]byte(`{"command":"ADD","stdin":"not base64"}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		req, err := decodeRequest(bytes.NewReader(in))
		if err != nil {
			checkCNIError(t, err)
			return
		}
		args := &skel.CmdArgs{ContainerID: req.ContainerID, Netns: req.Netns, IfName: req.IfName, Args: req.Args, StdinData: req.StdinData}
		if _, _, err := parseInput(req.Command, args); err != nil {
			checkCNIError(t, err)
			return
		}
		if utils.ValidateContainerID(req.ContainerID) != nil || utils.ValidateInterfaceName(req.IfName) != nil {
			t.Fatalf("accepted container %q, interface %q", req.ContainerID, req.IfName)
		}
	})
}

func checkCNIError(t *testing.T, err error) {
	t.Helper()
	var cniErr *types.Error
	if !errors.As(err, &cniErr) {
		t.Fatalf("error %v (%T) is not a CNI error", err, err)
	}
	if cniErr.Code == 0 || cniErr.Msg == "" {
		t.Fatalf("CNI error without code or message: %+v", cniErr)
	}
}
