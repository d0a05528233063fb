// Command coredns is CoreDNS with only the plugins the conformance cluster's
// Corefile uses, and hosts, which the e2e suite's own DNS server pods use
// (they run /coredns from the agnhost image; the full set pulls every cloud
// SDK and triples the build). dnstap streams every client response to the
// master (go-controller/pkg/dnstap), which learns from it what the names under
// wildcard dnsName/domainNames rules resolve to; bind lets the integration
// test (test/integration/dnstap_test.go) listen on 127.0.0.1 only.
// There is deliberately no forward plugin: names outside the cluster get no
// answer from another server, so no query ever leaves the machine.
package main

import (
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/dnstap"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() {
	coremain.Run()
}
