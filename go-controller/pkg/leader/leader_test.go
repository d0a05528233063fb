package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func testConfig(id string) Config {
	return Config{Namespace: "ovn-kubernetes", Name: "ovnkube-master", Identity: id,
		LeaseDuration: 2 * time.Second, RenewDeadline: 1500 * time.Millisecond, RetryPeriod: 100 * time.Millisecond}
}

// replica is one elector running lead until stopped.
type replica struct {
	e       *Elector
	cancel  context.CancelFunc
	done    chan error
	started chan time.Time
}

func startReplica(t *testing.T, kube *fake.Clientset, id string) *replica {
	e, err := New(testConfig(id), testr.New(t).WithName(id))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{e: e, cancel: cancel, done: make(chan error, 1), started: make(chan time.Time, 1)}
	go func() {
		r.done <- e.Run(ctx, kube, func(ctx context.Context) error {
			r.started <- time.Now()
			<-ctx.Done()
			return nil
		})
	}()
	t.Cleanup(func() { cancel(); <-r.done })
	return r
}

func waitStarted(t *testing.T, r *replica, within time.Duration) time.Time {
	t.Helper()
	select {
	case at := <-r.started:
		return at
	case <-time.After(within):
		t.Fatalf("%s did not start leading within %s (leading=%v)", r.e.cfg.Identity, within, r.e.Leading())
		return time.Time{}
	}
}

func TestOneReplicaLeadsAndAStandbyTakesOverOnRelease(t *testing.T) {
	kube := fake.NewSimpleClientset()
	a := startReplica(t, kube, "a")
	waitStarted(t, a, 5*time.Second)
	b := startReplica(t, kube, "b")
	select {
	case <-b.started:
		t.Fatal("b leads while a holds the lease")
	case <-time.After(2 * testConfig("").LeaseDuration):
	}
	if b.e.Leading() || b.e.Fence() == nil {
		t.Fatal("the standby's fence is open")
	}
	if err := a.e.Fence(); err != nil {
		t.Fatalf("the leader's fence is closed: %v", err)
	}
	a.cancel() // graceful stop releases the lease
	if err := <-a.done; err != nil {
		t.Fatalf("a stopped with %v, want nil", err)
	}
	a.done <- nil // for the cleanup
	if a.e.Fence() == nil {
		t.Fatal("a's fence is open after it stopped")
	}
	// Released: b need not wait for the lease to expire.
	waitStarted(t, b, testConfig("").LeaseDuration)
}

// A leader that cannot renew closes its fence before any other replica can
// acquire the lease, and Run reports the loss.
func TestLeaderThatCannotRenewStopsWritingBeforeAnotherLeads(t *testing.T) {
	kube := fake.NewSimpleClientset()
	var mu sync.Mutex
	cut := false
	kube.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		lease := action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease)
		mu.Lock()
		defer mu.Unlock()
		if cut && lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity == "a" {
			return true, nil, fmt.Errorf("connection refused (test)")
		}
		return false, nil, nil
	})
	a := startReplica(t, kube, "a")
	waitStarted(t, a, 5*time.Second)
	b := startReplica(t, kube, "b")
	mu.Lock()
	cut = true
	cutAt := time.Now()
	mu.Unlock()

	var fenceClosed time.Time
	deadline := time.Now().Add(5 * time.Second)
	for a.e.Fence() == nil {
		if time.Now().After(deadline) {
			t.Fatal("a's fence stayed open though it cannot renew")
		}
		time.Sleep(5 * time.Millisecond)
	}
	fenceClosed = time.Now()
	if d := fenceClosed.Sub(cutAt); d > testConfig("").RenewDeadline+500*time.Millisecond {
		t.Errorf("fence closed %s after renewals stopped; want within the renew deadline %s", d, testConfig("").RenewDeadline)
	}
	bLeads := waitStarted(t, b, 5*time.Second)
	if !bLeads.After(fenceClosed) {
		t.Fatalf("b started leading at %s, before a's fence closed at %s", bLeads.Format(time.StampMilli), fenceClosed.Format(time.StampMilli))
	}
	select {
	case err := <-a.done:
		if !errors.Is(err, ErrLostLease) {
			t.Fatalf("a's Run returned %v, want ErrLostLease", err)
		}
		a.done <- nil
	case <-time.After(5 * time.Second):
		t.Fatal("a's Run did not return after losing the lease")
	}
}

func TestLeadErrorReleasesTheLease(t *testing.T) {
	kube := fake.NewSimpleClientset()
	e, err := New(testConfig("a"), testr.New(t))
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("informers did not sync")
	if err := e.Run(context.Background(), kube, func(context.Context) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("Run returned %v, want %v", err, boom)
	}
	lease, err := kube.CoordinationV1().Leases("ovn-kubernetes").Get(context.Background(), "ovnkube-master", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := lease.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("lease still held by %q after lead failed", *h)
	}
}

func TestConfigValidate(t *testing.T) {
	good := testConfig("a")
	for name, mutate := range map[string]func(*Config){
		"lease not above renew": func(c *Config) { c.LeaseDuration = c.RenewDeadline },
		"renew below jitter":    func(c *Config) { c.RenewDeadline = c.RetryPeriod },
		"no identity":           func(c *Config) { c.Identity = "" },
		"no namespace":          func(c *Config) { c.Namespace = "" },
		"zero retry":            func(c *Config) { c.RetryPeriod = 0 },
	} {
		c := good
		mutate(&c)
		if err := c.Validate(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if err := good.Validate(); err != nil {
		t.Fatal(err)
	}
	d := Config{Namespace: DefaultNamespace, Name: DefaultLeaseName, Identity: "x", LeaseDuration: DefaultLeaseDuration, RenewDeadline: DefaultRenewDeadline, RetryPeriod: DefaultRetryPeriod}
	if err := d.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func TestFenceTransportRefusesWritesOnly(t *testing.T) {
	var hits []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits = append(hits, r.Method) }))
	defer srv.Close()
	open := true
	rt := FenceTransport(func() error {
		if open {
			return nil
		}
		return ErrNotLeader
	})(http.DefaultTransport)
	do := func(method string) error {
		req, _ := http.NewRequest(method, srv.URL+"/api/v1/pods", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, m := range []string{"GET", "PATCH", "POST"} {
		if err := do(m); err != nil {
			t.Fatalf("%s with the fence open: %v", m, err)
		}
	}
	open = false
	if err := do("GET"); err != nil {
		t.Fatalf("GET with the fence closed: %v", err)
	}
	for _, m := range []string{"PATCH", "POST", "PUT", "DELETE"} {
		if err := do(m); !errors.Is(err, ErrNotLeader) {
			t.Fatalf("%s with the fence closed: %v, want ErrNotLeader", m, err)
		}
	}
	if want := "GET PATCH POST GET"; fmt.Sprint(hits) != "["+want+"]" {
		t.Fatalf("server saw %v, want [%s]", hits, want)
	}
}
