package intern

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unsafe"
)

func data(s string) *byte { return unsafe.StringData(s) }

// A repeated string comes back as the first copy; different strings stay
// themselves; the empty and the long ones are returned as they are.
func TestString(t *testing.T) {
	a := strings.Clone("k8s.ovn.org/owner-type")
	b := strings.Clone(a)
	if data(a) == data(b) {
		t.Fatal("the test's copies share their bytes")
	}
	if got := String(a); data(got) != data(a) {
		t.Fatal("the first string met is not the one returned")
	}
	if got := String(b); got != b || data(got) != data(a) {
		t.Errorf("an equal string met again: got %q at %p, want the first copy at %p", got, data(got), data(a))
	}
	other := strings.Clone("k8s.ovn.org/owner")
	if got := String(other); got != other {
		t.Errorf("another string came back as %q", got)
	}
	long := strings.Repeat("x", MaxLen+1)
	if got := String(strings.Clone(long)); got != long {
		t.Errorf("a long string changed: %q", got)
	}
	String(long)
	if l2 := strings.Clone(long); data(String(l2)) != data(l2) {
		t.Error("a string over MaxLen was interned")
	}
	if String("") != "" || Bytes(nil) != "" {
		t.Error("the empty string changed")
	}
	if got := Bytes([]byte(b)); got != a || data(got) != data(a) {
		t.Errorf("bytes equal to a string met before: got %q at %p, want the first copy at %p", got, data(got), data(a))
	}
	nb := []byte("node-7")
	first := Bytes(nb)
	nb[0] = 'N'
	if first != "node-7" {
		t.Errorf("the string Bytes made shares its input: %q", first)
	}
	if got := String(strings.Clone("node-7")); data(got) != data(first) {
		t.Error("a string met first as bytes was not shared")
	}
}

// Under concurrent use, with more distinct strings than a shard's slots,
// every string comes back equal to what went in.
func TestBoundedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20000 {
				s := fmt.Sprintf("v-%d-%d", g, i%3000)
				if got := String(s); got != s {
					t.Errorf("String(%q) = %q", s, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}

func BenchmarkBytesHit(b *testing.B) {
	c := []byte(String("requested-chassis"))
	for b.Loop() {
		Bytes(c)
	}
}

func BenchmarkStringHit(b *testing.B) {
	s := String("k8s.ovn.org/owner-type")
	c := strings.Clone(s)
	for b.Loop() {
		String(c)
	}
}
