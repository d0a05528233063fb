package master

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// The master's informers keep objects without their managedFields, and its
// pod informer still keeps slim.Pods (its own transform is not replaced).
func TestInformersDropManagedFields(t *testing.T) {
	managed := metav1.ObjectMeta{Name: "a", Namespace: "a",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}}
	ns, svc, pod := &corev1.Namespace{ObjectMeta: managed}, &corev1.Service{ObjectMeta: managed}, &corev1.Pod{ObjectMeta: managed}
	ns.Namespace = ""
	f := NewInformers(fake.NewClientset(ns, svc, pod))
	nsInf, svcInf, podInf := f.Core().V1().Namespaces().Informer(), f.Core().V1().Services().Informer(), f.Core().V1().Pods().Informer()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f.Start(ctx.Done())
	f.WaitForCacheSync(ctx.Done())
	harness.Eventually(t, 10*time.Second, "the informers' copies", func() error {
		n, _, _ := nsInf.GetStore().GetByKey("a")
		s, _, _ := svcInf.GetStore().GetByKey("a/a")
		p, _, _ := podInf.GetStore().GetByKey("a/a")
		nsObj, ok1 := n.(*corev1.Namespace)
		svcObj, ok2 := s.(*corev1.Service)
		_, ok3 := p.(*slim.Pod)
		if !ok1 || !ok2 || !ok3 || nsObj.ManagedFields != nil || svcObj.ManagedFields != nil {
			return fmt.Errorf("last seen namespace %+v, service %+v, pod %T", n, s, p)
		}
		return nil
	})
}
