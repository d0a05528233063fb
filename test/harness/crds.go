package harness

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	npclient "sigs.k8s.io/network-policy-api/pkg/client/clientset/versioned"

	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
)

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// InstallCRDs creates every CustomResourceDefinition dist/kubernetes ships
// (*-crd-*.yaml: the network-policy-api's admin policy kinds, EgressFirewall
// and EgressIP), waits until the API server serves each one's served
// versions (the admin policy kinds, egressfirewalls and egressips among
// them), and returns a client of the admin policy API.
func (k *KubeAPI) InstallCRDs(t T) npclient.Interface {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(RepoRoot(t), "dist", "kubernetes", "*-crd-*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("dist/kubernetes has no CRD manifest (%v)", err)
	}
	sort.Strings(files)
	dyn, err := dynamic.NewForConfig(k.Config)
	if err != nil {
		t.Fatal(err)
	}
	var served []schema.GroupVersionResource
	for _, f := range files {
		for _, obj := range decodeYAML(t, f) {
			if obj.GetKind() != "CustomResourceDefinition" {
				t.Fatalf("%s holds a %s", f, obj.GetKind())
			}
			served = append(served, servedVersions(t, obj)...)
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
	d := k.Client.Discovery()
	want := []string{"policy.networking.k8s.io/v1alpha2/clusternetworkpolicies", "policy.networking.k8s.io/v1alpha1/adminnetworkpolicies",
		"policy.networking.k8s.io/v1alpha1/baselineadminnetworkpolicies", k8sovnv1.EgressFirewallResource.GroupVersion().String() + "/egressfirewalls",
		k8sovnv1.EgressIPResource.GroupVersion().String() + "/egressips", k8sovnv1.DNSNameResolverResource.GroupVersion().String() + "/dnsnameresolvers"}
	for _, w := range want {
		if !slices.ContainsFunc(served, func(gvr schema.GroupVersionResource) bool { return gvr.GroupVersion().String()+"/"+gvr.Resource == w }) {
			t.Fatalf("dist/kubernetes has no CRD serving %s", w)
		}
	}
	Eventually(t, 30*time.Second, "every CRD's kinds served", func() error {
		var missing []string
		for _, gvr := range served {
			if !serves(d, gvr) {
				missing = append(missing, gvr.String())
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("not served: %v", missing)
		}
		if !k8sovnv1.ServesEgressFirewall(d) {
			return fmt.Errorf("egressfirewalls not served")
		}
		if !k8sovnv1.ServesEgressIP(d) {
			return fmt.Errorf("egressips not served")
		}
		if !k8sovnv1.ServesDNSNameResolver(d) {
			return fmt.Errorf("dnsnameresolvers not served")
		}
		return nil
	})
	return client
}

// servedVersions are the resources a CRD's served versions are served as.
func servedVersions(t T, crd *unstructured.Unstructured) []schema.GroupVersionResource {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	plural, _, _ := unstructured.NestedString(crd.Object, "spec", "names", "plural")
	versions, _, _ := unstructured.NestedSlice(crd.Object, "spec", "versions")
	var out []schema.GroupVersionResource
	for _, v := range versions {
		m, _ := v.(map[string]any)
		name, _ := m["name"].(string)
		if on, _ := m["served"].(bool); on {
			out = append(out, schema.GroupVersionResource{Group: group, Version: name, Resource: plural})
		}
	}
	if group == "" || plural == "" || len(out) == 0 {
		t.Fatalf("CRD %s: group %q, plural %q, no served version", crd.GetName(), group, plural)
	}
	return out
}

// serves says whether the API server serves gvr.
func serves(d discovery.DiscoveryInterface, gvr schema.GroupVersionResource) bool {
	list, err := d.ServerResourcesForGroupVersion(gvr.GroupVersion().String())
	return err == nil && slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == gvr.Resource })
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
