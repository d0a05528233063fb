package leader

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

func namespace(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestCheckNamespace(t *testing.T) {
	ctx := context.Background()
	if err := CheckNamespace(ctx, fake.NewSimpleClientset(namespace("default"), namespace("ovn-kubernetes")), "ovn-kubernetes"); err != nil {
		t.Fatalf("namespace present: %v", err)
	}
	// The fake ignores field selectors: another namespace listed is not ours.
	var missing *NoNamespaceError
	if err := CheckNamespace(ctx, fake.NewSimpleClientset(namespace("default")), "ovn-kubernetes"); !errors.As(err, &missing) || missing.Namespace != "ovn-kubernetes" {
		t.Fatalf("namespace missing: %v, want a NoNamespaceError", err)
	}
	kube := fake.NewSimpleClientset()
	kube.PrependReactor("list", "namespaces", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, errors.New("forbidden")
	})
	if err := CheckNamespace(ctx, kube, "ovn-kubernetes"); err == nil || errors.As(err, &missing) {
		t.Fatalf("API error: %v, want an error other than NoNamespaceError (no answer is not a no)", err)
	}
}
