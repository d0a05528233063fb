package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
	current "github.com/containernetworking/cni/pkg/types/100"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// ovn_cni as a shim: the node daemon's CNI server does ADD, CHECK and DEL
// (with no API credentials in the network config), answering an ADD that
// came before the master's annotation from its pod informer, and never
// handing a re-created pod's address to its predecessor's sandbox; with the
// daemon down the shim fails with CNI error 11 naming the socket.
func TestCNIServerThroughTheShim(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	c.nodeSubnet("n1")
	sock := filepath.Join(t.TempDir(), "cni", "ovn-cni-server.sock")
	d := harness.Start(t, c.logDir, "node-n1", "ip", "netns", "exec", n1.NS.Name, harness.Binary(t, "ovnkube"), "node",
		"--node-name", "n1", "--encap-ip", n1.TunnelIP, "--sb-address", "unix:"+c.ovn.SBSock,
		"--ovs-address", n1.OVSAddress(), "--kubeconfig", c.kube.Kubeconfig, "--datapath-type", "netdev",
		"--cni-server-socket", sock, "--metrics-address", "127.0.0.1:9410")
	get := httpGetIn(n1.NS, 9410)
	waitStatus(t, get, "/readyz", 200)
	cni := harness.NewCNI(t, n1, "", map[string]any{"cniServerSocket": sock})

	// ADD at once after the pod is created: the server waits for the annotation.
	pod := c.createPod("default", "shim", "n1")
	podNS := harness.NewNetNS(t, "pod")
	rt := harness.RuntimeConf("5e4e000000000000aaaa", podNS, "default", "shim", string(pod.UID))
	res, err := cni.Add(rt)
	if err != nil {
		t.Fatalf("ADD through the shim: %v\n%s", err, d.Tail(20))
	}
	r, _ := current.NewResultFromResult(res)
	pn := c.podNetwork("default", "shim")
	if len(r.IPs) != 1 || r.IPs[0].Address.String() != pn.IPs[0].String() {
		t.Fatalf("result %+v, want the annotated %s", r, pn.IPs[0])
	}
	out, err := podNS.Exec("ip", "-o", "addr", "show", "dev", "eth0")
	if err != nil || !strings.Contains(out, pn.IPs[0].String()) {
		t.Fatalf("pod interface: %v %s", err, out)
	}
	if ids, _ := n1.VSCtl("--bare", "--columns=name", "find", "interface", "external_ids:iface-id=default_shim"); strings.TrimSpace(ids) == "" {
		t.Fatal("no OVS port bound to default_shim")
	}
	if err := cni.Check(rt); err != nil {
		t.Fatalf("CHECK through the shim: %v", err)
	}
	if err := cni.Del(rt); err != nil {
		t.Fatalf("DEL through the shim: %v", err)
	}
	if ids, _ := n1.VSCtl("--bare", "--columns=name", "find", "interface", "external_ids:iface-id=default_shim"); strings.TrimSpace(ids) != "" {
		t.Fatalf("OVS port left after DEL: %s", ids)
	}
	// A DEL the runtime could never send (skel refuses it), straight to the
	// socket: an empty container ID is refused with error 4 naming it, and
	// the ports without a sandbox id (br-int's, the management port) stay.
	ports, _ := n1.VSCtl("list-ports", "br-int")
	te := rawCNIRequest(t, sock, map[string]any{"command": "DEL", "containerID": "", "ifName": "eth0", "stdin": []byte(`{"cniVersion":"1.0.0","name":"ovn-k8s","type":"ovn_cni"}`)})
	if te == nil || te.Code != types.ErrInvalidEnvironmentVariables || !strings.Contains(te.Msg, "CNI_CONTAINERID") {
		t.Fatalf("DEL with an empty container ID: %+v, want CNI error 4 naming CNI_CONTAINERID", te)
	}
	if after, _ := n1.VSCtl("list-ports", "br-int"); after != ports || !strings.Contains(after, "ovn-k8s-mp0") {
		t.Fatalf("br-int's ports after a refused DEL: %q, were %q", after, ports)
	}
	for _, cmd := range []string{"ADD", "CHECK", "DEL"} {
		waitMetric(t, get, fmt.Sprintf("ovnkube_node_cni_request_duration_seconds_count{command=%q,result=\"ok\"}", cmd), func(v float64) bool { return v >= 1 })
	}

	// A pod that never gets an annotation: a clear timeout, counted as an error.
	ghost := harness.RuntimeConf("9405700000000000bbbb", harness.NewNetNS(t, "pod"), "default", "ghost", "")
	_, err = harness.NewCNI(t, n1, "", map[string]any{"cniServerSocket": sock, "annotationTimeout": "1s"}).Add(ghost)
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Details, "default/ghost") {
		t.Fatalf("ADD of a pod without annotation: %v, want error 11 naming the pod", err)
	}
	waitMetric(t, get, "ovnkube_node_cni_request_duration_seconds_count{command=\"ADD\",result=\"error\"}", func(v float64) bool { return v >= 1 })

	// The pod deleted and re-created with the same name while a sandbox of
	// the old one is being set up: the old UID's ADD never gets the new
	// pod's address (error 11 naming the UIDs); the new UID's ADD does.
	first := c.createPod("default", "again", "n1")
	c.podNetwork("default", "again")
	c.deletePod("default", "again")
	renewed := c.createPod("default", "again", "n1")
	stale := harness.RuntimeConf("a6a1000000000000cccc", harness.NewNetNS(t, "pod"), "default", "again", string(first.UID))
	_, err = harness.NewCNI(t, n1, "", map[string]any{"cniServerSocket": sock, "annotationTimeout": "2s"}).Add(stale)
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg+te.Details, string(first.UID)) {
		t.Fatalf("ADD for the deleted incarnation %s: %v, want error 11 naming its UID", first.UID, err)
	}
	fresh := harness.RuntimeConf("a6a2000000000000dddd", harness.NewNetNS(t, "pod"), "default", "again", string(renewed.UID))
	res, err = cni.Add(fresh)
	if err != nil {
		t.Fatalf("ADD for the re-created pod: %v", err)
	}
	r, _ = current.NewResultFromResult(res)
	if pn := c.podNetwork("default", "again"); pn.PodUID != string(renewed.UID) || len(r.IPs) != 1 || r.IPs[0].Address.String() != pn.IPs[0].String() {
		t.Fatalf("re-created pod: result %+v, annotation %+v (UID %s)", r, pn, renewed.UID)
	}
	if err := cni.Del(fresh); err != nil {
		t.Fatalf("DEL of the re-created pod: %v", err)
	}

	// The daemon down: error 11 (try again later) naming the socket.
	d.Stop()
	_, err = cni.Add(rt)
	if !errors.As(err, &te) || te.Code != types.ErrTryAgainLater || !strings.Contains(te.Msg, sock) {
		t.Fatalf("ADD with the daemon down: %v, want CNI error 11 naming %s", err, sock)
	}
}

// rawCNIRequest posts a request to the CNI server's socket as the shim
// would, and returns the CNI error it answered (nil on success).
func rawCNIRequest(t *testing.T, sock string, req map[string]any) *types.Error {
	t.Helper()
	body, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	client := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}, Timeout: 30 * time.Second}
	resp, err := client.Post("http://ovnkube-node/cni", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		return nil
	}
	te := &types.Error{}
	if err := json.NewDecoder(resp.Body).Decode(te); err != nil {
		t.Fatalf("HTTP %d without a CNI error: %v", resp.StatusCode, err)
	}
	return te
}
