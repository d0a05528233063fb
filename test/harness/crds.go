package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallAdminPolicyCRDs creates the admin network policy CRDs that
// dist/kubernetes ships (05-crd-*.yaml), waits until the API server serves
// all three kinds, and returns a client of their API.
func (k *KubeAPI) InstallAdminPolicyCRDs(t T) npclient.Interface {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(t), "dist", "kubernetes", "*-crd-*.yaml"))
	if err != nil || len(files) != 3 {
		t.Fatalf("dist/kubernetes has %d CRD manifests (%v), want the 3 admin policy kinds", len(files), err)
	}
	sort.Strings(files)
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		for _, obj := range decodeYAML(t, f) {
			if _, err := dyn.Resource(crdResource).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatalf("creating the CRD of %s: %v", f, err)
			}
		}
	}
	json := rest.CopyConfig(k.Config) // custom resources have no protobuf encoding
	json.ContentType, json.AcceptContentTypes = "application/json", "application/json"
	client, err := npclient.NewForConfig(json)
	if err != nil {
		t.Fatal(err)
	}
	Eventually(t, 30*time.Second, "the admin policy kinds served", func() error {
		if kinds := policy.DiscoverAdminAPI(k.Client.Discovery(), client).Kinds(); len(kinds) != 3 {
			return fmt.Errorf("served: %v", kinds)
		}
		return nil
	})
	return client
}

// decodeYAML reads every object of a YAML file.
func decodeYAML(t T, path string) []*unstructured.Unstructured {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		var m map[string]any
		if err := dec.Decode(&m); errors.Is(err, io.EOF) {
			return out
		} else if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if m != nil {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
}
