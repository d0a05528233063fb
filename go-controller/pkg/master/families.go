package master

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// An annotation of ours may hold addresses of an IP family the cluster does
// not have: written before the operator removed that family, or by a master
// of other families. Its addresses of the cluster's families are restored
// like any others (valid and free: kept), the others are dropped, the
// annotation is rewritten without them, and the object gets one Warning
// Event saying so.

// reasonIPFamilyNotInCluster is the Warning Event on an object whose
// annotation of ours held an address of a family the cluster lacks.
const reasonIPFamilyNotInCluster = "IPFamilyNotInCluster"

// families are the cluster's IP families, as its --cluster-subnet ranges
// say (the join subnets and service CIDRs are kept to them).
func (m *Master) families() topology.Families {
	var f topology.Families
	for _, cs := range m.cfg.ClusterSubnets {
		f.V4, f.V6 = f.V4 || cs.CIDR.Addr().Is4(), f.V6 || cs.CIDR.Addr().Is6()
	}
	if !f.V4 && !f.V6 {
		return topology.IPv4Only
	}
	return f
}

func hasFamily(f topology.Families, a netip.Addr) bool { return a.Is4() && f.V4 || a.Is6() && f.V6 }

// splitFamilies separates the prefixes of the families f has (kept, in
// their order) from the others.
func splitFamilies(ps []netip.Prefix, f topology.Families) (kept, dropped []netip.Prefix) {
	for _, p := range ps {
		if hasFamily(f, p.Addr()) {
			kept = append(kept, p)
		} else {
			dropped = append(dropped, p)
		}
	}
	return kept, dropped
}

// ofClusterFamilies keeps the prefixes of the cluster's families; what
// (the annotation or row they were read from) has none of them is an error.
func (m *Master) ofClusterFamilies(what string, ps []netip.Prefix) ([]netip.Prefix, error) {
	kept, dropped := splitFamilies(ps, m.families())
	if len(kept) == 0 {
		return nil, fmt.Errorf("%s has only %s, of a family the cluster has no --cluster-subnet of", what, joinPrefixes(dropped))
	}
	return kept, nil
}

// otherFamily says whether any prefix is of a family the cluster lacks
// (without allocating: it runs for every pod sync).
func (m *Master) otherFamily(ps []netip.Prefix) bool {
	f := m.families()
	return slices.ContainsFunc(ps, func(p netip.Prefix) bool { return !hasFamily(f, p.Addr()) })
}

func familyName(a netip.Addr) string {
	if a.Is4() {
		return "IPv4"
	}
	return "IPv6"
}

func joinPrefixes(ps []netip.Prefix) string {
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = p.String()
	}
	return strings.Join(s, ", ")
}

// familyDrop is an annotation of ours that held addresses of a family the
// cluster lacks, and what its object holds now.
type familyDrop struct {
	holder     string // "node" or "pod"
	name       string // n1, ns/p1
	annotation string
	noun       string         // what one address is: "host subnet", "address"
	had, now   []netip.Prefix // the annotation's; the object's now
	note       string         // appended to what the master did
}

// message says what was wrong, what the master did and the fix; ok is false
// when the annotation had the cluster's families only.
func (d familyDrop) message(f topology.Families) (msg string, ok bool) {
	kept, dropped := splitFamilies(d.had, f)
	if len(dropped) == 0 {
		return "", false
	}
	fam := familyName(dropped[0].Addr())
	var b strings.Builder
	fmt.Fprintf(&b, "%s %s's %s has %s, but the cluster has no %s --cluster-subnet; ", d.holder, d.name, d.annotation, joinPrefixes(dropped), fam)
	if len(kept) > 0 && slices.Equal(kept, d.now) {
		fmt.Fprintf(&b, "the master keeps its %s and drops the %s one", d.describe(d.now), fam)
	} else {
		fmt.Fprintf(&b, "the master drops the %s one; the %s now has %s", fam, d.holder, d.describe(d.now))
	}
	fmt.Fprintf(&b, "%s; if the cluster is meant to have %s, restart the master with an %s --cluster-subnet, else nothing is to be done", d.note, fam, fam)
	return b.String(), true
}

// describe names addresses with their family: "IPv4 host subnet 10.244.1.0/24".
func (d familyDrop) describe(ps []netip.Prefix) string {
	if len(ps) == 0 {
		return "no " + d.noun
	}
	s := make([]string, len(ps))
	for i, p := range ps {
		s[i] = familyName(p.Addr()) + " " + d.noun + " " + p.String()
	}
	return strings.Join(s, " and ")
}

// reportFamilyDrop logs d and puts a Warning Event on obj when d's
// annotation held a family the cluster lacks: once per object and message,
// so that neither a retry nor a resync repeats it.
func (m *Master) reportFamilyDrop(obj runtime.Object, d familyDrop) {
	msg, ok := d.message(m.families())
	if !ok {
		return
	}
	if prev, seen := m.reported.Swap(familyKey(d.holder, d.name, d.annotation), msg); seen && prev == msg {
		return
	}
	m.log.Info("an annotation holds addresses of an IP family the cluster does not have; they are dropped",
		d.holder, d.name, "annotation", d.annotation, "detail", msg)
	m.recorder.Event(obj, corev1.EventTypeWarning, reasonIPFamilyNotInCluster, msg)
}

// forgetFamilyDrops forgets what was reported about an object that is gone.
func (m *Master) forgetFamilyDrops(holder, name string, annotations ...string) {
	for _, a := range annotations {
		m.reported.Delete(familyKey(holder, name, a))
	}
}

func familyKey(holder, name, annotation string) string { return holder + " " + name + " " + annotation }

// macNote says what became of a pod's MAC, which follows its first address.
func macNote(had, now net.HardwareAddr) string {
	if had.String() == now.String() {
		return "; its MAC stays " + now.String()
	}
	return "; its MAC is now " + now.String() + " (it follows the first address; it was " + had.String() + ")"
}
