package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Interconnect is OVN interconnection's own databases, the IC NB (transit
// switches, the CMS's) and the IC SB (availability zones, gateways and
// transit port bindings, written by every zone's ovn-ic), as ovsdb-servers
// on unix sockets in a temporary directory.
type Interconnect struct {
	Dir            string
	NBSock, SBSock string
	nb, sb         *Process
	t              T
}

// StartInterconnect creates empty IC NB and SB databases and starts their
// servers.
func StartInterconnect(t T) *Interconnect {
	t.Helper()
	LookPath(t, "ovn-ic")
	dir := t.TempDir()
	ic := &Interconnect{Dir: dir, NBSock: filepath.Join(dir, "ic-nb.sock"), SBSock: filepath.Join(dir, "ic-sb.sock"), t: t}
	o := &OVNCentral{Dir: dir, t: t} // its database helpers
	for _, db := range []struct{ name, schema string }{{"ic-nb", ICNBSchema}, {"ic-sb", ICSBSchema}} {
		if _, err := Run("ovsdb-tool", "create", filepath.Join(dir, db.name+".db"), CurrentStack.Schema(t, db.schema)); err != nil {
			t.Fatal(err)
		}
	}
	ic.nb, ic.sb = o.startDB("ic-nb"), o.startDB("ic-sb")
	return ic
}

// NBCtl runs ovn-ic-nbctl against the IC NB.
func (ic *Interconnect) NBCtl(args ...string) (string, error) {
	return Run(append([]string{"ovn-ic-nbctl", "--db=unix:" + ic.NBSock}, args...)...)
}

// SBCtl runs ovn-ic-sbctl against the IC SB.
func (ic *Interconnect) SBCtl(args ...string) (string, error) {
	return Run(append([]string{"ovn-ic-sbctl", "--db=unix:" + ic.SBSock}, args...)...)
}

// Join makes o an availability zone named az of ic: the zone's NB is
// given the name and ovn-ic runs between the zone's databases and ic's
// (ovn-ic(8)). Once the zone is registered in the IC SB it returns.
func (o *OVNCentral) Join(ic *Interconnect, az string) {
	o.t.Helper()
	if _, err := o.NBCtl("set", "NB_Global", ".", "name="+az); err != nil {
		o.t.Fatal(err)
	}
	o.ic = Start(o.t, o.Dir, "ovn-ic", "ovn-ic", "--ovnnb-db=unix:"+o.NBSock, "--ovnsb-db=unix:"+o.SBSock,
		"--ic-nb-db=unix:"+ic.NBSock, "--ic-sb-db=unix:"+ic.SBSock, "--unixctl="+filepath.Join(o.Dir, "ovn-ic.ctl"), "--no-chdir")
	Eventually(o.t, 30*time.Second, "zone "+az+" in the IC SB", func() error {
		out, err := ic.SBCtl("--bare", "--columns=name", "find", "Availability_Zone", "name="+az)
		if err == nil && strings.TrimSpace(out) == "" {
			err = fmt.Errorf("not registered (ovn-ic log: %s)", o.ic.Tail(5))
		}
		return err
	})
}

// ICTail is the last n lines of the zone's ovn-ic log ("" before Join).
func (o *OVNCentral) ICTail(n int) string {
	if o.ic == nil {
		return ""
	}
	return o.ic.Tail(n)
}

// StopNB kills the IC NB server, as an outage would.
func (ic *Interconnect) StopNB() { ic.nb.Kill(); _ = os.Remove(ic.NBSock) }

// StartNB starts the IC NB server again on its database.
func (ic *Interconnect) StartNB() { ic.nb = (&OVNCentral{Dir: ic.Dir, t: ic.t}).startDB("ic-nb") }
