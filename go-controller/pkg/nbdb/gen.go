// Package nbdb holds the libovsdb models of the OVN Northbound database,
// generated from the schema Debian's ovn-central ships (copied beside this file).
package nbdb

//go:generate go run github.com/ovn-org/libovsdb/cmd/modelgen -p nbdb -o . ovn-nb.ovsschema
//go:generate go run github.com/ovn-k8s/ovn-k8s/hack/clonegen
