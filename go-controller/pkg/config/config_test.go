package config

import (
	"fmt"
	"strings"
	"testing"
)

func TestParseClusterSubnet(t *testing.T) {
	tests := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "10.244.0.0/16/24", want: "10.244.0.0/16/24"},
		{in: "10.244.0.0/16", want: "10.244.0.0/16/24"},
		{in: " 10.128.0.0/14/23 ", want: "10.128.0.0/14/23"},
		{in: "fd00:10:244::/48", want: "fd00:10:244::/48/64"},
		{in: "fd00:10:244::/48/64", want: "fd00:10:244::/48/64"},
		{in: "10.244.0.0/24/24", wantErr: "must be longer than the prefix length 24"},
		{in: "fd00::/48/63", wantErr: "IPv6 host subnets are /64 to /120"},
		{in: "fd00::/112/121", wantErr: "IPv6 host subnets are /64 to /120"},
		{in: "fd00::/104/120", want: "fd00::/104/120"},
		{in: "fd00::/64/64", wantErr: "must be longer than the prefix length 64"},
		{in: "10.244.1.0/16/24", wantErr: "did you mean 10.244.0.0/16"},
		{in: "10.244.0.0/16/15", wantErr: "must be longer than the prefix length 16"},
		{in: "10.244.0.0/16/31", wantErr: "leaves no room"},
		{in: "10.244.0.0/16/x", wantErr: "not a number"},
		{in: "banana", wantErr: "not a CIDR"},
		{in: "0.0.0.0/4/30", wantErr: "more than the 24 supported"},
		{in: "", wantErr: "not a CIDR"},
		// A host length is decimal digits in range, nothing else: these used to
		// become the /24 default ("-1") or be read by strconv.Atoi ("+24").
		{in: "10.0.0.0/16/-1", wantErr: `host subnet length "-1" is not a number`},
		{in: "10.0.0.0/16/+24", wantErr: `host subnet length "+24" is not a number`},
		{in: "10.0.0.0/16/", wantErr: "host subnet length is empty"},
		{in: "10.0.0.0/16/024", wantErr: "leading zero"},
		{in: "10.0.0.0/16/ 24", wantErr: "not a number"},
		{in: "10.0.0.0/16/99999999999999999999", wantErr: "outside 0..128"},
		{in: "fd00::/48/0x40", wantErr: "not a number"},
	}
	for _, tt := range tests {
		got, err := ParseClusterSubnet(tt.in)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseClusterSubnet(%q) error = %v, want one containing %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseClusterSubnet(%q) unexpected error %v", tt.in, err)
			continue
		}
		if got.String() != tt.want {
			t.Errorf("ParseClusterSubnet(%q) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseClusterSubnetsRejectsOverlap(t *testing.T) {
	if _, err := ParseClusterSubnets([]string{"10.244.0.0/16/24,10.244.128.0/17/24"}); err == nil || !strings.Contains(err.Error(), "overlap") {
		t.Fatalf("want overlap error, got %v", err)
	}
	got, err := ParseClusterSubnets([]string{"10.244.0.0/16/24", "fd00::/48"})
	if err != nil || len(got) != 2 {
		t.Fatalf("dual-stack list: %v %v", got, err)
	}
	if _, err := ParseClusterSubnets(nil); err == nil {
		t.Fatal("empty list accepted")
	}
	if _, err := ParseClusterSubnets([]string{"10.244.0.0/16/24,10.245.0.0/16/24"}); err == nil || !strings.Contains(err.Error(), "one range per family") {
		t.Fatalf("two IPv4 ranges: %v", err)
	}
	if _, err := ParseClusterSubnets([]string{"fd00:1::/48,fd00:2::/48"}); err == nil || !strings.Contains(err.Error(), "one range per family") {
		t.Fatalf("two IPv6 ranges: %v", err)
	}
}

// Service ranges: one per family, in the order given (the first is primary).
func TestParseServiceCIDRs(t *testing.T) {
	for _, tt := range []struct {
		in      string
		wantErr string
		want    string // the ranges in order, the primary first
	}{
		{in: "10.96.0.0/16", want: "[10.96.0.0/16]"},
		{in: "fd00:10:96::/112", want: "[fd00:10:96::/112]"},
		{in: "10.96.0.0/16,fd00:10:96::/112", want: "[10.96.0.0/16 fd00:10:96::/112]"},
		{in: "fd00:10:96::/112,10.96.0.0/16", want: "[fd00:10:96::/112 10.96.0.0/16]"},
		{in: "10.96.0.0/16,10.97.0.0/16", wantErr: "one range per family"},
		{in: "", wantErr: "no service CIDR"},
		{in: "10.96.0.1/16", wantErr: "did you mean 10.96.0.0/16"},
	} {
		got, err := ParseServiceCIDRs([]string{tt.in})
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("ParseServiceCIDRs(%q) = %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParseServiceCIDRs(%q): %v", tt.in, err)
			continue
		}
		if fmt.Sprint(got) != tt.want {
			t.Errorf("ParseServiceCIDRs(%q) = %v, want %s", tt.in, got, tt.want)
		}
	}
}

func TestParseOVSDBAddress(t *testing.T) {
	tests := []struct {
		in      string
		want    int
		wantErr bool
	}{
		{"unix:/var/run/ovn/ovnnb_db.sock", 1, false},
		{"tcp:127.0.0.1:6641", 1, false},
		{"ssl:10.0.0.1:6641,ssl:10.0.0.2:6641,ssl:10.0.0.3:6641", 3, false},
		{"tcp:[::1]:6641", 1, false},
		{"tcp:127.0.0.1", 0, true},
		{"tcp:ovn-central.example.com:6641", 1, false},
		{"ssl:OVN-Central:6641", 1, false},
		{"tcp:[fe80::1%eth0]:6641", 1, false},
		// The port is a decimal number 1..65535 and the host an IP address or DNS name.
		{"tcp:127.0.0.1:http", 0, true},
		{"ssl:127.0.0.1:6641x", 0, true},
		{"tcp:127.0.0.1:0", 0, true},
		{"tcp:127.0.0.1:65536", 0, true},
		{"tcp:127.0.0.1:-1", 0, true},
		{"tcp:127.0.0.1:+6641", 0, true},
		{"tcp:127.0.0.1:06641", 0, true},
		{"ssl:10.0.0.1:6641,tcp:10.0.0.2:x", 0, true},
		{"tcp::6641", 0, true},
		{"tcp:::1:6641", 0, true},
		{"tcp:[127.0.0.1]:6641", 0, true},
		{"tcp:a b:6641", 0, true},
		{"tcp:host_name:6641", 0, true},
		{"http://x", 0, true},
		{"/var/run/nb.sock", 0, true},
		{"", 0, true},
	}
	for _, tt := range tests {
		got, err := ParseOVSDBAddress(tt.in)
		if (err != nil) != tt.wantErr || len(got) != tt.want {
			t.Errorf("ParseOVSDBAddress(%q) = %v, %v", tt.in, got, err)
		}
	}
}

func TestParseOVSDBAddressNamesThePortProblem(t *testing.T) {
	for in, want := range map[string]string{
		"tcp:127.0.0.1:http":  `port "http" is not a number`,
		"ssl:10.0.0.1:70000":  "port 70000 is outside 1..65535",
		"tcp:::1:6641":        "an IPv6 address in brackets",
		"tcp:a b:6641":        "neither an IP address nor a DNS name",
		"unix:/x,tcp:h:06641": `port "06641" has a leading zero`,
	} {
		if _, err := ParseOVSDBAddress(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseOVSDBAddress(%q) error = %v, want one containing %q", in, err, want)
		}
	}
}

func TestDBEndpoints(t *testing.T) {
	eps, names := DBEndpoints([]string{"unix:/run/ovn/ovnnb_db.sock", "ssl:10.0.0.10:6641", "tcp:[fd00::1]:6642", "tcp:central.example:6641"})
	if fmt.Sprint(eps) != "[10.0.0.10:6641 [fd00::1]:6642]" || fmt.Sprint(names) != "[tcp:central.example:6641]" {
		t.Fatalf("endpoints %v, names %v", eps, names)
	}
}

// --join-subnet: one range per family, of which the cluster keeps those of
// its own families (in its order); a cluster family without one is refused.
func TestParseJoinSubnets(t *testing.T) {
	v4, _ := ParseClusterSubnets([]string{"10.244.0.0/16/24"})
	dual, _ := ParseClusterSubnets([]string{"fd00:10:244::/48/64,10.244.0.0/16/24"})
	for _, tt := range []struct {
		in      string
		cluster []ClusterSubnet
		want    string
		wantErr string
	}{
		{in: DefaultJoinSubnetFlag, cluster: v4, want: "[100.64.0.0/16]"},
		{in: DefaultJoinSubnetFlag, cluster: dual, want: "[fd98::/64 100.64.0.0/16]"},
		{in: "100.64.0.0/16", cluster: dual, wantErr: "no range of the family of cluster subnet fd00:10:244::/48"},
		{in: "100.64.0.0/16,100.65.0.0/16", cluster: v4, wantErr: "one range per family"},
	} {
		got, err := ParseJoinSubnets([]string{tt.in}, tt.cluster)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: %v, %v; want an error containing %q", tt.in, got, err, tt.wantErr)
			}
			continue
		}
		if err != nil || fmt.Sprint(got) != tt.want {
			t.Errorf("%q: %v, %v; want %s", tt.in, got, err, tt.want)
		}
	}
}

// A host's addresses and next hops: one per family, unicast, in order.
func TestParseHostAddressesAndAddrs(t *testing.T) {
	if got, err := ParseHostAddresses("172.18.0.2/24, fc00::2/64"); err != nil || fmt.Sprint(got) != "[172.18.0.2/24 fc00::2/64]" {
		t.Errorf("dual-stack host addresses: %v, %v", got, err)
	}
	for _, bad := range []string{"172.18.0.2", "172.18.0.2/24,172.18.0.3/24", "224.0.0.1/4", "fe80::1/64", "", "::ffff:1.2.3.4/120"} {
		if got, err := ParseHostAddresses(bad); err == nil {
			t.Errorf("%q accepted as host addresses: %v", bad, got)
		}
	}
	if got, err := ParseAddrs("172.18.0.1,fc00::1"); err != nil || fmt.Sprint(got) != "[172.18.0.1 fc00::1]" {
		t.Errorf("next hops: %v, %v", got, err)
	}
	for _, bad := range []string{"x", "172.18.0.1,172.18.0.254", "fe80::1%eth0"} {
		if got, err := ParseAddrs(bad); err == nil {
			t.Errorf("%q accepted as next hops: %v", bad, got)
		}
	}
}
