// Package vswitchd holds the libovsdb models of the Open vSwitch database,
// generated from the schema Debian's openvswitch-switch ships (copied beside this file).
package vswitchd

//go:generate go run github.com/ovn-org/libovsdb/cmd/modelgen -p vswitchd -o . vswitch.ovsschema
//go:generate go run github.com/ovn-k8s/ovn-k8s/hack/clonegen
