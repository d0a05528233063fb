package ovndb

import (
	"errors"
	"testing"
)

func set(members ...string) map[string]struct{} {
	out := map[string]struct{}{}
	for _, m := range members {
		out[m] = struct{}{}
	}
	return out
}

// TestLedgerDropsAReadRacingAFailedWrite: a read of a row's members that
// began before a write of that row failed (its outcome unknown) cannot tell
// whether it saw the write: what it read is not kept, and the reader is told
// to retry, whose read is kept.
func TestLedgerDropsAReadRacingAFailedWrite(t *testing.T) {
	l := newMemberLedger()
	key := memberKey{"Address_Set", "u1"}
	l.loaded["Address_Set"] = true // past the first whole-table read
	l.entries[key] = &memberEntry{gen: 1, members: set("a")}
	l.next = 1
	write := map[memberKey]*memberWrite{key: {gen: 1, want: set("a", "b")}}

	// The entry is forgotten (a resync), a reader starts reading the row,
	// and meanwhile a write computed from the old entry fails.
	l.forgetAll()
	l.loaded["Address_Set"] = true
	reading, finish := make(chan struct{}), make(chan struct{})
	reader := func(table, column, uuid string) (map[string]map[string]struct{}, error) {
		close(reading)
		<-finish
		return map[string]map[string]struct{}{"u1": set("a")}, nil // from before the write
	}
	done := make(chan error, 1)
	go func() {
		_, err := l.members(Epoch{}, key, "s", "addresses", reader)
		done <- err
	}()
	<-reading
	if err := l.settle(Epoch{}, write, errors.New("reply lost")); err == nil {
		t.Fatal("a failed write settled without its error")
	}
	close(finish)
	if err := <-done; !errors.Is(err, ErrMembersRaced) {
		t.Fatalf("the read racing the failed write ended with %v, want ErrMembersRaced", err)
	}
	if l.entries[key] != nil {
		t.Fatal("what the racing read saw was kept")
	}
	if len(l.touched) != 0 {
		t.Errorf("%d rows still marked with no read in flight", len(l.touched))
	}

	// The retry's read is kept.
	now := func(table, column, uuid string) (map[string]map[string]struct{}, error) {
		return map[string]map[string]struct{}{"u1": set("a", "b")}, nil
	}
	e, err := l.members(Epoch{}, key, "s", "addresses", now)
	if err != nil || len(e.members) != 2 {
		t.Fatalf("the retry read %v (%v), want a and b", e, err)
	}
}

// TestLedgerWritesByGeneration: a write is recorded only over the entry it
// was computed from; a second write from the same entry is a race, and the
// entry is forgotten.
func TestLedgerWritesByGeneration(t *testing.T) {
	l := newMemberLedger()
	key := memberKey{"Address_Set", "u1"}
	l.entries[key] = &memberEntry{gen: 1, members: set("a")}
	l.next = 1
	first := map[memberKey]*memberWrite{key: {gen: 1, want: set("a", "b")}}
	second := map[memberKey]*memberWrite{key: {gen: 1, want: set("a", "c")}}
	if err := l.settle(Epoch{}, first, nil); err != nil {
		t.Fatal(err)
	}
	if e := l.entries[key]; e == nil || len(e.members) != 2 || e.gen == 1 {
		t.Fatalf("the first write was not recorded: %+v", e)
	}
	if err := l.settle(Epoch{}, second, nil); !errors.Is(err, ErrMembersRaced) {
		t.Fatalf("the second write from the same entry ended with %v, want ErrMembersRaced", err)
	}
	if l.entries[key] != nil {
		t.Fatal("the entry was kept after two writes raced")
	}
}
