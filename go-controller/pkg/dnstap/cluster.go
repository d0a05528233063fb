package dnstap

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"

	"github.com/go-logr/logr"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/labels"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
)

// What the master (central mode) and the cluster manager (zone mode) share
// to take the cluster DNS's stream: --dns-tap-address and --dns-service.

// Listen opens a --dns-tap-address: HOST:PORT (TCP), or "unix:PATH" for a
// DNS server on this host (a socket file left there is replaced).
func Listen(address string) (net.Listener, error) {
	network, addr := "tcp", address
	if path, ok := strings.CutPrefix(addr, "unix:"); ok {
		network, addr = "unix", path
		if fi, err := os.Lstat(path); err == nil && fi.Mode()&os.ModeSocket != 0 {
			_ = os.Remove(path)
		}
	}
	l, err := net.Listen(network, addr)
	if err != nil {
		return nil, fmt.Errorf("--dns-tap-address %s: %w", address, err)
	}
	return l, nil
}

// ServeCluster takes the cluster DNS's stream on l until ctx ends: every
// answer it gave a client goes to observe (wildcard DNS names get their
// addresses from these alone). Over TCP only the endpoints of service
// (NAMESPACE/NAME, the cluster DNS's) may send: a pod's address cannot be
// forged (OVN's port security), so no other pod can make a name resolve to
// an address of its choosing. On a unix socket the file's permissions
// decide.
func ServeCluster(ctx context.Context, l net.Listener, slices discoverylisters.EndpointSliceLister, service string, observe func(string, []Answer), log logr.Logger) {
	var allow func(netip.Addr) bool
	if l.Addr().Network() != "unix" {
		ns, name, _ := strings.Cut(service, "/")
		allow = ServiceEndpoints(slices, ns, name)
	}
	srv := New(Options{Allow: allow}, observe, log)
	log.Info("taking the cluster DNS's dnstap stream", "address", l.Addr().String(), "senders", "endpoints of "+service)
	if err := srv.Serve(ctx, l); err != nil && ctx.Err() == nil {
		log.Error(err, "dnstap stream stopped: wildcard DNS names keep their addresses until their TTLs pass")
	}
}

// ServiceEndpoints says whether an address is one of the Service's
// endpoints (its EndpointSlices, any family).
func ServiceEndpoints(lister discoverylisters.EndpointSliceLister, ns, name string) func(netip.Addr) bool {
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
