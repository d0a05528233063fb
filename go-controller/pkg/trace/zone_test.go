package trace

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/nbdb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/topology"
	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// In zone mode a pod of another zone is no source for this zone's NB: its
// port is in its own zone's. Run says so, naming the node to trace from; a
// pod of this zone without a port gets the plain "not set up" error.
func TestSourceInAnotherZone(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	nb := ovndbtest.Connect(t, ovndbtest.NewServer(t))
	ops, err := nb.Create(&nbdb.LogicalSwitchPort{UUID: "tstor", Name: topology.TransitSwitchPort("n2"), Type: "remote"},
		&nbdb.LogicalSwitch{UUID: "ts", Name: topology.TransitSwitch, Ports: []string{"tstor"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ovndb.Transact(ctx, nb, ops); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 5*time.Second, "n2's transit switch port cached as remote", func() error {
		if !remoteNode(ctx, nb, "n2") {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name}, Spec: corev1.PodSpec{NodeName: node}}
	}
	opts := Options{Kube: fake.NewSimpleClientset(pod("far", "n2"), pod("near", "n1")), NB: nb}
	for src, want := range map[string][]string{
		"ns/far":  {"pod ns/far runs on node n2, in another zone", "trace from there (on node n2"},
		"ns/near": {"no port ns_near with addresses in the NB"},
	} {
		_, err := Run(ctx, opts, src, "192.0.2.1")
		for _, w := range want {
			if err == nil || !strings.Contains(err.Error(), w) {
				t.Errorf("trace from %s: %v, want an error saying %q", src, err, w)
			}
		}
		if src == "ns/near" && err != nil && strings.Contains(err.Error(), "another zone") {
			t.Errorf("trace from %s (this zone's node): %v, which blames a zone", src, err)
		}
	}
}
