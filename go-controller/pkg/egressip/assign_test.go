package egressip

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"
)

var t0 = time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)

// nd is an eligible node with the given networks.
func nd(name string, nets ...string) Node {
	n := Node{Name: name, Eligible: true}
	for _, s := range nets {
		n.Networks = append(n.Networks, netip.MustParsePrefix(s))
	}
	return n
}

// off is n made ineligible.
func off(n Node) Node { n.Eligible = false; return n }

// rq is a request created age seconds after t0 wanting ips.
func rq(name string, age int, ips ...string) Request {
	r := Request{Name: name, Created: t0.Add(time.Duration(age) * time.Second)}
	for _, s := range ips {
		r.IPs = append(r.IPs, netip.MustParseAddr(s))
	}
	return r
}

// cur is r with Current set from "ip=node" pairs.
func cur(r Request, pairs ...string) Request {
	r.Current = map[netip.Addr]string{}
	for _, p := range pairs {
		ip, n, _ := strings.Cut(p, "=")
		r.Current[netip.MustParseAddr(ip)] = n
	}
	return r
}

// placement renders a Result's assignments as "req:ip=node" strings, in
// request then IP order.
func placement(res Result) []string {
	var out []string
	for name, as := range res.Assigned {
		for _, a := range as {
			out = append(out, fmt.Sprintf("%s:%s=%s", name, a.IP, a.Node))
		}
	}
	slices.Sort(out)
	return out
}

// problems renders a Result's problems as "req: sentence" strings.
func problems(res Result) []string {
	var out []string
	for name, ps := range res.Problems {
		for _, p := range ps {
			out = append(out, name+": "+p)
		}
	}
	slices.Sort(out)
	return out
}

func TestAssign(t *testing.T) {
	const v4net = "172.18.0.2/16"
	three := []Node{nd("a", v4net), nd("b", v4net), nd("c", v4net)}
	tests := []struct {
		name     string
		reqs     []Request
		nodes    []Node
		want     []string
		problems []string // substrings, one per problem, in sorted order
	}{{
		name:  "balance over 3 nodes",
		reqs:  []Request{rq("e1", 0, "172.18.1.1", "172.18.1.2"), rq("e2", 1, "172.18.1.3", "172.18.1.4"), rq("e3", 2, "172.18.1.5", "172.18.1.6")},
		nodes: three,
		// e1 -> a, b; e2 -> c (least), then a (a,b tie at 1; a by name; c is e2's); e3 -> b, c.
		want: []string{"e1:172.18.1.1=a", "e1:172.18.1.2=b", "e2:172.18.1.3=c", "e2:172.18.1.4=a", "e3:172.18.1.5=b", "e3:172.18.1.6=c"},
	}, {
		name:  "stability: current kept although another node is emptier",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1"), "172.18.1.1=c"), cur(rq("e2", 1, "172.18.1.2"), "172.18.1.2=c")},
		nodes: three,
		want:  []string{"e1:172.18.1.1=c", "e2:172.18.1.2=c"},
	}, {
		name: "stability: kept IPs count before new ones are placed",
		// e1 (older) has a new IP; e2's IP stays on a: e1's goes to b, not a.
		reqs:  []Request{rq("e1", 0, "172.18.1.1"), cur(rq("e2", 1, "172.18.1.2"), "172.18.1.2=a")},
		nodes: []Node{nd("a", v4net), nd("b", v4net)},
		want:  []string{"e1:172.18.1.1=b", "e2:172.18.1.2=a"},
	}, {
		name:  "stability: current dropped when its node becomes ineligible, moved to the least loaded",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1"), "172.18.1.1=a"), cur(rq("e2", 1, "172.18.1.2"), "172.18.1.2=b")},
		nodes: []Node{off(nd("a", v4net)), nd("b", v4net), nd("c", v4net)},
		want:  []string{"e1:172.18.1.1=c", "e2:172.18.1.2=b"},
	}, {
		name:  "stability: current dropped when its node loses the network, moved to the least loaded",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1"), "172.18.1.1=a"), cur(rq("e2", 1, "172.18.1.2"), "172.18.1.2=b")},
		nodes: []Node{nd("a", "10.0.0.2/24"), nd("b", v4net), nd("c", v4net)},
		want:  []string{"e1:172.18.1.1=c", "e2:172.18.1.2=b"},
	}, {
		name:  "stability: current on an unknown node is ignored",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1"), "172.18.1.1=gone")},
		nodes: three,
		want:  []string{"e1:172.18.1.1=a"},
	}, {
		name: "failover: a node goes ineligible, only its IPs move",
		reqs: []Request{
			cur(rq("e1", 0, "172.18.1.1", "172.18.1.2"), "172.18.1.1=a", "172.18.1.2=b"),
			cur(rq("e2", 1, "172.18.1.3", "172.18.1.4"), "172.18.1.3=b", "172.18.1.4=c"),
			cur(rq("e3", 2, "172.18.1.5"), "172.18.1.5=a"),
		},
		nodes: []Node{nd("a", v4net), off(nd("b", v4net)), nd("c", v4net)},
		// b's IPs: e1's .2 cannot go to a (e1 holds .1 there) -> c; e2's .3 cannot go to c -> a.
		want: []string{"e1:172.18.1.1=a", "e1:172.18.1.2=c", "e2:172.18.1.3=a", "e2:172.18.1.4=c", "e3:172.18.1.5=a"},
	}, {
		name:  "families: IPv6 IP only to a node with an IPv6 network",
		reqs:  []Request{rq("e1", 0, "fc00::10"), rq("e2", 1, "172.18.1.1")},
		nodes: []Node{nd("a", v4net), nd("b", v4net), nd("z", "fc00::3/64")},
		want:  []string{"e1:fc00::10=z", "e2:172.18.1.1=a"},
	}, {
		name:  "families: dual-stack request",
		reqs:  []Request{rq("e1", 0, "fc00::10", "172.18.1.1")},
		nodes: []Node{nd("a", v4net, "fc00::2/64"), nd("b", v4net, "fc00::3/64")},
		want:  []string{"e1:172.18.1.1=a", "e1:fc00::10=b"},
	}, {
		name:     "families: IPv6 IP and IPv4-only nodes",
		reqs:     []Request{rq("e1", 0, "fc00::10")},
		nodes:    three,
		problems: []string{"e1: no eligible node has a network containing fc00::10 (label nodes k8s.ovn.org/egress-assignable)"},
	}, {
		name:     "conflict: older wins",
		reqs:     []Request{rq("young", 5, "172.18.1.1", "172.18.1.2"), rq("old", 1, "172.18.1.1")},
		nodes:    three,
		want:     []string{"old:172.18.1.1=a", "young:172.18.1.2=b"},
		problems: []string{"young: egress IP 172.18.1.1 is EgressIP old's"},
	}, {
		name:     "conflict: older wins although the younger's Current claims the IP",
		reqs:     []Request{cur(rq("young", 5, "172.18.1.1"), "172.18.1.1=b"), rq("old", 1, "172.18.1.1")},
		nodes:    three,
		want:     []string{"old:172.18.1.1=a"},
		problems: []string{"young: egress IP 172.18.1.1 is EgressIP old's"},
	}, {
		name:     "conflict: both Currents claim it, the older keeps its node",
		reqs:     []Request{cur(rq("young", 5, "172.18.1.1"), "172.18.1.1=b"), cur(rq("old", 1, "172.18.1.1"), "172.18.1.1=c")},
		nodes:    three,
		want:     []string{"old:172.18.1.1=c"},
		problems: []string{"young: egress IP 172.18.1.1 is EgressIP old's"},
	}, {
		name:     "conflict: equal Created, name order",
		reqs:     []Request{cur(rq("b", 1, "172.18.1.1"), "172.18.1.1=b"), cur(rq("a", 1, "172.18.1.1"), "172.18.1.1=c")},
		nodes:    three,
		want:     []string{"a:172.18.1.1=c"},
		problems: []string{"b: egress IP 172.18.1.1 is EgressIP a's"},
	}, {
		name:     "spread: 3 IPs over 2 nodes, the third is a problem",
		reqs:     []Request{rq("e1", 0, "172.18.1.3", "172.18.1.1", "172.18.1.2")},
		nodes:    []Node{nd("a", v4net), nd("b", v4net)},
		want:     []string{"e1:172.18.1.1=a", "e1:172.18.1.2=b"},
		problems: []string{"e1: no other eligible node has a network containing 172.18.1.3 (each node hosts at most one of an EgressIP's addresses)"},
	}, {
		name:  "spread: two current IPs on one node, the lower keeps it",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1", "172.18.1.2"), "172.18.1.2=c", "172.18.1.1=c")},
		nodes: three,
		want:  []string{"e1:172.18.1.1=c", "e1:172.18.1.2=a"},
	}, {
		name:     "no eligible node",
		reqs:     []Request{rq("e1", 0, "172.18.1.1")},
		nodes:    []Node{off(nd("a", v4net)), nd("b", "10.0.0.2/24")},
		problems: []string{"e1: no eligible node has a network containing 172.18.1.1 (label nodes k8s.ovn.org/egress-assignable)"},
	}, {
		name:     "no nodes at all",
		reqs:     []Request{rq("e1", 0, "172.18.1.1")},
		problems: []string{"e1: no eligible node has a network containing 172.18.1.1"},
	}, {
		name:  "duplicates within a request count once, mapped IPv4 is IPv4",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1", "172.18.1.1", "::ffff:172.18.1.1", "172.18.1.2"), "::ffff:172.18.1.2=c")},
		nodes: three,
		want:  []string{"e1:172.18.1.1=a", "e1:172.18.1.2=c"},
	}, {
		name:  "Current with the IPv4 and the mapped form of an IP: the lower node name",
		reqs:  []Request{cur(rq("e1", 0, "172.18.1.1"), "172.18.1.1=c", "::ffff:172.18.1.1=b")},
		nodes: three,
		want:  []string{"e1:172.18.1.1=b"},
	}, {
		name:  "mapped network counts as IPv4, networks are masked",
		reqs:  []Request{rq("e1", 0, "172.18.1.1")},
		nodes: []Node{nd("a", "10.0.0.0/8"), nd("m", "::ffff:172.18.0.9/112")},
		want:  []string{"e1:172.18.1.1=m"},
	}, {
		name: "overlapping networks of different lengths: least loaded across both",
		reqs: []Request{cur(rq("e1", 0, "10.1.0.5"), "10.1.0.5=a"), rq("e2", 1, "10.1.0.6")},
		// a and b are in 10.1.0.0/24, c in 10.0.0.0/8: a holds one, so b (name before c, both empty).
		nodes: []Node{nd("a", "10.1.0.1/24"), nd("b", "10.1.0.2/24"), nd("c", "10.9.9.9/8")},
		want:  []string{"e1:10.1.0.5=a", "e2:10.1.0.6=b"},
	}, {
		name:     "invalid IP is a problem",
		reqs:     []Request{{Name: "e1", IPs: []netip.Addr{{}, netip.MustParseAddr("172.18.1.1")}}},
		nodes:    three,
		want:     []string{"e1:172.18.1.1=a"},
		problems: []string{"e1: an egress IP is the invalid (zero) address"},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := Assign(tc.reqs, tc.nodes)
			for range 10 { // map iteration order must not matter
				if again := Assign(tc.reqs, tc.nodes); !reflect.DeepEqual(again, res) {
					t.Fatalf("second run differs: %q vs %q", placement(again), placement(res))
				}
			}
			if got := placement(res); !slices.Equal(got, tc.want) {
				t.Errorf("assigned\n got %q\nwant %q", got, tc.want)
			}
			got := problems(res)
			if len(got) != len(tc.problems) {
				t.Fatalf("problems\n got %q\nwant %q", got, tc.problems)
			}
			for i := range got {
				if !strings.Contains(got[i], tc.problems[i]) {
					t.Errorf("problem %d = %q, want it to contain %q", i, got[i], tc.problems[i])
				}
			}
			checkInvariants(t, tc.reqs, tc.nodes, res)
		})
	}
}

// TestAssignFailover runs a second round over the first's result: a node
// going ineligible moves its IPs only; it coming back moves nothing.
func TestAssignFailover(t *testing.T) {
	nodes := []Node{nd("a", "172.18.0.2/16"), nd("b", "172.18.0.3/16"), nd("c", "172.18.0.4/16")}
	var reqs []Request
	for i := range 6 {
		reqs = append(reqs, rq(fmt.Sprint("e", i), i, fmt.Sprintf("172.18.1.%d", i+1)))
	}
	withCurrent := func(res Result) []Request {
		out := slices.Clone(reqs)
		for i := range out {
			out[i].Current = map[netip.Addr]string{}
			for _, a := range res.Assigned[out[i].Name] {
				out[i].Current[a.IP] = a.Node
			}
		}
		return out
	}
	first := Assign(reqs, nodes)
	perNode := map[string]int{}
	for _, as := range first.Assigned {
		perNode[as[0].Node]++
	}
	if perNode["a"] != 2 || perNode["b"] != 2 || perNode["c"] != 2 {
		t.Fatalf("first round not balanced: %v", perNode)
	}

	nodes[1].Eligible = false
	second := Assign(withCurrent(first), nodes)
	for name, as := range first.Assigned {
		got := second.Assigned[name]
		if len(got) != 1 {
			t.Fatalf("%s: second round %v", name, got)
		}
		if as[0].Node != "b" && got[0] != as[0] {
			t.Errorf("%s moved from %s to %s although its node stayed eligible", name, as[0].Node, got[0].Node)
		}
		if got[0].Node == "b" {
			t.Errorf("%s still on ineligible b", name)
		}
	}
	perNode = map[string]int{}
	for _, as := range second.Assigned {
		perNode[as[0].Node]++
	}
	if perNode["a"] != 3 || perNode["c"] != 3 {
		t.Errorf("b's IPs not spread over a and c: %v", perNode)
	}

	nodes[1].Eligible = true
	third := Assign(withCurrent(second), nodes)
	if !reflect.DeepEqual(third, second) {
		t.Errorf("b coming back moved IPs:\n got %v\nwant %v", placement(third), placement(second))
	}
}

// TestAssignDeterministic shuffles every slice of the input 50 times.
func TestAssignDeterministic(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 5 {
		reqs, nodes := randomInput(rand.New(rand.NewPCG(uint64(round), 7)))
		want := Assign(reqs, nodes)
		for range 50 {
			r2 := slices.Clone(reqs)
			for i := range r2 {
				r2[i].IPs = slices.Clone(r2[i].IPs)
				rng.Shuffle(len(r2[i].IPs), func(a, b int) { r2[i].IPs[a], r2[i].IPs[b] = r2[i].IPs[b], r2[i].IPs[a] })
			}
			rng.Shuffle(len(r2), func(a, b int) { r2[a], r2[b] = r2[b], r2[a] })
			n2 := slices.Clone(nodes)
			for i := range n2 {
				n2[i].Networks = slices.Clone(n2[i].Networks)
				rng.Shuffle(len(n2[i].Networks), func(a, b int) { n2[i].Networks[a], n2[i].Networks[b] = n2[i].Networks[b], n2[i].Networks[a] })
			}
			rng.Shuffle(len(n2), func(a, b int) { n2[a], n2[b] = n2[b], n2[a] })
			if got := Assign(r2, n2); !reflect.DeepEqual(got, want) {
				t.Fatalf("round %d: shuffled input gave\n%q %q\nwant\n%q %q", round, placement(got), problems(got), placement(want), problems(want))
			}
		}
	}
}

// TestAssignDuplicateNames: merged nodes and dropped requests do not depend
// on order.
func TestAssignDuplicateNames(t *testing.T) {
	nodes := []Node{nd("a", "10.0.0.1/24"), nd("a", "fc00::1/64"), nd("b", "10.0.0.2/24")}
	reqs := []Request{rq("e", 0, "fc00::5", "10.0.0.5"), rq("e", 0, "10.0.0.6")}
	want := Assign(reqs, nodes)
	// Same Created and name: 10.0.0.5 < 10.0.0.6 makes the first request the
	// one considered. Its IPv4 goes to a; its IPv6 could only go to the
	// merged a, which holds the IPv4: a problem.
	if got := placement(want); !slices.Equal(got, []string{"e:10.0.0.5=a"}) {
		t.Fatalf("got %q", got)
	}
	slices.Reverse(nodes)
	slices.Reverse(reqs)
	if got := Assign(reqs, nodes); !reflect.DeepEqual(got, want) {
		t.Fatalf("order changed the result: %q vs %q", placement(got), placement(want))
	}
	if got := problems(want); len(got) != 1 || !strings.Contains(got[0], "no other eligible node has a network containing fc00::5") {
		t.Fatalf("problems %q", got)
	}
	nodes[1].Eligible = false // after reversing: b, a (fc00::1/64), a (10.0.0.1/24)
	if got := placement(Assign(reqs, nodes)); !slices.Equal(got, []string{"e:10.0.0.5=b"}) {
		t.Fatalf("a merged node is eligible only if all its entries are: got %q", got)
	}
}

// TestAssignProperties checks the invariants on random inputs.
func TestAssignProperties(t *testing.T) {
	for seed := range 300 {
		rng := rand.New(rand.NewPCG(uint64(seed), 99))
		reqs, nodes := randomInput(rng)
		res := Assign(reqs, nodes)
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) { checkInvariants(t, reqs, nodes, res) })
		if t.Failed() {
			return
		}
	}
}

// randomInput makes a small cluster and requests drawing from a small pool of
// IPs so that conflicts, spread limits and dual stack all happen.
func randomInput(rng *rand.Rand) ([]Request, []Node) {
	nets := []string{"10.0.0.1/24", "10.0.1.1/24", "10.0.0.1/16", "fd00::1/64", "fd00:0:0:1::1/64", "::ffff:10.0.1.1/120"}
	var nodes []Node
	for i := range 1 + rng.IntN(12) {
		n := Node{Name: fmt.Sprintf("node%02d", i), Eligible: rng.IntN(4) != 0}
		for _, s := range nets {
			if rng.IntN(3) == 0 {
				n.Networks = append(n.Networks, netip.MustParsePrefix(s))
			}
		}
		nodes = append(nodes, n)
	}
	pool := []string{"10.0.0.5", "10.0.0.6", "10.0.1.5", "10.0.1.6", "10.0.2.5", "10.0.7.7", "192.168.0.1",
		"fd00::5", "fd00::6", "fd00:0:0:1::5", "fd00:0:0:2::5", "::ffff:10.0.0.7"}
	var reqs []Request
	for i := range rng.IntN(10) {
		r := Request{Name: fmt.Sprintf("eip%d", i), Created: t0.Add(time.Duration(rng.IntN(4)) * time.Second)}
		for range rng.IntN(5) {
			r.IPs = append(r.IPs, netip.MustParseAddr(pool[rng.IntN(len(pool))]))
		}
		if rng.IntN(2) == 0 {
			r.Current = map[netip.Addr]string{}
			for _, ip := range r.IPs {
				if rng.IntN(3) != 0 {
					r.Current[ip] = fmt.Sprintf("node%02d", rng.IntN(len(nodes)+2)) // some unknown
				}
			}
		}
		reqs = append(reqs, r)
	}
	return reqs, nodes
}

// problemAddrs returns the addresses a problem sentence names.
func problemAddrs(p string) []netip.Addr {
	var out []netip.Addr
	for _, w := range strings.Fields(p) {
		if a, err := netip.ParseAddr(strings.TrimRight(w, ".,;:()'s")); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// checkInvariants: no IP assigned twice, only to eligible nodes with a
// network containing it, never two IPs of a request on one node, every
// wanted IP assigned or with exactly one problem, kept where rule 2 says it
// must be, and a problem only where rules 1, 4, 5 say so.
func checkInvariants(t *testing.T, reqs []Request, nodes []Node, res Result) {
	t.Helper()
	byName := map[string]Node{}
	for _, n := range nodes {
		byName[n.Name] = n
	}
	inNetwork := func(n Node, ip netip.Addr) bool {
		for _, p := range n.Networks {
			if normalizePrefix(p).Contains(ip) {
				return true
			}
		}
		return false
	}
	holder := map[netip.Addr]string{}
	for _, r := range reqs {
		wanted := map[netip.Addr]bool{}
		for _, ip := range r.IPs {
			wanted[ip.Unmap()] = true
		}
		onNode := map[string]netip.Addr{}
		got := map[netip.Addr]string{}
		for _, a := range res.Assigned[r.Name] {
			if h, dup := holder[a.IP]; dup {
				t.Errorf("%s assigned to both %s and %s", a.IP, h, r.Name)
			}
			holder[a.IP] = r.Name
			got[a.IP] = a.Node
			if !wanted[a.IP] {
				t.Errorf("%s: assigned %s it does not want", r.Name, a.IP)
			}
			n, ok := byName[a.Node]
			if !ok || !n.Eligible {
				t.Errorf("%s: %s on ineligible or unknown node %s", r.Name, a.IP, a.Node)
			}
			if !inNetwork(n, a.IP) {
				t.Errorf("%s: %s on %s outside its networks %v", r.Name, a.IP, a.Node, n.Networks)
			}
			if other, dup := onNode[a.Node]; dup {
				t.Errorf("%s: %s and %s both on %s", r.Name, other, a.IP, a.Node)
			}
			onNode[a.Node] = a.IP
		}
		if !slices.IsSortedFunc(res.Assigned[r.Name], func(x, y Assignment) int { return x.IP.Compare(y.IP) }) {
			t.Errorf("%s: assignments not sorted: %v", r.Name, res.Assigned[r.Name])
		}
		named := map[netip.Addr]int{}
		var order []netip.Addr
		for _, p := range res.Problems[r.Name] {
			if as := problemAddrs(p); len(as) > 0 {
				order = append(order, as[0])
			}
			for _, ip := range problemAddrs(p) {
				if wanted[ip] {
					named[ip]++
				}
			}
		}
		if !slices.IsSortedFunc(order, netip.Addr.Compare) {
			t.Errorf("%s: problems not in IP order: %q", r.Name, res.Problems[r.Name])
		}
		if len(got)+len(res.Problems[r.Name]) != len(wanted) {
			t.Errorf("%s: %d assigned + %d problems for %d wanted IPs: %v %q", r.Name, len(got), len(res.Problems[r.Name]), len(wanted), res.Assigned[r.Name], res.Problems[r.Name])
		}
		for ip := range wanted {
			_, assigned := got[ip]
			if !ip.IsValid() {
				n := 0
				for _, p := range res.Problems[r.Name] {
					if strings.Contains(p, "invalid") {
						n++
					}
				}
				if n != 1 {
					t.Errorf("%s: the invalid IP is named by %d problems: %q", r.Name, n, res.Problems[r.Name])
				}
				continue
			}
			if assigned && named[ip] != 0 || !assigned && named[ip] != 1 {
				t.Errorf("%s: %s assigned=%v, named by %d problems: %q", r.Name, ip, assigned, named[ip], res.Problems[r.Name])
			}
		}
	}
	// Rule 2 from the outside: an IP whose holder's Current puts it on an
	// eligible node containing it, no other of the holder's IPs being
	// currently there, stays there. (Of two Current keys for one IP, the
	// IPv4 and the mapped form, the lower node name counts.)
	for _, r := range reqs {
		current := map[netip.Addr]string{}
		for ip, node := range r.Current {
			if old, ok := current[ip.Unmap()]; !ok || node < old {
				current[ip.Unmap()] = node
			}
		}
		for ip, node := range current {
			if holder[ip] != r.Name {
				continue
			}
			n, ok := byName[node]
			if !ok || !n.Eligible || !inNetwork(n, ip) {
				continue
			}
			shared := false
			for ip2, node2 := range current {
				if node2 == node && ip2 != ip && slices.Contains(res.Assigned[r.Name], Assignment{IP: ip2, Node: node}) {
					shared = true
				}
			}
			if shared {
				continue
			}
			for _, a := range res.Assigned[r.Name] {
				if a.IP == ip && a.Node != node {
					t.Errorf("%s: %s moved from %s to %s although it could stay", r.Name, ip, node, a.Node)
				}
			}
		}
	}
}

func BenchmarkAssign(b *testing.B) {
	var nodes []Node
	for i := range 2000 {
		nodes = append(nodes, Node{Name: fmt.Sprintf("node-%04d", i), Eligible: i%10 != 0, Networks: []netip.Prefix{
			netip.PrefixFrom(netip.AddrFrom4([4]byte{172, 18, byte(i >> 8), byte(i)}), 16),
			netip.MustParsePrefix(fmt.Sprintf("fc00::%x/64", i+2)),
		}})
	}
	var reqs []Request
	for i := range 500 {
		reqs = append(reqs, Request{Name: fmt.Sprintf("eip-%03d", i), Created: t0.Add(time.Duration(i) * time.Second),
			IPs: []netip.Addr{netip.AddrFrom4([4]byte{172, 18, 200 + byte(i>>8), byte(i)}), netip.MustParseAddr(fmt.Sprintf("fc00::1:%x", i))}})
	}
	run := func(b *testing.B, reqs []Request) {
		b.ReportAllocs()
		for b.Loop() {
			res := Assign(reqs, nodes)
			if len(res.Problems) != 0 {
				b.Fatal(res.Problems)
			}
		}
	}
	b.Run("fresh", func(b *testing.B) { run(b, reqs) })
	// Steady state: every IP has a Current; a tenth of the nodes went
	// ineligible so a tenth of the IPs move.
	res := Assign(reqs, nodes)
	steady := slices.Clone(reqs)
	for i := range steady {
		steady[i].Current = map[netip.Addr]string{}
		for _, a := range res.Assigned[steady[i].Name] {
			steady[i].Current[a.IP] = a.Node
		}
	}
	for i := range nodes {
		nodes[i].Eligible = i%10 != 1
	}
	b.Run("steady", func(b *testing.B) { run(b, steady) })
}
