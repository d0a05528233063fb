package integration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/miekg/dns"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// TestEgressFirewallWildcardFromCoreDNS: a wildcard dnsName matches what the
// real CoreDNS answered its clients for names under it, streamed to the
// master (--dns-tap-address): nothing before a client asks, each address
// for its TTL after, not the wildcard's apex. (A unix socket here: the
// API server refuses loopback endpoints, so the TCP path's check, only the
// DNS Service's endpoints may send, is TestDNSTapSenders's and make
// northsouth's, with CoreDNS's pods.)
func TestEgressFirewallWildcardFromCoreDNS(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	dnsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	tapSock := filepath.Join(t.TempDir(), "dnstap.sock")
	c.startMaster("--dns-servers", dnsAddr, "--dns-tap-address", "unix:"+tapSock)
	c.createNode("n1", nil)
	c.namespace("a", nil)
	c.createPod("a", "client", "n1")
	if !ovndb.HasACLTiers(c.nb) {
		t.Fatal("this NB has no ACL tiers: egress firewalls are not applied there; run this test on a stack with tiers")
	}
	c.waitSynced()
	// a.wild.test in a zone of its own whose answers live 5 s; the others
	// with the hosts plugin's default TTL (3600 s).
	startCoreDNS(t, dnsAddr, "unix://"+tapSock, map[string]string{"a.wild.test": "192.0.2.20 a.wild.test\n        ttl 5",
		".": "192.0.2.21 b.deep.wild.test\n        192.0.2.22 wild.test"})

	c.createEF("a", efAllow(k8sovnv1.EgressFirewallDestination{DNSName: "*.wild.test"}), efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "0.0.0.0/0"}))
	c.efStatus("a", k8sovnv1.EgressFirewallApplied)
	c.waitEFRows("no name under the wildcard asked yet: an empty set", "a", "*.wild.test", 2)

	askCoreDNS(t, dnsAddr, "a.wild.test", "b.deep.wild.test", "wild.test")
	// The apex is not under the wildcard.
	c.waitEFRows("the names asked under the wildcard", "a", "*.wild.test", 2, "192.0.2.20", "192.0.2.21")
	// a.wild.test's TTL (5 s) passes; b.deep's (the hosts default, 3600 s) does not.
	c.waitEFRows("a.wild.test's address gone with its TTL", "a", "*.wild.test", 2, "192.0.2.21")

	// A restarted master has observed nothing yet: the set keeps what it
	// holds, and the restart writes nothing.
	c.idleRestartWritesNothing()
	c.waitEFRows("the wildcard's set kept across a restart", "a", "*.wild.test", 2, "192.0.2.21")
}

// startCoreDNS runs our CoreDNS build on dnsAddr with a server block per
// zone, each a hosts block of these lines, streaming its answers to
// tap (a dnstap target: tcp://HOST:PORT or unix://PATH); it stops with the
// test.
func startCoreDNS(t *testing.T, dnsAddr, tap string, zones map[string]string) {
	t.Helper()
	dir := t.TempDir()
	_, port, _ := net.SplitHostPort(dnsAddr)
	conf := ""
	for zone, hosts := range zones {
		conf += fmt.Sprintf("%s:%s {\n    bind 127.0.0.1\n    hosts {\n        %s\n        fallthrough\n    }\n    dnstap %s full\n}\n",
			zone, port, hosts, tap)
	}
	corefile := filepath.Join(dir, "Corefile")
	if err := os.WriteFile(corefile, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	p := harness.Start(t, dir, "coredns", harness.Binary(t, "coredns"), "-conf", corefile, "-dns.port", port)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("coredns log tail:\n%s", p.Tail(30))
		}
	})
}

// TestZoneWildcardFromClusterManager: in zone mode the cluster DNS's
// dnstap stream goes to the cluster manager (--dns-tap-address), which
// relays what pods were answered for every name a policy names as
// DNSNameResolvers; a zone's master (here with the zone's real NB, SB,
// northd and ovn-ic) puts them in its own address sets: each address until
// its TTL passes, as in central mode. A restarted cluster manager writes
// nothing (it starts from the objects), the zone keeps its set; an idle
// restart of the zone's master writes nothing to its NB.
func TestZoneWildcardFromClusterManager(t *testing.T) {
	c, tapSock, startCM := newZoneCluster(t)
	dnsAddr := "127.0.0.1:" + strconv.Itoa(harness.FreePort(t))
	cm := startCM("cluster-manager-1")
	c.namespace("a", nil)
	c.createPod("a", "client", "n1")
	c.startMaster("--zone", "zone-n1", "--leader-elect=false", "--dns-servers", dnsAddr, "--dns-tap-address", "unix:"+tapSock)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("cluster manager log tail:\n%s", cm.Tail(30))
		}
	})
	if !ovndb.HasACLTiers(c.nb) {
		t.Fatal("this NB has no ACL tiers: egress firewalls are not applied there; run this test on a stack with tiers")
	}
	c.waitSynced()
	harness.Eventually(t, 20*time.Second, "the cluster manager listening on "+tapSock, func() error {
		_, err := os.Stat(tapSock)
		return err
	})
	startCoreDNS(t, dnsAddr, "unix://"+tapSock, map[string]string{"a.wild.test": "192.0.2.20 a.wild.test\n        ttl 5",
		".": "192.0.2.21 b.deep.wild.test\n        192.0.2.22 wild.test"})

	c.createEF("a", efAllow(k8sovnv1.EgressFirewallDestination{DNSName: "*.wild.test"}), efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "0.0.0.0/0"}))
	c.efStatus("a", k8sovnv1.EgressFirewallApplied)
	c.waitEFRows("no name under the wildcard asked yet: an empty set", "a", "*.wild.test", 2)
	dyn := dynamicFor(t, c.kube.Config)
	resolver := func() (*unstructured.Unstructured, error) {
		return dyn.Resource(k8sovnv1.DNSNameResolverResource).Get(c.ctx(), k8sovnv1.DNSNameResolverName("*.wild.test"), metav1.GetOptions{})
	}
	harness.Eventually(t, 20*time.Second, "the cluster manager's DNSNameResolver of *.wild.test", func() error {
		_, err := resolver()
		return err
	})
	askCoreDNS(t, dnsAddr, "a.wild.test", "b.deep.wild.test", "wild.test")
	c.waitEFRows("the names asked under the wildcard, relayed to the zone", "a", "*.wild.test", 2, "192.0.2.20", "192.0.2.21")
	c.waitEFRows("a.wild.test's address gone with its TTL", "a", "*.wild.test", 2, "192.0.2.21")

	// The cluster manager restarted: it starts from its objects and writes nothing.
	harness.Eventually(t, 20*time.Second, "the DNSNameResolver holding only 192.0.2.21", func() error {
		u, err := resolver()
		if err != nil {
			return err
		}
		addrs, _, _ := unstructured.NestedSlice(u.Object, "status", "resolvedAddresses")
		if len(addrs) != 1 {
			return fmt.Errorf("status %v", u.Object["status"])
		}
		return nil
	})
	before, err := resolver()
	if err != nil {
		t.Fatal(err)
	}
	cm.Stop()
	// An object no policy names (left by a policy deleted while the cluster
	// manager was down): the restarted one deletes it, after the names it
	// follows are queued, so its being gone says the restart has synced.
	orphan := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "DNSNameResolver",
		"metadata": map[string]any{"name": k8sovnv1.DNSNameResolverName("gone.test")}, "spec": map[string]any{"name": "gone.test"}}}
	if _, err := dyn.Resource(k8sovnv1.DNSNameResolverResource).Create(c.ctx(), orphan, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cm = startCM("cluster-manager-2")
	harness.Eventually(t, 30*time.Second, "the restarted cluster manager deleting the DNSNameResolver no policy names", func() error {
		_, err := dyn.Resource(k8sovnv1.DNSNameResolverResource).Get(c.ctx(), orphan.GetName(), metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if u, err := resolver(); err != nil {
		t.Error(err)
	} else if u.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("the restarted cluster manager rewrote the DNSNameResolver of *.wild.test: status %v, was %v", u.Object["status"], before.Object["status"])
	}
	c.waitEFRows("the zone's set kept", "a", "*.wild.test", 2, "192.0.2.21")
	c.idleRestartWritesNothing()
	c.waitEFRows("the zone's set kept across its master's restart", "a", "*.wild.test", 2, "192.0.2.21")
}

// newZoneCluster is a cluster of one zone, zone-n1 (c.ovn: its NB, SB and
// northd, with ovn-ic to the interconnection databases), and its node n1;
// startCM starts a cluster manager taking the dnstap stream at tapSock.
func newZoneCluster(t *testing.T) (c *cluster, tapSock string, startCM func(name string) *harness.Process) {
	c = newCluster(t)
	c.kube.InstallCRDs(t)
	ic := harness.StartInterconnect(t)
	c.ovn.Join(ic, "zone-n1")
	if _, err := c.ovn.SBCtl("chassis-add", "chassis-n1", "geneve", "192.0.2.1", "--", "set", "chassis", "chassis-n1", "other_config:is-interconn=true"); err != nil {
		t.Fatal(err)
	}
	tapSock = filepath.Join(t.TempDir(), "dnstap.sock")
	startCM = func(name string) *harness.Process {
		return harness.Start(t, c.logDir, name, harness.Binary(t, "ovnkube"), "--loglevel", "4", "cluster-manager",
			"--kubeconfig", c.kube.Kubeconfig, "--ic-nb-address", "unix:"+ic.NBSock, "--leader-elect=false",
			"--egressip-reachability-timeout", "0", "--dns-tap-address", "unix:"+tapSock)
	}
	c.createNode("n1", map[string]string{annotations.NodeZone: "zone-n1", annotations.NodeChassisID: "chassis-n1"})
	return c, tapSock, startCM
}

// askCoreDNS asks the DNS server for each name's A records until it
// answers with some.
func askCoreDNS(t *testing.T, dnsAddr string, names ...string) {
	t.Helper()
	for _, name := range names {
		harness.Eventually(t, 20*time.Second, "CoreDNS answering "+name, func() error {
			r, err := dnsQuery(dnsAddr, name, dns.TypeA)
			if err == nil && len(r.Answer) == 0 {
				err = fmt.Errorf("no answer: %v", r)
			}
			return err
		})
	}
}
