package node

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	discoveryfake "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	clienttesting "k8s.io/client-go/testing"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
)

// eipOn is an EgressIP whose status assigns each "node=ip" of items.
func eipOn(name string, items ...string) *k8sovnv1.EgressIP {
	e := &k8sovnv1.EgressIP{ObjectMeta: metav1.ObjectMeta{Name: name}}
	for _, it := range items {
		node, ip, _ := strings.Cut(it, "=")
		e.Status.Items = append(e.Status.Items, k8sovnv1.EgressIPStatusItem{Node: node, EgressIP: ip})
	}
	return e
}

// The addresses to announce: only IPv6 ones newly assigned to this node,
// whatever EgressIP holds them; one it stops holding is forgotten, and
// announced again when it comes back.
func TestHeldEgressIPs(t *testing.T) {
	h := newHeldEgressIPs("n1")
	for _, step := range []struct {
		what string
		name string
		eip  *k8sovnv1.EgressIP // nil: deleted
		want string
	}{
		{"a: an IPv6 and an IPv4 address on n1, one on n2", "a", eipOn("a", "n1=2001:db8::1", "n1=192.0.2.1", "n2=2001:db8::2"), "[2001:db8::1]"},
		{"a again, unchanged", "a", eipOn("a", "n1=2001:db8::1", "n1=192.0.2.1", "n2=2001:db8::2"), "[]"},
		{"a takes two more", "a", eipOn("a", "n1=2001:db8::1", "n1=2001:db8::9", "n1=2001:db8::3"), "[2001:db8::3 2001:db8::9]"},
		{"b holds one a holds", "b", eipOn("b", "n1=2001:db8::1"), "[]"},
		{"a gives it up, b still holds it", "a", eipOn("a", "n1=2001:db8::9", "n1=2001:db8::3"), "[]"},
		{"b deleted: forgotten", "b", nil, "[]"},
		{"a takes it back: announced again", "a", eipOn("a", "n1=2001:db8::1", "n1=2001:db8::9", "n1=2001:db8::3"), "[2001:db8::1]"},
		{"moved to n2", "a", eipOn("a", "n2=2001:db8::1", "n1=2001:db8::9", "n1=2001:db8::3"), "[]"},
		{"back to n1", "a", eipOn("a", "n1=2001:db8::1", "n1=2001:db8::9", "n1=2001:db8::3"), "[2001:db8::1]"},
		{"malformed, mapped, zoned, empty: ignored", "c", eipOn("c", "n1=bogus", "n1=::ffff:192.0.2.7", "n1=fe80::1%eth0", "n1=", "=2001:db8::5"), "[]"},
		{"an EgressIP with no status", "d", &k8sovnv1.EgressIP{}, "[]"},
		{"deleting one never seen", "e", nil, "[]"},
	} {
		if got := fmt.Sprint(h.set(step.name, step.eip)); got != step.want {
			t.Errorf("%s: announced %s, want %s", step.what, got, step.want)
		}
	}
	if got := len(h.held); got != 3 {
		t.Errorf("held at the end: %v, want ::1, ::3, ::9", h.held)
	}
}

// logLines is a logger that keeps what it logs.
type logLines struct {
	mu    sync.Mutex
	lines []string
}

func (l *logLines) logger() logr.Logger {
	return funcr.New(func(prefix, args string) {
		l.mu.Lock()
		defer l.mu.Unlock()
		l.lines = append(l.lines, args)
	}, funcr.Options{})
}

// count is how many lines contain every one of parts.
func (l *logLines) count(parts ...string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, line := range l.lines {
		if !slices.ContainsFunc(parts, func(p string) bool { return !strings.Contains(line, p) }) {
			n++
		}
	}
	return n
}

func (l *logLines) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n")
}

// A burst: every round sends every address, the burst is logged once and
// each address that fails once, however often it fails.
func TestAnnounceBurst(t *testing.T) {
	var logs logLines
	ips := []netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
	var rounds [][]netip.Addr
	round := func(ips []netip.Addr) map[netip.Addr]error {
		rounds = append(rounds, ips)
		return map[netip.Addr]error{ips[1]: errors.New("announcing on breth0: no such interface")}
	}
	announceBurst(context.Background(), ips, round, 3, time.Millisecond, logs.logger())
	if len(rounds) != 3 || !slices.Equal(rounds[0], ips) || !slices.Equal(rounds[2], ips) {
		t.Errorf("rounds %v, want 3 of %v", rounds, ips)
	}
	if logs.count("announcing IPv6 egress IPs", "2001:db8::1", "2001:db8::2") != 1 ||
		logs.count("cannot announce", "2001:db8::2", "breth0") != 1 || logs.count("cannot announce") != 1 {
		t.Errorf("logs:\n%s\nwant the burst once and 2001:db8::2's failure once", &logs)
	}

	// A burst stops with its context, between rounds.
	ctx, cancel := context.WithCancel(context.Background())
	rounds = nil
	done := make(chan struct{})
	go func() {
		defer close(done)
		announceBurst(ctx, ips, func(ips []netip.Addr) map[netip.Addr]error {
			rounds = append(rounds, ips)
			cancel()
			return nil
		}, 3, time.Hour, logr.Discard())
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the burst did not stop with its context")
	}
	if len(rounds) != 1 {
		t.Errorf("%d rounds after the context ended in the first, want 1", len(rounds))
	}
}

// egressIPFixture is an API of EgressIPs (the dynamic fake), served or not.
type egressIPFixture struct {
	dyn      *dynamicfake.FakeDynamicClient
	disc     *discoveryfake.FakeDiscovery
	watching chan struct{}
}

func newEgressIPFixture(served bool) *egressIPFixture {
	f := &egressIPFixture{
		dyn: dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
			map[schema.GroupVersionResource]string{k8sovnv1.EgressIPResource: "EgressIPList"}),
		disc:     &discoveryfake.FakeDiscovery{Fake: &clienttesting.Fake{}},
		watching: make(chan struct{}),
	}
	if served {
		f.disc.Resources = []*metav1.APIResourceList{{GroupVersion: "k8s.ovn.org/v1", APIResources: []metav1.APIResource{{Name: "egressips", Kind: "EgressIP"}}}}
	}
	// The fake does not replay what happened between list and watch: the
	// test changes objects only once the informer watches.
	var once sync.Once
	f.dyn.PrependWatchReactor("*", func(action clienttesting.Action) (bool, watch.Interface, error) {
		w, err := f.dyn.Tracker().Watch(action.GetResource(), action.GetNamespace())
		once.Do(func() { close(f.watching) })
		return true, w, err
	})
	return f
}

// put creates or updates eip (its status with it: the fake has no
// subresources).
func (f *egressIPFixture) put(t *testing.T, eip *k8sovnv1.EgressIP) {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(eip)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("k8s.ovn.org/v1")
	u.SetKind("EgressIP")
	ri := f.dyn.Resource(k8sovnv1.EgressIPResource)
	if _, err = ri.Update(context.Background(), u, metav1.UpdateOptions{}); apierrors.IsNotFound(err) {
		_, err = ri.Create(context.Background(), u, metav1.CreateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// The daemon follows EgressIPs and announces each IPv6 address as it
// comes to this node: at its first list, when assigned, when moved back.
func TestFollowEgressIPs(t *testing.T) {
	f := newEgressIPFixture(true)
	f.put(t, eipOn("a", "n1=2001:db8::1", "n1=192.0.2.1"))
	var mu sync.Mutex
	var sent []string
	round := func(ips []netip.Addr) map[netip.Addr]error {
		mu.Lock()
		defer mu.Unlock()
		sent = append(sent, fmt.Sprint(ips))
		return nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var logs logLines
	go followEgressIPs(ctx, f.dyn, f.disc, "n1", round, logs.logger())
	// bursts waits until ip has been announced in n bursts, one of whose
	// rounds was sent.
	bursts := func(what, ip string, n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			mu.Lock()
			rounds := slices.Contains(sent, "["+ip+"]")
			mu.Unlock()
			got := logs.count("announcing IPv6 egress IPs", `"`+ip+`"`)
			if got == n && rounds {
				return
			}
			if got > n || time.Now().After(deadline) {
				t.Fatalf("%s: %d bursts of %s (rounds sent %v), want %d; logs:\n%s", what, got, ip, rounds, n, &logs)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	bursts("held at start", "2001:db8::1", 1)
	select {
	case <-f.watching:
	case <-time.After(10 * time.Second):
		t.Fatal("the informer does not watch")
	}
	f.put(t, eipOn("b", "n2=2001:db8::2"))
	f.put(t, eipOn("b", "n1=2001:db8::2"))
	bursts("assigned to n1", "2001:db8::2", 1)
	f.put(t, eipOn("a", "n2=2001:db8::1"))
	f.put(t, eipOn("a", "n1=2001:db8::1"))
	bursts("moved away and back", "2001:db8::1", 2)
	f.put(t, eipOn("a", "n1=2001:db8::1", "n1=192.0.2.1"))
	f.put(t, eipOn("c", "n1=2001:db8::2"))
	f.put(t, eipOn("d", "n2=2001:db8::4"))
	// Nothing new in those: handled in order, they are done when the next
	// address is announced.
	f.put(t, eipOn("e", "n1=2001:db8::5"))
	bursts("after nothing new", "2001:db8::5", 1)
	if logs.count("announcing IPv6 egress IPs") != 4 {
		t.Errorf("logs:\n%s\nwant 4 bursts: ::1, ::2, ::1 again, ::5", &logs)
	}
	if n := logs.count("following EgressIPs"); n != 1 {
		t.Errorf("logs:\n%s\nwant one line saying EgressIPs are followed", &logs)
	}
}

// Without EgressIPs served, or without the right to list them, the daemon
// says so once and announces nothing (the rest of it goes on).
func TestFollowEgressIPsUnavailable(t *testing.T) {
	forbidden := newEgressIPFixture(true)
	forbidden.dyn.PrependReactor("list", "egressips", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(k8sovnv1.EgressIPResource.GroupResource(), "", errors.New("RBAC: no list"))
	})
	for _, c := range []struct {
		what string
		f    *egressIPFixture
		want string
	}{
		{"not served", newEgressIPFixture(false), "does not serve EgressIPs"},
		{"forbidden", forbidden, "11-rbac-node.yaml"},
	} {
		var logs logLines
		done := make(chan struct{})
		go func() {
			defer close(done)
			followEgressIPs(context.Background(), c.f.dyn, c.f.disc, "n1", func([]netip.Addr) map[netip.Addr]error {
				t.Errorf("%s: announced", c.what)
				return nil
			}, logs.logger())
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Fatalf("%s: still following EgressIPs", c.what)
		}
		if len(logs.lines) != 1 || logs.count(c.want) != 1 {
			t.Errorf("%s: logs:\n%s\nwant one line saying %q", c.what, &logs, c.want)
		}
	}
}
