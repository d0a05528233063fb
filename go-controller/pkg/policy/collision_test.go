package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// A peer set's name is the full SHA-256 of its selector's canonical text:
// no collision can be searched for (64-bit FNV names fell in minutes).
func TestPeerSetNameIsSHA256OfItsKey(t *testing.T) {
	s := PeerSet{Namespace: "x", Pods: must(labels.Parse("app=db"))}
	sum := sha256.Sum256([]byte(s.Key()))
	if want := "peers." + hex.EncodeToString(sum[:]); s.Name() != want {
		t.Fatalf("name %s, want %s", s.Name(), want)
	}
}

// forceCollisions makes every peer set's name the same, as a hash
// collision would, for the rest of the test.
func forceCollisions(t *testing.T) {
	old := peerSetHash
	peerSetHash = func(string) string { return "same" }
	t.Cleanup(func() { peerSetHash = old })
}

func emptyController() *Controller {
	return &Controller{sets: map[string]*setEntry[PeerSet]{}, nodeSets: map[string]*setEntry[NodeSet]{}, domainSets: map[string]*setEntry[DomainSet]{}, policies: map[string]*policyEntry{},
		nsPolicies: map[string]map[string]bool{}, nsSets: map[string]map[string]bool{}, crossSets: map[string]bool{},
		namedPorts: map[string]map[string]bool{}, refused: map[string]string{}, admins: map[string]*adminEntry{}}
}

// Two selectors sharing a name: the second policy's set is refused (never
// registered under the first one's entry), and its rules naming it are left
// out, so the policy allows nothing through them.
func TestCollidingPeerSetNamesAreRefused(t *testing.T) {
	forceCollisions(t)
	c := emptyController()
	from := func(ns, podLabel string) *Rows {
		p := np(networkingv1.NetworkPolicySpec{Ingress: []networkingv1.NetworkPolicyIngressRule{
			{From: []networkingv1.NetworkPolicyPeer{{PodSelector: sel("app", podLabel)}}},
			{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.0.2.0/24"}}}},
		}})
		p.Namespace = ns
		r := Policy(p, noResolve, Logging{}, topology.IPv4Only)
		return &r
	}
	a, b := from("a", "db"), from("b", "web")
	if _, coll := c.register("a/p", "a", a); len(coll) != 0 {
		t.Fatalf("first policy refused: %v", coll)
	}
	_, coll := c.register("b/p", "b", b)
	if !slices.Equal(coll, []string{"peers.same"}) {
		t.Fatalf("collisions %v, want [peers.same]", coll)
	}
	if got := c.sets["peers.same"].set.Key(); got != a.PeerSets[0].Key() {
		t.Fatalf("the name now holds %q, want the first selector %q", got, a.PeerSets[0].Key())
	}
	if users := c.sets["peers.same"].users; len(users) != 1 || !users["a/p"] {
		t.Fatalf("users %v, want only a/p", users)
	}
	b.dropCollisions(coll)
	if len(b.PeerSets) != 0 {
		t.Fatalf("peer sets %v, want none", b.PeerSets)
	}
	for _, acl := range b.ACLs {
		if strings.Contains(acl.Match, "$peers.same") {
			t.Fatalf("an ACL still names the colliding set: %s", acl.Match)
		}
	}
	if len(b.ACLs) != 1 || !strings.Contains(b.ACLs[0].Match, "192.0.2.0/24") {
		t.Fatalf("ACLs %v, want only the ipBlock rule's", b.ACLs)
	}
}

// A pod declaring a named port re-queues only the policies naming that port
// (resolved or not), not every policy with some named port; a deleted policy
// leaves the index.
func TestNamedPortIndex(t *testing.T) {
	c := emptyController()
	naming := func(name string) *Rows {
		r := Policy(np(networkingv1.NetworkPolicySpec{Egress: []networkingv1.NetworkPolicyEgressRule{{
			Ports: []networkingv1.NetworkPolicyPort{port(corev1.ProtocolTCP, intstr.FromString(name))}}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress}}), noResolve, Logging{}, topology.IPv4Only)
		return &r
	}
	c.register("a/http", "a", naming("http"))
	c.register("a/metrics", "a", naming("metrics"))
	c.register("b/http", "b", naming("http"))
	pod := &slim.Pod{NamedPorts: []slim.NamedPort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 8080}}}
	got := c.policiesNamingPortsOf(pod, nil)
	slices.Sort(got)
	if !slices.Equal(got, []string{"a/http", "b/http"}) {
		t.Fatalf("policies %v, want [a/http b/http]", got)
	}
	udp := &slim.Pod{NamedPorts: []slim.NamedPort{{Name: "http", Protocol: corev1.ProtocolUDP, Port: 8080}}}
	if got := c.policiesNamingPortsOf(udp); len(got) != 0 {
		t.Fatalf("a UDP port named http re-queues %v", got)
	}
	c.register("a/http", "a", nil)
	c.register("b/http", "b", nil)
	if got := c.policiesNamingPortsOf(pod); len(got) != 0 || len(c.namedPorts) != 1 {
		t.Fatalf("after deletion: %v, index %v", got, c.namedPorts)
	}
}
