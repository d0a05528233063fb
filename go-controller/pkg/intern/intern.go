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
// writer of the cluster's objects can grow it.
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
)

type shard struct {
	mu    sync.Mutex
	slots [perShard]string
}

var (
	seed  = maphash.MakeSeed()
	table [shards]shard
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

// slot is where a string of hash h lives (the same for a string and its
// bytes).
func slot(h uint64) (*shard, uint64) {
	return &table[h%shards], (h / shards) % perShard
}
