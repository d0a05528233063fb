package intern

import (
	"fmt"
	"reflect"
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

// Under concurrent use, with more distinct strings than a shard's slots
// and more label sets than the table holds, every string comes back equal
// to what went in and every set with what its encoding says.
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
				v := fmt.Sprintf("v-%d-%d", g, i%6000)
				if m := Labels([]byte(v), func() map[string]string { return map[string]string{"app": v} }); m["app"] != v {
					t.Errorf("Labels(%q) = %v", v, m)
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

func mapData(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }

// A label set met again by its encoding is the first map built for it,
// without building another; other encodings, and ones too long to keep, get
// their own.
func TestLabels(t *testing.T) {
	builds := 0
	build := func(v string) func() map[string]string {
		return func() map[string]string { builds++; return map[string]string{"app": v} }
	}
	web := Labels([]byte("\n\x03app\x12\x03web"), build("web"))
	again := Labels([]byte("\n\x03app\x12\x03web"), build("other"))
	if builds != 1 || mapData(again) != mapData(web) || again["app"] != "web" {
		t.Errorf("the same encoding: %d builds, maps %p and %p (%v)", builds, mapData(web), mapData(again), again)
	}
	db := Labels([]byte("\n\x03app\x12\x02db"), build("db"))
	if builds != 2 || mapData(db) == mapData(web) || db["app"] != "db" || web["app"] != "web" {
		t.Errorf("another encoding: %d builds, %v and %v", builds, web, db)
	}
	long := []byte(strings.Repeat("x", MaxSetLen+1))
	a, b := Labels(long, build("a")), Labels(long, build("b"))
	if builds != 4 || mapData(a) == mapData(b) || b["app"] != "b" {
		t.Errorf("an encoding over MaxSetLen was kept: %d builds, %v %v", builds, a, b)
	}
	if m := Labels(nil, func() map[string]string { return nil }); m != nil {
		t.Errorf("no labels came back as %v", m)
	}
}
