package config

import (
	"crypto/tls"
	"net/netip"
	"time"
)

// Kube is how a command reaches the Kubernetes API.
type Kube struct {
	Kubeconfig string // empty: the pod's service account
	APIServer  string // overrides the kubeconfig's server, or the in-cluster ClusterIP
	QPS        float32
	Burst      int
}

// DefaultPolicyWorkers is how many NetworkPolicy keys sync at once.
const DefaultPolicyWorkers = 8

// Master configures `ovnkube master`.
type Master struct {
	Kube           Kube
	NBAddress      []string
	NBTLS          *tls.Config // for ssl: addresses
	ClusterSubnets []ClusterSubnet
	ServiceCIDRs   []netip.Prefix
	// JoinSubnets are the join switch's ranges, one per family of the
	// cluster subnets (--join-subnet's other families are left out).
	JoinSubnets []netip.Prefix
	// Zone, when set, is the zone whose NB this master writes (zone mode,
	// OVN interconnection; issue 38, being built: nodes and pods so far):
	// only nodes annotated with it (annotations.NodeZone) and their pods,
	// their host subnets read from the node annotation (another allocates
	// them), and each node's transit port at TransitSubnets' addresses.
	Zone           string
	TransitSubnets []netip.Prefix
	// PodWorkers bounds concurrent pod syncs; their NB writes share transactions
	// and their annotation patches run in parallel.
	PodWorkers     int
	NodeWorkers    int
	ServiceWorkers int
	// NamespaceIsolation makes every namespace a tenant of its own
	// (multitenant mode; see policy.TenantAnnotation).
	NamespaceIsolation bool
	// PolicyWorkers bounds concurrent NetworkPolicy, peer set and namespace syncs.
	PolicyWorkers int
	// RetryMaxDelay caps the backoff of a failing object's retries.
	RetryMaxDelay time.Duration
	// ResyncInterval is how often every object is synced again whatever the
	// events said (a safety net: an unchanged object sends nothing); 0 is
	// DefaultResyncInterval, negative turns it off.
	ResyncInterval time.Duration
	// ExternalIPCIDRs are the only ranges a Service's external IPs and
	// LoadBalancer ingress IPs may come from (--external-ip-cidrs; none:
	// every one is refused).
	ExternalIPCIDRs []netip.Prefix
	// NodePortRange is the API server's --service-node-port-range; zero:
	// DefaultNodePortRange.
	NodePortRange PortRange
	// GuardedDBs are the NB's and SB's IP endpoints, which an ACL on every
	// node switch keeps pods from (topology.DBGuard).
	GuardedDBs []netip.AddrPort
	// DNSServers ("host:port") resolve the DNS names of egress firewalls
	// and admin policies (--dns-servers; none: such names match nothing).
	DNSServers []string
	// DNSTapAddress is where the master takes the cluster DNS's dnstap
	// stream (--dns-tap-address, host:port; empty: not taken): the answers
	// it gave its clients, which give wildcard DNS names their addresses.
	// Only the endpoints of DNSService may send it.
	DNSTapAddress string
	// DNSService is the cluster DNS's Service, namespace/name
	// (--dns-service).
	DNSService string
	// NorthdBackoff is the longest ovn-northd waits after a run before the
	// next (NB_Global options:northd-backoff-interval-ms, which the master
	// keeps; --northd-backoff-interval; 0: northd runs at once).
	NorthdBackoff time.Duration
	// EgressIPReachTimeout bounds each reachability probe of an egress node
	// (--egressip-reachability-timeout; 0: no probes).
	EgressIPReachTimeout time.Duration
}

// DefaultDNSService is --dns-service's default: kubeadm's name of the
// cluster DNS's Service.
const DefaultDNSService = "kube-system/kube-dns"

// DefaultNorthdBackoff is --northd-backoff-interval's default, the value
// upstream OVN-Kubernetes deploys (OVN recommends less than 500 ms: the
// southbound lags by up to that much more under churn).
const DefaultNorthdBackoff = 300 * time.Millisecond

// MaxNorthdBackoff bounds --northd-backoff-interval.
const MaxNorthdBackoff = 5 * time.Second

// DefaultResyncInterval is the master's periodic full resync.
const DefaultResyncInterval = 5 * time.Minute

// Defaults shared by every command that takes the setting.
const (
	DefaultClusterSubnet = "10.244.0.0/16"
	// DefaultClusterSubnetFlag is --cluster-subnet's default: CIDR/HOSTLEN,
	// /24 host subnets.
	DefaultClusterSubnetFlag = DefaultClusterSubnet + "/24"
	DefaultServiceCIDR       = "10.96.0.0/16"
	DefaultJoinSubnet        = "100.64.0.0/16"
	DefaultJoinSubnetV6      = "fd98::/64"
	// DefaultJoinSubnetFlag is --join-subnet's default: a range per family,
	// of which a cluster uses those of its families (upstream's ranges).
	DefaultJoinSubnetFlag = DefaultJoinSubnet + "," + DefaultJoinSubnetV6
)
