// Package app is the ovnkube command line: flag parsing and validation,
// then a call into the package that does the work.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/go-logr/logr"
	"github.com/urfave/cli/v2"
	"k8s.io/klog/v2"
)

// exitUsage is the status for invalid flags, as for any Unix command.
const exitUsage = 2

// usageError marks an error caused by the command line.
type usageError struct{ error }

func flagError(name string, err error) error {
	return usageError{fmt.Errorf("invalid --%s: %w", name, err)}
}

// required returns the value of a flag that must be set, or a usage error.
func required(c *cli.Context, name string) (string, error) {
	v := c.String(name)
	if v == "" {
		return "", flagError(name, fmt.Errorf("is required"))
	}
	return v, nil
}

// Main runs ovnkube with args and returns the exit status.
func Main(args []string, stdout, stderr io.Writer) int {
	plugin := filepath.Base(args[0]) == PluginName
	level := 2
	if plugin {
		level = 0 // a user's command: its output, not the client library's notes
	}
	app := &cli.App{
		Name:  "ovnkube",
		Usage: "OVN-Kubernetes style network controller: Kubernetes objects into an OVN logical network",
		Description: "ovnkube master watches Nodes and Pods and programs the OVN Northbound database;\n" +
			"master-init creates the cluster-wide topology once, without watching anything.",
		Writer:    stdout,
		ErrWriter: stderr,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "loglevel", Value: level, Usage: "log verbosity (0 quiet … 5 debug)"},
		},
		Before:   func(c *cli.Context) error { return setLogLevel(c, stderr) },
		Commands: []*cli.Command{masterCommand(), clusterManagerCommand(), diffCommand(), traceCommand(), masterInitCommand(), minionInitCommand(), nodeCommand(), gatewayInitCommand(), nicsToBridgeCommand()},
		OnUsageError: func(c *cli.Context, err error, _ bool) error {
			return usageError{err}
		},
		ExitErrHandler: func(*cli.Context, error) {},
	}
	if plugin {
		app.Name, app.Usage = "kubectl ovnk", "see why a packet goes where it goes, and how the OVN Northbound database differs from the cluster's objects (read-only)"
		app.Description = "kubectl's plugin (ovnkube linked as " + PluginName + " on the PATH): the kubeconfig is kubectl's, and the\n" +
			"databases' addresses and the cluster's ranges come from the ConfigMap " + clusterConfig + "."
		app.Commands = pluginCommands()
	}
	for _, cmd := range app.Commands {
		cmd.OnUsageError = app.OnUsageError
		// --loglevel is accepted after the subcommand too (`ovnkube master --loglevel 5`).
		cmd.Flags = append(cmd.Flags, &cli.IntFlag{Name: "loglevel", Value: level, Usage: "log verbosity (0 quiet … 5 debug)"})
		cmd.Before = func(c *cli.Context) error {
			if !c.IsSet("loglevel") {
				return nil
			}
			return setLogLevel(c, stderr)
		}
	}
	if err := app.Run(traceFlagsFirst(args)); err != nil {
		var code exitCode
		if errors.As(err, &code) {
			return int(code) // the command said why
		}
		fmt.Fprintf(stderr, "%s: %v\n", app.Name, err)
		var ue usageError
		if errors.As(err, &ue) {
			return exitUsage
		}
		return 1
	}
	return 0
}

func setLogLevel(c *cli.Context, stderr io.Writer) error {
	level := c.Int("loglevel")
	if level < 0 {
		return flagError("loglevel", fmt.Errorf("must be 0 or more"))
	}
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	_ = fs.Set("v", strconv.Itoa(level))
	_ = fs.Set("logtostderr", "false")
	_ = fs.Set("alsologtostderr", "false")
	klog.SetOutput(stderr)
	return nil
}

// signalContext ends on SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, syscall.SIGINT, syscall.SIGTERM)
}

func logger() logr.Logger { return klog.NewKlogr() }
