//go:build tools

// Package tools pins SIG Network's network-policy-api v0.2.0, whose
// conformance suite (ClusterNetworkPolicy, policy.networking.k8s.io/v1alpha2)
// `make conformance` builds with `go test -c -o _output/bin/npapi-conformance-v0.2.0
// sigs.k8s.io/network-policy-api/conformance` from this module, so that the
// project's own go.mod stays free of the suite's dependencies. The imports
// are those of the suite's test files (conformance_test.go,
// conformance_profile_test.go): they keep its test
// dependencies (controller-runtime among them) in go.mod and go.sum.
// Changing the version in go.mod rebuilds the suite.
package tools

import (
	_ "k8s.io/apimachinery/pkg/util/sets"
	_ "k8s.io/client-go/kubernetes"
	_ "k8s.io/client-go/plugin/pkg/client/auth"
	_ "k8s.io/client-go/rest"
	_ "k8s.io/client-go/tools/clientcmd"
	_ "sigs.k8s.io/controller-runtime/pkg/client"
	_ "sigs.k8s.io/controller-runtime/pkg/client/config"
	_ "sigs.k8s.io/network-policy-api/apis/v1alpha2"
	_ "sigs.k8s.io/network-policy-api/conformance/apis/v1alpha1"
	_ "sigs.k8s.io/network-policy-api/conformance/tests"
	_ "sigs.k8s.io/network-policy-api/conformance/utils/flags"
	_ "sigs.k8s.io/network-policy-api/conformance/utils/suite"
	_ "sigs.k8s.io/yaml"
)
