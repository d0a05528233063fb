package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"k8s.io/client-go/kubernetes"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/master"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdiff"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// exitCode is an error that sets the exit status itself (ovnkube diff: 1
// when the NB differs).
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func diffCommand() *cli.Command {
	return &cli.Command{
		Name:  "diff",
		Usage: "show how the OVN Northbound database differs from what the master wants (read-only)",
		Description: "Runs the master's own code on the NB (reading the cluster and the NB, writing to neither) until it\n" +
			"has nothing left to do: if it never asked to write, the NB is in sync. Otherwise copies the NB's rows\n" +
			"into an in-memory database, runs the master against the copy, and compares the copy with the NB:\n" +
			"rows missing, rows that differ (column by column) and stale rows the master would delete. Takes\n" +
			"the master's flags, which decide the rows. Exit status 0 in sync, 1 when the NB\n" +
			"differs, 2 on trouble. A difference is confirmed by a second pass --settle later (a master at work\n" +
			"writes what the first pass would report).",
		Flags: append(masterSettingFlags(),
			&cli.StringFlag{Name: "output", Aliases: []string{"o"}, Value: "text", Usage: "text or json"},
			&cli.DurationFlag{Name: "settle", Value: 10 * time.Second, Usage: "when the NB differs, diff again after this long and report only the differences found both times: what a running master was about to write is left out (0: one pass)"},
			&cli.DurationFlag{Name: "timeout", Value: 5 * time.Minute, Usage: "give up after this long"},
		),
		Action: func(c *cli.Context) error {
			cfg, err := masterConfig(c)
			if err != nil {
				return err
			}
			out := c.String("output")
			if out != "text" && out != "json" {
				return flagError("output", fmt.Errorf("%q is not text or json", out))
			}
			settle, timeout := c.Duration("settle"), c.Duration("timeout")
			if settle < 0 {
				return flagError("settle", fmt.Errorf("must not be negative"))
			}
			if timeout <= 0 {
				return flagError("timeout", fmt.Errorf("must be positive"))
			}
			ctx, cancel := signalContext(c.Context)
			defer cancel()
			ctx, stop := context.WithTimeout(ctx, timeout)
			defer stop()
			trouble := func(err error) error {
				fmt.Fprintf(c.App.ErrWriter, "ovnkube diff: %v\n", err)
				return exitCode(2)
			}
			rc, err := kubeRESTConfig(cfg.Kube, "ovnkube-diff")
			if err != nil {
				return trouble(err)
			}
			rc.Wrap(nbdiff.ReadOnly)
			kube, err := kubernetes.NewForConfig(rc)
			if err != nil {
				return trouble(err)
			}
			// The copy master's notes (what it follows, its sync) only from --loglevel 1:
			// the diff is the output.
			log := logger().WithName("diff").V(1)
			opts := nbdiff.Options{Master: cfg, Kube: kube, APIs: func() master.APIs { return customAPIs(rc, kube, log) }, Log: log}
			r, err := diffSettled(ctx, opts, settle)
			if err != nil {
				return trouble(err)
			}
			if err := writeDiff(c.App.Writer, out, r); err != nil {
				return err
			}
			if len(r.Rows) > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
}

// diffSettled diffs, and with settle > 0 diffs again after settle and
// keeps only the differences found both times, the same.
func diffSettled(ctx context.Context, opts nbdiff.Options, settle time.Duration) (nbdiff.Result, error) {
	first, err := nbdiff.Diff(ctx, opts)
	if err != nil || settle == 0 || len(first.Rows) == 0 {
		return first, err
	}
	select {
	case <-time.After(settle):
	case <-ctx.Done():
		return first, ctx.Err()
	}
	second, err := nbdiff.Diff(ctx, opts)
	if err != nil {
		return second, err
	}
	seen := map[string]bool{}
	for _, r := range first.Rows {
		seen[rowKey(r)] = true
	}
	kept := second.Rows[:0]
	for _, r := range second.Rows {
		if seen[rowKey(r)] {
			kept = append(kept, r)
		}
	}
	second.Rows = kept
	return second, nil
}

func rowKey(r ovndb.RowDiff) string {
	b, _ := json.Marshal(r)
	return string(b)
}

func writeDiff(w io.Writer, format string, r nbdiff.Result) error {
	if format == "json" {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		phases := map[string]float64{}
		for k, d := range r.Phases {
			phases[k] = d.Seconds()
		}
		return enc.Encode(struct {
			InSync bool               `json:"inSync"`
			Rows   []ovndb.RowDiff    `json:"rows"`
			NBRows int                `json:"nbRows"`
			Took   string             `json:"took"`
			Phases map[string]float64 `json:"phasesSeconds"`
		}{len(r.Rows) == 0, append([]ovndb.RowDiff{}, r.Rows...), r.NBRows, r.Took.Round(time.Millisecond).String(), phases})
	}
	count := map[string]int{}
	for _, d := range r.Rows {
		count[d.Kind]++
	}
	if len(r.Rows) == 0 {
		_, err := fmt.Fprintf(w, "in sync: the NB's %d rows are what the master wants (%s)\n", r.NBRows, r.Took.Round(time.Millisecond))
		return err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d rows differ: %d missing, %d differ, %d stale, %d unowned (of the NB's %d rows; %s)\n", len(r.Rows),
		count[ovndb.RowMissing], count[ovndb.RowDiffers], count[ovndb.RowStale], count[ovndb.RowUnowned], r.NBRows, r.Took.Round(time.Millisecond))
	for _, d := range r.Rows {
		fmt.Fprintf(&b, "%-8s %s %s\n", d.Kind, d.Table, d.Row)
		for _, col := range d.Columns {
			if len(col.Added)+len(col.Removed) == 0 {
				fmt.Fprintf(&b, "         %s:\n           have %s\n           want %s\n", col.Column, col.Have, col.Want)
				continue
			}
			fmt.Fprintf(&b, "         %s:\n", col.Column)
			for _, x := range col.Removed {
				fmt.Fprintf(&b, "           - %s\n", x)
			}
			for _, x := range col.Added {
				fmt.Fprintf(&b, "           + %s\n", x)
			}
		}
	}
	_, err := io.WriteString(w, b.String())
	return err
}
