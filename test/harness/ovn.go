package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// OVNCentral is a real OVN control plane: NB and SB ovsdb-server and ovn-northd.
type OVNCentral struct {
	Dir            string
	NBSock, SBSock string
	nb, sb, northd *Process
	ic             *Process // ovn-ic, once the zone has joined an Interconnect
	raft           *RaftNB  // a clustered NB (StartOVNCentralRaft), else nil
	t              T
}

// StartOVNCentral creates empty NB and SB databases in a temporary directory
// and starts the servers and northd on unix sockets there.
func StartOVNCentral(t T) *OVNCentral {
	t.Helper()
	LookPath(t, "ovsdb-server")
	LookPath(t, "ovn-northd")
	dir := t.TempDir()
	o := &OVNCentral{Dir: dir, NBSock: filepath.Join(dir, "nb.sock"), SBSock: filepath.Join(dir, "sb.sock"), t: t}
	for _, db := range []struct{ file, schema string }{{"nb.db", NBSchema}, {"sb.db", SBSchema}} {
		if _, err := Run("ovsdb-tool", "create", filepath.Join(dir, db.file), CurrentStack.Schema(t, db.schema)); err != nil {
			t.Fatal(err)
		}
	}
	o.StartNB()
	o.sb = o.startDB("sb")
	o.northd = Start(t, dir, "northd", "ovn-northd", "--ovnnb-db=unix:"+o.NBSock, "--ovnsb-db=unix:"+o.SBSock,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--no-chdir")
	return o
}

// Exited names the first of its processes that is gone ("" when all run):
// a benchmark that outgrows the machine's memory may lose one to the kernel.
func (o *OVNCentral) Exited() string {
	for _, p := range []struct {
		name string
		p    *Process
	}{{"the NB ovsdb-server", o.nb}, {"the SB ovsdb-server", o.sb}, {"ovn-northd", o.northd}, {"ovn-ic", o.ic}} {
		if p.p != nil && p.p.Exited() {
			return p.name
		}
	}
	return ""
}

// NBAddress is the --nb-address of this NB (every server of a clustered one).
func (o *OVNCentral) NBAddress() string { return strings.Join(o.NBEndpoints(), ",") }

// NBEndpoints are the NB's servers' addresses.
func (o *OVNCentral) NBEndpoints() []string {
	if o.raft == nil {
		return []string{"unix:" + o.NBSock}
	}
	var eps []string
	for _, s := range o.raft.Socks {
		eps = append(eps, "unix:"+s)
	}
	return eps
}

// Raft is the clustered NB, nil for a standalone one.
func (o *OVNCentral) Raft() *RaftNB { return o.raft }

// StartNB (re)starts the NB server on its existing database file.
func (o *OVNCentral) StartNB() { o.nb = o.startDB("nb") }

// StopNB kills the NB server, as an outage would.
func (o *OVNCentral) StopNB() { o.nb.Kill(); _ = os.Remove(o.NBSock) }

func (o *OVNCentral) startDB(name string) *Process {
	return o.startServer(name, filepath.Join(o.Dir, name+".db"))
}

// StartSBRelay starts an SB relay (ovsdb-server relay:OVN_Southbound, which
// keeps one monitor of the SB and serves its own clients from its copy, as
// OVN deployments put between a central SB and its nodes) and returns its
// socket. It is stopped with the test.
func (o *OVNCentral) StartSBRelay(name string) string {
	o.startServer(name, "relay:OVN_Southbound:unix:"+o.SBSock)
	return filepath.Join(o.Dir, name+".sock")
}

// startServer starts an ovsdb-server on db (a file or a relay: source) at
// Dir/name.sock and waits for its socket.
func (o *OVNCentral) startServer(name, db string) *Process {
	sock := filepath.Join(o.Dir, name+".sock")
	p := Start(o.t, o.Dir, name, "ovsdb-server", db,
		"--remote=punix:"+sock, "--unixctl="+filepath.Join(o.Dir, name+".ctl"), "--no-chdir")
	Eventually(o.t, 10*time.Second, name+" ovsdb-server socket", func() error {
		if _, err := os.Stat(sock); err != nil {
			return fmt.Errorf("%v (log: %s)", err, p.Tail(5))
		}
		return nil
	})
	return p
}

// NBCtl runs ovn-nbctl against this NB.
func (o *OVNCentral) NBCtl(args ...string) (string, error) {
	return Run(append([]string{"ovn-nbctl", "--db=" + o.NBAddress()}, args...)...)
}

// SBCtl runs ovn-sbctl against this SB.
func (o *OVNCentral) SBCtl(args ...string) (string, error) {
	return Run(append([]string{"ovn-sbctl", "--db=unix:" + o.SBSock}, args...)...)
}

// ResetNB replaces the NB database with an empty one, as a lost or restored
// database would (the server is restarted on a fresh file).
func (o *OVNCentral) ResetNB() {
	o.StopNB()
	_ = os.Remove(filepath.Join(o.Dir, "nb.db"))
	if _, err := Run("ovsdb-tool", "create", filepath.Join(o.Dir, "nb.db"), CurrentStack.Schema(o.t, NBSchema)); err != nil {
		o.t.Fatal(err)
	}
	o.StartNB()
}
