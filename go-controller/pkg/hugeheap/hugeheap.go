// Package hugeheap backs the process's Go heap with transparent huge pages
// on a host whose THP mode is "madvise" (Debian's and Ubuntu's default).
//
// Go's runtime asks for huge pages for its own metadata but, since Go
// 1.21.1, not for the heap, so on such a host a heap of a gigabyte is
// mapped in 4 KiB pages: 260,000 of them against a TLB that reaches a few
// MiB. The garbage collector's marking then misses the TLB more the larger
// the heap, and its cost per byte marked grows with the heap (the master's
// CPU per pod went ×1.89 from 10,000 to 150,000 pods, most of it marking;
// docs/performance.md, "Scale"). With huge pages, as on a host whose THP
// mode is "always" (RHEL's default, where this package does nothing), that
// part goes: a synthetic heap's cost per event stayed flat from 89 MB to
// 1.3 GB, and the master's own work per pod from 10,000 to 150,000 pods
// (the marking's loads of span metadata still miss the CPU caches).
//
// Only what the heap already holds whole is collapsed: a 2 MiB range every
// one of whose pages is present (/proc/self/pagemap), so the resident size
// never grows. Nothing is marked MADV_HUGEPAGE: that would let khugepaged
// fill sparse ranges (up to 511 absent pages each, its default) and fight
// the runtime's scavenger, which is why Go stopped asking for it.
package hugeheap

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
)

// MinMapping is the smallest mapping looked at: the heap grows by at least
// 4 MiB at a time; smaller anonymous mappings are not the heap's.
const MinMapping = 4 << 20

const (
	madvCollapse = 25 // MADV_COLLAPSE (Linux 6.1)
	hugePage     = 2 << 20
)

// ErrUnsupported: the kernel cannot collapse pages into huge pages.
var ErrUnsupported = errors.New("the kernel refuses MADV_COLLAPSE (EINVAL): no transparent huge pages, or a kernel before 6.1")

// Mapping is one line of /proc/self/maps that Advise looks at.
type Mapping struct {
	Lo, Hi uint64
	Perms  string
	Inode  string
	Path   string
}

// goHeap is how the maps name the heap where the kernel keeps names of
// anonymous mappings (the runtime names them since Go 1.25).
const goHeap = "[anon: Go: heap]"

// Candidate says whether m may be the Go heap's: anonymous (unnamed or
// named the Go heap), private, read-write and at least MinMapping long.
func (m Mapping) Candidate() bool {
	return m.Perms == "rw-p" && m.Inode == "0" && (m.Path == "" || m.Path == goHeap) && m.Hi-m.Lo >= MinMapping
}

// ParseMaps reads the lines of /proc/PID/maps.
func ParseMaps(b []byte) ([]Mapping, error) {
	var out []Mapping
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 5 {
			continue
		}
		lo, hi, ok := strings.Cut(f[0], "-")
		if !ok {
			return nil, fmt.Errorf("maps line %q: no address range", sc.Text())
		}
		var m Mapping
		var err1, err2 error
		m.Lo, err1 = strconv.ParseUint(lo, 16, 64)
		m.Hi, err2 = strconv.ParseUint(hi, 16, 64)
		if err := errors.Join(err1, err2); err != nil || m.Hi < m.Lo {
			return nil, fmt.Errorf("maps line %q: bad address range", sc.Text())
		}
		m.Perms, m.Inode = f[1], f[4]
		if len(f) > 5 {
			m.Path = strings.Join(f[5:], " ")
		}
		out = append(out, m)
	}
	return out, sc.Err()
}

// Collapser turns the heap's dense ranges into huge pages.
type Collapser struct {
	tried, done int // collapse calls, and those that succeeded, ever
}

// Collapse reads this process's mappings and collapses (MADV_COLLAPSE,
// Linux 6.1) every 2 MiB range of a candidate mapping whose pages are all
// present. It returns the bytes collapsed (a range already a huge page
// counts again) and ErrUnsupported once every call so far has been refused
// as invalid (a kernel without MADV_COLLAPSE or transparent huge pages).
func (c *Collapser) Collapse() (int64, error) {
	b, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		return 0, err
	}
	maps, err := ParseMaps(b)
	if err != nil {
		return 0, err
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return 0, err
	}
	defer pm.Close()
	var collapsed int64
	entries := make([]byte, 8*(hugePage/pageSize))
	for _, m := range maps {
		if !m.Candidate() {
			continue
		}
		for lo := (m.Lo + hugePage - 1) &^ (hugePage - 1); lo+hugePage <= m.Hi; lo += hugePage {
			if _, err := pm.ReadAt(entries, int64(lo/pageSize*8)); err != nil {
				break // unmapped since the read
			}
			if !allPresent(entries) {
				continue
			}
			c.tried++
			switch madvise(lo, lo+hugePage, madvCollapse) {
			case 0:
				c.done++
				collapsed += hugePage
			case syscall.EINVAL:
				if c.done == 0 && c.tried >= 8 {
					return collapsed, ErrUnsupported
				}
			}
		}
	}
	return collapsed, nil
}

const pageSize = 4096

// allPresent says whether every pagemap entry (64 bits, little-endian on
// the architectures Go runs the master on) has its present bit (63) set.
func allPresent(entries []byte) bool {
	for i := 7; i < len(entries); i += 8 {
		if entries[i]&0x80 == 0 {
			return false
		}
	}
	return true
}

func madvise(lo, hi uint64, advice uintptr) syscall.Errno {
	_, _, errno := syscall.Syscall(syscall.SYS_MADVISE, uintptr(lo), uintptr(hi-lo), advice)
	return errno
}

// Mode is the host's THP mode ("always", "madvise" or "never"), read from
// the kernel's enabled file (the bracketed word).
func Mode(enabled []byte) string {
	s := string(enabled)
	i, j := strings.IndexByte(s, '['), strings.IndexByte(s, ']')
	if i < 0 || j < i {
		return ""
	}
	return s[i+1 : j]
}

const enabledFile = "/sys/kernel/mm/transparent_hugepage/enabled"

// Keep collapses the heap's dense ranges at once and then every interval
// until ctx is done (the heap grows, and the runtime's scavenger splits
// huge pages when it returns memory), when the host's THP mode is
// "madvise"; in any other mode it says why it does nothing and returns. A
// failure is logged once and ends it.
func Keep(ctx context.Context, every time.Duration, log logr.Logger) {
	b, err := os.ReadFile(enabledFile)
	if mode := Mode(b); err != nil || mode != "madvise" {
		why := "THP mode " + strconv.Quote(mode)
		if err != nil {
			why = err.Error()
		}
		log.V(1).Info("the heap is left to the host's THP mode", "why", why)
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	var c Collapser
	for {
		if _, err := c.Collapse(); err != nil {
			log.Info("huge pages for the heap: giving up; the heap stays in 4 KiB pages (costs CPU at large sizes; set the host's THP mode to always, or run with --heap-huge-pages=false to silence this)", "error", err.Error())
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
