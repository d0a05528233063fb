package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// RaftNB is a clustered (RAFT) Northbound database: servers on unix sockets
// in one directory, peering over 127.0.0.1.
type RaftNB struct {
	Dir     string
	Socks   []string
	files   []string
	remotes []string // raft addresses
	servers []*Process
	t       T
}

// StartOVNCentralRaft is StartOVNCentral with a RAFT NB of n servers
// (ovsdb-tool create-cluster on the first, join-cluster on the others);
// NBAddress lists every server, and ovn-northd connects to all of them.
func StartOVNCentralRaft(t T, n int) *OVNCentral {
	t.Helper()
	LookPath(t, "ovsdb-server")
	LookPath(t, "ovn-northd")
	dir := t.TempDir()
	o := &OVNCentral{Dir: dir, SBSock: filepath.Join(dir, "sb.sock"), t: t}
	r := &RaftNB{Dir: dir, t: t}
	for i := 0; i < n; i++ {
		r.Socks = append(r.Socks, filepath.Join(dir, fmt.Sprintf("nb%d.sock", i)))
		r.files = append(r.files, filepath.Join(dir, fmt.Sprintf("nb%d.db", i)))
		r.remotes = append(r.remotes, fmt.Sprintf("tcp:127.0.0.1:%d", FreePort(t)))
	}
	if _, err := Run("ovsdb-tool", "create-cluster", r.files[0], CurrentStack.Schema(t, NBSchema), r.remotes[0]); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if _, err := Run("ovsdb-tool", "join-cluster", r.files[i], "OVN_Northbound", r.remotes[i], r.remotes[0]); err != nil {
			t.Fatal(err)
		}
	}
	r.servers = make([]*Process, n)
	for i := range r.servers {
		r.Start(i)
	}
	o.raft = r
	o.NBSock = r.Socks[0]
	if _, err := Run("ovsdb-tool", "create", filepath.Join(dir, "sb.db"), CurrentStack.Schema(t, SBSchema)); err != nil {
		t.Fatal(err)
	}
	o.sb = o.startDB("sb")
	Eventually(t, 30*time.Second, "NB cluster with a leader", func() error {
		_, err := r.Leader()
		return err
	})
	o.northd = Start(t, dir, "northd", "ovn-northd", "--ovnnb-db="+o.NBAddress(), "--ovnsb-db=unix:"+o.SBSock,
		"--unixctl="+filepath.Join(dir, "northd.ctl"), "--no-chdir")
	return o
}

// Start (re)starts server i on its database file (it rejoins the cluster).
func (r *RaftNB) Start(i int) {
	name := fmt.Sprintf("nb%d", i)
	_ = os.Remove(r.Socks[i])
	r.servers[i] = Start(r.t, r.Dir, name, "ovsdb-server", r.files[i],
		"--remote=punix:"+r.Socks[i], "--unixctl="+r.ctl(i), "--no-chdir")
	Eventually(r.t, 10*time.Second, name+" socket", func() error {
		if _, err := os.Stat(r.Socks[i]); err != nil {
			return fmt.Errorf("%v (log: %s)", err, r.servers[i].Tail(5))
		}
		return nil
	})
}

// Kill kills server i, as a crash would.
func (r *RaftNB) Kill(i int) { r.servers[i].Kill() }

func (r *RaftNB) ctl(i int) string { return filepath.Join(r.Dir, fmt.Sprintf("nb%d.ctl", i)) }

// Leader is the index of the server that reports itself leader.
func (r *RaftNB) Leader() (int, error) {
	var roles []string
	for i, p := range r.servers {
		if p == nil || p.Exited() {
			roles = append(roles, "down")
			continue
		}
		out, err := Run("ovs-appctl", "-t", r.ctl(i), "cluster/status", "OVN_Northbound")
		if err != nil {
			roles = append(roles, err.Error())
			continue
		}
		for _, line := range strings.Split(out, "\n") {
			if role, ok := strings.CutPrefix(strings.TrimSpace(line), "Role: "); ok {
				if role == "leader" {
					return i, nil
				}
				roles = append(roles, role)
			}
		}
	}
	return -1, fmt.Errorf("no leader among the NB servers (roles %v)", roles)
}
