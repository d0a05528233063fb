package metrics

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes"
)

// Delegated answers are kept this long, as Kubernetes' delegating
// authenticator and authorizer keep theirs: a scraper costs the API server
// two requests per token and path every 10 s, not per scrape.
const (
	DelegatedCacheTTL  = 10 * time.Second
	DelegatedCacheSize = 1024
)

// Delegated guards a handler as the kubelet and kube-rbac-proxy do: the
// request's bearer token is authenticated by the API server (TokenReview,
// authentication.k8s.io/v1), then the user it names is authorized for the
// request's non-resource URL (SubjectAccessReview, authorization.k8s.io/v1:
// path, and the verb its HTTP method maps to: get for GET).
type Delegated struct {
	kube      kubernetes.Interface
	log       logr.Logger
	users     *cache.LRUExpireCache // sha256 of the token → *authnv1.UserInfo (nil: not authenticated)
	decisions *cache.LRUExpireCache // the review's spec, as JSON → decision
}

type decision struct {
	allowed bool
	reason  string
}

// NewDelegated checks tokens and permissions through kube; clock is nil
// but in tests.
func NewDelegated(kube kubernetes.Interface, log logr.Logger, clock cache.Clock) *Delegated {
	if clock == nil {
		clock = realClock{}
	}
	return &Delegated{kube: kube, log: log,
		users:     cache.NewLRUExpireCacheWithClock(DelegatedCacheSize, clock),
		decisions: cache.NewLRUExpireCacheWithClock(DelegatedCacheSize, clock)}
}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

// Protect serves h to requests the API server authenticates and
// authorizes: 401 without a bearer token or with one it does not
// authenticate, 403 when the user may not, 503 when it cannot be asked.
func (d *Delegated) Protect(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, msg := d.check(r)
		if code != 0 {
			if code == http.StatusUnauthorized {
				w.Header().Set("WWW-Authenticate", `Bearer realm="ovnkube"`)
			}
			http.Error(w, msg, code)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// check returns 0 when the request may proceed, else its status and why.
func (d *Delegated) check(r *http.Request) (int, string) {
	token, ok := bearerToken(r)
	if !ok {
		return http.StatusUnauthorized, "Unauthorized: no bearer token (Authorization: Bearer TOKEN)"
	}
	u, err := d.authenticate(r.Context(), token)
	if err != nil {
		d.log.Error(err, "cannot authenticate a request", "path", r.URL.Path)
		return http.StatusServiceUnavailable, "cannot authenticate the request: the API server's TokenReview failed"
	}
	if u == nil {
		return http.StatusUnauthorized, "Unauthorized: the API server does not authenticate this token"
	}
	verb := verbOf(r.Method)
	dec, err := d.authorize(r.Context(), u, verb, r.URL.Path)
	if err != nil {
		d.log.Error(err, "cannot authorize a request", "user", u.Username, "path", r.URL.Path)
		return http.StatusServiceUnavailable, "cannot authorize the request: the API server's SubjectAccessReview failed"
	}
	if !dec.allowed {
		return http.StatusForbidden, fmt.Sprintf("Forbidden: user %q may not %s the non-resource URL %s%s", u.Username, verb, r.URL.Path, dec.reason)
	}
	return 0, ""
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// verbOf maps an HTTP method to an authorization verb as the API server
// does for non-resource URLs.
func verbOf(method string) string {
	switch method {
	case http.MethodGet, http.MethodHead:
		return "get"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	}
	return strings.ToLower(method)
}

// authenticate returns the token's user, or nil when the API server does
// not authenticate it. Both answers are cached.
func (d *Delegated) authenticate(ctx context.Context, token string) (*authnv1.UserInfo, error) {
	key := sha256.Sum256([]byte(token))
	if u, ok := d.users.Get(key); ok {
		return u.(*authnv1.UserInfo), nil
	}
	tr, err := d.kube.AuthenticationV1().TokenReviews().Create(ctx,
		&authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
	if err != nil {
		return nil, err
	}
	var u *authnv1.UserInfo
	if tr.Status.Authenticated {
		u = &tr.Status.User
	}
	d.users.Add(key, u, DelegatedCacheTTL)
	return u, nil
}

// authorize asks whether u may verb the non-resource URL path. Both
// answers are cached, keyed by the whole question.
func (d *Delegated) authorize(ctx context.Context, u *authnv1.UserInfo, verb, path string) (decision, error) {
	spec := authzv1.SubjectAccessReviewSpec{User: u.Username, UID: u.UID, Groups: u.Groups,
		NonResourceAttributes: &authzv1.NonResourceAttributes{Path: path, Verb: verb}}
	if len(u.Extra) > 0 {
		spec.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range u.Extra {
			spec.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	b, err := json.Marshal(spec)
	if err != nil {
		return decision{}, err
	}
	key := string(b)
	if dec, ok := d.decisions.Get(key); ok {
		return dec.(decision), nil
	}
	sar, err := d.kube.AuthorizationV1().SubjectAccessReviews().Create(ctx,
		&authzv1.SubjectAccessReview{Spec: spec}, metav1.CreateOptions{})
	if err != nil {
		return decision{}, err
	}
	if sar.Status.EvaluationError != "" && !sar.Status.Allowed {
		d.log.V(2).Info("SubjectAccessReview evaluation error", "user", u.Username, "path", path, "err", sar.Status.EvaluationError)
	}
	dec := decision{allowed: sar.Status.Allowed && !sar.Status.Denied}
	if !dec.allowed && sar.Status.Reason != "" {
		dec.reason = ": " + sar.Status.Reason
	}
	d.decisions.Add(key, dec, DelegatedCacheTTL)
	return dec, nil
}

// errNoClient is Listen's refusal of delegated auth without an API client.
var errNoClient = errors.New("delegated authentication needs an API client")
