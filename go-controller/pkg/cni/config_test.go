package cni

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/containernetworking/cni/pkg/types"
)

func TestParseConf(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantCode uint
		check    func(*NetConf) bool
	}{
		{name: "defaults", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni"}`, check: func(c *NetConf) bool {
			return c.MTU == 1400 && c.OVSAddress == "unix:/var/run/openvswitch/db.sock" &&
				c.annotationTimeout == 30*time.Second && c.ovnInstalledTimeout == 20*time.Second && !c.DisableTxChecksumOffload
		}},
		{name: "all keys", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","kubeconfig":"/k","ovsAddress":"unix:/x.sock","mtu":1450,"annotationTimeout":"2s","ovnInstalledTimeout":"0s","disableTxChecksumOffload":true}`,
			check: func(c *NetConf) bool {
				return c.Kubeconfig == "/k" && c.MTU == 1450 && c.annotationTimeout == 2*time.Second && c.ovnInstalledTimeout == 0 && c.DisableTxChecksumOffload
			}},
		{name: "not json", in: `{`, wantCode: types.ErrDecodingFailure},
		{name: "bad mtu", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","mtu":100}`, wantCode: types.ErrInvalidNetworkConfig},
		{name: "bad duration", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","ovnInstalledTimeout":"-1s"}`, wantCode: types.ErrInvalidNetworkConfig},
		{name: "bad ovs address", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","ovsAddress":"/x.sock"}`, wantCode: types.ErrInvalidNetworkConfig},
		{name: "bad prevResult", in: `{"cniVersion":"1.0.0","name":"n","type":"ovn_cni","prevResult":{"ips":[{"address":"x"}]}}`, wantCode: types.ErrDecodingFailure},
	}
	for _, tt := range tests {
		c, err := parseConf([]byte(tt.in))
		if tt.wantCode != 0 {
			var e *types.Error
			if !errors.As(err, &e) || e.Code != tt.wantCode {
				t.Errorf("%s: error %v, want code %d", tt.name, err, tt.wantCode)
			}
			continue
		}
		if err != nil || !tt.check(c) {
			t.Errorf("%s: %+v, %v", tt.name, c, err)
		}
	}
}

func TestParseArgs(t *testing.T) {
	if _, err := parseArgs("K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p;K8S_POD_UID=u;IgnoreUnknown=1;FOO=bar", true); err != nil {
		t.Fatal(err)
	}
	var e *types.Error
	if _, err := parseArgs("K8S_POD_NAMESPACE=ns", true); !errors.As(err, &e) || e.Code != types.ErrInvalidEnvironmentVariables {
		t.Fatalf("missing pod name: %v", err)
	}
	if _, err := parseArgs("", false); err != nil {
		t.Fatalf("DEL without pod args: %v", err)
	}
}

func TestHostVethName(t *testing.T) {
	seen := map[string]string{}
	for _, id := range []string{"0123456789abcdef0123", "0123456789abcdef0124", "eth0", "breth0", "ovn-k8s-mp0", "br-int", "x"} {
		got := HostVethName(id)
		if len(got) > 15 || !strings.HasPrefix(got, "ovn") || strings.Contains(got, "-") {
			t.Errorf("HostVethName(%q) = %q: not a 15-character ovn<hex> name", id, got)
		}
		if got == id {
			t.Errorf("HostVethName(%q) names the container ID's own interface", id)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%q and %q share host end %q", id, other, got)
		}
		seen[got] = id
	}
	if HostVethName("abc") != HostVethName("abc") {
		t.Error("not deterministic")
	}
}
