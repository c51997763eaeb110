package bbolt

import (
	"context"
	"slices"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// The change log keeps at least the newest changeLogSize changes, grows to
// changeLogSize+changeLogSlack, and then drops back to changeLogSize in one
// commit; a subscriber behind what it keeps sees every session, one within
// it sees the sessions changed since.
func TestChangeLogBound(t *testing.T) {
	ctx := context.Background()
	s := openWithSession(t) // s1
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s2", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	changes := 2
	change := func(session string) {
		t.Helper()
		role := []backend.GrantRole{backend.RoleReader, backend.RoleWriter}[changes%2]
		if err := s.Grant(ctx, session, backend.Grant{Principal: "bob", Role: role}); err != nil {
			t.Fatal(err)
		}
		changes++
	}
	// span is the first and last position the log holds; it fails unless
	// every position between them is there.
	span := func() (uint64, uint64) {
		t.Helper()
		var first, last, n uint64
		err := s.view(ctx, func(x *txn) error {
			c := x.tx.Bucket(bucketChanges).Cursor()
			for k, _ := c.First(); k != nil; k, _ = c.Next() {
				if n == 0 {
					first = fromU64(k)
				}
				last = fromU64(k)
				n++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if n != last-first+1 {
			t.Fatalf("the log holds %d entries from %d to %d: not contiguous", n, first, last)
		}
		return first, last
	}
	for changes < changeLogSize+changeLogSlack {
		change("s1")
	}
	if first, last := span(); first != 1 || last != changeLogSize+changeLogSlack {
		t.Fatalf("after %d changes the log holds %d..%d, want all of them", changes, first, last)
	}
	change("s2") // one past the slack: back to the newest changeLogSize
	first, last := span()
	if last != uint64(changes) || last-first+1 != changeLogSize {
		t.Fatalf("after %d changes the log holds %d..%d, want the newest %d", changes, first, last, changeLogSize)
	}
	change("s1") // grows again, nothing dropped
	if f, l := span(); f != first || l != last+1 {
		t.Fatalf("after %d changes the log holds %d..%d, want %d..%d", changes, f, l, first, last+1)
	}
	// A subscriber at a position the log still holds sees what changed
	// after it: s2, then s1.
	ids, next, err := s.changesAfter(ctx, last-1)
	if err != nil || !slices.Equal(ids, []string{"s2", "s1"}) || next != last+1 {
		t.Fatalf("changes after %d: %v up to %d (%v), want [s2 s1] up to %d", last-1, ids, next, err, last+1)
	}
	// One behind what the log holds sees every session.
	ids, next, err = s.changesAfter(ctx, first-2)
	if err != nil || !slices.Equal(ids, []string{"s1", "s2"}) || next != last+1 {
		t.Fatalf("changes after %d: %v up to %d (%v), want every session up to %d", first-2, ids, next, err, last+1)
	}
}
