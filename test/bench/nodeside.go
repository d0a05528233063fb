package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// nodeSide is the scale scenario's view from one node: node0000 runs for
// real (its own OVS and ovn-controller in a network namespace, one pod's
// port bound to it), and every other node is simulated in the SB: a
// Chassis with its Geneve Encap, and its pods' port bindings claimed for
// it, as their own ovn-controllers would. The real ovn-controller then
// holds the flows and tunnels of a node of a cluster that size.
type nodeSide struct {
	b       *bench
	node    *harness.Node
	mu      sync.Mutex
	bindMu  sync.Mutex        // one bindOnce at a time: the loop's and grow's
	chassis map[string]string // simulated node name → its Chassis UUID
	stop    chan struct{}
	done    chan struct{}
	bound   int   // port bindings the binder claimed
	lastErr error // of the binder's last transaction
	// stopped says why ovn-controller was stopped (its RSS went past
	// -scale-node-max-rss): the node side measures nothing after it.
	stopped string
}

// realNode is the node whose OVS and ovn-controller run.
var realNode = scaleNode(0)

func (b *bench) startNodeSide() *nodeSide {
	ns := &nodeSide{b: b, chassis: map[string]string{}, stop: make(chan struct{}), done: make(chan struct{})}
	ns.node = harness.StartNode(b.s, b.ovn, harness.NewUnderlay(b.s), realNode)
	// As minion-init configures a node, its chassis named by its hostname
	// (what the ports' requested-chassis says).
	if _, err := ns.node.VSCtl("set", "open_vswitch", ".", "external_ids:system-id="+realNode, "external_ids:hostname="+realNode,
		"external_ids:ovn-remote=unix:"+b.ovn.SBSock, "external_ids:ovn-encap-type=geneve", "external_ids:ovn-encap-ip="+ns.node.TunnelIP,
		"external_ids:ovn-bridge=br-int", "external_ids:ovn-bridge-datapath-type=netdev"); err != nil {
		b.s.Fatal(err)
	}
	if b.zones != nil { // as node --zone marks it: its zone's gateway to the others
		if _, err := ns.node.VSCtl("set", "open_vswitch", ".", "external_ids:ovn-is-interconn=true"); err != nil {
			b.s.Fatal(err)
		}
	}
	harness.Eventually(b.s, 60*time.Second, realNode+"'s ovn-controller registered in the SB", func() error {
		out, err := b.ovn.SBCtl("--bare", "--columns=name", "find", "chassis", "name="+realNode)
		if err != nil || strings.TrimSpace(out) != realNode {
			return fmt.Errorf("not yet: %v %s", err, out)
		}
		return nil
	})
	if b.zones == nil { // in zone mode no other node's pod is in this zone's SB
		go ns.bindLoop()
	} else {
		close(ns.done)
	}
	b.s.Cleanup(func() { close(ns.stop); <-ns.done })
	return ns
}

// watchRSS stops the node's ovn-controller and ovs-vswitchd (which holds
// the flows too) when their RSS together passes the cap: one node of a
// cluster too large for it must not take the machine's memory from the
// control plane being measured.
func (ns *nodeSide) watchRSS() {
	procs := []*harness.Process{ns.node.Process("ovn-controller"), ns.node.Process("ovs-vswitchd")}
	rss := 0.0
	for _, p := range procs {
		rss += procStatus(p.Cmd.Process.Pid, "VmRSS")
	}
	if limit := float64(ns.b.o.scaleNodeMaxRSS) * 1024; rss <= limit || ns.stopped != "" {
		return
	}
	ns.mu.Lock()
	ns.stopped = fmt.Sprintf("ovn-controller's and ovs-vswitchd's RSS reached %.0f MiB (-scale-node-max-rss %d) at %d nodes, %d pods, %d services; stopped",
		rss/1024, ns.b.o.scaleNodeMaxRSS, len(ns.b.scaleLoad), ns.b.podCount, ns.b.serviceCount)
	ns.mu.Unlock()
	say("   %s: %s", realNode, ns.stopped)
	for _, p := range procs {
		p.Kill()
	}
}

// running says whether the node side still measures.
func (ns *nodeSide) running() bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.stopped == ""
}

// addChassis registers the simulated nodes 1..nodes-1 not yet there, in
// transactions of 100 (a command line argument holds 128 KiB).
func (ns *nodeSide) addChassis(nodes int) {
	var names []string
	for i := 1; i < nodes; i++ {
		if _, ok := ns.chassis[scaleNode(i)]; !ok {
			names = append(names, scaleNode(i))
		}
	}
	for len(names) > 0 {
		batch := names[:min(100, len(names))]
		names = names[len(batch):]
		ops := []any{"OVN_Southbound"}
		for j, name := range batch {
			idx := nodeIndex(name)
			encap, ch := fmt.Sprintf("e%d", j), fmt.Sprintf("c%d", j)
			ops = append(ops,
				map[string]any{"op": "insert", "table": "Encap", "uuid-name": encap, "row": map[string]any{
					"type": "geneve", "ip": simulatedEncapIP(idx), "chassis_name": name,
					"options": []any{"map", []any{[]any{"csum", "true"}}}}},
				map[string]any{"op": "insert", "table": "Chassis", "uuid-name": ch, "row": map[string]any{
					"name": name, "hostname": name, "encaps": []any{"named-uuid", encap}}},
				map[string]any{"op": "insert", "table": "Chassis_Private", "row": map[string]any{
					"name": name, "chassis": []any{"named-uuid", ch}}})
		}
		var res []struct {
			UUID  []string `json:"uuid"`
			Error string   `json:"error"`
		}
		ns.transact(ops, &res)
		for j, name := range batch {
			if r := res[3*j+1]; len(r.UUID) == 2 {
				ns.mu.Lock()
				ns.chassis[name] = r.UUID[1]
				ns.mu.Unlock()
			}
		}
	}
}

func nodeIndex(name string) int {
	var i int
	_, _ = fmt.Sscanf(name, "node%d", &i)
	return i
}

// transact sends one SB transaction with ovsdb-client and decodes its
// results into res; any error fails the benchmark.
func (ns *nodeSide) transact(ops []any, res any) {
	transactOn(ns.b.s, "unix:"+ns.b.ovn.SBSock, ops, res)
}

// transactOn sends one transaction to the database server at addr.
func transactOn(s *harness.Session, addr string, ops []any, res any) {
	data, _ := json.Marshal(ops)
	out, err := harness.Run("ovsdb-client", "transact", addr, string(data))
	if err == nil && res != nil {
		err = json.Unmarshal([]byte(out), res)
	}
	if err == nil && strings.Contains(out, `"error"`) {
		err = fmt.Errorf("%s", out)
	}
	if err != nil {
		s.Fatalf("transaction on %s: %v", addr, err)
	}
}

// bindLoop claims, once a second, the unbound port bindings of the simulated
// nodes' pods for their chassis. Each look is a select over every
// Port_Binding: the SB server's CPU it costs is the simulation's, not the
// cluster's, and counted in its figures.
func (ns *nodeSide) bindLoop() {
	defer close(ns.done)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ns.stop:
			return
		case <-tick.C:
			if ns.running() {
				ns.watchRSS()
				ns.bindOnce()
			}
		}
	}
}

// bindOnce binds what is unbound now; it returns the ports still waiting
// for a chassis not registered yet.
func (ns *nodeSide) bindOnce() int {
	ns.bindMu.Lock()
	defer ns.bindMu.Unlock()
	out, err := harness.Run("ovsdb-client", "query", "unix:"+ns.b.ovn.SBSock,
		`["OVN_Southbound",{"op":"select","table":"Port_Binding","where":[["chassis","==",["set",[]]],["type","==",""]],"columns":["_uuid","options"]}]`)
	if err != nil {
		return 0 // the SB restarting: the next tick tries again
	}
	var res []struct {
		Rows []struct {
			UUID    []string `json:"_uuid"`
			Options []any    `json:"options"`
		} `json:"rows"`
	}
	if json.Unmarshal([]byte(out), &res) != nil || len(res) == 0 {
		return 0
	}
	ops, waiting := []any{"OVN_Southbound"}, 0
	ns.mu.Lock()
	for _, r := range res[0].Rows {
		node := requestedChassis(r.Options)
		if node == "" || node == realNode {
			continue // its own ovn-controller binds it, or nobody
		}
		ch, ok := ns.chassis[node]
		if !ok {
			waiting++
			continue
		}
		ops = append(ops, map[string]any{"op": "update", "table": "Port_Binding", "where": []any{[]any{"_uuid", "==", r.UUID}},
			"row": map[string]any{"chassis": []any{"uuid", ch}}})
	}
	ns.mu.Unlock()
	// In transactions of 300 updates: a command line argument holds 128 KiB.
	for rest := ops[1:]; len(rest) > 0; {
		batch := rest[:min(300, len(rest))]
		rest = rest[len(batch):]
		data, _ := json.Marshal(append([]any{"OVN_Southbound"}, batch...))
		_, err := harness.Run("ovsdb-client", "transact", "unix:"+ns.b.ovn.SBSock, string(data))
		ns.mu.Lock()
		if ns.lastErr = err; err == nil {
			ns.bound += len(batch)
		}
		ns.mu.Unlock()
		waiting += len(batch) // bound now (or not): the caller looks again
	}
	return waiting
}

// requestedChassis reads options:requested-chassis from an OVSDB map.
func requestedChassis(options []any) string {
	if len(options) != 2 {
		return ""
	}
	pairs, _ := options[1].([]any)
	for _, p := range pairs {
		if kv, ok := p.([]any); ok && len(kv) == 2 && kv[0] == "requested-chassis" {
			s, _ := kv[1].(string)
			return s
		}
	}
	return ""
}

// grow registers the step's simulated nodes, binds the real node one pod's
// port the first time, and waits until every simulated pod is bound.
func (ns *nodeSide) grow(nodes int) {
	if !ns.running() {
		return
	}
	if ns.b.zones != nil { // the other zones are there (growZones): no pod of theirs to bind here
		if ns.node != nil && !ns.hasPod() {
			ns.addPod()
		}
		return
	}
	ns.addChassis(nodes)
	if ns.node != nil && !ns.hasPod() {
		ns.addPod()
	}
	// The ports' bindings are northd's: once it has caught up with the NB,
	// none is missing from what is bound below.
	if _, err := ns.b.ovn.NBCtl("--timeout=600", "--wait=sb", "sync"); err != nil {
		ns.b.s.Fatal(err)
	}
	harness.Eventually(ns.b.s, ns.b.waitFor(ns.b.podCount, 200), "every simulated node's pods bound to its chassis", func() error {
		if !ns.running() {
			return nil
		}
		if n := ns.bindOnce(); n > 0 {
			ns.mu.Lock()
			defer ns.mu.Unlock()
			return fmt.Errorf("%d port bindings to bind (the last transaction's error: %v)", n, ns.lastErr)
		}
		return nil
	})
}

// podPort is the OVS port of the real node's pod.
const podPort = "pod0"

func (ns *nodeSide) hasPod() bool {
	out, _ := ns.node.VSCtl("--if-exists", "get", "interface", podPort, "name")
	return strings.TrimSpace(out) != ""
}

// addPod plugs the first pod placed on the real node into its br-int as a
// CNI ADD would (an interface with the pod's iface-id and UID): its switch
// becomes local, and through the cluster router every other one.
func (ns *nodeSide) addPod() {
	b := ns.b
	pods, err := b.kube.Client.CoreV1().Pods("").List(context.Background(), metav1.ListOptions{FieldSelector: "spec.nodeName=" + realNode, Limit: 1})
	if err != nil || len(pods.Items) == 0 {
		b.s.Fatalf("no pod on %s to plug in: %v", realNode, err)
	}
	p := pods.Items[0]
	if _, err := ns.node.VSCtl("add-port", "br-int", podPort, "--", "set", "interface", podPort, "type=internal",
		"external_ids:iface-id="+topology.PodPort(p.Namespace, p.Name), "external_ids:iface-id-ver="+string(p.UID)); err != nil {
		b.s.Fatal(err)
	}
	harness.Eventually(b.s, 60*time.Second, "the pod's port bound to "+realNode, func() error {
		out, err := b.ovn.SBCtl("--bare", "--columns=chassis", "find", "port_binding", "logical_port="+topology.PodPort(p.Namespace, p.Name))
		if err != nil || strings.TrimSpace(out) == "" {
			return fmt.Errorf("not yet: %v", err)
		}
		return nil
	})
}

// flows counts the OpenFlow flows of the real node's br-int.
func (ns *nodeSide) flows() int {
	out, err := harness.Run("ovs-ofctl", "dump-aggregate", "unix:"+filepath.Join(ns.node.Dir, "br-int.mgmt"))
	if err != nil {
		return 0
	}
	var n int
	if i := strings.Index(out, "flow_count="); i >= 0 {
		_, _ = fmt.Sscanf(out[i:], "flow_count=%d", &n)
	}
	return n
}

// tunnels counts the Geneve ports ovn-controller made on br-int.
func (ns *nodeSide) tunnels() int {
	out, err := ns.node.VSCtl("--bare", "--columns=name", "find", "interface", "type=geneve")
	if err != nil {
		return 0
	}
	return len(strings.Fields(out))
}

// startMonitors connects n SB clients that monitor every table of the SB
// as ovn-controller does (monitor_cond_since; no condition, as every switch
// is local to every node through the cluster router), reading what the
// server sends and throwing it away unparsed: the SB server's work to fan
// each change out to n more nodes, without n clients parsing it on this
// machine's cores. The SB server's CPU per change with and without them
// gives its cost per node; its session count (memory/show) says they stayed.
func (b *bench) startMonitors(n int) {
	if n == 0 {
		return
	}
	out, err := harness.Run("ovsdb-client", "list-tables", "unix:"+b.ovn.SBSock, "OVN_Southbound")
	if err != nil {
		b.s.Fatal(err)
	}
	tables := map[string][]struct{}{}
	lines := strings.Split(out, "\n")
	for _, l := range lines[min(2, len(lines)):] { // after the heading and its rule
		if t := strings.TrimSpace(l); t != "" {
			tables[t] = []struct{}{{}}
		}
	}
	socks := b.startRelays(b.o.scaleRelays)
	for i := 0; i < n; i++ {
		req, err := json.Marshal(map[string]any{"id": i, "method": "monitor_cond_since",
			"params": []any{"OVN_Southbound", fmt.Sprintf("m%d", i), tables, "00000000-0000-0000-0000-000000000000"}})
		if err != nil {
			b.s.Fatal(err)
		}
		var conn net.Conn
		for try := 0; try < 500; try++ { // the server's listen backlog may be full a moment
			if conn, err = net.Dial("unix", socks[i%len(socks)]); err == nil || !errors.Is(err, syscall.EAGAIN) {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err == nil {
			_, err = conn.Write(req)
		}
		if err != nil {
			b.s.Fatal(fmt.Errorf("SB monitor %d: %w", i, err))
		}
		go func() { _, _ = io.Copy(io.Discard, conn) }()
		b.s.Cleanup(func() { _ = conn.Close() })
	}
	say("   %d SB monitors of every table connected (one per simulated node's ovn-controller; %d tables) to %s; the SB server: %s", n, len(tables), relayText(b.o.scaleRelays), b.sbSessions())
}

func relayText(n int) string {
	if n == 0 {
		return "the SB server"
	}
	return fmt.Sprintf("%d SB relays", n)
}

// startRelays starts n SB relays (harness.StartSBRelay) and returns the
// sockets the monitors connect to: the SB server's own when n is 0.
func (b *bench) startRelays(n int) []string {
	if n == 0 {
		return []string{b.ovn.SBSock}
	}
	var socks []string
	for i := 0; i < n; i++ {
		socks = append(socks, b.ovn.StartSBRelay(fmt.Sprintf("sb-relay%d", i)))
	}
	return socks
}

// sbSessions is the SB server's own count of its monitors and sessions.
func (b *bench) sbSessions() string {
	out, err := harness.Run("ovs-appctl", "-t", filepath.Join(b.ovn.Dir, "sb.ctl"), "memory/show")
	if err != nil {
		return err.Error()
	}
	var kept []string
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "monitors:") || strings.HasPrefix(f, "sessions:") {
			kept = append(kept, f)
		}
	}
	return strings.Join(kept, " ")
}
