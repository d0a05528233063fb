package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/node"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/trace"
)

func traceCommand() *cli.Command {
	return &cli.Command{
		Name:      "trace",
		Usage:     "follow one packet through the logical network and say what decided its fate (read-only)",
		ArgsUsage: "(NAMESPACE/POD | node/NAME) (NAMESPACE/POD | svc/NAMESPACE/NAME | node/NAME | IP)",
		Description: "Builds the first packet of a connection from the pod (its address, MAC and port) to the\n" +
			"destination, runs ovn-trace on the southbound with it, and prints the verdict (delivered,\n" +
			"dropped, rejected) and the decisions in the cluster's terms: the Service balancer and the\n" +
			"backend, the NetworkPolicy or admin policy ACL (by the rows' owners), the routes and SNATs.\n" +
			"To a pod, its reply on the connection is traced too (an established connection's answer).\n" +
			"Exit status 0 delivered (both ways), 1 dropped or rejected, 2 on trouble.",
		Flags: append(append(append(kubeFlags(), tlsFlags("nb")...), tlsFlags("sb")...),
			&cli.StringFlag{Name: "nb-address", Usage: "OVN NB database: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT"},
			&cli.StringFlag{Name: "sb-address", Usage: "OVN SB database for ovn-trace: unix:PATH, tcp:HOST:PORT or ssl:HOST:PORT"},
			&cli.IntFlag{Name: "tcp", Usage: "trace TCP to this port (a Service's port for svc/…; default: the Service's first TCP port)"},
			&cli.IntFlag{Name: "udp", Usage: "trace UDP to this port"},
			&cli.BoolFlag{Name: "icmp", Usage: "trace an ICMP echo request"},
			&cli.BoolFlag{Name: "ipv4", Aliases: []string{"4"}, Usage: "trace IPv4 (default: the source's first family the destination has)"},
			&cli.BoolFlag{Name: "ipv6", Aliases: []string{"6"}, Usage: "trace IPv6"},
			&cli.StringFlag{Name: "backend", Usage: "for a Service: the backend (IP:PORT) the balancer is to pick; default: ovn-trace's choice"},
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.BoolFlag{Name: "raw", Usage: "also print ovn-trace's own output (and ofproto/trace's)"},
			&cli.BoolFlag{Name: "ofproto", Value: true, Usage: "also trace the packet through the OpenFlow tables of this host's OVS (ovs-appctl ofproto/trace) when the source's port is on it: run the trace on the source's node; --ofproto=false: never"},
			&cli.StringFlag{Name: "ovs-db", Usage: "this host's OVS database for ovs-vsctl (default: ovs-vsctl's own)"},
			&cli.StringFlag{Name: "ovs-vswitchd-ctl", Usage: "ovs-vswitchd's control socket for ovs-appctl -t (default: ovs-appctl's own)"},
		),
		Action: func(c *cli.Context) error {
			if c.NArg() != 2 {
				return usageError{fmt.Errorf("ovnkube trace takes a source and a destination, got %d arguments", c.NArg())}
			}
			kcfg, err := kubeConfig(c)
			if err != nil {
				return err
			}
			out := c.String("output")
			if out != "text" && out != "json" {
				return flagError("output", fmt.Errorf("%q is not text or json", out))
			}
			proto, port, err := traceProtocol(c)
			if err != nil {
				return err
			}
			family, err := traceFamily(c)
			if err != nil {
				return err
			}
			if _, err := required(c, "nb-address"); err != nil {
				return err
			}
			nbAddr, nbTLS, err := dbConnection(c, "nb")
			if err != nil {
				return err
			}
			sb, err := required(c, "sb-address")
			if err != nil {
				return err
			}
			sbEndpoints, err := config.ParseOVSDBAddress(sb)
			if err != nil {
				return flagError("sb-address", err)
			}
			sbFiles, err := dbTLSFiles(c, "sb", sbEndpoints)
			if err != nil {
				return err
			}
			ovnTrace := []string{"ovn-trace", "--db=" + strings.Join(sbEndpoints, ",")}
			if sbFiles.Cert != "" {
				ovnTrace = append(ovnTrace, "--private-key="+sbFiles.Key, "--certificate="+sbFiles.Cert, "--ca-cert="+sbFiles.CA)
			}
			trouble := func(err error) error {
				fmt.Fprintf(c.App.ErrWriter, "ovnkube trace: %v\n", err)
				return exitCode(2)
			}
			ctx, cancel := context.WithTimeout(c.Context, time.Minute)
			defer cancel()
			kube, err := kubeClient(kcfg, "ovnkube-trace")
			if err != nil {
				return trouble(err)
			}
			nb, err := ovndb.ConnectNB(ctx, nbAddr, logger().WithName("nb"), nbTLS)
			if err != nil {
				return trouble(err)
			}
			defer nb.Close()
			ovs, ovsNote := traceOVS(c)
			r, err := trace.Run(ctx, trace.Options{Kube: kube, NB: nb, OVNTrace: ovnTrace, Proto: proto, Port: port, Backend: c.String("backend"), Family: family, OVS: ovs},
				c.Args().Get(0), c.Args().Get(1))
			if err != nil {
				return trouble(err)
			}
			delivered := true
			for d := &r; d != nil; d = d.Reply {
				if d.OFProtoNote == "" {
					d.OFProtoNote = ovsNote
				}
				if !c.Bool("raw") {
					d.Raw = ""
					if d.OFProto != nil {
						d.OFProto.Raw = ""
					}
				}
				delivered = delivered && d.Trace.Verdict == trace.Delivered
			}
			if err := writeTrace(c.App.Writer, out, r); err != nil {
				return err
			}
			if !delivered {
				return exitCode(1)
			}
			return nil
		},
	}
}

// traceOVS is how the trace reaches this host's OVS: nothing without
// --ofproto, nor without OVS's tools (the note says so).
func traceOVS(c *cli.Context) (trace.OVS, string) {
	if !c.Bool("ofproto") {
		return trace.OVS{}, ""
	}
	for _, tool := range []string{"ovs-vsctl", "ovs-appctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return trace.OVS{}, "no " + tool + " on this host"
		}
	}
	o := trace.OVS{Vsctl: []string{"ovs-vsctl", "--timeout=5"}, Appctl: []string{"ovs-appctl", "--timeout=10"}, Bridge: node.IntegrationBridge}
	if db := c.String("ovs-db"); db != "" {
		o.Vsctl = append(o.Vsctl, "--db="+db)
	}
	if ctl := c.String("ovs-vswitchd-ctl"); ctl != "" {
		o.Appctl = append(o.Appctl, "-t", ctl)
	}
	return o, ""
}

// traceFamily reads --ipv4 and --ipv6 (one at most): 4, 6 or 0 for either.
func traceFamily(c *cli.Context) (int, error) {
	switch {
	case c.Bool("ipv4") && c.Bool("ipv6"):
		return 0, flagError("ipv6", fmt.Errorf("give --ipv4 or --ipv6, not both"))
	case c.Bool("ipv4"):
		return 4, nil
	case c.Bool("ipv6"):
		return 6, nil
	}
	return 0, nil
}

// traceProtocol reads --tcp, --udp and --icmp (one at most; TCP by default).
func traceProtocol(c *cli.Context) (string, int, error) {
	set := 0
	for _, f := range []string{"tcp", "udp", "icmp"} {
		if c.IsSet(f) {
			set++
		}
	}
	if set > 1 {
		return "", 0, flagError("tcp", fmt.Errorf("give one of --tcp, --udp and --icmp"))
	}
	for _, f := range []string{"tcp", "udp"} {
		if p := c.Int(f); c.IsSet(f) && (p < 1 || p > 65535) {
			return "", 0, flagError(f, fmt.Errorf("port %d is not 1-65535", p))
		}
	}
	switch {
	case c.IsSet("udp"):
		return "udp", c.Int("udp"), nil
	case c.Bool("icmp"):
		return "icmp", 0, nil
	}
	return "tcp", c.Int("tcp"), nil
}

func writeTrace(w io.Writer, format string, r trace.Result) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	var b strings.Builder
	writeDirection(&b, "", r)
	if r.Reply != nil {
		b.WriteString("\n")
		writeDirection(&b, "reply: ", *r.Reply)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeDirection tells one packet's way: the verdict, the decisions, the
// microflow, OVS's verdict, and with --raw the traces themselves.
func writeDirection(b *strings.Builder, prefix string, r trace.Result) {
	fmt.Fprintf(b, "%s%s: %s → %s", prefix, strings.ToUpper(r.Trace.Verdict), r.From, r.To)
	if r.Trace.Port != "" {
		fmt.Fprintf(b, " (out of port %s)", r.Trace.Port)
	}
	b.WriteString("\n")
	for _, d := range r.Decisions {
		fmt.Fprintf(b, "  %-8s %s", d.Kind, d.Text)
		if d.Object != "" {
			fmt.Fprintf(b, "  ← %s", d.Object)
		}
		b.WriteString("\n")
	}
	fmt.Fprintf(b, "microflow: %s\n", r.Microflow)
	switch o := r.OFProto; {
	case o != nil:
		fmt.Fprintf(b, "ofproto/trace on this host's %s: %s", o.Bridge, strings.ToUpper(o.Verdict))
		if o.Tunnel != "" {
			fmt.Fprintf(b, " (Geneve to %s)", o.Tunnel)
		}
		fmt.Fprintf(b, "; datapath actions: %s\nflow: %s\n", o.DatapathActions, o.Flow)
	case r.OFProtoNote != "":
		fmt.Fprintf(b, "ofproto/trace: none: %s\n", r.OFProtoNote)
	}
	if r.Raw != "" {
		b.WriteString("\n" + r.Raw)
	}
	if r.OFProto != nil && r.OFProto.Raw != "" {
		b.WriteString("\n" + r.OFProto.Raw)
	}
}

// traceFlagsFirst lets `ovnkube [--loglevel N] trace` take its flags after
// its arguments (flagsFirst); other commands' arguments are left as they are.
func traceFlagsFirst(args []string) []string {
	for i := 1; i < len(args); i++ {
		switch a := args[i]; {
		case a == "trace":
			return append(args[:i+1:i+1], flagsFirst(args[i+1:], map[string]bool{"icmp": true, "raw": true, "ofproto": true, "ipv4": true, "4": true, "ipv6": true, "6": true, "help": true, "h": true})...)
		case a == "--loglevel":
			i++ // its value
		case !strings.HasPrefix(a, "-"):
			return args // another command
		}
	}
	return args
}

// flagsFirst moves a command's positional arguments after its flags, so
// that `ovnkube trace ns/a ns/b --tcp 80` reads as it is written (the CLI
// library stops at the first argument); boolFlags take no value.
func flagsFirst(args []string, boolFlags map[string]bool) []string {
	var flags, positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			positional = append(positional, args[i+1:]...)
			i = len(args)
		case strings.HasPrefix(a, "-") && len(a) > 1:
			flags = append(flags, a)
			name := strings.TrimLeft(a, "-")
			if !strings.Contains(name, "=") && !boolFlags[name] && i+1 < len(args) {
				i++
				flags = append(flags, args[i])
			}
		default:
			positional = append(positional, a)
		}
	}
	return append(flags, positional...)
}
