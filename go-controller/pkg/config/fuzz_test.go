package config

import (
	"net"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// The flag parsers' fuzz targets check properties of what they accept, each
// against an oracle other than the parser itself. Seeds: f.Add below and
// testdata/fuzz/<target>.

func FuzzParseCIDR(f *testing.F) {
	for _, s := range []string{"10.244.0.0/16", "fd00:10:244::/48", "10.244.1.0/16", "0.0.0.0/0", "::ffff:10.0.0.0/104", "fe80::%eth0/64", "10.0.0.0/+8", " 10.0.0.0/8 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		p, err := ParseCIDR(in)
		if err != nil {
			return
		}
		if !p.IsValid() || p.Masked() != p || p.Addr().Zone() != "" {
			t.Fatalf("ParseCIDR(%q) = %s: not a network address without zone", in, p)
		}
		if back, err := ParseCIDR(p.String()); err != nil || back != p {
			t.Fatalf("ParseCIDR(%q) = %s, which parses back as %s, %v", in, p, back, err)
		}
		_, ipnet, err := net.ParseCIDR(strings.TrimSpace(in))
		if err != nil {
			t.Fatalf("ParseCIDR(%q) = %s, but net.ParseCIDR refuses it: %v", in, p, err)
		}
		if ones, _ := ipnet.Mask.Size(); ones != p.Bits() || !ipnet.IP.Equal(p.Addr().AsSlice()) {
			t.Fatalf("ParseCIDR(%q) = %s; net.ParseCIDR says %s", in, p, ipnet)
		}
	})
}

func FuzzParseClusterSubnet(f *testing.F) {
	for _, s := range []string{"10.244.0.0/16/24", "10.244.0.0/16", "fd00:10:244::/48/64", "10.0.0.0/16/-1", "10.0.0.0/16/+24", "10.0.0.0/16/", "10.0.0.0/16/024", "0.0.0.0/4/30", "10.0.0.0/8/99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		cs, err := ParseClusterSubnet(in)
		if err != nil {
			return
		}
		p, hostLen := cs.CIDR, cs.HostSubnetLength
		if _, err := ParseCIDR(p.String()); err != nil {
			t.Fatalf("ParseClusterSubnet(%q): range %s is not a CIDR ParseCIDR accepts: %v", in, p, err)
		}
		maxHostLen := p.Addr().BitLen() - 2 // room for the gateway, management port and a pod
		if hostLen < p.Bits() || hostLen > maxHostLen || hostLen-p.Bits() > 24 {
			t.Fatalf("ParseClusterSubnet(%q) = %s: host subnet length out of bounds", in, cs)
		}
		if back, err := ParseClusterSubnet(cs.String()); err != nil || back != cs {
			t.Fatalf("ParseClusterSubnet(%q) = %s, which parses back as %s, %v", in, cs, back, err)
		}
		// A host length given is the one used, written the same way.
		if parts := strings.Split(strings.TrimSpace(in), "/"); len(parts) == 3 && parts[2] != strconv.Itoa(hostLen) {
			t.Fatalf("ParseClusterSubnet(%q) = %s: host length %q read as %d", in, cs, parts[2], hostLen)
		}
	})
}

func FuzzParseOVSDBAddress(f *testing.F) {
	for _, s := range []string{"unix:/var/run/ovn/ovnnb_db.sock", "tcp:127.0.0.1:6641", "ssl:10.0.0.1:6641,ssl:10.0.0.2:6641", "tcp:[::1]:6641",
		"tcp:127.0.0.1:http", "tcp:h:-1", "tcp:h:+1", "tcp:h:65536", "tcp:::1:6641", "ptcp:6641", ",", "tcp:[fe80::1%eth0]:6641"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		eps, err := ParseOVSDBAddress(in)
		if err != nil {
			return
		}
		if len(eps) == 0 {
			t.Fatalf("ParseOVSDBAddress(%q) accepted no endpoint", in)
		}
		for _, ep := range eps {
			checkAcceptedEndpoint(t, in, ep)
		}
		if back, err := ParseOVSDBAddress(strings.Join(eps, ",")); err != nil || !reflect.DeepEqual(back, eps) {
			t.Fatalf("ParseOVSDBAddress(%q) = %q, which parses back as %q, %v", in, eps, back, err)
		}
	})
}

// checkAcceptedEndpoint holds an accepted endpoint to what OVS can dial:
// unix:PATH, or tcp:/ssl: with HOST:PORT that the net package splits and
// joins back unchanged and a port 1..65535 written canonically.
func checkAcceptedEndpoint(t *testing.T, in, ep string) {
	t.Helper()
	if ep != strings.TrimSpace(ep) || strings.Contains(ep, ",") {
		t.Fatalf("ParseOVSDBAddress(%q): endpoint %q has spaces or a comma", in, ep)
	}
	scheme, rest, _ := strings.Cut(ep, ":")
	switch scheme {
	case "unix":
		if rest == "" {
			t.Fatalf("ParseOVSDBAddress(%q): %q has no path", in, ep)
		}
		return
	case "tcp", "ssl":
	default:
		t.Fatalf("ParseOVSDBAddress(%q): %q has scheme %q", in, ep, scheme)
	}
	host, port, err := net.SplitHostPort(rest)
	if err != nil || host == "" || net.JoinHostPort(host, port) != rest {
		t.Fatalf("ParseOVSDBAddress(%q): %q is not HOST:PORT (%v)", in, ep, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 || strconv.FormatUint(n, 10) != port {
		t.Fatalf("ParseOVSDBAddress(%q): %q has port %q", in, ep, port)
	}
}
