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

	for _, name := range []string{"a.wild.test", "b.deep.wild.test", "wild.test"} {
		harness.Eventually(t, 20*time.Second, "CoreDNS answering "+name, func() error {
			r, err := dnsQuery(dnsAddr, name, dns.TypeA)
			if err == nil && len(r.Answer) == 0 {
				err = fmt.Errorf("no answer: %v", r)
			}
			return err
		})
	}
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
