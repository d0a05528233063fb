package clustermanager

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"path/filepath"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/kubernetes/fake"
	npfake "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned/fake"
	npinformers "sigs.k8s.io/network-policy-api/pkg/client/informers/externalversions"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnsname"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

// The cluster manager keeps a DNSNameResolver for every DNS name some
// policy names (here an EgressFirewall's, normalized), its status what the
// pods were answered; a restarted manager starts from those statuses and
// writes nothing; a name no policy names any more loses its object.
func TestDNSNamesRelayed(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		k8sovnv1.EgressFirewallResource: "EgressFirewallList", k8sovnv1.DNSNameResolverResource: "DNSNameResolverList"})
	ctx := context.Background()
	ef := &unstructured.Unstructured{Object: map[string]any{"apiVersion": k8sovnv1.GroupVersion.String(), "kind": "EgressFirewall",
		"metadata": map[string]any{"name": k8sovnv1.EgressFirewallName, "namespace": "a"},
		"spec": map[string]any{"egress": []any{
			map[string]any{"type": "Allow", "to": map[string]any{"dnsName": "*.Wild.Test."}},
			map[string]any{"type": "Allow", "to": map[string]any{"dnsName": "plain.test"}},
			map[string]any{"type": "Deny", "to": map[string]any{"cidrSelector": "0.0.0.0/0"}}}}}}
	if _, err := dyn.Resource(k8sovnv1.EgressFirewallResource).Namespace("a").Create(ctx, ef, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube := fake.NewSimpleClientset()
	tap := filepath.Join(t.TempDir(), "tap.sock")
	startRelay := func() (*Manager, func()) {
		api := &policy.AdminAPI{Factory: npinformers.NewSharedInformerFactory(npfake.NewSimpleClientset(), 0), Dynamic: dyn,
			EFInformer: k8sovnv1.NewEgressFirewallInformer(dyn, 0), DNSNameResolvers: true}
		return startWith(t, kube, nil, EgressIPs{}, DNSOptions{TapAddress: "unix:" + tap, Service: "kube-system/kube-dns", API: api})
	}
	m, stop := startRelay()
	objects := func() (map[string]k8sovnv1.DNSNameResolver, error) {
		l, err := dyn.Resource(k8sovnv1.DNSNameResolverResource).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		out := map[string]k8sovnv1.DNSNameResolver{}
		for _, u := range l.Items {
			var o k8sovnv1.DNSNameResolver
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &o); err != nil {
				return nil, err
			}
			if o.Name != k8sovnv1.DNSNameResolverName(o.Spec.Name) {
				return nil, fmt.Errorf("object %s names %q: not its own name", o.Name, o.Spec.Name)
			}
			out[o.Spec.Name] = o
		}
		return out, nil
	}
	addrsOf := func(name string, want ...string) func() error {
		return func() error {
			objs, err := objects()
			if err != nil {
				return err
			}
			o, ok := objs[name]
			if !ok {
				return fmt.Errorf("no DNSNameResolver of %q among %d", name, len(objs))
			}
			var got []string
			for _, r := range o.Status.ResolvedAddresses {
				got = append(got, r.IP)
			}
			if !slices.Equal(got, want) {
				return fmt.Errorf("%q's status holds %v, want %v", name, got, want)
			}
			return nil
		}
	}
	eventually(t, "an object of each name, no address yet", func() error {
		if err := addrsOf("*.wild.test")(); err != nil {
			return err
		}
		return addrsOf("plain.test")()
	})

	m.dns.dns.Observe("a.b.wild.test", []dnsname.Answer{{Addr: netip.MustParseAddr("192.0.2.20"), TTL: 30 * time.Second},
		{Addr: netip.MustParseAddr("2001:db8::20"), TTL: time.Hour}})
	eventually(t, "the answers under the wildcard recorded", addrsOf("*.wild.test", "192.0.2.20", "2001:db8::20"))
	objs, _ := objects()
	for _, r := range objs["*.wild.test"].Status.ResolvedAddresses {
		want := map[string]time.Duration{"192.0.2.20": 30 * time.Second, "2001:db8::20": time.Hour}[r.IP]
		if left := time.Until(r.Expires.Time); left > want+time.Second || left < want-5*time.Second {
			t.Errorf("%s expires in %v, want about %v", r.IP, left, want)
		}
	}

	// Restarted: it learns what the objects say and writes nothing.
	stop()
	before := len(dyn.Actions())
	m, stop = startRelay()
	eventually(t, "the restarted manager knows the wildcard's addresses", func() error {
		if got := m.dns.dns.Addrs("*.wild.test"); len(got) != 2 {
			return fmt.Errorf("%v", got)
		}
		if !m.Idle() {
			return fmt.Errorf("not idle")
		}
		return nil
	})
	for _, a := range dyn.Actions()[before:] {
		if v := a.GetVerb(); v != "list" && v != "watch" && v != "get" {
			t.Errorf("the restarted manager wrote: %s %s %s", v, a.GetResource().Resource, a.GetSubresource())
		}
	}

	// The firewall names only plain.test now: the wildcard's object goes.
	ef.Object["spec"] = map[string]any{"egress": []any{map[string]any{"type": "Allow", "to": map[string]any{"dnsName": "plain.test"}}}}
	if _, err := dyn.Resource(k8sovnv1.EgressFirewallResource).Namespace("a").Update(ctx, ef, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "only plain.test's object left", func() error {
		objs, err := objects()
		if _, wild := objs["*.wild.test"]; err == nil && (wild || len(objs) != 1) {
			err = fmt.Errorf("objects of %v", slices.Collect(maps.Keys(objs)))
		}
		return err
	})
	stop()
}

// An address's recorded expiry is renewed once less than half of what the
// answers give it is recorded; the addresses differing is always due.
func TestDNSNamesStatusDue(t *testing.T) {
	now := time.Now()
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	at := func(d time.Duration) time.Time { return now.Add(d) }
	for _, c := range []struct {
		name           string
		recorded, want map[netip.Addr]time.Time
		due            bool
	}{
		{"same", map[netip.Addr]time.Time{a: at(30 * time.Second)}, map[netip.Addr]time.Time{a: at(30 * time.Second)}, false},
		{"extended, most still recorded", map[netip.Addr]time.Time{a: at(20 * time.Second)}, map[netip.Addr]time.Time{a: at(30 * time.Second)}, false},
		{"extended, under half recorded", map[netip.Addr]time.Time{a: at(14 * time.Second)}, map[netip.Addr]time.Time{a: at(30 * time.Second)}, true},
		{"an address more", map[netip.Addr]time.Time{a: at(30 * time.Second)}, map[netip.Addr]time.Time{a: at(30 * time.Second), b: at(time.Second)}, true},
		{"another address", map[netip.Addr]time.Time{a: at(30 * time.Second)}, map[netip.Addr]time.Time{b: at(30 * time.Second)}, true},
		{"one expired", map[netip.Addr]time.Time{a: at(30 * time.Second), b: at(-time.Second)}, map[netip.Addr]time.Time{a: at(30 * time.Second)}, true},
	} {
		if got := statusDue(c.recorded, c.want, now); got != c.due {
			t.Errorf("%s: due %v, want %v", c.name, got, c.due)
		}
	}
	if got := recheckIn(map[netip.Addr]time.Time{a: at(30 * time.Second), b: at(10 * time.Second)}, now); got != 5*time.Second {
		t.Errorf("recheck in %v, want 5s (half the earliest)", got)
	}
	if got := recheckIn(map[netip.Addr]time.Time{a: at(time.Second)}, now); got != time.Second {
		t.Errorf("recheck in %v, want the 1s floor", got)
	}
	s := statusOf(map[netip.Addr]time.Time{b: now.Truncate(time.Second).Add(1500 * time.Millisecond), a: now.Truncate(time.Second)})
	if len(s.ResolvedAddresses) != 2 || s.ResolvedAddresses[0].IP != "192.0.2.1" || !s.ResolvedAddresses[1].Expires.Time.Equal(now.Truncate(time.Second).Add(2*time.Second)) {
		t.Errorf("status %+v: want sorted, rounded up to the second", s)
	}
}
