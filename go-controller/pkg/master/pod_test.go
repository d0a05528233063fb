package master

import (
	"context"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/annotations"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/slim"
)

// The echo of the master's own annotation PATCH needs no sync; any other
// value (a user's edit, another incarnation's copy, another node) does.
func TestOwnAnnotationEchoIsRecognised(t *testing.T) {
	e, _, pn := newEnvWithPod(t)
	pod, err := e.kube.CoreV1().Pods("ns").Get(context.Background(), "p1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	echo := slim.FromPod(pod)
	if !e.m.annotationIsHeld(echo) {
		t.Fatalf("the annotation the master wrote (%s) is not recognised as its own", pod.Annotations[annotations.PodNetworks])
	}
	// The echo's addresses, known without parsing, are what parsing gives.
	if known, parsed := echo.Addresses(), slim.FromPod(pod).Addresses(); len(known) == 0 || !slices.Equal(known, parsed) {
		t.Errorf("the echo's known addresses %v, parsed %v", known, parsed)
	}
	edited := pn
	edited.Routes = nil
	for name, change := range map[string]func(*corev1.Pod){
		"user-edited routes":  func(p *corev1.Pod) { p.Annotations[annotations.PodNetworks] = annotations.FormatPodNetworks(edited) },
		"malformed":           func(p *corev1.Pod) { p.Annotations[annotations.PodNetworks] = "{" },
		"another incarnation": func(p *corev1.Pod) { p.UID = "someone-else" },
		"another node":        func(p *corev1.Pod) { p.Spec.NodeName = "n2" },
		"removed":             func(p *corev1.Pod) { delete(p.Annotations, annotations.PodNetworks) },
	} {
		p := pod.DeepCopy()
		change(p)
		sp := slim.FromPod(p)
		if e.m.annotationIsHeld(sp) {
			t.Errorf("%s: taken for the master's own annotation", name)
		}
		if got, want := sp.Addresses(), slim.FromPod(p).Addresses(); !slices.Equal(got, want) {
			t.Errorf("%s: addresses %v after the check, %v parsed", name, got, want)
		}
	}
}
