package controller

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

func TestObjectOf(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p"}}
	if got := ObjectOf[*corev1.Pod](pod); got != pod {
		t.Errorf("the object itself: %v", got)
	}
	if got := ObjectOf[*corev1.Pod](cache.DeletedFinalStateUnknown{Key: "ns/p", Obj: pod}); got != pod {
		t.Errorf("a missed deletion's last state: %v", got)
	}
	if got := ObjectOf[*corev1.Node](pod); got != nil {
		t.Errorf("another kind: %v, want nil", got)
	}
	if got := ObjectOf[*corev1.Pod](cache.DeletedFinalStateUnknown{Key: "ns/p"}); got != nil {
		t.Errorf("a missed deletion without its state: %v, want nil", got)
	}
}
