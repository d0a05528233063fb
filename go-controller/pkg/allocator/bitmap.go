// Package allocator hands out host subnets to nodes and addresses to pods.
// Allocators are plain data structures: callers serialise access.
package allocator

import "math/bits"

// bitmap is a fixed-size set of small integers with a next-fit cursor, so a
// freed slot is not handed out again until the others have been used
// (a reused pod IP with stale ARP/conntrack entries is the failure this avoids).
type bitmap struct {
	words []uint64
	size  int
	used  int
	next  int
}

func newBitmap(size int) *bitmap {
	return &bitmap{words: make([]uint64, (size+63)/64), size: size}
}

func (b *bitmap) has(i int) bool { return b.words[i/64]&(1<<(uint(i)%64)) != 0 }

func (b *bitmap) set(i int) bool {
	if b.has(i) {
		return false
	}
	b.words[i/64] |= 1 << (uint(i) % 64)
	b.used++
	return true
}

func (b *bitmap) clear(i int) bool {
	if !b.has(i) {
		return false
	}
	b.words[i/64] &^= 1 << (uint(i) % 64)
	b.used--
	return true
}

// allocate takes the first free slot at or after the cursor, wrapping once.
func (b *bitmap) allocate() (int, bool) {
	if b.used >= b.size {
		return 0, false
	}
	for pass := 0; pass < 2; pass++ {
		start, end := b.next, b.size
		if pass == 1 {
			start, end = 0, b.next
		}
		for i := start; i < end; {
			w := b.words[i/64] | (1<<(uint(i)%64) - 1) // ignore bits below i
			if w == ^uint64(0) {
				i = (i/64 + 1) * 64
				continue
			}
			j := (i/64)*64 + bits.TrailingZeros64(^w)
			if j >= end {
				break
			}
			b.set(j)
			b.next = (j + 1) % b.size
			return j, true
		}
	}
	return 0, false
}
