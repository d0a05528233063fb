package config

import (
	"fmt"
	"strings"
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
		scheme, rest, ok := strings.Cut(ep, ":")
		if !ok || rest == "" {
			return nil, fmt.Errorf("%q is not an OVSDB address (want unix:/path, tcp:host:port or ssl:host:port)", ep)
		}
		switch scheme {
		case "unix":
		case "tcp", "ssl":
			i := strings.LastIndex(rest, ":")
			if i <= 0 || i == len(rest)-1 {
				return nil, fmt.Errorf("%q needs host:port", ep)
			}
		default:
			return nil, fmt.Errorf("%q: scheme %q is not one of unix, tcp, ssl", ep, scheme)
		}
		out = append(out, ep)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no OVSDB address given")
	}
	return out, nil
}
