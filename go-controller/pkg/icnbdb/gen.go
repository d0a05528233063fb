// Package icnbdb holds the libovsdb models of OVN's interconnection
// Northbound database (the IC NB that ovn-ic reads), generated from the
// schema of the oldest supported OVN stack (Debian 12's ovn-ic-db 23.03,
// copied beside this file). The cluster-wide part of zone mode writes its
// transit switch there (pkg/clustermanager).
package icnbdb

//go:generate go run github.com/ovn-org/libovsdb/cmd/modelgen -p icnbdb -o . ovn-ic-nb.ovsschema
