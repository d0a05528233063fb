package policy

import (
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

func ptr[T any](v T) *T { return &v }

func noResolve(PeerSet, string, corev1.Protocol) []int32 { return nil }

// TestIsolates: what a namespace's default-deny groups read of a policy
// (its selector and directions, the rows aside) is what Policy says.
func TestIsolates(t *testing.T) {
	web := metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}
	bad := metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: "Near"}}}
	egress := []networkingv1.NetworkPolicyEgressRule{{}}
	for _, tc := range []struct {
		name         string
		spec         networkingv1.NetworkPolicySpec
		in, eg, fail bool
		picksWeb     bool
	}{
		{name: "no policyTypes, no egress rules: ingress only", spec: networkingv1.NetworkPolicySpec{PodSelector: web}, in: true, picksWeb: true},
		{name: "no policyTypes, egress rules: both", spec: networkingv1.NetworkPolicySpec{PodSelector: web, Egress: egress}, in: true, eg: true, picksWeb: true},
		{name: "Egress only", spec: networkingv1.NetworkPolicySpec{PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}, eg: true, picksWeb: true},
		{name: "malformed selector picks nothing", spec: networkingv1.NetworkPolicySpec{PodSelector: bad}, in: true, fail: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := np(tc.spec)
			sel, in, eg, err := Isolates(p)
			if in != tc.in || eg != tc.eg || (err != nil) != tc.fail || sel.Matches(labels.Set{"app": "web"}) != tc.picksWeb {
				t.Fatalf("Isolates = %v ingress %v egress %v error %v; want ingress %v egress %v failing %v picking app=web %v", sel, in, eg, err, tc.in, tc.eg, tc.fail, tc.picksWeb)
			}
			r := Policy(p, noResolve, Logging{}, topology.IPv4Only)
			if r.Ingress != in || r.Egress != eg || r.PodSelector.String() != sel.String() || (len(r.Problems) > 0) != tc.fail {
				t.Fatalf("Policy says ingress %v egress %v selector %v problems %v; Isolates ingress %v egress %v selector %v", r.Ingress, r.Egress, r.PodSelector, r.Problems, in, eg, sel)
			}
		})
	}
}

func np(spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: "web-ns", Name: "allow-db"}, Spec: spec}
}

func sel(kv ...string) *metav1.LabelSelector {
	m := map[string]string{}
	for i := 0; i+1 < len(kv); i += 2 {
		m[kv[i]] = kv[i+1]
	}
	return &metav1.LabelSelector{MatchLabels: m}
}

func port(proto corev1.Protocol, p intstr.IntOrString, end ...int32) networkingv1.NetworkPolicyPort {
	pp := networkingv1.NetworkPolicyPort{Protocol: &proto, Port: &p}
	if len(end) > 0 {
		pp.EndPort = &end[0]
	}
	return pp
}

// setName is the address set name of a peer set given by its parts.
func setName(ns string, nsSel, podSel *metav1.LabelSelector, named *NamedPort) string {
	s := PeerSet{Namespace: ns, Pods: labels.Everything(), Port: named}
	if nsSel != nil {
		s.Namespace, s.Namespaces = "", must(metav1.LabelSelectorAsSelector(nsSel))
	}
	if podSel != nil {
		s.Pods = must(metav1.LabelSelectorAsSelector(podSel))
	}
	return s.Name()
}

func must(s labels.Selector, err error) labels.Selector {
	if err != nil {
		panic(err)
	}
	return s
}

func TestPolicyACLs(t *testing.T) {
	const pg = "np.web_ns.allow_db"
	appDB := sel("app", "db")
	teamA := sel("team", "a")
	resolve := func(s PeerSet, name string, proto corev1.Protocol) []int32 {
		if name == "http" && proto == corev1.ProtocolTCP {
			return []int32{8080, 80}
		}
		return nil
	}
	tests := []struct {
		name        string
		spec        networkingv1.NetworkPolicySpec
		wantMatches []string
		wantIn      bool
		wantEg      bool
		wantSets    int
	}{
		{
			name:   "deny all ingress: no rules, only isolation",
			spec:   networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web")},
			wantIn: true,
		},
		{
			name:        "allow all ingress: one empty rule",
			spec:        networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{}}},
			wantMatches: []string{"outport == @" + pg},
			wantIn:      true,
		},
		{
			name: "pod selector peer with a port, a range and a protocol",
			spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{PodSelector: appDB}},
				Ports: []networkingv1.NetworkPolicyPort{
					port(corev1.ProtocolTCP, intstr.FromInt32(5432)),
					port(corev1.ProtocolUDP, intstr.FromInt32(1000), 2000),
					{Protocol: ptr(corev1.ProtocolSCTP)},
				},
			}}},
			wantMatches: []string{"outport == @" + pg + " && ip4.src == $" + setName("web-ns", nil, appDB, nil) +
				" && ((tcp && tcp.dst == 5432) || (udp && udp.dst >= 1000 && udp.dst <= 2000) || sctp)"},
			wantIn: true, wantSets: 1,
		},
		{
			name: "namespace selector, both selectors, and an ipBlock with except",
			spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{
					{NamespaceSelector: teamA},
					{NamespaceSelector: teamA, PodSelector: appDB},
					{IPBlock: &networkingv1.IPBlock{CIDR: "172.18.0.0/16", Except: []string{"172.18.1.0/24", "172.18.2.0/24"}}},
				},
			}}},
			wantMatches: []string{"outport == @" + pg + " && (ip4.src == {$" + setName("", teamA, nil, nil) + ", $" + setName("", teamA, appDB, nil) +
				"} || ip4.src == {172.18.0.0/24, 172.18.3.0/24, 172.18.4.0/22, 172.18.8.0/21, 172.18.16.0/20, 172.18.32.0/19, 172.18.64.0/18, 172.18.128.0/17})"},
			wantIn: true, wantSets: 2,
		},
		{
			name: "named port resolved on the selected pods, one ACL per number",
			spec: networkingv1.NetworkPolicySpec{PodSelector: *sel("app", "web"), Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"))},
			}}},
			wantMatches: []string{
				"outport == @" + pg + " && ip4.dst == $" + setName("web-ns", nil, sel("app", "web"), &NamedPort{"http", corev1.ProtocolTCP, 80}) + " && tcp && tcp.dst == 80",
				"outport == @" + pg + " && ip4.dst == $" + setName("web-ns", nil, sel("app", "web"), &NamedPort{"http", corev1.ProtocolTCP, 8080}) + " && tcp && tcp.dst == 8080",
			},
			wantIn: true, wantSets: 2,
		},
		{
			name: "named port nobody declares allows nothing",
			spec: networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
				Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolUDP, intstr.FromString("dns"))},
			}}},
			wantIn: true,
		},
		{
			name: "egress only: to a pod selector on a named port and to an ipBlock",
			spec: networkingv1.NetworkPolicySpec{
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{}}, // ignored: not in policyTypes
				Egress: []networkingv1.NetworkPolicyEgressRule{
					{To: []networkingv1.NetworkPolicyPeer{{PodSelector: appDB}}, Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"))}},
					{To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}},
				},
			},
			wantMatches: []string{
				"inport == @" + pg + " && ip4.dst == $" + setName("web-ns", nil, appDB, &NamedPort{"http", corev1.ProtocolTCP, 80}) + " && tcp && tcp.dst == 80",
				"inport == @" + pg + " && ip4.dst == $" + setName("web-ns", nil, appDB, &NamedPort{"http", corev1.ProtocolTCP, 8080}) + " && tcp && tcp.dst == 8080",
				"inport == @" + pg + " && ip4.dst == 192.0.2.0/24",
			},
			wantEg: true, wantSets: 2,
		},
		{
			name: "egress rules without policyTypes isolate both directions",
			spec: networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/32"}}},
			}}},
			wantMatches: []string{"inport == @" + pg + " && ip6.dst == 2001:db8::/32"},
			wantIn:      true, wantEg: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rows := Policy(np(tt.spec), resolve, Logging{}, topology.IPv4Only)
			if len(rows.Problems) > 0 {
				t.Fatalf("problems: %v", rows.Problems)
			}
			var matches []string
			for _, a := range rows.ACLs {
				matches = append(matches, a.Match)
				if a.Priority != PriorityAllow || a.Action != "allow-related" {
					t.Errorf("ACL %q: priority %d action %s, want %d allow-related", a.Match, a.Priority, a.Action, PriorityAllow)
				}
				egress := strings.HasPrefix(a.Match, "inport")
				if egress != (a.Direction == "from-lport") || egress != (a.Options["apply-after-lb"] == "true") {
					t.Errorf("ACL %q: direction %s options %v", a.Match, a.Direction, a.Options)
				}
				if a.ExternalIDs[ACLIDKey] == "" || a.ExternalIDs["k8s.ovn.org/name"] != "web-ns/allow-db" {
					t.Errorf("ACL %q: external_ids %v", a.Match, a.ExternalIDs)
				}
			}
			if !reflect.DeepEqual(matches, tt.wantMatches) {
				t.Errorf("matches:\n got %q\nwant %q", matches, tt.wantMatches)
			}
			if rows.Ingress != tt.wantIn || rows.Egress != tt.wantEg {
				t.Errorf("directions: ingress %v egress %v, want %v %v", rows.Ingress, rows.Egress, tt.wantIn, tt.wantEg)
			}
			if len(rows.PeerSets) != tt.wantSets {
				t.Errorf("peer sets: %d, want %d", len(rows.PeerSets), tt.wantSets)
			}
			if rows.PortGroup.Name != pg {
				t.Errorf("port group %q, want %q", rows.PortGroup.Name, pg)
			}
		})
	}
}

// Rows per policy do not grow with the pods it selects: the ACLs name
// port groups and address sets, whose members the controller manages.
func TestPolicyRowsIndependentOfPods(t *testing.T) {
	spec := networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: sel("team", "a")}},
	}}}
	a := Policy(np(spec), noResolve, Logging{}, topology.IPv4Only)
	if len(a.ACLs) != 1 || len(a.PeerSets) != 1 {
		t.Fatalf("ACLs %d, sets %d; want 1 and 1", len(a.ACLs), len(a.PeerSets))
	}
}

// Two policies naming the same selector share one address set; different
// selectors (or namespaces, for a pod selector) get different ones.
func TestPeerSetsShared(t *testing.T) {
	mk := func(ns, name string, peer networkingv1.NetworkPolicyPeer) string {
		p := np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{peer}}}})
		p.Namespace, p.Name = ns, name
		rows := Policy(p, noResolve, Logging{}, topology.IPv4Only)
		return rows.PeerSets[0].Name()
	}
	a := mk("x", "one", networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})
	b := mk("x", "two", networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})
	c := mk("y", "one", networkingv1.NetworkPolicyPeer{PodSelector: sel("app", "db")})
	d := mk("x", "one", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "a"), PodSelector: sel("app", "db")})
	e := mk("y", "one", networkingv1.NetworkPolicyPeer{NamespaceSelector: sel("team", "a"), PodSelector: sel("app", "db")})
	if a != b || a == c || d != e || a == d {
		t.Fatalf("set names: same selector %s %s, other namespace %s, with namespace selector %s %s", a, b, c, d, e)
	}
}

func TestDefaultDeny(t *testing.T) {
	pg, acls := DefaultDeny("web-ns", Ingress, Logging{Deny: "alert", Meter: "acl-logging"}, topology.IPv4Only)
	if pg.Name != "ns.web_ns.ingressDefaultDeny" {
		t.Fatalf("name %q", pg.Name)
	}
	want := map[string]string{
		"outport == @ns.web_ns.ingressDefaultDeny":                             "drop",
		"outport == @ns.web_ns.ingressDefaultDeny && (arp || nd)":              "allow",
		"outport == @ns.web_ns.ingressDefaultDeny && ip4.src == 169.254.169.5": "allow-related",
	}
	for _, a := range acls {
		if want[a.Match] != a.Action {
			t.Errorf("unexpected ACL %q %s", a.Match, a.Action)
		}
		if a.Action == "drop" && (!a.Log || *a.Severity != "alert" || *a.Meter != "acl-logging" || a.Priority != PriorityDefaultDeny) {
			t.Errorf("deny ACL: %+v", a)
		}
		delete(want, a.Match)
	}
	if len(want) > 0 {
		t.Errorf("missing ACLs: %v", want)
	}
	_, eg := DefaultDeny("web-ns", Egress, Logging{}, topology.IPv4Only)
	for _, a := range eg {
		if a.Direction != "from-lport" || a.Options["apply-after-lb"] != "true" || !strings.HasPrefix(a.Match, "inport == @ns.web_ns.egressDefaultDeny") {
			t.Errorf("egress ACL %+v", a)
		}
	}
}

func TestPeerSetSelects(t *testing.T) {
	pod := slim.FromPod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Labels: map[string]string{"app": "db"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Ports: []corev1.ContainerPort{{ContainerPort: 80}, {Name: "pg", ContainerPort: 5432}}}}}})
	nsSel := PeerSet{Namespaces: must(metav1.LabelSelectorAsSelector(sel("team", "a"))), Pods: labels.Everything()}
	if !nsSel.Selects(pod, labels.Set{"team": "a"}) || nsSel.Selects(pod, labels.Set{"team": "b"}) {
		t.Error("namespace selector")
	}
	named := PeerSet{Namespace: "a", Pods: labels.Everything(), Port: &NamedPort{"pg", corev1.ProtocolTCP, 5432}}
	if !named.Selects(pod, nil) {
		t.Error("named port with the default protocol")
	}
	named.Port.Number = 5433
	if named.Selects(pod, nil) {
		t.Error("named port with another number")
	}
}

// In each of the cluster's families a rule's peers are matched against
// that family's address sets (the IPv6 row named with "_v6"), named ports
// too; ipBlocks keep their own family; rows are made per family.
func TestPolicyFamilies(t *testing.T) {
	spec := networkingv1.NetworkPolicySpec{
		Ingress: []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{
			{PodSelector: sel("app", "web")},
			{IPBlock: &networkingv1.IPBlock{CIDR: "2001:db8::/64"}},
		}}},
		Egress: []networkingv1.NetworkPolicyEgressRule{{Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString("http"))}}},
	}
	resolve := func(PeerSet, string, corev1.Protocol) []int32 { return []int32{8080} }
	set := PeerSet{Namespace: "web-ns", Pods: labels.SelectorFromSet(labels.Set{"app": "web"})}.Name()
	every := PeerSet{Namespaces: labels.Everything(), Pods: labels.Everything(), Port: &NamedPort{Name: "http", Protocol: corev1.ProtocolTCP, Number: 8080}}.Name()
	for _, tt := range []struct {
		fams            topology.Families
		ingress, egress string
	}{
		{topology.IPv4Only,
			"outport == @np.web_ns.allow_db && (ip4.src == $" + set + " || ip6.src == 2001:db8::/64)",
			"inport == @np.web_ns.allow_db && ip4.dst == $" + every + " && tcp && tcp.dst == 8080"},
		{topology.Families{V6: true},
			"outport == @np.web_ns.allow_db && (ip6.src == $" + set + "_v6 || ip6.src == 2001:db8::/64)",
			"inport == @np.web_ns.allow_db && ip6.dst == $" + every + "_v6 && tcp && tcp.dst == 8080"},
		{topology.Families{V4: true, V6: true},
			"outport == @np.web_ns.allow_db && ((ip4.src == $" + set + " || ip6.src == $" + set + "_v6) || ip6.src == 2001:db8::/64)",
			"inport == @np.web_ns.allow_db && (ip4.dst == $" + every + " || ip6.dst == $" + every + "_v6) && tcp && tcp.dst == 8080"},
	} {
		r := Policy(np(spec), resolve, Logging{}, tt.fams)
		if len(r.ACLs) != 2 || r.ACLs[0].Match != tt.ingress || r.ACLs[1].Match != tt.egress {
			var got []string
			for _, a := range r.ACLs {
				got = append(got, a.Match)
			}
			t.Errorf("%+v: matches\n%s\nwant\n%s\n%s", tt.fams, strings.Join(got, "\n"), tt.ingress, tt.egress)
		}
	}
	s := PeerSet{Namespace: "web-ns", Pods: labels.Everything()}
	if a4, a6 := s.AddressSet(false, []string{"10.244.1.5"}), s.AddressSet(true, []string{"fd00::5"}); a4.Name != s.Name() ||
		a6.Name != s.Name()+"_v6" || a4.ExternalIDs[FamilyKey] != "v4" || a6.ExternalIDs[FamilyKey] != "v6" || a6.ExternalIDs[PeersKey] != s.Key() {
		t.Errorf("rows %+v and %+v", a4, a6)
	}
}

// A namespace selector "key in (a, b)" names the sets of "key=a" and
// "key=b", those a matchLabels selector of one team names, in both
// families; other selectors stay one set each.
func TestSplitUnions(t *testing.T) {
	in := func(key string, values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOpIn, Values: values}}}
	}
	set := func(ns *metav1.LabelSelector, pods *metav1.LabelSelector) PeerSet {
		s := PeerSet{Namespaces: must(metav1.LabelSelectorAsSelector(ns)), Pods: labels.Everything()}
		if pods != nil {
			s.Pods = must(metav1.LabelSelectorAsSelector(pods))
		}
		return s
	}
	keys := func(sets []PeerSet) []string {
		var out []string
		for _, s := range sets {
			out = append(out, s.Key())
		}
		return out
	}
	many := make([]string, MaxUnionParts+1)
	for i := range many {
		many[i] = string(rune('a' + i))
	}
	notIn := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"a", "b"}}}}
	twoReqs := in("team", "a", "b")
	twoReqs.MatchLabels = map[string]string{"env": "prod"}
	for _, tc := range []struct {
		name string
		in   []PeerSet
		want []PeerSet
	}{
		{"union of two teams", []PeerSet{set(in("team", "b", "a"), nil)}, []PeerSet{set(sel("team", "a"), nil), set(sel("team", "b"), nil)}},
		{"pods of a union keep their selector", []PeerSet{set(in("team", "a", "b"), sel("app", "db"))},
			[]PeerSet{set(sel("team", "a"), sel("app", "db")), set(sel("team", "b"), sel("app", "db"))}},
		{"a part named twice is named once", []PeerSet{set(sel("team", "a"), nil), set(in("team", "a", "b"), nil)},
			[]PeerSet{set(sel("team", "a"), nil), set(sel("team", "b"), nil)}},
		{"one value", []PeerSet{set(in("team", "a"), nil)}, []PeerSet{set(sel("team", "a"), nil)}},
		{"not in", []PeerSet{set(notIn, nil)}, []PeerSet{set(notIn, nil)}},
		{"two requirements", []PeerSet{set(twoReqs, nil)}, []PeerSet{set(twoReqs, nil)}},
		{"more values than MaxUnionParts", []PeerSet{set(in("team", many...), nil)}, []PeerSet{set(in("team", many...), nil)}},
		{"one namespace's pods", []PeerSet{{Namespace: "x", Pods: labels.Everything()}}, []PeerSet{{Namespace: "x", Pods: labels.Everything()}}},
	} {
		if got, want := keys(splitUnions(tc.in)), keys(tc.want); !slices.Equal(got, want) {
			t.Errorf("%s: got %q, want %q", tc.name, got, want)
		}
	}

	// In a NetworkPolicy and an admin policy alike, the rule's ACL names
	// the parts and the rows list them, not the union.
	a, b := nsSet("team", "a"), nsSet("team", "b")
	wantMatch := "(ip4.src == {$" + a + ", $" + b + "} || ip6.src == {$" + a + "_v6, $" + b + "_v6})"
	nrows := Policy(np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{{
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: in("team", "a", "b")}},
	}}}), noResolve, Logging{}, topology.Families{V4: true, V6: true})
	cnp := &cnpv1alpha2.ClusterNetworkPolicy{ObjectMeta: metav1.ObjectMeta{Name: "teams"}, Spec: cnpv1alpha2.ClusterNetworkPolicySpec{
		Tier: cnpv1alpha2.AdminTier, Priority: 1, Subject: cnpv1alpha2.ClusterNetworkPolicySubject{Namespaces: sel("tenant", "x")},
		Ingress: []cnpv1alpha2.ClusterNetworkPolicyIngressRule{{Action: cnpv1alpha2.ClusterNetworkPolicyRuleActionDeny,
			From: []cnpv1alpha2.ClusterNetworkPolicyIngressPeer{{Namespaces: in("team", "a", "b")}}}},
	}}
	arows := AdminRows(FromCNP(cnp), noResolve, AdminLogging{}, topology.Families{V4: true, V6: true})
	for name, r := range map[string]Rows{"NetworkPolicy": nrows, "ClusterNetworkPolicy": arows} {
		if len(r.ACLs) != 1 || !strings.Contains(r.ACLs[0].Match, wantMatch) {
			t.Errorf("%s: ACLs %v, want one matching %s", name, viewACLs(r.ACLs), wantMatch)
		}
		if got := keys(r.PeerSets); !slices.Equal(got, []string{set(sel("team", "a"), nil).Key(), set(sel("team", "b"), nil).Key()}) {
			t.Errorf("%s: peer sets %q", name, got)
		}
	}
}
