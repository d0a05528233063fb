package config

import (
	"fmt"
	"strconv"
	"strings"
)

// PortRange is an inclusive range of ports.
type PortRange struct{ First, Last int32 }

// DefaultNodePortRange is the API server's default --service-node-port-range.
var DefaultNodePortRange = PortRange{First: 30000, Last: 32767}

// Contains says whether port is in the range.
func (r PortRange) Contains(port int32) bool { return port >= r.First && port <= r.Last }

func (r PortRange) String() string { return fmt.Sprintf("%d-%d", r.First, r.Last) }

// ParsePortRange parses a node port range as the API server's
// --service-node-port-range takes it: "FIRST-LAST", "FIRST+COUNT" or one port.
func ParsePortRange(s string) (PortRange, error) {
	bad := fmt.Errorf("%q is not a port range such as 30000-32767", s)
	s = strings.TrimSpace(s)
	num := func(v string) (int32, bool) {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
		return int32(n), err == nil && n >= 1 && n <= 65535
	}
	var r PortRange
	var ok1, ok2 bool
	if a, b, found := strings.Cut(s, "-"); found {
		r.First, ok1 = num(a)
		r.Last, ok2 = num(b)
	} else if a, b, found := strings.Cut(s, "+"); found {
		var count int32
		r.First, ok1 = num(a)
		n, err := strconv.ParseInt(strings.TrimSpace(b), 10, 32)
		count, ok2 = int32(n), err == nil && n >= 0
		r.Last = r.First + count
		ok2 = ok2 && int64(r.First)+n <= 65535
	} else {
		r.First, ok1 = num(s)
		r.Last, ok2 = r.First, ok1
	}
	if !ok1 || !ok2 {
		return PortRange{}, bad
	}
	if r.Last < r.First {
		return PortRange{}, fmt.Errorf("%q: the last port is below the first", s)
	}
	return r, nil
}
