package app

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/leader"
)

// fakeAPIServer answers namespace lists with only "default" and everything
// else with 404, counting the Lease requests.
func fakeAPIServer(t *testing.T, leaseRequests *atomic.Int32) *httptest.Server {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if strings.Contains(r.URL.Path, "/leases") {
			leaseRequests.Add(1)
		}
		if r.Method == http.MethodGet && r.URL.Path == "/api/v1/namespaces" {
			fmt.Fprint(w, `{"kind":"NamespaceList","apiVersion":"v1","metadata":{},"items":[{"metadata":{"name":"default"}}]}`)
			return
		}
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"NotFound","code":404,"message":"%s not found"}`, r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The README's Quick start on a cluster without the Lease's namespace: the
// master says once what is missing and the ways out, and exits 2, instead of
// campaigning (and logging the API's refusal) several times a second forever.
func TestMasterWithoutLeaseNamespaceExitsSayingWhy(t *testing.T) {
	var leaseRequests atomic.Int32
	srv := fakeAPIServer(t, &leaseRequests)
	args := []string{"master", "--kubeconfig", writeKubeconfig(t, srv.URL, "t"), "--nb-address", "unix:/nonexistent", "--leader-elect-identity", "a"}
	status, out := runMain(t, 10*time.Second, args...)
	if status != exitUsage {
		t.Errorf("exit %d, want 2", status)
	}
	for _, want := range []string{`"ovn-kubernetes"`, "kubectl create namespace ovn-kubernetes", "--leader-elect-resource-namespace", "--leader-elect=false"} {
		if strings.Count(out, want) < 1 {
			t.Errorf("the message does not say %s", want)
		}
	}
	if n := strings.Count(out, "kubectl create namespace"); n != 1 {
		t.Errorf("the way out is said %d times, want once", n)
	}
	if n := leaseRequests.Load(); n != 0 {
		t.Errorf("%d Lease requests, want none (no campaign)", n)
	}
	if t.Failed() {
		t.Logf("output:\n%s", out)
	}
}

func TestCheckLeaseNamespace(t *testing.T) {
	ctx := context.Background()
	cfg := leader.Config{Namespace: "ovn-kubernetes", LeaseDuration: leader.DefaultLeaseDuration}
	present := fake.NewSimpleClientset(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ovn-kubernetes"}})
	if err := checkLeaseNamespace(ctx, present, cfg, logr.Discard()); err != nil {
		t.Fatalf("namespace present: %v", err)
	}
	err := checkLeaseNamespace(ctx, fake.NewSimpleClientset(), cfg, logr.Discard())
	var ue usageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "invalid --leader-elect-resource-namespace") {
		t.Fatalf("namespace missing: %v, want a usage error naming --leader-elect-resource-namespace", err)
	}
	// No answer from the API is not a "no": log once, campaign (the elector retries).
	forbidden := fake.NewSimpleClientset()
	forbidden.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	var logged []string
	log := funcr.New(func(prefix, args string) { logged = append(logged, args) }, funcr.Options{})
	if err := checkLeaseNamespace(ctx, forbidden, cfg, log); err != nil || len(logged) != 1 || !strings.Contains(logged[0], "forbidden") {
		t.Fatalf("API error: %v, logged %q; want nil and the error logged once", err, logged)
	}
}
