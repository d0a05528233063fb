package dnsname

import (
	"bufio"
	"fmt"
	"net"
	"net/netip"
	"os"
	"strings"
)

const (
	maxNameLen  = 253
	maxLabelLen = 63
)

// Normalize lowercases a DNS name and strips one trailing dot. ok is false
// when the name is not valid: empty, longer than 253 characters, or with a
// label that is empty, longer than 63 characters or has a character outside
// [A-Za-z0-9-]. A leading "*." wildcard is not valid.
func Normalize(name string) (string, bool) {
	name = strings.ToLower(strings.TrimSuffix(name, "."))
	if name == "" || len(name) > maxNameLen {
		return "", false
	}
	for _, label := range strings.Split(name, ".") {
		if !validLabel(label) {
			return "", false
		}
	}
	return name, true
}

// Wildcard is the prefix of a wildcard name: "*.example.com" matches the
// names under example.com, at any depth, but not example.com itself.
const Wildcard = "*."

// NormalizePattern is Normalize for a name or a wildcard name
// ("*." followed by a valid name).
func NormalizePattern(name string) (string, bool) {
	if rest, ok := strings.CutPrefix(name, Wildcard); ok {
		norm, ok := Normalize(rest)
		return Wildcard + norm, ok
	}
	return Normalize(name)
}

// Matches says whether a normalized name falls under a normalized pattern:
// equal to a plain name, under a wildcard's domain.
func Matches(pattern, name string) bool {
	if suffix, ok := strings.CutPrefix(pattern, Wildcard); ok {
		return strings.HasSuffix(name, "."+suffix)
	}
	return pattern == name
}

func validLabel(label string) bool {
	if label == "" || len(label) > maxLabelLen {
		return false
	}
	for i := 0; i < len(label); i++ {
		c := label[i]
		if (c < 'a' || c > 'z') && (c < '0' || c > '9') && c != '-' {
			return false
		}
	}
	return true
}

// ServersFromResolvConf reads the nameserver lines of the resolv.conf at path
// and returns them as "host:port" with port 53, IPv6 addresses bracketed.
// Comments and other lines (search, options, ...) are ignored. It fails when
// the file cannot be read, when a nameserver is not an IP address, or when
// there is no nameserver at all.
func ServersFromResolvConf(path string) ([]string, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read resolv.conf %s: %w", path, err)
	}
	defer f.Close()
	var servers []string
	sc := bufio.NewScanner(f)
	for line := 1; sc.Scan(); line++ {
		fields := strings.Fields(stripComment(sc.Text()))
		if len(fields) < 2 || fields[0] != "nameserver" {
			continue
		}
		addr, err := netip.ParseAddr(fields[1])
		if err != nil {
			return nil, fmt.Errorf("resolv.conf %s line %d: nameserver %q is not an IP address", path, line, fields[1])
		}
		servers = append(servers, net.JoinHostPort(addr.Unmap().String(), "53"))
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read resolv.conf %s: %w", path, err)
	}
	if len(servers) == 0 {
		return nil, fmt.Errorf("resolv.conf %s has no nameserver", path)
	}
	return servers, nil
}

// stripComment cuts a resolv.conf line at the first '#' or ';'.
func stripComment(line string) string {
	if i := strings.IndexAny(line, "#;"); i >= 0 {
		return line[:i]
	}
	return line
}
