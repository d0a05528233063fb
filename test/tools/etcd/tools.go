//go:build tools

// Package tools pins etcd, which `make deps` builds with
// `go build go.etcd.io/etcd/server/v3` from this module (its replace
// directives keep it from `go install`), so that the project's own go.mod
// stays free of it. Changing the version in go.mod rebuilds it.
package tools

import _ "go.etcd.io/etcd/server/v3"
