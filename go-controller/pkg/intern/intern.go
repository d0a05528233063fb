// Package intern shares one copy of strings that many long-lived objects
// repeat: the keys and common values of the NB cache's maps (owner-type,
// requested-chassis and its node, a pod's namespace) and of the informer's
// pods (namespace, node, label keys and values). Each decoded copy is an
// object the collector marks on every cycle; at 150,000 pods the master's
// live heap held 2.45 M strings from decoding the NB alone
// (docs/performance.md, "Scale"), and the marking per object is what grows
// the heap goal the GC budget sets.
//
// The table is direct-mapped, like a CPU cache: a string hashes to one slot
// and replaces what the slot held when it differs. A repeated string meets
// itself there unless another string took the slot in between; a unique one
// costs a hash and a compare and evicts one entry. So the table's size, not
// its input, bounds what it holds (65,536 strings, a few MiB at most), and no
// writer of the cluster's objects can grow it. Label sets, which the pods of
// one workload repeat whole, have a table of their own of the same kind
// (Labels).
package intern

import (
	"hash/maphash"
	"sync"
)

const (
	// The table holds at most shards × perShard strings.
	shards   = 64
	perShard = 1024
	// MaxLen is the longest string interned: longer ones (an LSP's
	// address, a load balancer's backends) are rarely repeated.
	MaxLen = 64

	// The label table holds at most shards × setsPerShard sets, each
	// encoded in at most MaxSetLen bytes.
	setsPerShard = 64
	MaxSetLen    = 512
)

type shard struct {
	mu    sync.Mutex
	slots [perShard]string
}

type setShard struct {
	mu    sync.Mutex
	slots [setsPerShard]labelSet
}

type labelSet struct {
	enc string
	m   map[string]string
}

var (
	seed  = maphash.MakeSeed()
	table [shards]shard
	sets  [shards]setShard
)

// String is s or an equal string met before. It is safe for concurrent use.
func String(s string) string {
	if len(s) == 0 || len(s) > MaxLen {
		return s
	}
	sh, i := slot(maphash.String(seed, s))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c := sh.slots[i]; c == s {
		return c
	}
	sh.slots[i] = s
	return s
}

// Bytes is String(string(b)) without making the string when an equal one is
// in the table: a decoder's common case.
func Bytes(b []byte) string {
	if len(b) == 0 || len(b) > MaxLen {
		return string(b)
	}
	sh, i := slot(maphash.Bytes(seed, b))
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if c := sh.slots[i]; c == string(b) {
		return c
	}
	s := string(b)
	sh.slots[i] = s
	return s
}

// Labels is the label set encoded as enc: the map met before for the same
// encoding, or build's. The pods of one workload carry the same labels, and
// each map is objects the collector marks on every cycle (a map a pod at
// 150,000 pods, about 0.5 KiB each). The map returned is shared by every
// holder of that encoding, so none may write it: an informer's objects are
// read-only anyway. An encoding over MaxSetLen bytes is built and not kept.
func Labels(enc []byte, build func() map[string]string) map[string]string {
	if len(enc) == 0 || len(enc) > MaxSetLen {
		return build()
	}
	h := maphash.Bytes(seed, enc)
	sh, i := &sets[h%shards], (h/shards)%setsPerShard
	sh.mu.Lock()
	if c := sh.slots[i]; c.m != nil && c.enc == string(enc) {
		sh.mu.Unlock()
		return c.m
	}
	sh.mu.Unlock()
	m := build()
	sh.mu.Lock()
	sh.slots[i] = labelSet{string(enc), m}
	sh.mu.Unlock()
	return m
}

// slot is where a string of hash h lives (the same for a string and its
// bytes).
func slot(h uint64) (*shard, uint64) {
	return &table[h%shards], (h / shards) % perShard
}
