package master

import (
	"context"
	"net"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/cache"

	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/config"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/dnstap"
	k8sovnv1 "github.com/ovn-k8s/ovn-k8s/go-controller/pkg/k8sovn/v1"
	"github.com/ovn-k8s/ovn-k8s/go-controller/pkg/policy"
)

// What the cluster's DNS answered pods (wildcard DNS names match these
// alone). In central mode the master takes the cluster DNS's dnstap stream
// at --dns-tap-address. In zone mode that stream goes to one address, the
// cluster manager's (clustermanager.DNSNames), which writes the answers for
// every name some policy names as DNSNameResolvers; a zone's master given
// --dns-tap-address learns them from there and listens on nothing.

// listenDNSTap opens --dns-tap-address in central mode (nil: not
// configured, or zone mode).
func (m *Master) listenDNSTap() (net.Listener, error) {
	if m.cfg.DNSTapAddress == "" || m.dns == nil || m.cfg.Zone != "" {
		return nil, nil
	}
	return dnstap.Listen(m.cfg.DNSTapAddress)
}

// serveDNSTap takes the stream on l (dnstap.ServeCluster).
func (m *Master) serveDNSTap(ctx context.Context, l net.Listener) {
	dnstap.ServeCluster(ctx, l, m.factory.Discovery().V1().EndpointSlices().Lister(), m.cfg.DNSService, m.dns.Observe, m.log.WithName("dnstap"))
}

// dnsRelay is a zone master's source of the cluster DNS's answers: the
// DNSNameResolvers' informer, not started (nil: central mode, no
// --dns-tap-address, or the API server does not serve them).
func dnsRelay(cfg config.Master, admin *policy.AdminAPI, log logr.Logger) cache.SharedIndexInformer {
	if cfg.Zone == "" || cfg.DNSTapAddress == "" || len(cfg.DNSServers) == 0 {
		return nil
	}
	if admin == nil || !admin.DNSNameResolvers {
		log.Info("wildcard DNS names match nothing in this zone: the API server serves no DNSNameResolvers (dist/kubernetes/05-crd-dnsnameresolvers.yaml), through which the cluster manager relays the cluster DNS's answers")
		return nil
	}
	return k8sovnv1.NewDNSNameResolverInformer(admin.Dynamic, 0)
}

// learnRelayed has the resolver learn each DNSNameResolver's addresses as
// the cluster manager writes them (one not named after its name is
// ignored); a name not followed yet learns them when it is
// (dnsname.Options.Known).
func (m *Master) learnRelayed(inf cache.SharedIndexInformer) {
	learn := func(obj any) {
		if o, ok := obj.(*k8sovnv1.DNSNameResolver); ok && o.Name == k8sovnv1.DNSNameResolverName(o.Spec.Name) {
			m.dns.Learn(o.Spec.Name, o.Status.Expiries())
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: learn, UpdateFunc: func(_, cur any) { learn(cur) }})
}
