package main

import (
	"strings"
	"testing"
)

func TestDescribeAPI(t *testing.T) {
	before := parseProm(strings.NewReader(`# HELP apiserver_request_total x
apiserver_request_total{code="201",component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="",verb="POST",version="v1alpha2"} 10
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="",verb="POST",version="v1alpha2"} 0.1
`))
	after := parseProm(strings.NewReader(`apiserver_request_total{code="201",component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="",verb="POST",version="v1alpha2"} 110
apiserver_request_total{code="409",component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="",verb="POST",version="v1alpha2"} 2
apiserver_request_duration_seconds_sum{component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="",verb="POST",version="v1alpha2"} 0.61
apiserver_request_total{code="200",component="apiserver",dry_run="",group="policy.networking.k8s.io",resource="clusternetworkpolicies",scope="resource",subresource="status",verb="PUT",version="v1alpha2"} 40
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 0
`))
	if got := seriesLabel(`x{a="1",subresource="",verb="PUT"}`, "verb"); got != "PUT" {
		t.Errorf("verb: %q", got)
	}
	if got := seriesLabel(`x{a="1",subresource="",verb="PUT"}`, "subresource"); got != "" {
		t.Errorf("subresource: %q", got)
	}
	if got := seriesLabel(`x`, "verb"); got != "" {
		t.Errorf("no labels: %q", got)
	}
	m := map[string]float64{}
	got := describeAPI(m, "create_", before, after)
	want := "142 requests; POST clusternetworkpolicies 102 (mean 5 ms), PUT clusternetworkpolicies/status 40"
	if got != want {
		t.Errorf("describeAPI:\n got %q\nwant %q", got, want)
	}
	if m["create_api_requests"] != 142 || m["create_api_post_clusternetworkpolicies"] != 102 || m["create_api_put_clusternetworkpolicies_status"] != 40 {
		t.Errorf("metrics: %v", m)
	}
	if got := describeAPI(map[string]float64{}, "", nil, nil); got != "no request counts" {
		t.Errorf("empty: %q", got)
	}
}
