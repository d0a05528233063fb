package harness

import (
	"context"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// ServicePort is one port of a Service and the port its backends serve it on.
type ServicePort struct {
	Name       string
	Protocol   corev1.Protocol
	Port       int32
	TargetPort int32
}

// CreateService creates a Service of the cluster's families, the primary
// first (RequireDualStack on a dual-stack cluster, SingleStack otherwise),
// and its EndpointSlices with the backends (SetEndpoints). mutate may change
// the object before it is created (Type: NodePort).
func (c *Cluster) CreateService(namespace, name string, ports []ServicePort, backends []*Pod, mutate ...func(*corev1.Service)) *corev1.Service {
	t := c.T
	t.Helper()
	policy := corev1.IPFamilyPolicySingleStack
	if len(c.Families) > 1 {
		policy = corev1.IPFamilyPolicyRequireDualStack
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name},
		Spec:       corev1.ServiceSpec{IPFamilies: append([]corev1.IPFamily{}, c.Families...), IPFamilyPolicy: &policy},
	}
	for _, p := range ports {
		svc.Spec.Ports = append(svc.Spec.Ports, corev1.ServicePort{Name: p.Name, Protocol: p.Protocol, Port: p.Port, TargetPort: intstr.FromInt32(p.TargetPort)})
	}
	for _, f := range mutate {
		f(svc)
	}
	out, err := c.Kube.Client.CoreV1().Services(namespace).Create(context.Background(), svc, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Spec.ClusterIPs) != len(c.Families) {
		t.Fatalf("service %s/%s got ClusterIPs %v, want one per family %v", namespace, name, out.Spec.ClusterIPs, c.Families)
	}
	c.SetEndpoints(namespace, name, ports, backends...)
	return out
}

// ClusterIP is the service's ClusterIP of a family ("" when it has none).
func ClusterIP(svc *corev1.Service, f corev1.IPFamily) string {
	for i, fam := range svc.Spec.IPFamilies {
		if fam == f && i < len(svc.Spec.ClusterIPs) {
			return svc.Spec.ClusterIPs[i]
		}
	}
	return ""
}

// SetEndpoints writes the service's EndpointSlices as the EndpointSlice
// controller would (none runs here): one per family of the cluster,
// <svc>-ipv4 and <svc>-ipv6 of AddressType IPv4 and IPv6, each with the
// backends' addresses of its family, ready; created or updated.
func (c *Cluster) SetEndpoints(namespace, svc string, ports []ServicePort, backends ...*Pod) {
	t := c.T
	t.Helper()
	ctx := context.Background()
	cl := c.Kube.Client.DiscoveryV1().EndpointSlices(namespace)
	for _, f := range c.Families {
		addrType := discovery.AddressTypeIPv4
		if f == IPv6 {
			addrType = discovery.AddressTypeIPv6
		}
		slice := &discovery.EndpointSlice{
			ObjectMeta:  metav1.ObjectMeta{Name: svc + "-" + strings.ToLower(string(f)), Labels: map[string]string{discovery.LabelServiceName: svc}},
			AddressType: addrType,
		}
		for _, p := range ports {
			slice.Ports = append(slice.Ports, discovery.EndpointPort{Name: ptrTo(p.Name), Protocol: ptrTo(p.Protocol), Port: ptrTo(p.TargetPort)})
		}
		for _, b := range backends {
			if a := b.Addr(f); a.IsValid() {
				slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{a.String()},
					NodeName: ptrTo(b.Node), Conditions: discovery.EndpointConditions{Ready: ptrTo(true)}})
			}
		}
		if old, err := cl.Get(ctx, slice.Name, metav1.GetOptions{}); err == nil {
			slice.ResourceVersion = old.ResourceVersion
			if _, err := cl.Update(ctx, slice, metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if _, err := cl.Create(ctx, slice, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func ptrTo[V any](v V) *V { return &v }
