package harness

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/ovn-org/libovsdb/cache"
	"github.com/ovn-org/libovsdb/client"
	"github.com/ovn-org/libovsdb/model"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
)

// StartMaster runs `ovnkube master` against the given NB and API server.
func StartMaster(t T, logDir, name string, ovn *OVNCentral, kube *KubeAPI, extra ...string) *Process {
	t.Helper()
	args := append([]string{Binary(t, "ovnkube"), "--loglevel", "4", "master",
		"--kubeconfig", kube.Kubeconfig, "--nb-address", ovn.NBAddress()}, extra...)
	if !slices.Contains(extra, "--dns-servers") {
		args = append(args, "--dns-servers", NoDNS) // never the host's resolvers
	}
	if !slices.Contains(extra, "--egressip-reachability-timeout") {
		args = append(args, "--egressip-reachability-timeout", "0") // no probes of made-up node addresses
	}
	return Start(t, logDir, name, args...)
}

// NoDNS is a DNS server address on loopback where nothing answers: a
// master of a test resolves no name, and never asks the host's resolvers.
const NoDNS = "127.0.0.1:1"

// WaitForLog waits until the process log contains text.
func WaitForLog(t T, p *Process, text string, timeout time.Duration) {
	t.Helper()
	Eventually(t, timeout, fmt.Sprintf("%q in %s log", text, p.Name), func() error {
		if p.Exited() {
			t.Fatalf("%s exited:\n%s", p.Name, p.Tail(30))
		}
		if strings.Contains(p.Tail(100000), text) {
			return nil
		}
		return fmt.Errorf("not yet")
	})
}

// NBWatcher is an independent NB client used to read rows and to count the
// changes other clients make.
type NBWatcher struct {
	client.Client
	changes atomic.Int64
	tables  map[string]bool
}

// WatchNB connects a monitoring client; changes to the listed tables are
// counted. It monitors every column, those the controllers leave out
// (ovndb.NBUnmonitored) included: tests check all that the database holds.
func WatchNB(t T, ovn *OVNCentral, countTables ...string) *NBWatcher {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := ovndb.ConnectNBFull(ctx, ovn.NBEndpoints(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	w := &NBWatcher{Client: c, tables: map[string]bool{}}
	for _, tbl := range countTables {
		w.tables[tbl] = true
	}
	c.Cache().AddEventHandler(&cache.EventHandlerFuncs{
		AddFunc: func(table string, _ model.Model) { w.count(table) },
		UpdateFunc: func(table string, old, cur model.Model) {
			// ovn-northd writes the up column of ports; that is not a change of ours.
			if o, ok := old.(*nbdb.LogicalSwitchPort); ok {
				n := *cur.(*nbdb.LogicalSwitchPort)
				n.Up = o.Up
				if reflect.DeepEqual(*o, n) {
					return
				}
			}
			w.count(table)
		},
		DeleteFunc: func(table string, _ model.Model) { w.count(table) },
	})
	return w
}

func (w *NBWatcher) count(table string) {
	if w.tables[table] {
		w.changes.Add(1)
	}
}

// Changes is the number of row changes seen on the counted tables so far.
func (w *NBWatcher) Changes() int64 { return w.changes.Load() }
