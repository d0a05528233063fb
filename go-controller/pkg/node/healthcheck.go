package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/services"
)

// HealthCheck is what a node answers on a service's healthCheckNodePort: a
// load balancer in front of the cluster sends a Service with
// externalTrafficPolicy Local only to the nodes that answer 200, the nodes
// with a ready endpoint of it.
type HealthCheck struct {
	Namespace, Name string
	LocalEndpoints  int // ready endpoints on this node
}

// HealthChecks are the health checks this node serves, by port: one for
// every Service ovn-k8s handles with externalTrafficPolicy Local and a
// health check node port inside the policy's node port range (outside it,
// the port could be one the host listens on). Endpoints count once per
// address, as kube-proxy counts them; terminating ones do not count.
func HealthChecks(svcs []*corev1.Service, slices []*discovery.EndpointSlice, node string, policy services.AddressPolicy) map[int32]HealthCheck {
	out := map[int32]HealthCheck{}
	byService := map[string]int32{}
	for _, svc := range svcs {
		port := svc.Spec.HealthCheckNodePort
		if port == 0 || svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal ||
			svc.Spec.Type != corev1.ServiceTypeLoadBalancer || !services.Handled(svc) || !policy.NodePortRange().Contains(port) {
			continue
		}
		if _, taken := out[port]; taken {
			continue // the API server allocates each port once; never serve two
		}
		out[port] = HealthCheck{Namespace: svc.Namespace, Name: svc.Name}
		byService[svc.Namespace+"/"+svc.Name] = port
	}
	seen := map[string]bool{}
	for _, sl := range slices {
		port, ok := byService[sl.Namespace+"/"+sl.Labels[discovery.LabelServiceName]]
		if !ok || sl.AddressType == discovery.AddressTypeFQDN {
			continue
		}
		for _, ep := range sl.Endpoints {
			if ep.NodeName == nil || *ep.NodeName != node || len(ep.Addresses) == 0 ||
				(ep.Conditions.Ready != nil && !*ep.Conditions.Ready) {
				continue
			}
			k := strconv.Itoa(int(port)) + "/" + ep.Addresses[0]
			if seen[k] {
				continue
			}
			seen[k] = true
			hc := out[port]
			hc.LocalEndpoints++
			out[port] = hc
		}
	}
	return out
}

// healthResponse is kube-proxy's answer, field for field, so that cloud
// load balancers and tools that read it see the same thing.
type healthResponse struct {
	Service struct {
		Namespace string `json:"namespace"`
		Name      string `json:"name"`
	} `json:"service"`
	LocalEndpoints      int  `json:"localEndpoints"`
	ServiceProxyHealthy bool `json:"serviceProxyHealthy"`
}

// ServeHTTP answers 200 with the count when the node has a ready endpoint,
// 503 when it has none, on any path.
func (hc HealthCheck) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	var r healthResponse
	r.Service.Namespace, r.Service.Name = hc.Namespace, hc.Name
	r.LocalEndpoints, r.ServiceProxyHealthy = hc.LocalEndpoints, true
	body, _ := json.Marshal(r)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Load-Balancing-Endpoint-Weight", strconv.Itoa(hc.LocalEndpoints))
	if hc.LocalEndpoints == 0 {
		w.WriteHeader(http.StatusServiceUnavailable)
	} else {
		w.WriteHeader(http.StatusOK)
	}
	_, _ = w.Write(body)
}

// HealthServer serves the health checks on this node's addresses (Addr:
// "" for all of them), one HTTP listener per port, and follows Sync.
type HealthServer struct {
	Addr string
	Log  logr.Logger

	mu        sync.Mutex
	checks    map[int32]HealthCheck
	listeners map[int32]*http.Server
	failed    map[int32]string // ports that could not be opened, and why (logged once)
}

// Sync opens the ports of want that are not served yet, closes those no
// longer wanted and answers with want's counts from now on. A port that
// cannot be opened (another process has it) is retried at the next Sync
// (runHealthChecks syncs again every 10 s while one fails)
// and named in the error.
func (s *HealthServer) Sync(want map[int32]HealthCheck) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.listeners == nil {
		s.listeners, s.failed = map[int32]*http.Server{}, map[int32]string{}
	}
	s.checks = want
	for port, srv := range s.listeners {
		if _, ok := want[port]; !ok {
			_ = srv.Close()
			delete(s.listeners, port)
		}
	}
	var errs []error
	for port := range want {
		if s.listeners[port] != nil {
			continue
		}
		if err := s.listen(port); err != nil {
			errs = append(errs, err)
			if s.failed[port] != err.Error() {
				s.failed[port] = err.Error()
				s.Log.Error(err, "cannot serve a service's health check node port; retrying every 10 s", "service", want[port].Namespace+"/"+want[port].Name)
			}
			continue
		}
		delete(s.failed, port)
	}
	for port := range s.failed {
		if _, ok := want[port]; !ok {
			delete(s.failed, port)
		}
	}
	return errors.Join(errs...)
}

func (s *HealthServer) listen(port int32) error {
	l, err := net.Listen("tcp", net.JoinHostPort(s.Addr, strconv.Itoa(int(port))))
	if err != nil {
		return fmt.Errorf("health check node port %d: %w", port, err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			s.mu.Lock()
			hc, ok := s.checks[port]
			s.mu.Unlock()
			if !ok {
				http.Error(w, "no service", http.StatusServiceUnavailable)
				return
			}
			hc.ServeHTTP(w, r)
		}),
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		MaxHeaderBytes:    4096,
	}
	s.listeners[port] = srv
	go func() { _ = srv.Serve(l) }()
	return nil
}

// Ports are the ports served now, for tests and metrics.
func (s *HealthServer) Ports() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int32, 0, len(s.listeners))
	for p := range s.listeners {
		out = append(out, p)
	}
	return out
}

// Close stops every listener.
func (s *HealthServer) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for port, srv := range s.listeners {
		_ = srv.Close()
		delete(s.listeners, port)
	}
}

// runHealthChecks keeps the health server in line with the services and
// their endpoints until ctx ends; kick says something changed.
func runHealthChecks(ctx context.Context, s *HealthServer, node string, policy services.AddressPolicy,
	list func() ([]*corev1.Service, []*discovery.EndpointSlice, error), kick <-chan struct{}) {
	defer s.Close()
	retry := time.NewTicker(10 * time.Second)
	defer retry.Stop()
	pending := true
	for {
		if pending {
			svcs, slices, err := list()
			if err == nil {
				err = s.Sync(HealthChecks(svcs, slices, node, policy))
			}
			pending = err != nil
		}
		select {
		case <-ctx.Done():
			return
		case <-kick:
			pending = true
		case <-retry.C:
		}
	}
}
