package node

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

func hcService(name string, port int32, mutate ...func(*corev1.Service)) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, ClusterIP: "10.96.0.10",
			ExternalTrafficPolicy: corev1.ServiceExternalTrafficPolicyLocal, HealthCheckNodePort: port}}
	for _, f := range mutate {
		f(s)
	}
	return s
}

func hcSlice(svc, name string, eps ...discovery.Endpoint) *discovery.EndpointSlice {
	return &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{discovery.LabelServiceName: svc}},
		AddressType: discovery.AddressTypeIPv4, Endpoints: eps}
}

func hcEndpoint(ip, node string, ready bool) discovery.Endpoint {
	return discovery.Endpoint{Addresses: []string{ip}, NodeName: &node, Conditions: discovery.EndpointConditions{Ready: &ready}}
}

// Only LoadBalancer services with externalTrafficPolicy Local, a port in
// the node port range and ovn-k8s as their proxy get a health check; it
// counts this node's ready endpoints once per address (terminating ones,
// other nodes' and a second slice repeating an address do not count).
func TestHealthChecks(t *testing.T) {
	svcs := []*corev1.Service{
		hcService("local", 30100),
		hcService("cluster", 30101, func(s *corev1.Service) { s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyCluster }),
		hcService("low-port", 22),
		hcService("other-proxy", 30102, func(s *corev1.Service) { s.Labels = map[string]string{services.ServiceProxyNameLabel: "x"} }),
		hcService("empty", 30103),
	}
	slices := []*discovery.EndpointSlice{
		hcSlice("local", "a", hcEndpoint("10.244.1.5", "n1", true), hcEndpoint("10.244.1.6", "n1", false), hcEndpoint("10.244.2.5", "n2", true)),
		hcSlice("local", "b", hcEndpoint("10.244.1.5", "n1", true), hcEndpoint("10.244.1.7", "n1", true)),
		hcSlice("cluster", "c", hcEndpoint("10.244.1.8", "n1", true)),
	}
	got := HealthChecks(svcs, slices, "n1", services.AddressPolicy{})
	want := map[int32]HealthCheck{
		30100: {Namespace: "ns", Name: "local", LocalEndpoints: 2},
		30103: {Namespace: "ns", Name: "empty"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("health checks:\n got %v\nwant %v", got, want)
	}
}

func freePort(t *testing.T) int32 {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return int32(l.Addr().(*net.TCPAddr).Port)
}

// The server answers as kube-proxy does: 200 with the count while the node
// has a ready endpoint, 503 with 0 when it has none, on any path; a port no
// longer wanted is closed, and a port another process holds is named in
// the error and taken at a later Sync once free.
func TestHealthServer(t *testing.T) {
	s := &HealthServer{Addr: "127.0.0.1", Log: testr.New(t)}
	defer s.Close()
	p1, p2 := freePort(t), freePort(t)
	get := func(port int32) (int, healthResponse, error) {
		c := http.Client{Timeout: 2 * time.Second}
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", port))
		if err != nil {
			return 0, healthResponse{}, err
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		var r healthResponse
		if err := json.Unmarshal(body, &r); err != nil {
			return resp.StatusCode, r, fmt.Errorf("body %q: %w", body, err)
		}
		if resp.Header.Get("Content-Type") != "application/json" {
			return resp.StatusCode, r, fmt.Errorf("content type %q", resp.Header.Get("Content-Type"))
		}
		return resp.StatusCode, r, nil
	}
	if err := s.Sync(map[int32]HealthCheck{p1: {Namespace: "ns", Name: "web", LocalEndpoints: 2}}); err != nil {
		t.Fatal(err)
	}
	code, r, err := get(p1)
	if err != nil || code != 200 || r.LocalEndpoints != 2 || r.Service.Name != "web" || r.Service.Namespace != "ns" || !r.ServiceProxyHealthy {
		t.Fatalf("with two endpoints: %d %+v %v", code, r, err)
	}
	if err := s.Sync(map[int32]HealthCheck{p1: {Namespace: "ns", Name: "web"}}); err != nil {
		t.Fatal(err)
	}
	if code, r, err := get(p1); err != nil || code != 503 || r.LocalEndpoints != 0 {
		t.Fatalf("with none: %d %+v %v", code, r, err)
	}

	// p2 is held by someone else: the error names it; p1 is closed.
	held, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p2))
	if err != nil {
		t.Fatal(err)
	}
	err = s.Sync(map[int32]HealthCheck{p2: {Namespace: "ns", Name: "other", LocalEndpoints: 1}})
	if err == nil || len(s.Ports()) != 0 {
		t.Fatalf("a held port: error %v, serving %v", err, s.Ports())
	}
	if _, _, err := get(p1); err == nil {
		t.Fatalf("port %d still answers after its service went", p1)
	}
	held.Close()
	if err := s.Sync(map[int32]HealthCheck{p2: {Namespace: "ns", Name: "other", LocalEndpoints: 1}}); err != nil {
		t.Fatal(err)
	}
	if code, r, err := get(p2); err != nil || code != 200 || r.Service.Name != "other" {
		t.Fatalf("the freed port: %d %+v %v", code, r, err)
	}
}
