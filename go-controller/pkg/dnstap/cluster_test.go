package dnstap

import (
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
)

// Only the endpoints of the cluster DNS's Service may send the dnstap
// stream: not another Service's endpoints, not a node.
func TestDNSTapSenders(t *testing.T) {
	slice := func(ns, svc string, addrs ...string) *discoveryv1.EndpointSlice {
		return &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: svc + "-x", Namespace: ns, Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
			AddressType: discoveryv1.AddressTypeIPv4, Endpoints: []discoveryv1.Endpoint{{Addresses: addrs}}}
	}
	kube := fake.NewClientset(slice("kube-system", "kube-dns", "10.244.1.5", "fd00:10:244:1::5"), slice("kube-system", "other", "10.244.1.6"),
		slice("tenant", "kube-dns", "10.244.1.7"))
	factory := informers.NewSharedInformerFactory(kube, 0)
	lister := factory.Discovery().V1().EndpointSlices().Lister()
	stop := make(chan struct{})
	defer close(stop)
	factory.Start(stop)
	factory.WaitForCacheSync(stop)
	allow := ServiceEndpoints(lister, "kube-system", "kube-dns")
	for addr, want := range map[string]bool{"10.244.1.5": true, "fd00:10:244:1::5": true, "::ffff:10.244.1.5": true,
		"10.244.1.6": false, "10.244.1.7": false, "172.18.0.2": false} {
		if got := allow(netip.MustParseAddr(addr)); got != want {
			t.Errorf("%s may send: %v, want %v", addr, got, want)
		}
	}
}
