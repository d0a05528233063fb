package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// diffReport is what `ovnkube diff -o json` prints.
type diffReport struct {
	InSync bool            `json:"inSync"`
	Rows   []ovndb.RowDiff `json:"rows"`
	NBRows int             `json:"nbRows"`
}

// runDiff runs `ovnkube diff` against the cluster with the master's flags
// and returns its report and exit status.
func (c *cluster) runDiff(extra ...string) (diffReport, int) {
	c.t.Helper()
	var r diffReport
	args := []string{"diff", "--kubeconfig", c.kube.Kubeconfig, "--nb-address", c.ovn.NBAddress(),
		"--dns-servers", harness.NoDNS, "--egressip-reachability-timeout", "0"}
	if !slices.Contains(extra, "--settle") {
		args = append(args, "--settle", "0") // no master runs while faults are checked
	}
	code := c.runJSON(&r, append(args, extra...)...)
	return r, code
}

// runJSON runs an ovnkube command with -o json, decodes what it prints
// into out and returns its exit status.
func (c *cluster) runJSON(out any, args ...string) int {
	c.t.Helper()
	cmd := exec.Command(harness.Binary(c.t, "ovnkube"), append([]string{"--loglevel", "0"}, append(args, "-o", "json")...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.Output()
	code := 0
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		code = exit.ExitCode()
	} else if err != nil {
		c.t.Fatal(err)
	}
	if jerr := json.Unmarshal(stdout, out); jerr != nil {
		c.t.Fatalf("ovnkube %q (exit %d): %v\n%s\n%s", args, code, jerr, stdout, stderr.String())
	}
	return code
}

func diffLines(r diffReport) []string {
	var out []string
	for _, d := range r.Rows {
		line := d.Kind + " " + d.Table + " " + d.Row
		var cols []string
		for _, col := range d.Columns {
			cols = append(cols, col.Column)
		}
		if len(cols) > 0 {
			line += " (" + strings.Join(cols, ", ") + ")"
		}
		out = append(out, line)
	}
	sort.Strings(out)
	return out
}

// Issue 36: `ovnkube diff` against the real NB and API server reports
// exactly each fault the master repairs, before the master runs: a pod's
// port deleted by hand, a column edited, a stale row of ours added, the NB
// wiped; and nothing once the master has converged. It writes nothing.
func TestDiffReportsEachFaultBeforeTheMasterRepairsIt(t *testing.T) {
	c := newCluster(t)
	c.startMaster()
	c.createNode("n1", nil)
	c.kube.EnsureNamespace(t, "ns")
	for _, p := range []string{"a", "b"} {
		c.createPod("ns", p, "n1")
		c.podNetwork("ns", p)
		c.waitPort("n1", "ns_"+p, nil)
	}
	c.waitSynced()
	harness.Eventually(t, 20*time.Second, "ovnkube diff in sync while the master runs", func() error {
		if r, code := c.runDiff(); code != 0 || !r.InSync {
			return fmt.Errorf("exit %d: %q", code, diffLines(r))
		}
		return nil
	})

	c.master.Stop()
	ids := topology.Owner{Type: topology.OwnerNode, Name: "gone"}.ExternalIDs()
	stale := []string{"ls-add", "gone", "--", "set", "Logical_Switch", "gone"}
	for k, v := range ids {
		stale = append(stale, fmt.Sprintf("external_ids:%q=%q", k, v))
	}
	for _, args := range [][]string{{"lsp-del", "ns_a"}, {"set", "Logical_Switch_Port", "ns_b", `port_security="0a:58:0a:f4:00:63 10.244.0.99"`}, stale} {
		if out, err := c.ovn.NBCtl(args...); err != nil {
			t.Fatalf("ovn-nbctl %q: %v %s", args, err, out)
		}
	}
	before := nbSnapshot(t, c)
	r, code := c.runDiff()
	got := strings.Join(diffLines(r), "\n")
	want := strings.Join([]string{
		"differs Logical_Switch n1 (ports)",
		"differs Logical_Switch_Port ns_b (port_security)",
		"missing Logical_Switch_Port ns_a",
		"stale Logical_Switch gone",
	}, "\n")
	if code != 1 || r.InSync || got != want {
		t.Errorf("after three faults: exit %d, in sync %v, rows\n%s\nwant\n%s", code, r.InSync, got, want)
	}
	if d := ovndb.Compare(before, nbSnapshot(t, c)); len(d) > 0 {
		t.Errorf("ovnkube diff wrote to the NB: %+v", d)
	}

	c.startMaster()
	c.waitSynced()
	harness.Eventually(t, 20*time.Second, "in sync after the master's repair", func() error {
		if r, code := c.runDiff(); code != 0 {
			return fmt.Errorf("exit %d: %q", code, diffLines(r))
		}
		return nil
	})

	// A row named as ours that nobody owns: the master leaves it, the diff
	// names it (with the master running, settled).
	if out, err := c.ovn.NBCtl("lr-add", "GR_intruder"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	r, code = c.runDiff("--settle", "1s")
	if got := strings.Join(diffLines(r), "\n"); code != 1 || got != "unowned Logical_Router GR_intruder" {
		t.Errorf("unowned router: exit %d, rows\n%s", code, got)
	}
	if out, err := c.ovn.NBCtl("lr-del", "GR_intruder"); err != nil {
		t.Fatalf("%v %s", err, out)
	}

	// The NB wiped (northd may put NB_Global back at any time: left out).
	c.master.Stop()
	snap := nbSnapshot(t, c)
	converged := snap.Rows() - len(snap["NB_Global"])
	c.ovn.ResetNB()
	r, code = c.runDiff()
	missing := 0
	for _, d := range r.Rows {
		if d.Kind != ovndb.RowMissing || d.Table == "NB_Global" {
			continue
		}
		missing++
	}
	if code != 1 || missing != converged {
		t.Errorf("NB wiped: exit %d, %d rows missing, want all %d:\n%s", code, missing, converged, strings.Join(diffLines(r), "\n"))
	}
	c.startMaster()
	c.waitSynced()
}

func nbSnapshot(t *testing.T, c *cluster) ovndb.Snapshot {
	t.Helper()
	nb, err := ovndb.ConnectNBFull(c.ctx(), c.ovn.NBEndpoints(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	defer nb.Close()
	return ovndb.TakeSnapshot(nb)
}

// `ovnkube diff --zone` on a zone's own NB (zone mode: the zone's NB, SB,
// northd and ovn-ic, its node's host subnet from the cluster manager) is in
// sync while the zone's master runs, and reports a pod's port deleted by
// hand while it is down: the same master, scoped to the zone, on a copy.
func TestDiffZone(t *testing.T) {
	c, _, startCM := newZoneCluster(t)
	startCM("cluster-manager")
	c.kube.EnsureNamespace(t, "ns")
	c.createPod("ns", "a", "n1")
	zone := []string{"--zone", "zone-n1"}
	c.startMaster(append(zone, "--leader-elect=false")...)
	c.waitSynced()
	c.podNetwork("ns", "a")
	c.waitPort("n1", "ns_a", nil)
	harness.Eventually(t, 20*time.Second, "ovnkube diff --zone in sync while the zone's master runs", func() error {
		if r, code := c.runDiff(zone...); code != 0 || !r.InSync {
			return fmt.Errorf("exit %d: %q", code, diffLines(r))
		}
		return nil
	})
	c.master.Stop()
	if out, err := c.ovn.NBCtl("lsp-del", "ns_a"); err != nil {
		t.Fatalf("%v %s", err, out)
	}
	r, code := c.runDiff(zone...)
	want := "differs Logical_Switch n1 (ports)\nmissing Logical_Switch_Port ns_a"
	if got := strings.Join(diffLines(r), "\n"); code != 1 || got != want {
		t.Errorf("a pod's port deleted: exit %d, rows\n%s\nwant\n%s", code, got, want)
	}
}
