package config

import (
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
		{in: "10.244.0.0/24/24", want: "10.244.0.0/24/24"},
		{in: "10.244.1.0/16/24", wantErr: "did you mean 10.244.0.0/16"},
		{in: "10.244.0.0/16/15", wantErr: "between the prefix length 16"},
		{in: "10.244.0.0/16/31", wantErr: "leaves no room"},
		{in: "10.244.0.0/16/x", wantErr: "not a number"},
		{in: "banana", wantErr: "not a CIDR"},
		{in: "0.0.0.0/4/30", wantErr: "more than the 24 supported"},
		{in: "", wantErr: "not a CIDR"},
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
