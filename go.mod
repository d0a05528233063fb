module github.com/ovn-k8s/ovn-k8s

go 1.24

require github.com/ovn-org/libovsdb v0.7.0

require golang.org/x/text v0.14.0 // indirect
