// Package vswitchd holds the libovsdb models of the Open vSwitch database,
// generated from the schema of the oldest supported stack (Debian 12's
// openvswitch-switch 3.1, copied beside this file), for the same reason as
// package nbdb's; test/integration/schema_test.go checks it against each stack.
package vswitchd

//go:generate go run github.com/ovn-org/libovsdb/cmd/modelgen -p vswitchd -o . vswitch.ovsschema
//go:generate go run github.com/ovn-k8s/ovn-k8s/hack/clonegen
