// Command pause is the pod sandbox's process: PID 1 of the pod's namespaces.
// It does nothing but reap the children it inherits (orphans in a shared PID
// namespace) and exit 0 on SIGTERM or SIGINT. Built static (CGO_ENABLED=0)
// into the pause image by test/cluster/cmd/images.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	// PID 1 gets no signal it has no handler for: Notify installs them.
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for sig := range sigs {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		// Signals coalesce: one SIGCHLD may stand for several exits.
		for {
			var status syscall.WaitStatus
			if pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil); pid <= 0 || err != nil {
				break
			}
		}
	}
}
