package clustermanager

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/controller"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnstap"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

// DNSOptions configure the relay of the cluster DNS's answers (an empty
// TapAddress: none).
type DNSOptions struct {
	// TapAddress is where the cluster DNS's dnstap stream comes
	// (--dns-tap-address: HOST:PORT or unix:PATH).
	TapAddress string
	// Service is the cluster DNS's Service, NAMESPACE/NAME: only its
	// endpoints may send over TCP.
	Service string
	// API is where the policies naming DNS names come from, and the
	// DNSNameResolvers go (API.DNSNameResolvers must be true).
	API *policy.AdminAPI
}

// DNSNames relays the cluster DNS's answers to every zone. The cluster DNS
// sends its dnstap stream to one address, here; for every DNS name some
// policy names (an EgressFirewall's dnsName, an admin policy's domainNames,
// wildcards included) the cluster manager keeps a DNSNameResolver whose
// status is each address the pods were answered for it and when it
// expires, which every zone's master learns (master.learnRelayed). It alone
// writes them: it creates a name's object as a policy starts naming it,
// deletes it when none does, writes the status when the addresses change,
// and renews an address's recorded expiry before it passes while the pods
// keep being answered it (when less than half of what the answers give is
// recorded), so a name answered steadily costs a write per half TTL.
type DNSNames struct {
	opts    DNSOptions
	objects cache.SharedIndexInformer
	slices  discoverylisters.EndpointSliceLister
	factory informers.SharedInformerFactory // the DNS Service's namespace
	dns     *dnsname.Resolver
	queue   *controller.Queue
	log     logr.Logger

	mu    sync.Mutex
	named map[string][]string // by policy object (kind/namespace/name): the names it names
	refs  map[string]int      // by name: the objects naming it
}

// newDNSNames wires the relay: the DNSNameResolvers, the DNS Service's
// EndpointSlices and the policies' informers (started by Run).
func newDNSNames(opts DNSOptions, kube kubernetes.Interface, log logr.Logger) *DNSNames {
	ns, _, _ := strings.Cut(opts.Service, "/")
	d := &DNSNames{
		opts:    opts,
		objects: k8sovnv1.NewDNSNameResolverInformer(opts.API.Dynamic, 0),
		factory: informers.NewSharedInformerFactoryWithOptions(kube, 0, informers.WithNamespace(ns)),
		log:     log,
		named:   map[string][]string{},
		refs:    map[string]int{},
	}
	d.slices = d.factory.Discovery().V1().EndpointSlices().Lister()
	store := d.objects.GetStore()
	d.dns = dnsname.New(dnsname.Options{ObserveOnly: true, Known: k8sovnv1.KnownAddresses(store)}, func(name string) { d.queue.Add(name) }, log.WithName("dns"))
	d.queue = controller.NewQueue("cluster-manager-dns-names", 30*time.Second, d.sync, log)
	requeue := func(obj any) {
		if o := controller.ObjectOf[*k8sovnv1.DNSNameResolver](obj); o != nil {
			d.queue.Add(o.Spec.Name)
		}
	}
	_, _ = d.objects.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: requeue, UpdateFunc: func(_, cur any) { requeue(cur) }, DeleteFunc: requeue})
	d.watchPolicies()
	return d
}

// watchPolicies follows the names every policy kind served names.
func (d *DNSNames) watchPolicies() {
	api := d.opts.API
	handler := func(kind string) cache.ResourceEventHandlerFuncs {
		return cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { d.policyChanged(kind, obj, false) },
			UpdateFunc: func(_, cur any) { d.policyChanged(kind, cur, false) },
			DeleteFunc: func(obj any) { d.policyChanged(kind, obj, true) },
		}
	}
	if api.CNP {
		_, _ = api.Factory.Policy().V1alpha2().ClusterNetworkPolicies().Informer().AddEventHandler(handler(policy.KindCNP))
	}
	if api.ANP {
		_, _ = api.Factory.Policy().V1alpha1().AdminNetworkPolicies().Informer().AddEventHandler(handler(policy.KindANP))
	}
	if api.BANP {
		_, _ = api.Factory.Policy().V1alpha1().BaselineAdminNetworkPolicies().Informer().AddEventHandler(handler(policy.KindBANP))
	}
	if api.EFInformer != nil {
		_, _ = api.EFInformer.AddEventHandler(handler(policy.KindEF))
	}
}

// policyChanged records the names a policy object names; the resolver
// follows every name some object names, and a name starting or ending to
// be named is queued (its object created or deleted).
func (d *DNSNames) policyChanged(kind string, obj any, deleted bool) {
	if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj, deleted = t.Obj, true
	}
	o, ok := obj.(metav1.Object)
	if !ok {
		return
	}
	key := kind + "/" + o.GetNamespace() + "/" + o.GetName()
	var names []string
	if !deleted {
		names = policy.DomainNames(obj)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	old := d.named[key]
	if slices.Equal(old, names) {
		return
	}
	var changed []string
	for _, n := range old {
		if d.refs[n]--; d.refs[n] == 0 {
			delete(d.refs, n)
			changed = append(changed, n)
		}
	}
	for _, n := range names {
		if d.refs[n]++; d.refs[n] == 1 {
			changed = append(changed, n)
		}
	}
	if len(names) == 0 {
		delete(d.named, key)
	} else {
		d.named[key] = names
	}
	if len(changed) == 0 {
		return
	}
	followed := make([]string, 0, len(d.refs))
	for n := range d.refs {
		followed = append(followed, n)
	}
	d.dns.Set(followed) // under d.mu: the last set wins
	for _, n := range changed {
		d.queue.Add(n)
	}
}

func (d *DNSNames) followed(name string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.refs[name] > 0
}

// run takes the stream on l and keeps the objects until ctx ends: it
// follows the objects first (what the zones were told, which the resolver
// starts from), then the policies, and queues every object's name (one no
// policy names any more is deleted). What it waits for (caches) does not
// hold up the rest of the cluster manager.
func (d *DNSNames) run(ctx context.Context, l net.Listener) {
	defer l.Close()
	go d.objects.RunWithContext(ctx)
	d.factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), d.objects.HasSynced) {
		return
	}
	d.factory.WaitForCacheSync(ctx.Done())
	if err := d.opts.API.Start(ctx); err != nil {
		d.log.Error(err, "DNS answers are not relayed to the zones")
		return
	}
	for _, obj := range d.objects.GetStore().List() {
		if o, ok := obj.(*k8sovnv1.DNSNameResolver); ok {
			d.queue.Add(o.Spec.Name)
		}
	}
	go d.dns.Run(ctx)
	go dnstap.ServeCluster(ctx, l, d.slices, d.opts.Service, d.dns.Observe, d.log.WithName("dnstap"))
	d.queue.Run(ctx, 2)
}

// sync makes a name's DNSNameResolver exist while some policy names it,
// with what the pods were answered as its status, and renews it in time.
func (d *DNSNames) sync(ctx context.Context, name string) error {
	objName := k8sovnv1.DNSNameResolverName(name)
	cur := k8sovnv1.GetDNSNameResolver(d.objects.GetStore(), name)
	if !d.followed(name) {
		if cur == nil {
			return nil
		}
		if err := k8sovnv1.DeleteDNSNameResolver(ctx, d.opts.API.Dynamic, objName, cur.UID); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return fmt.Errorf("deleting DNSNameResolver %s of %q, which no policy names: %w", objName, name, err)
		}
		return nil
	}
	if cur == nil {
		var err error
		if cur, err = k8sovnv1.CreateDNSNameResolver(ctx, d.opts.API.Dynamic, name); err != nil {
			return fmt.Errorf("creating DNSNameResolver %s of %q (one of that name naming another name is not ours to keep: delete it): %w", objName, name, err)
		}
	}
	want := d.dns.Expiries(name)
	if want == nil {
		return nil // nothing answered or known yet
	}
	now := time.Now()
	recorded := cur.Status.Expiries()
	if statusDue(recorded, want, now) {
		status := statusOf(want)
		if err := k8sovnv1.WriteDNSNameResolverStatus(ctx, d.opts.API.Dynamic, objName, status); err != nil {
			return fmt.Errorf("writing the addresses of %q to DNSNameResolver %s: %w", name, objName, err)
		}
		recorded = status.Expiries()
	}
	if next := recheckIn(recorded, now); next > 0 {
		d.queue.AddAfter(name, next)
	}
	return nil
}

// statusDue says whether the recorded addresses must be rewritten: they
// differ from the wanted ones, or one's recorded expiry is less than half
// of what is left of its wanted one.
func statusDue(recorded, want map[netip.Addr]time.Time, now time.Time) bool {
	if len(recorded) != len(want) {
		return true
	}
	for a, w := range want {
		r, ok := recorded[a]
		if !ok || w.After(r) && r.Sub(now) <= w.Sub(now)/2 {
			return true
		}
	}
	return false
}

// recheckIn is when statusDue may turn true through answers extending the
// wanted expiries alone (which the resolver does not report): half of what
// is left until the earliest recorded expiry, at least a second (0: no
// address recorded).
func recheckIn(recorded map[netip.Addr]time.Time, now time.Time) time.Duration {
	var next time.Duration
	for _, r := range recorded {
		if d := max(r.Sub(now)/2, time.Second); next == 0 || d < next {
			next = d
		}
	}
	return next
}

// statusOf is the status recording want: sorted by address, each expiry
// rounded up to the second (what the API keeps).
func statusOf(want map[netip.Addr]time.Time) k8sovnv1.DNSNameResolverStatus {
	addrs := make([]netip.Addr, 0, len(want))
	for a := range want {
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var s k8sovnv1.DNSNameResolverStatus
	for _, a := range addrs {
		exp := want[a].Truncate(time.Second)
		if exp.Before(want[a]) {
			exp = exp.Add(time.Second)
		}
		s.ResolvedAddresses = append(s.ResolvedAddresses, k8sovnv1.ResolvedAddress{IP: a.String(), Expires: metav1.NewTime(exp)})
	}
	return s
}
