package config

import "testing"

func TestParsePortRange(t *testing.T) {
	for in, want := range map[string]PortRange{"30000-32767": {30000, 32767}, " 20000 - 20010 ": {20000, 20010}, "30000+2767": {30000, 32767}, "8080": {8080, 8080}, "1-65535": {1, 65535}} {
		if got, err := ParsePortRange(in); err != nil || got != want {
			t.Errorf("ParsePortRange(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"", "30000-", "-1", "0-100", "32767-30000", "30000-70000", "a-b", "65000+1000", "30000+-1", "1-2-3"} {
		if got, err := ParsePortRange(in); err == nil {
			t.Errorf("ParsePortRange(%q) = %v, want an error", in, got)
		}
	}
}

func FuzzParsePortRange(f *testing.F) {
	for _, s := range []string{"30000-32767", "30000+2767", "8080", "", "0-1", "65535+1", "1-2-3", " 1 - 2 "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParsePortRange(s)
		if err == nil && (r.First < 1 || r.Last > 65535 || r.Last < r.First) {
			t.Fatalf("ParsePortRange(%q) = %v, a range that is not one", s, r)
		}
	})
}
