package dnsname

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestNormalize(t *testing.T) {
	label63 := strings.Repeat("a", 63)
	name253 := strings.Repeat(label63+".", 3) + strings.Repeat("b", 61) // 3*64 + 61
	for _, tc := range []struct {
		in   string
		want string
		ok   bool
	}{
		{"example.com", "example.com", true},
		{"Example.COM", "example.com", true},
		{"example.com.", "example.com", true},
		{"localhost", "localhost", true},
		{"a-b.c-d9.example", "a-b.c-d9.example", true},
		{"xn--bcher-kva.example", "xn--bcher-kva.example", true},
		{label63 + ".example", label63 + ".example", true},
		{name253, name253, true},
		{name253 + ".", name253, true},
		{"", "", false},
		{".", "", false},
		{"example.com..", "", false},
		{".example.com", "", false},
		{"a..example", "", false},
		{"*.example.com", "", false},
		{"*", "", false},
		{"a*.example.com", "", false},
		{strings.Repeat("a", 64) + ".example", "", false},
		{name253 + "b", "", false},
		{"under_score.example", "", false},
		{"space .example", "", false},
		{"exämple.com", "", false},
		{"192.0.2.1:53", "", false},
	} {
		got, ok := Normalize(tc.in)
		if got != tc.want || ok != tc.ok {
			t.Errorf("Normalize(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
}

func TestServersFromResolvConf(t *testing.T) {
	for _, tc := range []struct {
		name    string
		content string
		want    []string
		wantErr string
	}{
		{
			name: "kubelet style",
			content: "search default.svc.cluster.local svc.cluster.local cluster.local\n" +
				"nameserver 10.96.0.10\n" +
				"options ndots:5\n",
			want: []string{"10.96.0.10:53"},
		},
		{
			name: "mixed families and comments",
			content: "# generated\n" +
				"; another comment\n" +
				"nameserver 192.0.2.53 # primary\n" +
				"  nameserver\t2001:db8::53\n" +
				"#nameserver 192.0.2.99\n" +
				"nameserver fe80::1%eth0\n" +
				"nameserver ::ffff:192.0.2.54\n" +
				"options edns0 rotate\n" +
				"domain example\n",
			want: []string{"192.0.2.53:53", "[2001:db8::53]:53", "[fe80::1%eth0]:53", "192.0.2.54:53"},
		},
		{name: "no nameserver", content: "search example\noptions ndots:1\n", wantErr: "has no nameserver"},
		{name: "not an address", content: "nameserver dns.example\n", wantErr: `line 1: nameserver "dns.example"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "resolv.conf")
			if err := os.WriteFile(path, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			got, err := ServersFromResolvConf(path)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || !strings.Contains(err.Error(), path) {
					t.Fatalf("error = %v, want one naming %s and saying %q", err, path, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("got %v, %v; want %v", got, err, tc.want)
			}
		})
	}
	if _, err := ServersFromResolvConf(filepath.Join(t.TempDir(), "missing")); err == nil {
		t.Error("a missing file gave no error")
	}
}
