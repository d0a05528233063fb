package cni

import (
	"errors"
	"testing"

	"github.com/containernetworking/cni/pkg/types"
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
