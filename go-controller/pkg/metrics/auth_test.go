package metrics

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// fakeAPI is an API server that knows two tokens ("reader" for user
// prometheus, "profiler" for user alice) and lets prometheus get /metrics
// and alice get /debug/pprof/*, recording every review it is asked.
type fakeAPI struct {
	mu      sync.Mutex
	reviews []string // "token:TOKEN" or "sar:USER VERB PATH"
	down    bool
}

func (f *fakeAPI) client() *fake.Clientset {
	kube := fake.NewSimpleClientset()
	kube.PrependReactor("create", "tokenreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		tr := a.(k8stesting.CreateAction).GetObject().(*authnv1.TokenReview)
		if err := f.record("token:" + tr.Spec.Token); err != nil {
			return true, nil, err
		}
		users := map[string]string{"reader": "prometheus", "profiler": "alice"}
		if name, ok := users[tr.Spec.Token]; ok {
			tr.Status = authnv1.TokenReviewStatus{Authenticated: true,
				User: authnv1.UserInfo{Username: name, Groups: []string{"system:authenticated"}, Extra: map[string]authnv1.ExtraValue{"k": {"v"}}}}
		}
		return true, tr, nil
	})
	kube.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		sar := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		s, nr := sar.Spec, sar.Spec.NonResourceAttributes
		if nr == nil || sar.Spec.ResourceAttributes != nil || len(s.Groups) != 1 || s.Extra["k"][0] != "v" {
			return true, nil, fmt.Errorf("a SubjectAccessReview without the user's groups and extra, or not for a non-resource URL: %+v", s)
		}
		if err := f.record(fmt.Sprintf("sar:%s %s %s", s.User, nr.Verb, nr.Path)); err != nil {
			return true, nil, err
		}
		allowed := nr.Verb == "get" && (s.User == "prometheus" && nr.Path == "/metrics" ||
			s.User == "alice" && strings.HasPrefix(nr.Path, "/debug/pprof/"))
		sar.Status = authzv1.SubjectAccessReviewStatus{Allowed: allowed}
		if !allowed {
			sar.Status.Reason = "no RBAC rule allows it"
		}
		return true, sar, nil
	})
	return kube
}

func (f *fakeAPI) record(review string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.down {
		return errors.New("connection refused")
	}
	f.reviews = append(f.reviews, review)
	return nil
}

// take returns the reviews asked since the last call.
func (f *fakeAPI) take() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.reviews
	f.reviews = nil
	return r
}

type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

// delegatedServer is a handler with delegated auth over a fake API server.
func delegatedServer(t *testing.T) (http.Handler, *fakeAPI, *fakeClock) {
	t.Helper()
	api, clock := &fakeAPI{}, &fakeClock{now: time.Unix(1e9, 0)}
	reg := prometheus.NewRegistry()
	RegisterNode(reg)
	s := Server{Registry: reg, Pprof: true, Delegated: true, Kube: api.client()}
	// As s.Handler(), with the fake clock.
	d := NewDelegated(s.Kube, logr.Discard(), clock)
	return s.routes(d.Protect), api, clock
}

func request(h http.Handler, method, path, token string) (int, string, http.Header) {
	req := httptest.NewRequest(method, path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	b, _ := io.ReadAll(rec.Body)
	return rec.Code, string(b), rec.Header()
}

func expectReviews(t *testing.T, api *fakeAPI, what string, want ...string) {
	t.Helper()
	if got := api.take(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("%s: the API server was asked %q, want %q", what, got, want)
	}
}

func TestDelegatedRefusesWithoutABearerToken(t *testing.T) {
	h, api, _ := delegatedServer(t)
	for _, path := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap"} {
		code, body, hdr := request(h, "GET", path, "")
		if code != 401 || !strings.Contains(body, "no bearer token") || !strings.HasPrefix(hdr.Get("WWW-Authenticate"), "Bearer") {
			t.Errorf("GET %s without a token: %d %q (WWW-Authenticate %q), want 401 saying a bearer token is needed", path, code, body, hdr.Get("WWW-Authenticate"))
		}
	}
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Authorization", "Basic cHJvbWV0aGV1czpwYXNz")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != 401 {
		t.Errorf("GET /metrics with basic auth: %d, want 401", rec.Code)
	}
	expectReviews(t, api, "requests without a token")
}

func TestDelegatedRefusesATokenTheAPIServerDoesNotAuthenticate(t *testing.T) {
	h, api, _ := delegatedServer(t)
	code, body, _ := request(h, "GET", "/metrics", "forged")
	if code != 401 || !strings.Contains(body, "does not authenticate") {
		t.Errorf("a bad token: %d %q, want 401", code, body)
	}
	expectReviews(t, api, "a bad token", "token:forged")
	if code, _, _ := request(h, "GET", "/metrics", "forged"); code != 401 {
		t.Errorf("the bad token again: %d, want 401", code)
	}
	expectReviews(t, api, "the bad token again (cached)")
}

func TestDelegatedRefusesAUserWithoutThePermission(t *testing.T) {
	h, api, _ := delegatedServer(t)
	code, body, _ := request(h, "GET", "/metrics", "profiler")
	if code != 403 || !strings.Contains(body, `"alice" may not get the non-resource URL /metrics`) || !strings.Contains(body, "no RBAC rule") {
		t.Errorf("alice on /metrics: %d %q, want 403 naming the user, verb and path", code, body)
	}
	expectReviews(t, api, "alice on /metrics", "token:profiler", "sar:alice get /metrics")
}

func TestDelegatedServesAnAuthorizedUserAndCachesTheAnswers(t *testing.T) {
	h, api, clock := delegatedServer(t)
	code, body, _ := request(h, "GET", "/metrics", "reader")
	if code != 200 || !strings.Contains(body, "ovnkube_node_repairs_total") {
		t.Fatalf("prometheus on /metrics: %d %q, want 200 and the metrics", code, body)
	}
	expectReviews(t, api, "the first scrape", "token:reader", "sar:prometheus get /metrics")
	clock.now = clock.now.Add(DelegatedCacheTTL - time.Second)
	if code, _, _ := request(h, "GET", "/metrics", "reader"); code != 200 {
		t.Fatalf("the second scrape: %d", code)
	}
	expectReviews(t, api, "a scrape within the cache's lifetime")
	clock.now = clock.now.Add(2 * time.Second)
	if code, _, _ := request(h, "GET", "/metrics", "reader"); code != 200 {
		t.Fatalf("a scrape after the cache's lifetime: %d", code)
	}
	expectReviews(t, api, "a scrape after the cache's lifetime", "token:reader", "sar:prometheus get /metrics")
	// A denial is cached as well.
	for i := 0; i < 3; i++ {
		if code, _, _ := request(h, "GET", "/debug/pprof/heap", "reader"); code != 403 {
			t.Fatalf("prometheus on pprof: %d, want 403", code)
		}
	}
	expectReviews(t, api, "prometheus on pprof three times", "sar:prometheus get /debug/pprof/heap")
}

func TestDelegatedPprofIsAuthorizedByItsOwnPath(t *testing.T) {
	h, api, _ := delegatedServer(t)
	for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, body, _ := request(h, "GET", path, "profiler"); code != 200 {
			t.Errorf("alice on %s: %d %q, want 200", path, code, body)
		}
	}
	expectReviews(t, api, "alice on pprof", "token:profiler", "sar:alice get /debug/pprof/",
		"sar:alice get /debug/pprof/heap", "sar:alice get /debug/pprof/cmdline")
	// pprof's symbol lookup by POST is a create, which nobody was granted.
	if code, _, _ := request(h, "POST", "/debug/pprof/symbol", "profiler"); code != 403 {
		t.Errorf("POST /debug/pprof/symbol: %d, want 403", code)
	}
	expectReviews(t, api, "a POST", "sar:alice create /debug/pprof/symbol")
}

func TestDelegatedLeavesTheProbesOpen(t *testing.T) {
	h, api, _ := delegatedServer(t)
	for _, path := range []string{"/healthz", "/readyz"} {
		if code, _, _ := request(h, "GET", path, ""); code != 200 {
			t.Errorf("GET %s without a token: %d, want 200 (probes carry no token)", path, code)
		}
	}
	expectReviews(t, api, "the probes")
}

func TestDelegatedAnswers503AndCachesNothingWhenTheAPIServerFails(t *testing.T) {
	h, api, _ := delegatedServer(t)
	api.down = true
	code, body, _ := request(h, "GET", "/metrics", "reader")
	if code != 503 || !strings.Contains(body, "TokenReview failed") {
		t.Errorf("API server down: %d %q, want 503 naming the TokenReview", code, body)
	}
	api.down = false
	if code, _, _ := request(h, "GET", "/metrics", "reader"); code != 200 {
		t.Errorf("API server back: %d, want 200 (a failure is not cached)", code)
	}
}

func TestListenRefusesDelegatedAuthWithoutHTTPSOrClient(t *testing.T) {
	api := &fakeAPI{}
	for _, s := range []Server{
		{Address: "127.0.0.1:0", Registry: prometheus.NewRegistry(), Delegated: true, Kube: api.client()},
		{Address: "127.0.0.1:0", Registry: prometheus.NewRegistry(), Delegated: true},
	} {
		if err := s.Listen(t.Context(), logr.Discard()); err == nil {
			t.Errorf("Listen served delegated auth with TLS %v and client %v", s.TLS != nil, s.Kube != nil)
		}
	}
}
