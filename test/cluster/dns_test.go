package cluster

import (
	"strings"
	"testing"
)

// The Corefile's hosts block names the external host (by both its names)
// by its address of each family of the cluster, and passes every other
// name on.
func TestCorefileHosts(t *testing.T) {
	for family, want := range map[string][]string{
		IPv4: {externalIP},
		IPv6: {externalIP6},
		Dual: {externalIP, externalIP6},
	} {
		cf := New(Config{IPFamily: family, Log: func(string, ...any) {}}).corefile()
		hosts := cf[strings.Index(cf, "hosts {"):]
		hosts = hosts[:strings.Index(hosts, "}")]
		var got []string
		for _, l := range strings.Split(hosts, "\n") {
			if f := strings.Fields(l); len(f) == 3 && f[1] == externalName && f[2] == wildName {
				got = append(got, f[0])
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") || !strings.Contains(hosts, "fallthrough") {
			t.Errorf("%s: hosts block %q: want %v and fallthrough", family, hosts, want)
		}
	}
}
