// Command ovnkube runs the ovn-k8s controllers: `ovnkube master` on the
// control plane and the one-shot setup commands. See `ovnkube --help`.
package main

import (
	"os"

	"github.com/ovn-k8s/ovn-k8s/go-controller/cmd/ovnkube/app"
)

func main() {
	os.Exit(app.Main(os.Args, os.Stdout, os.Stderr))
}
