//go:build tools

// Package tools pins the code generators `make generate` runs, so their
// versions come from go.mod like every other dependency.
package tools

import _ "github.com/ovn-org/libovsdb/cmd/modelgen"
