// Package leader lets any number of replicas of a controller run while only
// one writes: the holder of a coordination.k8s.io Lease (client-go's
// leaderelection). The holder's writes are fenced: Fence fails as soon as the
// lease may have passed to another replica (the last renewal is older than
// the renew deadline), so a leader frozen or cut off past its lease writes
// nothing when it wakes, even before it has noticed.
package leader

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Defaults of the Lease timings: a leader killed without releasing its lease
// is replaced within LeaseDuration plus two retry periods (about 12 s); a leader keeps its lease through 8 s of failed renewals (a slow API server).
const (
	DefaultNamespace     = "ovn-kubernetes"
	DefaultLeaseName     = "ovnkube-master"
	DefaultLeaseDuration = 10 * time.Second
	DefaultRenewDeadline = 8 * time.Second
	DefaultRetryPeriod   = time.Second
)

// ErrNotLeader is what a fenced write fails with.
var ErrNotLeader = errors.New("this replica does not hold the leader lease; write refused")

// ErrLostLease is what Run returns when the lease was lost while leading.
var ErrLostLease = errors.New("lost the leader lease; stopped writing")

// Config names the Lease and its timings.
type Config struct {
	Namespace, Name string
	Identity        string // unique per replica (the pod or host name)
	LeaseDuration   time.Duration
	RenewDeadline   time.Duration
	RetryPeriod     time.Duration
}

// Validate checks the timings as client-go requires them (and names the flag's setting).
func (c Config) Validate() error {
	switch {
	case c.Namespace == "" || c.Name == "":
		return fmt.Errorf("the lease needs a namespace and a name")
	case c.Identity == "":
		return fmt.Errorf("the replica needs an identity")
	case c.RetryPeriod <= 0:
		return fmt.Errorf("retry period must be positive")
	case c.RenewDeadline <= time.Duration(leaderelection.JitterFactor*float64(c.RetryPeriod)):
		return fmt.Errorf("renew deadline %s must exceed %.1f × the retry period %s", c.RenewDeadline, leaderelection.JitterFactor, c.RetryPeriod)
	case c.LeaseDuration <= c.RenewDeadline:
		return fmt.Errorf("lease duration %s must exceed the renew deadline %s", c.LeaseDuration, c.RenewDeadline)
	}
	return nil
}

// NoNamespaceError is CheckNamespace's answer when the Lease's namespace does
// not exist: no replica can create the Lease, so none would ever lead.
type NoNamespaceError struct{ Namespace string }

func (e *NoNamespaceError) Error() string {
	return fmt.Sprintf("the leader Lease's namespace %q does not exist", e.Namespace)
}

// CheckNamespace asks the API once whether the Lease's namespace exists, and
// returns a *NoNamespaceError when it does not. Any other error means the API
// did not answer (unreachable, no permission): the caller may campaign
// anyway, as the elector retries. It lists namespaces by name rather than
// getting one, as a controller that watches namespaces may list them.
func CheckNamespace(ctx context.Context, kube kubernetes.Interface, namespace string) error {
	list, err := kube.CoreV1().Namespaces().List(ctx, metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", namespace).String()})
	if err != nil {
		return fmt.Errorf("checking the leader Lease's namespace %q: %w", namespace, err)
	}
	for _, ns := range list.Items {
		if ns.Name == namespace {
			return nil
		}
	}
	return &NoNamespaceError{Namespace: namespace}
}

// Elector runs a function while this replica holds the lease.
type Elector struct {
	cfg Config
	log logr.Logger
	// renewed is when the last successful write of our own record was sent:
	// no other replica can take the lease before renewed + LeaseDuration.
	renewed atomic.Pointer[time.Time]
	leading atomic.Bool
}

// New returns an elector for cfg (see Validate).
func New(cfg Config, log logr.Logger) (*Elector, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &Elector{cfg: cfg, log: log}, nil
}

// Leading says whether this replica holds the lease now (for metrics and
// readiness); writes use Fence.
func (e *Elector) Leading() bool { return e.Fence() == nil }

// Fence allows a write only while the lease is certainly ours: renewed less
// than the renew deadline ago (before any other replica could acquire it).
func (e *Elector) Fence() error {
	t := e.renewed.Load()
	if !e.leading.Load() || t == nil || time.Since(*t) >= e.cfg.RenewDeadline {
		return ErrNotLeader
	}
	return nil
}

// Run campaigns for the lease until ctx ends and runs lead while holding it.
// It returns nil when ctx ended (the lease is released), ErrLostLease when
// the lease was lost, or lead's error (the lease is released then too).
// kube should not be fenced (the lease itself is written through it).
func (e *Elector) Run(ctx context.Context, kube kubernetes.Interface, lead func(context.Context) error) error {
	inner, err := resourcelock.New(resourcelock.LeasesResourceLock, e.cfg.Namespace, e.cfg.Name,
		kube.CoreV1(), kube.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: e.cfg.Identity})
	if err != nil {
		return err
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var leadErr atomic.Pointer[error]
	led := make(chan struct{})
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            &fencedLock{Interface: inner, e: e},
		LeaseDuration:   e.cfg.LeaseDuration,
		RenewDeadline:   e.cfg.RenewDeadline,
		RetryPeriod:     e.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            e.cfg.Namespace + "/" + e.cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				e.log.Info("acquired the leader lease; starting", "lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity)
				close(led)
				if err := lead(lctx); err != nil && lctx.Err() == nil {
					leadErr.Store(&err)
					cancel()
				}
			},
			OnStoppedLeading: func() { e.leading.Store(false) },
			OnNewLeader: func(id string) {
				if id != e.cfg.Identity {
					e.log.Info("another replica leads; standing by", "leader", id)
				}
			},
		},
	})
	if err != nil {
		return err
	}
	e.log.Info("campaigning for the leader lease", "lease", e.cfg.Namespace+"/"+e.cfg.Name, "identity", e.cfg.Identity,
		"leaseDuration", e.cfg.LeaseDuration, "renewDeadline", e.cfg.RenewDeadline, "retryPeriod", e.cfg.RetryPeriod)
	le.Run(runCtx)
	e.leading.Store(false)
	if p := leadErr.Load(); p != nil {
		return *p
	}
	select {
	case <-led:
		if ctx.Err() == nil {
			return ErrLostLease
		}
	default:
	}
	return nil
}

// fencedLock records when each successful write of our own record was sent.
type fencedLock struct {
	resourcelock.Interface
	e *Elector
}

func (l *fencedLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.record(r, func() error { return l.Interface.Create(ctx, r) })
}

func (l *fencedLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	return l.record(r, func() error { return l.Interface.Update(ctx, r) })
}

func (l *fencedLock) record(r resourcelock.LeaderElectionRecord, write func() error) error {
	sent := time.Now()
	err := write()
	if err != nil || r.HolderIdentity != l.e.cfg.Identity {
		if r.HolderIdentity != l.e.cfg.Identity {
			l.e.leading.Store(false) // released
		}
		return err
	}
	l.e.renewed.Store(&sent)
	l.e.leading.Store(true)
	return nil
}

// FenceTransport wraps a Kubernetes client transport so that every request
// that changes something fails with ErrNotLeader unless fence allows it;
// reads pass. Use it for every client of the controller except the one the
// lease is written through.
func FenceTransport(fence func() error) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(req *http.Request) (*http.Response, error) {
			switch req.Method {
			case http.MethodGet, http.MethodHead, http.MethodOptions:
			default:
				if err := fence(); err != nil {
					return nil, fmt.Errorf("%s %s: %w", req.Method, req.URL.Path, err)
				}
			}
			return rt.RoundTrip(req)
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
