package master

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/go-logr/logr/testr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
)

// The annotation PATCH goes through the REST client without decoding the
// returned object; the API's verdicts still arrive as typed errors: a pod
// replaced (UID precondition, 409) or gone (404) is not an error of the
// sync, anything else is, and the request is the UID-guarded merge patch.
func TestAnnotationPatchThroughTheRESTClient(t *testing.T) {
	var mu sync.Mutex
	var status int
	var got struct{ method, path, ctype, body string }
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		got.method, got.path, got.ctype, got.body = r.Method, r.URL.Path, r.Header.Get("Content-Type"), string(body)
		code := status
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		if code == http.StatusOK {
			_, _ = w.Write([]byte(`{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p1"}}`))
			return
		}
		reason := map[int]metav1.StatusReason{409: metav1.StatusReasonConflict, 404: metav1.StatusReasonNotFound, 500: metav1.StatusReasonInternalError}[code]
		_ = json.NewEncoder(w).Encode(metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
			Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "from the test server"})
	}))
	defer srv.Close()
	kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	m := &Master{kube: kube, log: testr.New(t)}
	pod := &slim.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p1", UID: "uid-1"}}
	pn := annotations.PodNetwork{PodUID: "uid-1"}
	for _, c := range []struct {
		status  int
		wantErr bool
	}{{http.StatusOK, false}, {http.StatusConflict, false}, {http.StatusNotFound, false}, {http.StatusInternalServerError, true}} {
		mu.Lock()
		status = c.status
		mu.Unlock()
		err := m.annotatePod(context.Background(), pod, pn)
		if (err != nil) != c.wantErr {
			t.Errorf("API answered %d: annotatePod returned %v, want an error: %v", c.status, err, c.wantErr)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if got.method != http.MethodPatch || got.path != "/api/v1/namespaces/ns/pods/p1" || got.ctype != "application/merge-patch+json" ||
		!strings.Contains(got.body, `"uid":"uid-1"`) || !strings.Contains(got.body, annotations.PodNetworks) {
		t.Errorf("request %+v, want a merge PATCH of pods/p1 with the UID precondition and the annotation", got)
	}
}
