package hugeheap

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"unsafe"
)

func TestParseMapsCandidates(t *testing.T) {
	in := []byte(`00400000-0052e000 r-xp 00000000 fd:01 1234 /usr/bin/ovnkube
c000000000-c004000000 rw-p 00000000 00:00 0 
c004000000-c004100000 rw-p 00000000 00:00 0 
7f0000000000-7f0008000000 rw-p 00000000 00:00 0 
7f0010000000-7f0018000000 rw-s 00000000 00:05 99 /dev/shm/x
7ffd00000000-7ffd01000000 rw-p 00000000 00:00 0                          [stack]
7f0020000000-7f0028000000 r--p 00000000 00:00 0 
7f0030000000-7f0038000000 rw-p 00000000 00:00 0                          [anon: Go: heap]
7f0040000000-7f0048000000 rw-p 00000000 00:00 0                          [anon: Go: page alloc]
`)
	maps, err := ParseMaps(in)
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, m := range maps {
		if m.Candidate() {
			got = append(got, m.Lo)
		}
	}
	want := []uint64{0xc000000000, 0x7f0000000000, 0x7f0030000000} // 64 MiB and 128 MiB anonymous rw-p, the named heap; not 1 MiB, a file, [stack], read-only, other named mappings
	if len(got) != len(want) || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Errorf("candidates %#x, want %#x", got, want)
	}
	if _, err := ParseMaps([]byte("zz-10 rw-p 0 00:00 0\n")); err == nil {
		t.Error("a bad address range parsed")
	}
}

func TestMode(t *testing.T) {
	for in, want := range map[string]string{"always [madvise] never\n": "madvise", "[always] madvise never": "always", "always madvise [never]": "never", "": ""} {
		if got := Mode([]byte(in)); got != want {
			t.Errorf("Mode(%q) = %q, want %q", in, got, want)
		}
	}
}

// region maps 16 MiB of anonymous memory, as the runtime maps the heap,
// between two read-only pages of its own (so that it is a mapping of its
// own, not merged with the heap's), and touches one page in every step
// bytes.
func region(t *testing.T, step int) []byte {
	all, err := syscall.Mmap(-1, 0, 16<<20+2*pageSize, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Munmap(all) })
	if err := errors.Join(syscall.Mprotect(all[:pageSize], syscall.PROT_READ), syscall.Mprotect(all[len(all)-pageSize:], syscall.PROT_READ)); err != nil {
		t.Fatal(err)
	}
	b := all[pageSize : len(all)-pageSize]
	for i := 0; i < len(b); i += step {
		b[i] = 1
	}
	return b
}

func thp(t *testing.T) {
	if b, err := os.ReadFile(enabledFile); err != nil || Mode(b) == "never" {
		t.Skipf("this kernel has no transparent huge pages (%v, %q): nothing to collapse", err, b)
	}
}

// TestCollapseDense: a region every page of which is present is in huge
// pages after Collapse (its mapping's AnonHugePages, from smaps), and its
// resident size is what it was.
func TestCollapseDense(t *testing.T) {
	thp(t)
	b := region(t, pageSize)
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	huge, rss := smapsField(t, addr, "AnonHugePages:"), smapsField(t, addr, "Rss:")
	var c Collapser
	n, err := c.Collapse()
	if err != nil {
		t.Fatal(err)
	}
	if n < 14<<20 {
		t.Errorf("collapsed %d bytes, less than the region's 14 MiB of whole huge pages", n)
	}
	if got := smapsField(t, addr, "AnonHugePages:") - huge; got < 14<<10 {
		t.Errorf("the region's mapping gained %d KiB in huge pages, want at least 14 MiB", got)
	}
	if got := smapsField(t, addr, "Rss:"); got != rss {
		t.Errorf("the region's mapping holds %d KiB, %d before Collapse: want no change", got, rss)
	}
}

// TestCollapseLeavesSparse: a region of which one page in two is present
// is not collapsed (that would make the absent half resident).
func TestCollapseLeavesSparse(t *testing.T) {
	thp(t)
	b := region(t, 2*pageSize)
	addr := uint64(uintptr(unsafe.Pointer(&b[0])))
	huge, rss := smapsField(t, addr, "AnonHugePages:"), smapsField(t, addr, "Rss:")
	var c Collapser
	if _, err := c.Collapse(); err != nil {
		t.Fatal(err)
	}
	if got := smapsField(t, addr, "AnonHugePages:"); got != huge {
		t.Errorf("the sparse region's mapping has %d KiB in huge pages, %d before", got, huge)
	}
	if got := smapsField(t, addr, "Rss:"); got != rss {
		t.Errorf("the sparse region's mapping holds %d KiB, %d before Collapse: want no change", got, rss)
	}
}

// smapsField reads a field (KiB) of the mapping holding addr.
func smapsField(t *testing.T, addr uint64, field string) int64 {
	b, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Fatal(err)
	}
	inside, found := false, false
	var sum int64
	for _, line := range bytes.Split(b, []byte("\n")) {
		f := strings.Fields(string(line))
		if len(f) == 0 {
			continue
		}
		if m, err := ParseMaps(append(line, '\n')); err == nil && len(m) == 1 && strings.Contains(f[0], "-") {
			inside = m[0].Lo <= addr && addr < m[0].Hi
			found = found || inside
			continue
		}
		if inside && f[0] == field && len(f) > 1 {
			v, _ := strconv.ParseInt(f[1], 10, 64)
			sum += v
		}
	}
	if !found {
		t.Fatalf("no mapping holds %#x in smaps", addr)
	}
	return sum
}
