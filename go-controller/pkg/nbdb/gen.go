// Package nbdb holds the libovsdb models of the OVN Northbound database,
// generated from the schema of the oldest supported OVN stack (Debian 12's
// ovn-central 23.03, copied beside this file): newer schemas only add, so every
// column the models write exists in every supported stack, which
// test/integration/schema_test.go checks against each stack's server.
package nbdb

//go:generate go run github.com/ovn-org/libovsdb/cmd/modelgen -p nbdb -o . ovn-nb.ovsschema
//go:generate go run github.com/ovn-k8s/ovn-k8s/hack/clonegen
