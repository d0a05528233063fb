// Command kube-apiserver is a real Kubernetes API server built from the
// k8s.io/kubernetes module, used only by ovn-k8s integration tests and the demo.
// It lives in its own module so the project's dependency graph stays small.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
