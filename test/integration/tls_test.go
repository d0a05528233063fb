package integration

import (
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// Item 12: every command that dials the NB speaks TLS to a real
// ovsdb-server with certificates: master-init and master create the
// cluster over ssl:, and a client whose certificate another CA signed is
// refused with an error that says so.
func TestNBOverTLS(t *testing.T) {
	pki := harness.NewPKI(t, "ovn-test")
	addr, sock := harness.StartTLSNB(t, pki)
	cert, key := pki.Issue(t, "ovnkube")
	tlsArgs := []string{"--nb-client-cert", cert, "--nb-client-privkey", key, "--nb-client-cacert", pki.CACert}
	nbctl := func(args ...string) string {
		out, _ := harness.Run(append([]string{"ovn-nbctl", "--db=unix:" + sock}, args...)...)
		return out
	}
	bin := harness.Binary(t, "ovnkube")
	out, err := exec.Command(bin, append([]string{"master-init", "--nb-address", addr, "--node-name", "m",
		"--master-switch-subnet", "10.244.0.0/24", "--timeout", "20s"}, tlsArgs...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("master-init over ssl: %v\n%s", err, out)
	}
	if show := nbctl("show"); !strings.Contains(show, "ovn_cluster_router") || !strings.Contains(show, "switch") {
		t.Fatalf("master-init over ssl: wrote nothing:\n%s", show)
	}

	kube := harness.StartKubeAPI(t)
	master := harness.Start(t, t.TempDir(), "master-tls", append([]string{bin, "master", "--kubeconfig", kube.Kubeconfig, "--nb-address", addr}, tlsArgs...)...)
	c := &cluster{t: t, kube: kube, master: master}
	c.createNode("n1", nil)
	harness.Eventually(t, 20*time.Second, "n1's switch written by the master over ssl:", func() error {
		if master.Exited() {
			t.Fatalf("master exited:\n%s", master.Tail(20))
		}
		if out := nbctl("--bare", "--columns=name", "find", "logical_switch", "name=n1"); strings.TrimSpace(out) != "n1" {
			return fmt.Errorf("no switch n1 (%q)", out)
		}
		return nil
	})

	rogue := harness.NewPKI(t, "rogue")
	rcert, rkey := rogue.Issue(t, "intruder")
	out, err = exec.Command(bin, "master-init", "--nb-address", addr, "--node-name", "x", "--master-switch-subnet", "10.244.9.0/24",
		"--timeout", "3s", "--nb-client-cert", rcert, "--nb-client-privkey", rkey, "--nb-client-cacert", pki.CACert).CombinedOutput()
	if err == nil {
		t.Fatalf("a client certificate from another CA was accepted:\n%s", out)
	}
	if !strings.Contains(string(out), addr) {
		t.Errorf("the refusal does not name the NB address %s:\n%s", addr, out)
	}
	if strings.Contains(nbctl("--bare", "--columns=name", "find", "logical_switch", "name=x"), "x") {
		t.Error("the rogue client wrote a switch")
	}
}

// Item 12, SB side: ovn-controller dials the SB, so an ssl: --sb-address
// puts the files in OVS's SSL table, where ovn-controller reads them.
func TestMinionInitSSLSBConfiguresOVS(t *testing.T) {
	c := newNodeCluster(t)
	c.startMaster()
	n1 := c.addNode("n1")
	pki := harness.NewPKI(t, "ovn-test")
	cert, key := pki.Issue(t, "ovn-controller")
	ssl := []string{"--sb-address", "ssl:127.0.0.1:6642", "--sb-client-cert", cert, "--sb-client-privkey", key, "--sb-client-cacert", pki.CACert}
	for i := 0; i < 2; i++ { // the second run changes nothing
		if out, err := c.minionInit(n1, ssl...); err != nil {
			t.Fatalf("minion-init with an ssl: SB: %v\n%s", err, out)
		}
	}
	out, _ := n1.VSCtl("get-ssl")
	for _, want := range []string{"Private key: " + key, "Certificate: " + cert, "CA Certificate: " + pki.CACert} {
		if !strings.Contains(out, want) {
			t.Errorf("OVS SSL lacks %q:\n%s", want, out)
		}
	}
	if n, _ := n1.VSCtl("--bare", "--columns=_uuid", "list", "ssl"); len(strings.Fields(n)) != 1 {
		t.Errorf("%d SSL rows, want 1", len(strings.Fields(n)))
	}
	if remote, _ := n1.VSCtl("get", "open_vswitch", ".", "external_ids:ovn-remote"); !strings.Contains(remote, "ssl:127.0.0.1:6642") {
		t.Errorf("ovn-remote %s", remote)
	}
}
