package config

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// ParseOVSDBAddress validates an OVSDB remote list: comma-separated
// "unix:PATH", "tcp:HOST:PORT" or "ssl:HOST:PORT" entries (several for a clustered DB).
func ParseOVSDBAddress(s string) ([]string, error) {
	var out []string
	for _, ep := range strings.Split(s, ",") {
		ep = strings.TrimSpace(ep)
		if ep == "" {
			continue
		}
		if err := checkOVSDBEndpoint(ep); err != nil {
			return nil, err
		}
		out = append(out, ep)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no OVSDB address given")
	}
	return out, nil
}

func checkOVSDBEndpoint(ep string) error {
	scheme, rest, ok := strings.Cut(ep, ":")
	if !ok || rest == "" {
		return fmt.Errorf("%q is not an OVSDB address (want unix:/path, tcp:host:port or ssl:host:port)", ep)
	}
	switch scheme {
	case "unix":
		return nil
	case "tcp", "ssl":
		return checkHostPort(ep, rest)
	}
	return fmt.Errorf("%q: scheme %q is not one of unix, tcp, ssl", ep, scheme)
}

// checkHostPort accepts HOST:PORT as OVS writes it: an IP address or DNS
// name, an IPv6 address in brackets, and a port 1..65535 in decimal.
func checkHostPort(ep, hostPort string) error {
	host, port, err := net.SplitHostPort(hostPort)
	if err != nil || host == "" || net.JoinHostPort(host, port) != hostPort {
		return fmt.Errorf("%q needs host:port (an IPv6 address in brackets, e.g. tcp:[fd00::1]:6641)", ep)
	}
	if _, err := netip.ParseAddr(host); err != nil && len(validation.IsDNS1123Subdomain(strings.ToLower(host))) > 0 {
		return fmt.Errorf("%q: host %q is neither an IP address nor a DNS name", ep, host)
	}
	if _, err := parseDecimal(port, 1, 65535); err != nil {
		return fmt.Errorf("%q: port %v", ep, err)
	}
	return nil
}

// DBEndpoints are the IP endpoints of OVSDB remote lists (tcp: and ssl:
// entries whose host is an IP address), for keeping pods away from them;
// names lists the entries that name their host (not guarded: an ACL
// matches addresses, and a name may resolve differently later).
func DBEndpoints(remotes []string) (out []netip.AddrPort, names []string) {
	for _, ep := range remotes {
		scheme, rest, _ := strings.Cut(ep, ":")
		if scheme != "tcp" && scheme != "ssl" {
			continue
		}
		if ap, err := netip.ParseAddrPort(rest); err == nil {
			out = append(out, ap)
		} else {
			names = append(names, ep)
		}
	}
	return out, names
}
