package policy

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// aclView is what a table test compares of an ACL.
type aclView struct {
	id, dir, action, tier string
	priority              int
	match                 string
}

func viewACLs(acls []*nbdb.ACL) []aclView {
	var out []aclView
	for _, a := range acls {
		out = append(out, aclView{id: a.ExternalIDs[ACLIDKey], dir: a.Direction, action: a.Action, tier: a.ExternalIDs[ovndb.ACLTierKey],
			priority: a.Priority, match: a.Match})
	}
	slices.SortFunc(out, func(a, b aclView) int { return strings.Compare(a.dir+a.id, b.dir+b.id) })
	return out
}

func nsSet(kv ...string) string {
	return PeerSet{Namespaces: must(metav1.LabelSelectorAsSelector(sel(kv...))), Pods: labels.Everything()}.Name()
}

func nodeSet(kv ...string) string {
	return NodeSet{Nodes: must(metav1.LabelSelectorAsSelector(sel(kv...)))}.Name()
}

// The same guardrails written in both API generations give the same rows
// but for names: one engine serves both.
func TestAdminRowsBothGenerations(t *testing.T) {
	tcp80 := cnpv1alpha2.ClusterNetworkPolicyProtocol{TCP: &cnpv1alpha2.ClusterNetworkPolicyProtocolTCP{DestinationPort: &cnpv1alpha2.Port{Number: 80}}}
	udpRange := cnpv1alpha2.ClusterNetworkPolicyProtocol{UDP: &cnpv1alpha2.ClusterNetworkPolicyProtocolUDP{DestinationPort: &cnpv1alpha2.Port{Range: &cnpv1alpha2.PortRange{Start: 5000, End: 5100}}}}
	cnp := &cnpv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: cnpv1alpha2.ClusterNetworkPolicySpec{
		Tier: cnpv1alpha2.AdminTier, Priority: 10,
		Subject: cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "a")},
		Ingress: []cnpv1alpha2.ClusterNetworkPolicyIngressRule{
			{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept, From: []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: sel("role", "monitoring")}},
				Protocols: []cnpv1alpha2.ClusterNetworkPolicyProtocol{tcp80}},
			{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, From: []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
		},
		Egress: []cnpv1alpha2.ClusterNetworkPolicyEgressRule{
			{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionPass, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Nodes: sel("role", "infra")}},
				Protocols: []cnpv1alpha2.ClusterNetworkPolicyProtocol{udpRange}},
			{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny, To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{Networks: []cnpv1alpha2.CIDR{"169.254.169.254/32", "fd00:ec2::254/128"}}}},
		},
	}}
	anp := &anpv1alpha1.AdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "guard"}, Spec: anpv1alpha1.AdminNetworkPolicySpec{
		Priority: 10,
		Subject:  anpv1alpha1.AdminNetworkPolicySubject{Namespaces: sel("tenant", "a")},
		Ingress: []anpv1alpha1.AdminNetworkPolicyIngressRule{
			{Action: anpv1alpha1.AdminNetworkPolicyRuleActionAllow, From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: sel("role", "monitoring")}},
				Ports: &[]anpv1alpha1.AdminNetworkPolicyPort{{PortNumber: &anpv1alpha1.Port{Protocol: corev1.ProtocolTCP, Port: 80}}}},
			{Action: anpv1alpha1.AdminNetworkPolicyRuleActionDeny, From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}},
		},
		Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{
			{Action: anpv1alpha1.AdminNetworkPolicyRuleActionPass, To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Nodes: sel("role", "infra")}},
				Ports: &[]anpv1alpha1.AdminNetworkPolicyPort{{PortRange: &anpv1alpha1.PortRange{Protocol: corev1.ProtocolUDP, Start: 5000, End: 5100}}}},
			{Action: anpv1alpha1.AdminNetworkPolicyRuleActionDeny, To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{Networks: []anpv1alpha1.CIDR{"169.254.169.254/32", "fd00:ec2::254/128"}}}},
		},
	}}
	monitoring, all, infra := nsSet("role", "monitoring"), nsSet(), nodeSet("role", "infra")
	want := func(pg string) []aclView {
		return []aclView{
			{"egress[0]/ports", "from-lport", "pass", "1", 30700, "inport == @" + pg + " && (ip4.dst == $" + infra + " || ip6.dst == $" + infra + "_v6) && udp && udp.dst >= 5000 && udp.dst <= 5100"},
			{"egress[1]/ports", "from-lport", "drop", "1", 30699, "inport == @" + pg + " && (ip4.dst == 169.254.169.254/32 || ip6.dst == fd00:ec2::254/128)"},
			{"ingress[0]/ports", "to-lport", "allow-related", "1", 30700, "outport == @" + pg + " && (ip4.src == $" + monitoring + " || ip6.src == $" + monitoring + "_v6) && tcp && tcp.dst == 80"},
			{"ingress[1]/ports", "to-lport", "drop", "1", 30699, "outport == @" + pg + " && (ip4.src == $" + all + " || ip6.src == $" + all + "_v6)"},
		}
	}
	for _, tc := range []struct {
		p  *AdminPolicy
		pg string
	}{{FromCNP(cnp), "cnp.guard"}, {FromANP(anp), "anp.guard"}} {
		t.Run(tc.p.Kind, func(t *testing.T) {
			r := AdminRows(tc.p, noResolve, AdminLogging{}, topology.Families{V4: true, V6: true})
			if r.Refused != "" || len(r.Problems) > 0 {
				t.Fatalf("refused %q, problems %v", r.Refused, r.Problems)
			}
			if r.PortGroup.Name != tc.pg {
				t.Errorf("port group %q, want %q", r.PortGroup.Name, tc.pg)
			}
			if o, _ := topology.OwnerOf(r.PortGroup.ExternalIDs); o != (topology.Owner{Type: tc.p.Kind, Name: "guard"}) {
				t.Errorf("owner %v", o)
			}
			if got, w := viewACLs(r.ACLs), want(tc.pg); !slices.Equal(got, w) {
				t.Errorf("ACLs\n got %v\nwant %v", got, w)
			}
			if len(r.PeerSets) != 2 || len(r.NodeSets) != 1 {
				t.Errorf("%d peer sets and %d node sets, want 2 and 1", len(r.PeerSets), len(r.NodeSets))
			}
			if !r.Subject.Namespaces.Matches(labels.Set{"tenant": "a"}) || r.Subject.Namespaces.Matches(labels.Set{"tenant": "b"}) {
				t.Errorf("subject %s", r.Subject.Key())
			}
		})
	}
}

// Priorities order rules across policies and tiers: a lower API priority
// is a higher OVN priority, rule order breaks ties within a policy, and a
// BaselineAdminNetworkPolicy comes after every Baseline-tier CNP.
func TestAdminPrioritiesOrderRules(t *testing.T) {
	if !(AdminACLPriority(0, AdminRuleSlots-1) > AdminACLPriority(1, 0)) {
		t.Error("the last rule of priority 0 is not above the first of priority 1")
	}
	if low := AdminACLPriority(MaxAdminPriority, AdminRuleSlots-1); low <= AdminACLPriority(BaselinePriority, 0) || AdminACLPriority(BaselinePriority, AdminRuleSlots-1) < 0 {
		t.Errorf("BANP rules not below every CNP's, or below 0 (%d, %d)", low, AdminACLPriority(BaselinePriority, AdminRuleSlots-1))
	}
	if AdminACLPriority(0, 0) > 32767 {
		t.Errorf("priority %d is above OVN's limit", AdminACLPriority(0, 0))
	}
	banp := FromBANP(&anpv1alpha1.BaselineAdminNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: anpv1alpha1.BaselineAdminNetworkPolicySpec{
		Subject: anpv1alpha1.AdminNetworkPolicySubject{Namespaces: &metav1.LabelSelector{}},
		Ingress: []anpv1alpha1.BaselineAdminNetworkPolicyIngressRule{{Action: anpv1alpha1.BaselineAdminNetworkPolicyRuleActionDeny,
			From: []anpv1alpha1.AdminNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}}}},
	}})
	r := AdminRows(banp, noResolve, AdminLogging{Deny: "alert", Meter: "m"}, topology.IPv4Only)
	if len(r.ACLs) != 1 {
		t.Fatalf("%d ACLs", len(r.ACLs))
	}
	a := r.ACLs[0]
	if a.ExternalIDs[ovndb.ACLTierKey] != "3" || a.Priority != AdminACLPriority(BaselinePriority, 0) || a.Action != nbdb.ACLActionDrop {
		t.Errorf("BANP deny: tier %s priority %d action %s", a.ExternalIDs[ovndb.ACLTierKey], a.Priority, a.Action)
	}
	if !a.Log || a.Severity == nil || *a.Severity != "alert" || a.Meter == nil {
		t.Errorf("BANP deny not logged at alert: %+v", a)
	}
	if r.PortGroup.Name != "banp.default" {
		t.Errorf("port group %s", r.PortGroup.Name)
	}
}

// Named ports resolve on the subject's pods for ingress and on the peers'
// for egress, for any protocol when none is given; a policy over the
// rule limit is refused whole, and unsupported peers are reported.
func TestAdminNamedPortsLimitsAndProblems(t *testing.T) {
	resolve := func(s PeerSet, name string, proto corev1.Protocol) []int32 {
		if name == "web" && proto == corev1.ProtocolTCP {
			return []int32{8080}
		}
		return nil
	}
	cnp := &cnpv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "named"}, Spec: cnpv1alpha2.ClusterNetworkPolicySpec{
		Tier: cnpv1alpha2.BaselineTier, Priority: 5,
		Subject: cnpv1alpha2.ClusterNetworkPolicySubject{Pods: &cnpv1alpha2.NamespacedPod{NamespaceSelector: metav1.LabelSelector{}, PodSelector: *sel("app", "web")}},
		Ingress: []cnpv1alpha2.ClusterNetworkPolicyIngressRule{{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept,
			From:      []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: &metav1.LabelSelector{}}},
			Protocols: []cnpv1alpha2.ClusterNetworkPolicyProtocol{{DestinationNamedPort: "web"}}}},
		Egress: []cnpv1alpha2.ClusterNetworkPolicyEgressRule{{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionAccept,
			To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1alpha2.DomainName{"bad_name.example.com"}}}}},
	}}
	r := AdminRows(FromCNP(cnp), resolve, AdminLogging{}, topology.IPv4Only)
	if len(r.ACLs) != 1 {
		t.Fatalf("ACLs %v, want only the resolved named port (the malformed domain-name rule has no peer left)", viewACLs(r.ACLs))
	}
	if a := r.ACLs[0]; !strings.Contains(a.Match, "tcp && tcp.dst == 8080") || a.ExternalIDs[ovndb.ACLTierKey] != "3" {
		t.Errorf("named port ACL %q tier %s", a.Match, a.ExternalIDs[ovndb.ACLTierKey])
	}
	if !slices.Equal(r.NamedPorts, []string{"TCP/web", "UDP/web", "SCTP/web"}) {
		t.Errorf("named ports %v", r.NamedPorts)
	}
	if len(r.Problems) != 1 || !strings.Contains(r.Problems[0], "domainNames") {
		t.Errorf("problems %v, want the wildcard domain name", r.Problems)
	}
	if c := programmedCondition(&r); c.Status != metav1.ConditionTrue || c.Reason != ReasonPartlyProgrammed {
		t.Errorf("condition %+v", c)
	}

	for i := 0; i <= AdminRuleSlots; i++ {
		cnp.Spec.Ingress = append(cnp.Spec.Ingress, cnp.Spec.Ingress[0])
	}
	r = AdminRows(FromCNP(cnp), resolve, AdminLogging{}, topology.IPv4Only)
	if r.Refused == "" || len(r.ACLs) != 0 || len(r.PeerSets) != 0 {
		t.Fatalf("a policy over %d rules: refused %q, %d ACLs", AdminRuleSlots, r.Refused, len(r.ACLs))
	}
	if c := programmedCondition(&r); c.Status != metav1.ConditionFalse || c.Reason != ReasonTooLarge {
		t.Errorf("condition %+v", c)
	}
}

// DomainNames: the normalized DNS names of a ClusterNetworkPolicy's and an
// AdminNetworkPolicy's egress peers (each once, a malformed one left out),
// none of another object.
func TestDomainNames(t *testing.T) {
	cnp := &cnpv1alpha2.ClusterNetworkPolicy{Spec: cnpv1alpha2.ClusterNetworkPolicySpec{Egress: []cnpv1alpha2.ClusterNetworkPolicyEgressRule{
		{To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1alpha2.DomainName{"*.Example.com.", "bad_name.example.com"}}}},
		{To: []cnpv1alpha2.ClusterNetworkPolicyEgressPeer{{DomainNames: []cnpv1alpha2.DomainName{"www.example.org", "*.example.com"}}}}}}}
	if got := DomainNames(cnp); !slices.Equal(got, []string{"*.example.com", "www.example.org"}) {
		t.Errorf("ClusterNetworkPolicy: %v", got)
	}
	anp := &anpv1alpha1.AdminNetworkPolicy{Spec: anpv1alpha1.AdminNetworkPolicySpec{Egress: []anpv1alpha1.AdminNetworkPolicyEgressRule{
		{To: []anpv1alpha1.AdminNetworkPolicyEgressPeer{{DomainNames: []anpv1alpha1.DomainName{"db.example.net"}}}}}}}
	if got := DomainNames(anp); !slices.Equal(got, []string{"db.example.net"}) {
		t.Errorf("AdminNetworkPolicy: %v", got)
	}
	if got := DomainNames(&metav1.ObjectMeta{}); got != nil {
		t.Errorf("another object: %v", got)
	}
}
