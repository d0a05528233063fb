package app

import (
	"fmt"

	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
)

// refuseCleartextCredentials refuses a client that would send credentials
// (a bearer token such as the pod's service account token, a password, an
// auth or exec plugin's token) to a plain http:// API server. Plain http
// without credentials stays allowed. A kubeconfig's credentials need no check
// here: client-go uses them only over TLS (TestKubeconfigCredentialsOnlyOverTLS).
// The error names the flag that chose the server.
func refuseCleartextCredentials(rc *rest.Config, k config.Kube) error {
	u, _, err := rest.DefaultServerUrlFor(rc)
	if err != nil || u.Scheme != "http" || !sendsCredentials(rc) {
		return nil
	}
	flag := "kubeconfig"
	if k.APIServer != "" {
		flag = "k8s-apiserver"
	}
	return flagError(flag, fmt.Errorf("API server %s is plain http and the client would send its token in clear: use https://", u.Redacted()))
}

func sendsCredentials(rc *rest.Config) bool {
	return rc.BearerToken != "" || rc.BearerTokenFile != "" || rc.Username != "" || rc.Password != "" ||
		rc.AuthProvider != nil || rc.ExecProvider != nil
}
