package nbdb

import (
	"strings"
	"testing"
	"unsafe"
)

// Copies of two rows decoded apart share their map strings (the cache keeps
// copies), and a copy shares nothing a write to the original could change.
func TestDeepCopyInternsMapStrings(t *testing.T) {
	row := func() *LogicalSwitchPort {
		return &LogicalSwitchPort{
			Name:        "ns_a",
			ExternalIDs: map[string]string{strings.Clone("k8s.ovn.org/owner-type"): strings.Clone("pod")},
			Options:     map[string]string{strings.Clone("requested-chassis"): strings.Clone("node1")},
		}
	}
	a, b := row().DeepCopy(), row().DeepCopy()
	for _, m := range []struct{ a, b map[string]string }{{a.ExternalIDs, b.ExternalIDs}, {a.Options, b.Options}} {
		for k, v := range m.a {
			var kb string
			for k2 := range m.b {
				kb = k2
			}
			if unsafe.StringData(k) != unsafe.StringData(kb) || unsafe.StringData(v) != unsafe.StringData(m.b[kb]) {
				t.Errorf("the copies hold %q: %q apart", k, v)
			}
		}
	}
	orig := row()
	c := orig.DeepCopy()
	orig.ExternalIDs["x"] = "y"
	orig.Options["requested-chassis"] = "node2"
	if len(c.ExternalIDs) != 1 || c.Options["requested-chassis"] != "node1" {
		t.Errorf("the copy changed with its original: %v %v", c.ExternalIDs, c.Options)
	}
}
