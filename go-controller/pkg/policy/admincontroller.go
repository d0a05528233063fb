package policy

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	anpv1alpha1 "sigs.k8s.io/network-policy-api/apis/v1alpha1"
	cnpv1alpha2 "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"
	npinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"
	anplisters "sigs.k8s.io/network-policy-api/pkg/client/listers/apis/v1alpha1"
	cnplisters "sigs.k8s.io/network-policy-api/pkg/client/listers/apis/v1alpha2"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
)

// AdminAPI is where admin policies come from and where their status goes.
// Each kind is followed only when the API server serves it (DiscoverAdminAPI).
type AdminAPI struct {
	Client         npclient.Interface
	Factory        npinformers.SharedInformerFactory
	CNP, ANP, BANP bool
	// EgressFirewalls (k8s.ovn.org/v1), through the dynamic client (nil:
	// not served).
	Dynamic    dynamic.Interface
	EFInformer cache.SharedIndexInformer
	// DNSNameResolvers: k8s.ovn.org/v1 DNSNameResolvers are served (zone
	// mode's relay of the cluster DNS's answers, through Dynamic).
	DNSNameResolvers bool
}

// DiscoverAdminAPI asks the API server which admin policy kinds it serves
// (their CRDs are installed); a kind it does not serve is not followed.
func DiscoverAdminAPI(d discovery.DiscoveryInterface, client npclient.Interface, dyn dynamic.Interface) *AdminAPI {
	a := &AdminAPI{Client: client, Factory: npinformers.NewSharedInformerFactoryWithOptions(client, 0, npinformers.WithTransform(slim.DropManagedFields)), Dynamic: dyn}
	if dyn != nil && k8sovnv1.ServesEgressFirewall(d) {
		a.EFInformer = k8sovnv1.NewEgressFirewallInformer(dyn, 0)
	}
	a.DNSNameResolvers = dyn != nil && k8sovnv1.ServesDNSNameResolver(d)
	serves := func(gv, resource string) bool {
		list, err := d.ServerResourcesForGroupVersion(gv)
		return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == resource })
	}
	a.CNP = serves(cnpv1alpha2.SchemeGroupVersion.String(), "clusternetworkpolicies")
	a.ANP = serves(anpv1alpha1.SchemeGroupVersion.String(), "adminnetworkpolicies")
	a.BANP = serves(anpv1alpha1.SchemeGroupVersion.String(), "baselineadminnetworkpolicies")
	return a
}

// Kinds lists the kinds followed.
func (a *AdminAPI) Kinds() []string {
	var out []string
	for kind, on := range map[string]bool{KindCNP: a.CNP, KindANP: a.ANP, KindBANP: a.BANP, KindEF: a.EFInformer != nil} {
		if on {
			out = append(out, kind)
		}
	}
	sort.Strings(out)
	return out
}

// Start starts the informers of the kinds followed and waits for their
// caches.
func (a *AdminAPI) Start(ctx context.Context) error {
	a.Factory.Start(ctx.Done())
	for typ, ok := range a.Factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return fmt.Errorf("informer cache for %v did not sync", typ)
		}
	}
	if a.EFInformer != nil {
		go a.EFInformer.RunWithContext(ctx)
		if !cache.WaitForCacheSync(ctx.Done(), a.EFInformer.HasSynced) {
			return fmt.Errorf("informer cache for egressfirewalls did not sync")
		}
	}
	return nil
}

// adminSources are the listers of the kinds followed (nil: not followed).
type adminSources struct {
	api  *AdminAPI
	cnp  cnplisters.ClusterNetworkPolicyLister
	anp  anplisters.AdminNetworkPolicyLister
	banp anplisters.BaselineAdminNetworkPolicyLister
	ef   cache.Indexer
}

// adminEntry is what pod and namespace events need of an admin policy.
type adminEntry struct {
	subject PeerSet
}

// The condition an admin policy's status carries, and its reasons.
const (
	ConditionReady          = "Ready"
	ReasonProgrammed        = "Programmed"
	ReasonPartlyProgrammed  = "PartlyProgrammed"
	ReasonPriorityCollision = "PriorityCollision"
	ReasonTooLarge          = "TooLarge"
	ReasonNoTiers           = "ACLTiersNotSupported"
)

// watchAdmin wires the admin policy informers (c.admin.api set).
func (c *Controller) watchAdmin(api *AdminAPI) {
	c.admin = adminSources{api: api}
	handler := func(kind string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc: func(obj any) { c.adminChanged(kind, obj, false) },
			UpdateFunc: func(old, cur any) {
				if !statusOnly(old, cur) { // our own status writes come back here
					c.adminChanged(kind, cur, false)
				}
			},
			DeleteFunc: func(obj any) { c.adminChanged(kind, obj, true) },
		}
	}
	if api.CNP {
		inf := api.Factory.Policy().V1alpha2().ClusterNetworkPolicies()
		c.admin.cnp = inf.Lister()
		_, _ = inf.Informer().AddEventHandler(handler(KindCNP))
	}
	if api.ANP {
		inf := api.Factory.Policy().V1alpha1().AdminNetworkPolicies()
		c.admin.anp = inf.Lister()
		_, _ = inf.Informer().AddEventHandler(handler(KindANP))
	}
	if api.BANP {
		inf := api.Factory.Policy().V1alpha1().BaselineAdminNetworkPolicies()
		c.admin.banp = inf.Lister()
		_, _ = inf.Informer().AddEventHandler(handler(KindBANP))
	}
	if api.EFInformer != nil {
		c.admin.ef = api.EFInformer.GetIndexer()
		_, _ = api.EFInformer.AddEventHandler(handler(KindEF))
	}
}

// adminObject is one admin policy as its API object and its conversion.
type adminObject struct {
	obj    metav1.Object
	policy *AdminPolicy
}

// getAdmin reads one admin policy from its lister (nil: gone or not followed).
func (c *Controller) getAdmin(kind, name string) *adminObject {
	switch {
	case kind == KindCNP && c.admin.cnp != nil:
		if o, err := c.admin.cnp.Get(name); err == nil {
			return &adminObject{o, FromCNP(o)}
		}
	case kind == KindANP && c.admin.anp != nil:
		if o, err := c.admin.anp.Get(name); err == nil {
			return &adminObject{o, FromANP(o)}
		}
	case kind == KindBANP && c.admin.banp != nil:
		if o, err := c.admin.banp.Get(name); err == nil {
			return &adminObject{o, FromBANP(o)}
		}
	case kind == KindEF && c.admin.ef != nil: // by namespace: one per namespace
		if o, ok, _ := c.admin.ef.GetByKey(name + "/" + k8sovnv1.EgressFirewallName); ok {
			if ef, ok := o.(*k8sovnv1.EgressFirewall); ok {
				return &adminObject{ef, FromEF(ef, c.opts.ClusterSubnets)}
			}
		}
	}
	return nil
}

// listAdmin lists every admin policy followed.
func (c *Controller) listAdmin() []*adminObject {
	var out []*adminObject
	if c.admin.cnp != nil {
		l, _ := c.admin.cnp.List(labels.Everything())
		for _, o := range l {
			out = append(out, &adminObject{o, FromCNP(o)})
		}
	}
	if c.admin.anp != nil {
		l, _ := c.admin.anp.List(labels.Everything())
		for _, o := range l {
			out = append(out, &adminObject{o, FromANP(o)})
		}
	}
	if c.admin.banp != nil {
		l, _ := c.admin.banp.List(labels.Everything())
		for _, o := range l {
			out = append(out, &adminObject{o, FromBANP(o)})
		}
	}
	if c.admin.ef != nil {
		for _, o := range c.admin.ef.List() {
			if ef, ok := o.(*k8sovnv1.EgressFirewall); ok && ef.Name == k8sovnv1.EgressFirewallName {
				out = append(out, &adminObject{ef, FromEF(ef, c.opts.ClusterSubnets)})
			}
		}
	}
	return out
}

// tierPriority is where a policy ranks: its tier and priority.
type tierPriority struct {
	tier     int
	priority int32
}

// rankOf reads an admin policy object's tier and priority (what the
// priority index needs, without converting the whole policy).
func rankOf(obj any) (tierPriority, bool) {
	switch o := obj.(type) {
	case *cnpv1alpha2.ClusterNetworkPolicy:
		if o.Spec.Tier == cnpv1alpha2.BaselineTier {
			return tierPriority{TierBaseline, o.Spec.Priority}, true
		}
		return tierPriority{TierAdmin, o.Spec.Priority}, true
	case *anpv1alpha1.AdminNetworkPolicy:
		return tierPriority{TierAdmin, o.Spec.Priority}, true
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		return tierPriority{TierBaseline, BaselinePriority}, true
	}
	return tierPriority{}, false
}

// statusOnly says whether an update changed neither spec nor annotations
// (the ACL logging) of a policy: its status alone, which we write.
func statusOnly(old, cur any) bool {
	o, ok1 := old.(metav1.Object)
	n, ok2 := cur.(metav1.Object)
	return ok1 && ok2 && o.GetGeneration() == n.GetGeneration() && o.GetUID() == n.GetUID() &&
		maps.Equal(o.GetAnnotations(), n.GetAnnotations())
}

// adminChanged records the policy's rank and queues it, with the policies
// whose priority collision its change may start or end: those refused for
// one and those sharing its rank.
func (c *Controller) adminChanged(kind string, obj any, deleted bool) {
	c.pacer.event()
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	if kind == KindEF { // one per namespace, which names it
		if o.GetName() == k8sovnv1.EgressFirewallName {
			c.queue.Add(adminKey + kind + "/" + o.GetNamespace())
		}
		return
	}
	key := kind + "/" + o.GetName()
	rank, _ := rankOf(obj)
	c.mu.Lock()
	if deleted {
		delete(c.ranks, key)
	} else {
		c.ranks[key] = rank
	}
	var also []string
	for k := range c.collided {
		also = append(also, k)
	}
	for k, r := range c.ranks {
		if r == rank && k != key {
			also = append(also, k)
		}
	}
	c.mu.Unlock()
	c.queue.Add(adminKey + key)
	for _, k := range also {
		c.queue.Add(adminKey + k)
	}
}

// collisionWinner is the policy that keeps a priority several policies of
// one tier share (nil: no collision): the one programmed already (its port
// group is in the NB), so that a newcomer never displaces it; otherwise the
// oldest, then by kind and name.
func (c *Controller) collisionWinner(a *adminObject) *adminObject {
	rank := tierPriority{a.policy.Tier, a.policy.Priority}
	c.mu.RLock()
	var keys []string
	for k, r := range c.ranks {
		if r == rank && k != a.policy.Key() {
			keys = append(keys, k)
		}
	}
	c.mu.RUnlock()
	if len(keys) == 0 {
		return nil
	}
	same := []*adminObject{a}
	for _, k := range keys {
		kind, name, _ := strings.Cut(k, "/")
		if o := c.getAdmin(kind, name); o != nil {
			same = append(same, o)
		}
	}
	if len(same) < 2 {
		return nil
	}
	programmed := map[string]bool{}
	for _, o := range same {
		programmed[o.policy.Key()] = c.hasPortGroup(o.policy)
	}
	sort.Slice(same, func(i, j int) bool {
		if pi, pj := programmed[same[i].policy.Key()], programmed[same[j].policy.Key()]; pi != pj {
			return pi
		}
		ti, tj := same[i].obj.GetCreationTimestamp(), same[j].obj.GetCreationTimestamp()
		if !ti.Equal(&tj) {
			return ti.Before(&tj)
		}
		return same[i].policy.Key() < same[j].policy.Key()
	})
	return same[0]
}

// hasPortGroup says whether an admin policy's port group is in the NB.
func (c *Controller) hasPortGroup(p *AdminPolicy) bool {
	pg := &nbdb.PortGroup{Name: AdminPortGroup(p.Kind, p.Name)}
	return c.nb.Get(context.Background(), pg) == nil && topology.OwnedBy(pg.ExternalIDs, topology.Owner{Type: p.Kind, Name: p.Name})
}

// syncAdmin makes an admin policy's port group (members and ACLs) match
// it, creates the address sets it names, and reports its condition.
func (c *Controller) syncAdmin(ctx context.Context, key string) error {
	kind, name, _ := strings.Cut(key, "/")
	a := c.getAdmin(kind, name)
	owner := topology.Owner{Type: kind, Name: name}
	var rows *Rows
	var cond metav1.Condition
	switch {
	case a == nil:
	case !ovndb.HasACLTiers(c.nb):
		cond = refusedCondition(ReasonNoTiers, "the OVN Northbound database has no ACL tiers (OVN 23.09 or later is needed); nothing is programmed")
	default:
		if w := c.collisionWinner(a); w != nil && w.policy.Key() != key {
			cond = refusedCondition(ReasonPriorityCollision, fmt.Sprintf("priority %d of this tier is %s's (created first); nothing is programmed until one of them changes priority", a.policy.Priority, w.policy.Key()))
			break
		}
		logging, bad := c.adminLogging(kind, a.obj)
		r := AdminRows(a.policy, c.resolve, logging, c.fams)
		if bad != "" {
			r.Problems = append(r.Problems, bad)
		}
		if why := wildcardProblem(a.policy); why != "" && !c.opts.DNSTap {
			r.Problems = append(r.Problems, why)
		}
		cond = programmedCondition(&r)
		if r.Refused == "" {
			rows = &r
		}
	}
	c.mu.Lock()
	if cond.Reason == ReasonPriorityCollision {
		c.collided[key] = true
	} else {
		delete(c.collided, key)
	}
	c.mu.Unlock()
	unused, collisions := c.register(adminKey+key, "", rows)
	if rows != nil && len(collisions) > 0 {
		c.log.Error(nil, "a peer selector's address set name is another selector's; the rules naming it are left out", "policy", key, "addressSets", collisions)
		rows.dropCollisions(collisions)
	}
	members := memberMemo{}
	err := c.commitGroup(ctx, adminKey+key, func(t *ovndb.Txn) {
		if rows == nil {
			if pg := ovndb.Lookup(t, &nbdb.PortGroup{Name: AdminPortGroup(kind, name)}); pg != nil && topology.OwnedBy(pg.ExternalIDs, owner) {
				t.Delete(pg) // its ACLs go with it
			}
			return
		}
		c.ensureSets(t, rows, members)
		c.ensurePortGroup(t, rows.PortGroup, rows.ACLs, c.subjectPorts(t, *rows.Subject))
	})
	if err != nil {
		return fmt.Errorf("%s %s: %w", kind, name, err)
	}
	for _, k := range unused {
		c.queue.Add(k)
	}
	c.mu.Lock()
	if a == nil {
		delete(c.wantStatus, key)
	} else {
		c.wantStatus[key] = cond
	}
	c.mu.Unlock()
	if a != nil {
		c.statusQueue.Add(key)
	}
	return nil
}

// ensureSets creates the address sets a policy's rows name that do not
// exist yet (their own keys keep them up to date).
func (c *Controller) ensureSets(t *ovndb.Txn, rows *Rows, members memberMemo) {
	for _, s := range rows.PeerSets {
		c.ensurePeerSet(t, s, members)
	}
	for _, s := range rows.NodeSets {
		c.ensureNewSet(t, s.Name(), s.Key(), func(v6 bool) *nbdb.AddressSet {
			return NodeSetRow(s, v6, members.get(topology.FamilySetName(s.Name(), v6), func() []string { return c.nodeMembers(s, v6) }))
		})
	}
	for _, s := range rows.DomainSets {
		c.ensureNewSet(t, s.Name(), s.Key(), func(v6 bool) *nbdb.AddressSet {
			return DomainSetRow(s, v6, members.get(topology.FamilySetName(s.Name(), v6), func() []string { return c.domainMembers(s, v6) }))
		})
	}
}

func refusedCondition(reason, msg string) metav1.Condition {
	return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse, Reason: reason, Message: msg}
}

func programmedCondition(r *Rows) metav1.Condition {
	switch {
	case r.Refused != "":
		return refusedCondition(ReasonTooLarge, r.Refused+"; nothing is programmed")
	case len(r.Problems) > 0:
		return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonPartlyProgrammed,
			Message: "programmed, except: " + strings.Join(r.Problems, "; ")}
	}
	return metav1.Condition{Type: ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonProgrammed,
		Message: fmt.Sprintf("%d ACLs programmed", len(r.ACLs))}
}

// syncAdminStatus writes a policy's Ready condition, as its last sync
// computed it, when it differs from the one it carries (an idle restart
// writes nothing). Status writes have a queue of their own, so that the
// NB's workers never wait on the API server, and yield to the policies'
// own writes for a while (statuspacer.go).
func (c *Controller) syncAdminStatus(ctx context.Context, key string) error {
	write := c.statusWrite(ctx, key)
	if write == nil {
		c.pacer.done(key)
		return nil
	}
	if c.pacer.hold(key) {
		return nil
	}
	if err := write(); err != nil {
		return err
	}
	c.pacer.done(key)
	return nil
}

// statusWrite is the write that brings a policy's status in line with the
// condition its last sync computed (nil: none is needed).
func (c *Controller) statusWrite(ctx context.Context, key string) func() error {
	kind, name, _ := strings.Cut(key, "/")
	c.mu.RLock()
	cond, ok := c.wantStatus[key]
	c.mu.RUnlock()
	a := c.getAdmin(kind, name)
	if !ok || a == nil {
		return nil
	}
	if ef, ok := a.obj.(*k8sovnv1.EgressFirewall); ok {
		return c.efStatusWrite(ctx, ef, cond)
	}
	obj := a.obj
	cond.ObservedGeneration = obj.GetGeneration()
	var conds *[]metav1.Condition
	var update func() error
	switch o := obj.(type) {
	case *cnpv1alpha2.ClusterNetworkPolicy:
		o = o.DeepCopy()
		conds = &o.Status.Conditions
		update = func() error {
			_, err := c.admin.api.Client.PolicyV1alpha2().ClusterNetworkPolicies().UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}
	case *anpv1alpha1.AdminNetworkPolicy:
		o = o.DeepCopy()
		conds = &o.Status.Conditions
		update = func() error {
			_, err := c.admin.api.Client.PolicyV1alpha1().AdminNetworkPolicies().UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}
	case *anpv1alpha1.BaselineAdminNetworkPolicy:
		o = o.DeepCopy()
		conds = &o.Status.Conditions
		update = func() error {
			_, err := c.admin.api.Client.PolicyV1alpha1().BaselineAdminNetworkPolicies().UpdateStatus(ctx, o, metav1.UpdateOptions{})
			return err
		}
	default:
		return nil
	}
	if old := meta.FindStatusCondition(*conds, cond.Type); old != nil && old.Status == cond.Status && old.Reason == cond.Reason &&
		old.Message == cond.Message && old.ObservedGeneration == cond.ObservedGeneration {
		return nil
	}
	meta.SetStatusCondition(conds, cond)
	return func() error {
		if cond.Status == metav1.ConditionFalse {
			c.log.Info("admin policy not programmed", "kind", kind, "name", obj.GetName(), "reason", cond.Reason, "message", cond.Message)
		}
		if err := update(); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s %s: writing its status: %w", kind, obj.GetName(), err)
		}
		return nil
	}
}

// efStatusWrite is the write of an egress firewall's status, upstream's
// words for the condition its last sync computed, when it differs from the
// one it carries (nil: none is needed).
func (c *Controller) efStatusWrite(ctx context.Context, ef *k8sovnv1.EgressFirewall, cond metav1.Condition) func() error {
	want := k8sovnv1.EgressFirewallStatus{Status: k8sovnv1.EgressFirewallApplied}
	if cond.Reason != ReasonProgrammed {
		want = k8sovnv1.EgressFirewallStatus{Status: k8sovnv1.EgressFirewallNotApplied, Messages: []string{cond.Message}}
	}
	if ef.Status.Status == want.Status && slices.Equal(ef.Status.Messages, want.Messages) {
		return nil
	}
	return func() error {
		if want.Status == k8sovnv1.EgressFirewallNotApplied { // once per change of what is wrong
			c.log.Info("egress firewall not applied as written", "namespace", ef.Namespace, "reason", cond.Reason, "message", cond.Message)
			if c.opts.Events != nil {
				c.opts.Events.Eventf(ef, corev1.EventTypeWarning, "EgressFirewall"+cond.Reason, "%s", cond.Message)
			}
		}
		err := k8sovnv1.WriteEgressFirewallStatus(ctx, c.admin.api.Dynamic, ef.Namespace, ef.Name, want)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("EgressFirewall %s/%s: writing its status: %w", ef.Namespace, ef.Name, err)
		}
		return nil
	}
}

// adminLogging is an admin policy's ACL logging, from its
// k8s.ovn.org/acl-logging annotation; a malformed one logs nothing and
// says so in problem (for the policy's condition: its rules are programmed
// all the same). An egress firewall logs as its namespace's
// NetworkPolicies do (its Allow with their allow severity), as upstream's
// does.
func (c *Controller) adminLogging(kind string, obj metav1.Object) (l AdminLogging, problem string) {
	if kind == KindEF {
		l := c.logging(obj.GetNamespace())
		return AdminLogging{Pass: l.Allow, Deny: l.Deny, Meter: l.Meter}, ""
	}
	v, ok := obj.GetAnnotations()[annotations.NamespaceACLLogging]
	if !ok {
		return AdminLogging{}, ""
	}
	parsed, err := annotations.ParseACLLogging(v)
	if err != nil {
		return AdminLogging{}, fmt.Sprintf("annotation %s: %v; ACL logging is off", annotations.NamespaceACLLogging, err)
	}
	return AdminLogging{Accept: parsed.Allow, Deny: parsed.Deny, Pass: parsed.Pass, Meter: topology.ACLLogMeter}, ""
}

// subjectPorts are the UUIDs of the ports of the pods a subject selects,
// across the namespaces it selects.
func (c *Controller) subjectPorts(t *ovndb.Txn, s PeerSet) []string {
	var out []string
	q, epoch := portsQuestion(s), ovndb.CurrentEpoch(c.nb)
	for _, ns := range c.namespacesOf(s) {
		out = append(out, c.memo.get(ns, q, epoch, func() []string {
			return c.selectedPorts(t, ns, func(p *slim.Pod) bool { return s.Pods.Matches(labels.Set(p.Labels)) })
		})...)
	}
	sort.Strings(out)
	return out
}

// adminPodChanged queues the members of the admin policies whose subject
// holds the pod before or after the change (c.mu held for reading).
func (c *Controller) adminPodChanged(old, cur *slim.Pod, nsLabels labels.Set) {
	for key, e := range c.admins {
		if old != nil && e.subject.Selects(old, nsLabels) || cur != nil && e.subject.Selects(cur, nsLabels) {
			c.queue.Add(membersKey + adminKey + key)
		}
	}
}

// adminNamespaceChanged queues the members of the admin policies whose
// subject a namespace's label change moves it into or out of: their ACLs
// do not depend on which pods the subject holds, unless they name ports,
// which the subject's pods resolve (the full sync) (c.mu held for reading).
func (c *Controller) adminNamespaceChanged(oldL, curL labels.Set) {
	for key, e := range c.admins {
		if e.subject.Namespace != "" || e.subject.Namespaces.Matches(oldL) == e.subject.Namespaces.Matches(curL) {
			continue
		}
		if p := c.policies[adminKey+key]; p != nil && len(p.namedPorts) > 0 {
			c.queue.Add(adminKey + key)
		} else {
			c.queue.Add(membersKey + adminKey + key)
		}
	}
}

func nodeOf(obj any) *corev1.Node { return controller.ObjectOf[*corev1.Node](obj) }
