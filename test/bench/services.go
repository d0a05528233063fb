package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discovery "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/ovn-k8s/ovn-k8s/test/harness"
)

// createService creates Service s<i> with an EndpointSlice of the configured
// number of ready endpoints.
func (b *bench) createService(ns string, i int) {
	ctx := context.Background()
	name := fmt.Sprintf("s%04d", i)
	if _, err := b.kube.Client.CoreV1().Services(ns).Create(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt(8080)}}}},
		metav1.CreateOptions{}); err != nil {
		b.s.Fatal(err)
	}
	slice := &discovery.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{discovery.LabelServiceName: name}},
		AddressType: discovery.AddressTypeIPv4,
		Ports:       []discovery.EndpointPort{{Name: strPtr("http"), Protocol: protoPtr(corev1.ProtocolTCP), Port: int32Ptr(8080)}}}
	for e := 0; e < b.o.endpoints; e++ {
		slice.Endpoints = append(slice.Endpoints, discovery.Endpoint{Addresses: []string{fmt.Sprintf("10.250.%d.%d", i%250, e+1)}})
	}
	if _, err := b.kube.Client.DiscoveryV1().EndpointSlices(ns).Create(ctx, slice, metav1.CreateOptions{}); err != nil {
		b.s.Fatal(err)
	}
}

// programmedServices counts the benchmark's service load balancers that have
// all their backends, and all its load balancer rows.
func (b *bench) programmedServices() (full, rows int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, f := range b.lbFull {
		if f {
			full++
		}
	}
	return full, len(b.lbFull)
}

// services: Services with endpoints each → until every load balancer is programmed.
func (b *bench) services() Result {
	say("== services: %d services x %d endpoints", b.o.services, b.o.endpoints)
	b.namespace("svc")
	stopProfile := b.profile("services")
	defer stopProfile()
	start, cpu := time.Now(), cpuSnapshot()
	parallel(b.o.services, b.o.serviceWorkers, func(i int) { b.createService("svc", i) })
	b.serviceCount = b.o.services
	created := time.Since(start)
	createCPU := cpuSnapshot().since(cpu)
	var done time.Duration
	var rows int
	harness.Eventually(b.s, 300*time.Second, "every service load balancer programmed", func() error {
		var full int
		full, rows = b.programmedServices()
		if full < b.o.services {
			return fmt.Errorf("%d of %d programmed", full, b.o.services)
		}
		done = time.Since(start)
		return nil
	})
	used := cpuSnapshot().since(cpu)
	rate := float64(b.o.services) / done.Seconds()
	say("  created in %.2fs; all programmed after %.2fs (%.0f ms after the last object was created): %.0f services/s = %.0f%% of the API's bare creation rate; %.1f load balancer rows per service",
		created.Seconds(), done.Seconds(), float64((done - created).Milliseconds()), rate, 100*rate/b.serviceLimit, float64(rows)/float64(b.o.services))
	say("  CPU while the API created them: %s", createCPU.describe(created.Seconds()))
	say("  the API server and etcd alone need %.2f s of CPU to create them (%.2f ms per Service + EndpointSlice, measured in the limits)",
		b.apiCPUPerService*float64(b.o.services)/1000, b.apiCPUPerService)
	m := map[string]float64{"services": float64(b.o.services), "endpoints_each": float64(b.o.endpoints),
		"create_s": created.Seconds(), "programmed_s": done.Seconds(), "lag_after_last_create_s": (done - created).Seconds(),
		"services_per_s": rate, "ratio_to_api_create_limit": rate / b.serviceLimit,
		"lb_rows_per_service": float64(rows) / float64(b.o.services)}
	used.metrics(m, done.Seconds())
	return Result{Scenario: "services", Metrics: m}
}

func strPtr(s string) *string                     { return &s }
func int32Ptr(i int32) *int32                     { return &i }
func protoPtr(p corev1.Protocol) *corev1.Protocol { return &p }
