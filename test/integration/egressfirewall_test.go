package integration

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// createEF creates a namespace's EgressFirewall through the API server.
func (c *cluster) createEF(ns string, rules ...k8sovnv1.EgressFirewallRule) {
	c.t.Helper()
	ef := &k8sovnv1.EgressFirewall{TypeMeta: metav1.TypeMeta{APIVersion: k8sovnv1.GroupVersion.String(), Kind: "EgressFirewall"},
		ObjectMeta: metav1.ObjectMeta{Name: k8sovnv1.EgressFirewallName, Namespace: ns}, Spec: k8sovnv1.EgressFirewallSpec{Egress: rules}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(ef)
	if err != nil {
		c.t.Fatal(err)
	}
	dyn := dynamicFor(c.t, c.kube.Config)
	if _, err := dyn.Resource(k8sovnv1.EgressFirewallResource).Namespace(ns).Create(c.ctx(), &unstructured.Unstructured{Object: obj}, metav1.CreateOptions{}); err != nil {
		c.t.Fatal(err)
	}
}

// efStatus waits for a namespace's EgressFirewall to report status.
func (c *cluster) efStatus(ns, status string) *unstructured.Unstructured {
	c.t.Helper()
	dyn := dynamicFor(c.t, c.kube.Config)
	var out *unstructured.Unstructured
	harness.Eventually(c.t, 20*time.Second, "EgressFirewall "+ns+" status "+status, func() error {
		o, err := dyn.Resource(k8sovnv1.EgressFirewallResource).Namespace(ns).Get(c.ctx(), k8sovnv1.EgressFirewallName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		got, _, _ := unstructured.NestedString(o.Object, "status", "status")
		msgs, _, _ := unstructured.NestedStringSlice(o.Object, "status", "messages")
		if got != status {
			return fmt.Errorf("status %q %q", got, msgs)
		}
		out = o
		return nil
	})
	return out
}

func efAllow(to k8sovnv1.EgressFirewallDestination, ports ...k8sovnv1.EgressFirewallPort) k8sovnv1.EgressFirewallRule {
	return k8sovnv1.EgressFirewallRule{Type: k8sovnv1.EgressFirewallRuleAllow, To: to, Ports: ports}
}

func efDeny(to k8sovnv1.EgressFirewallDestination) k8sovnv1.EgressFirewallRule {
	return k8sovnv1.EgressFirewallRule{Type: k8sovnv1.EgressFirewallRuleDeny, To: to}
}

// TestOVNTraceEgressFirewall checks, in the logical flows northd generated
// in the real SB of a dual-stack cluster, what a namespace's EgressFirewall
// lets out: a CIDR on one port, a DNS name (resolved by a DNS server the
// test controls, kept current as its answer changes), everything else
// denied, in both families; pods of the cluster and other namespaces are
// untouched; a NetworkPolicy still closes what the firewall allows; an
// idle restart writes nothing; deleting it lets everything out again. On
// an NB without ACL tiers it says it is not applied and changes nothing.
func TestOVNTraceEgressFirewall(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	dns := harness.StartDNS(t, 1)
	dns.Set("allowed.example.com", "203.0.113.5", "2001:db8:5::5")
	c.startMaster("--cluster-subnet", "10.244.0.0/16/24,fd00:10:244::/48/64", "--dns-servers", dns.Addr)
	c.createNode("n1", nil)
	c.createNode("n2", nil)
	c.namespace("a", nil)
	c.namespace("b", nil)
	c.createPod("a", "client", "n1")
	c.createPod("b", "server", "n2")
	pods := c.tracePods([3]string{"a", "client", "n1"}, [3]string{"b", "server", "n2"})
	tr := newTracer(c, pods)
	out := func(from, ip string, port int) flow { return flow{from: pods[from], dstIP: ip, dport: port, ct: "new"} }
	leaves := func(name string, f flow, want bool) {
		t.Helper()
		harness.Eventually(t, 20*time.Second, name, func() error {
			if ok, trace := tr.leaves(f); ok != want {
				return fmt.Errorf("leaves the switch: %v, want %v:\n%s", ok, want, trace)
			}
			return nil
		})
	}
	leaves("before any firewall: client → 192.0.2.1:80 leaves", out("client", "192.0.2.1", 80), true)

	c.createEF("a",
		efAllow(k8sovnv1.EgressFirewallDestination{CIDRSelector: "198.51.100.0/24"}, k8sovnv1.EgressFirewallPort{Protocol: "TCP", Port: 443}),
		efAllow(k8sovnv1.EgressFirewallDestination{DNSName: "allowed.example.com"}),
		efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "0.0.0.0/0"}),
		efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "::/0"}),
	)
	if !ovndb.HasACLTiers(c.nb) {
		c.efStatus("a", k8sovnv1.EgressFirewallNotApplied)
		harness.Eventually(t, 20*time.Second, "a Warning Event on the firewall", func() error {
			return c.warningEvent("a", k8sovnv1.EgressFirewallName, "EgressFirewall"+policy.ReasonNoTiers)
		})
		leaves("no tiers: nothing changes: client → 192.0.2.1:80 leaves", out("client", "192.0.2.1", 80), true)
		if pg := (&nbdb.PortGroup{Name: policy.AdminPortGroup(policy.KindEF, "a")}); c.nb.Get(c.ctx(), pg) == nil {
			t.Errorf("an egress firewall port group on an NB without tiers: %+v", pg)
		}
		return
	}
	c.efStatus("a", k8sovnv1.EgressFirewallApplied)
	// What cannot be programmed (a wildcard name, without the DNS server's
	// dnstap stream here) is said in the status and an Event; the rest is
	// in force.
	c.createEF("b", efDeny(k8sovnv1.EgressFirewallDestination{DNSName: "*.example.com"}), efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "192.0.2.0/24"}))
	st := c.efStatus("b", k8sovnv1.EgressFirewallNotApplied)
	if msgs, _, _ := unstructured.NestedStringSlice(st.Object, "status", "messages"); len(msgs) != 1 || !strings.Contains(msgs[0], `wildcard name "*.example.com" matches nothing`) {
		t.Errorf("status messages %q, want the wildcard named", msgs)
	}
	harness.Eventually(t, 20*time.Second, "a Warning Event on the firewall", func() error {
		return c.warningEvent("b", k8sovnv1.EgressFirewallName, "EgressFirewall"+policy.ReasonPartlyProgrammed)
	})
	leaves("the rest is in force: server → 192.0.2.1:80 dropped", out("server", "192.0.2.1", 80), false)
	for _, tc := range []struct {
		name string
		f    flow
		want bool
	}{
		{"the CIDR on its port: client → 198.51.100.7:443 leaves", out("client", "198.51.100.7", 443), true},
		{"the CIDR on another port: client → 198.51.100.7:80 dropped", out("client", "198.51.100.7", 80), false},
		{"the DNS name: client → 203.0.113.5:80 leaves", out("client", "203.0.113.5", 80), true},
		{"the DNS name over IPv6: client → [2001:db8:5::5]:80 leaves", out("client", "2001:db8:5::5", 80), true},
		{"denied: client → 192.0.2.1:80 dropped", out("client", "192.0.2.1", 80), false},
		{"denied over IPv6: client → [2001:db8:9::9]:80 dropped", out("client", "2001:db8:9::9", 80), false},
		{"another namespace's firewall: server → 198.51.100.7:80 leaves", out("server", "198.51.100.7", 80), true},
	} {
		leaves(tc.name, tc.f, tc.want)
	}
	tr.expect("pods are not the firewall's: client → b/server:8080 allowed", tr.to("client", "server", 8080), true)

	// A NetworkPolicy still closes what the firewall allows (Allow passes).
	c.createPolicy("a", "no-egress", networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}})
	leaves("a NetworkPolicy over the firewall's Allow: client → 198.51.100.7:443 dropped", out("client", "198.51.100.7", 443), false)
	if err := c.kube.Client.NetworkingV1().NetworkPolicies("a").Delete(c.ctx(), "no-egress", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leaves("without it: client → 198.51.100.7:443 leaves", out("client", "198.51.100.7", 443), true)

	// The name's answer changes: the new address is let out, and the old
	// one only until its TTL (raised to the resolver's floor) has passed.
	dns.Set("allowed.example.com", "203.0.113.6")
	leaves("the new answer: client → 203.0.113.6:80 leaves", out("client", "203.0.113.6", 80), true)
	leaves("the old answer expired: client → 203.0.113.5:80 dropped", out("client", "203.0.113.5", 80), false)
	leaves("the old IPv6 answer expired: client → [2001:db8:5::5]:80 dropped", out("client", "2001:db8:5::5", 80), false)

	// An idle restart writes nothing: no row, no status.
	before := c.efStatus("a", k8sovnv1.EgressFirewallApplied)
	c.idleRestartWritesNothing()
	if after := c.efStatus("a", k8sovnv1.EgressFirewallApplied); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Errorf("an idle restart rewrote the EgressFirewall (resourceVersion %s → %s)", before.GetResourceVersion(), after.GetResourceVersion())
	}

	// Deleted: everything leaves again, and its rows are gone.
	if err := dynamicFor(t, c.kube.Config).Resource(k8sovnv1.EgressFirewallResource).Namespace("a").Delete(c.ctx(), k8sovnv1.EgressFirewallName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	leaves("deleted: client → 192.0.2.1:80 leaves", out("client", "192.0.2.1", 80), true)
	harness.Eventually(t, 20*time.Second, "the firewall's rows gone", func() error {
		var sets []nbdb.AddressSet // its name's (b's wildcard stays)
		if err := c.nb.WhereCache(func(as *nbdb.AddressSet) bool {
			return as.ExternalIDs["k8s.ovn.org/owner-type"] == policy.OwnerDomainPeers &&
				as.ExternalIDs[policy.PeersKey] == policy.DomainSet{Domain: "allowed.example.com"}.Key()
		}).List(c.ctx(), &sets); err != nil {
			return err
		}
		if pg := (&nbdb.PortGroup{Name: policy.AdminPortGroup(policy.KindEF, "a")}); c.nb.Get(c.ctx(), pg) == nil || len(sets) > 0 {
			return fmt.Errorf("port group %s, %d DNS address sets", pg.Name, len(sets))
		}
		return nil
	})
}

// idleRestartWritesNothing restarts the master on a settled NB and checks
// that it changes no ACL, port group or address set row.
func (c *cluster) idleRestartWritesNothing() {
	c.t.Helper()
	rows := harness.WatchNB(c.t, c.ovn, nbdb.ACLTable, nbdb.PortGroupTable, nbdb.AddressSetTable)
	quiet := func() int64 { // no change for a second
		last, since := rows.Changes(), time.Now()
		harness.Eventually(c.t, 20*time.Second, "the NB quiet", func() error {
			if n := rows.Changes(); n != last {
				last, since = n, time.Now()
			}
			if time.Since(since) < time.Second {
				return fmt.Errorf("changed %v ago", time.Since(since))
			}
			return nil
		})
		return last
	}
	before := quiet()
	c.master.Stop()
	c.startMaster(c.masterArgs...)
	c.waitSynced()
	if n := quiet() - before; n != 0 {
		c.t.Errorf("an idle restart changed %d ACL, port group and address set rows", n)
	}
}

// efRows is what the NB holds of a namespace's firewall: its ACLs (-1: no
// port group) and the IPv4 addresses of a DNS name's set (nil: no set).
func (c *cluster) efRows(ns, domain string) (acls int, addrs []string) {
	pg := &nbdb.PortGroup{Name: policy.AdminPortGroup(policy.KindEF, ns)}
	acls = -1
	if c.nb.Get(c.ctx(), pg) == nil {
		acls = len(pg.ACLs)
	}
	as := &nbdb.AddressSet{Name: policy.DomainSet{Domain: domain}.Name()}
	if c.nb.Get(c.ctx(), as) == nil {
		addrs = append([]string{}, as.Addresses...)
		slices.Sort(addrs)
	}
	return acls, addrs
}

// waitEFRows waits until a firewall has this many ACLs and the DNS name's
// set these addresses.
func (c *cluster) waitEFRows(what, ns, domain string, acls int, addrs ...string) {
	c.t.Helper()
	harness.Eventually(c.t, 30*time.Second, what, func() error {
		if n, got := c.efRows(ns, domain); n != acls || !slices.Equal(got, addrs) {
			return fmt.Errorf("%d ACLs, DNS set %v; want %d, %v", n, got, acls, addrs)
		}
		return nil
	})
}

// TestEgressFirewallFaults: a firewall's rows come back after the NB is
// replaced by an empty one; a master killed and restarted while its DNS
// server is down keeps the name's addresses (a rule must not change on a
// DNS outage); a firewall deleted while the master is down leaves no row
// behind; one deleted and re-created with other rules gets the new rules.
func TestEgressFirewallFaults(t *testing.T) {
	c := newCluster(t)
	c.kube.InstallCRDs(t)
	dns := harness.StartDNS(t, 1)
	dns.Set("db.example.com", "203.0.113.9")
	c.startMaster("--dns-servers", dns.Addr)
	c.createNode("n1", nil)
	c.namespace("a", nil)
	c.createPod("a", "client", "n1")
	if !ovndb.HasACLTiers(c.nb) {
		t.Fatal("this NB has no ACL tiers: egress firewalls are not applied there (TestOVNTraceEgressFirewall checks that branch); run this test on a stack with tiers")
	}
	c.createEF("a", efAllow(k8sovnv1.EgressFirewallDestination{DNSName: "db.example.com"}), efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "0.0.0.0/0"}))
	c.waitEFRows("programmed", "a", "db.example.com", 2, "203.0.113.9")

	c.ovn.ResetNB() // an empty database (a restore, a new central)
	c.waitEFRows("rows back after the NB was replaced", "a", "db.example.com", 2, "203.0.113.9")

	c.waitSynced()
	dns.Down(true)
	c.master.Kill()
	asked := dns.Queries()
	c.startMaster(c.masterArgs...)
	c.waitSynced()
	dns.Set("db.example.com", "203.0.113.10") // what it will say when it is back
	// The restarted master has asked twice (a query and its retry) and had
	// no answer: the set keeps its address.
	harness.Eventually(t, 20*time.Second, "the restarted master asking the DNS server again", func() error {
		if n := dns.Queries() - asked; n < 2 {
			return fmt.Errorf("%d questions since the restart", n)
		}
		return nil
	})
	if _, got := c.efRows("a", "db.example.com"); !slices.Equal(got, []string{"203.0.113.9"}) {
		t.Errorf("during the DNS outage after a restart the set holds %v, want the last answer 203.0.113.9", got)
	}
	dns.Down(false)
	c.waitEFRows("the new answer after the outage", "a", "db.example.com", 2, "203.0.113.10")

	// Deleted while the master is down: stale at the next start.
	c.master.Stop()
	dyn := dynamicFor(t, c.kube.Config).Resource(k8sovnv1.EgressFirewallResource).Namespace("a")
	if err := dyn.Delete(c.ctx(), k8sovnv1.EgressFirewallName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	c.startMaster(c.masterArgs...)
	c.waitEFRows("stale rows removed at start", "a", "db.example.com", -1)

	// Re-created with the same name and other rules.
	c.createEF("a", efDeny(k8sovnv1.EgressFirewallDestination{CIDRSelector: "192.0.2.0/24"}))
	c.waitEFRows("re-created with one rule and no name", "a", "db.example.com", 1)
	c.efStatus("a", k8sovnv1.EgressFirewallApplied)
}
