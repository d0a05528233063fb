package policy

import (
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/ovndb/ovndbtest"
)

// A namespace moved into an admin policy's subject queues the policy's
// members (the sets queue) when its ACLs do not depend on the subject's
// pods, and its full sync (the rows queue) when it names ports, which the
// subject's pods resolve.
func TestNamespaceMoveQueuesAdminMembers(t *testing.T) {
	for _, tc := range []struct {
		name       string
		namedPorts []string
		members    bool
	}{
		{"no named ports", nil, true},
		{"a named port", []string{NamedPortKey("TCP", "http")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := informers.NewSharedInformerFactory(fake.NewClientset(), 0)
			c := New(f, ovndbtest.Connect(t, ovndbtest.NewServer(t)), nil, Options{}, logr.Discard(), time.Second)
			subject := &PeerSet{Namespaces: labels.SelectorFromSet(labels.Set{"tenant": "a"}), Pods: labels.Everything()}
			c.register(adminKey+KindCNP+"/p", "", &Rows{Subject: subject, NamedPorts: tc.namedPorts})
			c.mu.RLock()
			c.adminNamespaceChanged(labels.Set{"tenant": "b"}, labels.Set{"tenant": "b", "x": "y"}) // not moved
			c.mu.RUnlock()
			if !c.queue.sets.Idle() || !c.queue.rows.Idle() {
				t.Fatal("a label change that moves no namespace queued a key")
			}
			c.mu.RLock()
			c.adminNamespaceChanged(labels.Set{"tenant": "b"}, labels.Set{"tenant": "a"})
			c.mu.RUnlock()
			if members := !c.queue.sets.Idle() && c.queue.rows.Idle(); members != tc.members {
				t.Errorf("members alone queued: %v, want %v (sets queue idle %v, rows queue idle %v)",
					members, tc.members, c.queue.sets.Idle(), c.queue.rows.Idle())
			}
		})
	}
}
