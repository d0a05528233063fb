package master

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnstap"
)

// listenDNSTap opens --dns-tap-address (nil: not configured): TCP, or a
// unix socket ("unix:PATH", replacing a socket file left there) for a DNS
// server on the master's host.
func (m *Master) listenDNSTap() (net.Listener, error) {
	if m.cfg.DNSTapAddress == "" || m.dns == nil {
		return nil, nil
	}
	network, addr := "tcp", m.cfg.DNSTapAddress
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("--dns-tap-address %s: %w", m.cfg.DNSTapAddress, err)
	}
	return l, nil
}

// serveDNSTap takes the cluster DNS's dnstap stream on l: every answer it
// gave a client is an observation for the resolver (wildcard DNS names get
// their addresses from these alone). Over TCP only the cluster DNS's
// endpoints may send: a pod's address cannot be forged (OVN's port
// security), so no other pod can make a name resolve to an address of its
// choosing. On a unix socket the file's permissions decide.
func (m *Master) serveDNSTap(ctx context.Context, l net.Listener) {
	ns, name, _ := strings.Cut(m.cfg.DNSService, "/")
	var allow func(netip.Addr) bool
	if l.Addr().Network() != "unix" {
		allow = dnsEndpoint(m.factory.Discovery().V1().EndpointSlices().Lister(), ns, name)
	}
	srv := dnstap.New(dnstap.Options{Allow: allow}, m.dns.Observe, m.log.WithName("dnstap"))
	m.log.Info("taking the cluster DNS's dnstap stream", "address", l.Addr().String(), "senders", "endpoints of "+m.cfg.DNSService)
	if err := srv.Serve(ctx, l); err != nil && ctx.Err() == nil {
		m.log.Error(err, "dnstap stream stopped: wildcard DNS names keep their addresses until their TTLs pass")
	}
}

// dnsEndpoint says whether an address is one of the Service's endpoints
// (its EndpointSlices, any family).
func dnsEndpoint(lister discoverylisters.EndpointSliceLister, ns, name string) func(netip.Addr) bool {
	sel := labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: name})
	return func(peer netip.Addr) bool {
		list, err := lister.EndpointSlices(ns).List(sel)
		if err != nil {
			return false
		}
		for _, s := range list {
			for _, ep := range s.Endpoints {
				for _, a := range ep.Addresses {
					if ip, err := netip.ParseAddr(a); err == nil && ip.Unmap() == peer.Unmap() {
						return true
					}
				}
			}
		}
		return false
	}
}
