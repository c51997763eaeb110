//go:build linux

package producer

import (
	"context"
	"errors"
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// lockedElsewhere reports whether bbolt's lock on the file at path is held:
// a descriptor of its own cannot take it.
func lockedElsewhere(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// holding opens an outbox in dir whose file, after an operation, would
// stay open for hold if nobody waited for it, and adds one event.
func holding(t *testing.T, dir string, hold time.Duration, identity string) *Outbox {
	t.Helper()
	o, err := OpenOutbox(dir, OutboxOptions{LockWait: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	o.mu.Lock()
	o.hold = hold
	o.mu.Unlock()
	if _, err := o.Add(context.Background(), Event{Session: "s1", Identity: identity, Text: identity}); err != nil {
		t.Fatal(err)
	}
	return o
}

// Between operations the file stays open while nobody waits; an outbox
// that has to wait (another open file description, as another process's
// would be) marks its wait and is let in at once: without the mark it
// would wait out the first one's hour and fail after LockWait.
func TestOutboxHoldsTheFileUntilAWaiterMarks(t *testing.T) {
	dir := t.TempDir()
	a := holding(t, dir, time.Hour, "A")
	if !lockedElsewhere(t, a.Path()) {
		t.Fatal("the file closed after an operation with an hour's hold and nobody waiting")
	}
	b := holding(t, dir, time.Hour, "B") // waits for a to see its mark
	if !lockedElsewhere(t, a.Path()) {
		t.Fatal("the second outbox does not hold the file after its operation")
	}
	// And back: a waits, b yields.
	c, err := a.Count(context.Background())
	if err != nil || c.Pending != 2 {
		t.Fatalf("count after both adds: %+v, %v", c, err)
	}
	b.mu.Lock()
	bHolds := b.held != nil
	b.mu.Unlock()
	if bHolds {
		t.Fatal("the second outbox still holds the file after the first one's operation")
	}
}

// Past its hold, an idle outbox closes the file on its own, and its next
// operation opens it afresh.
func TestOutboxClosesTheFileAfterItsHold(t *testing.T) {
	dir := t.TempDir()
	a := holding(t, dir, 20*time.Millisecond, "A")
	deadline := time.Now().Add(20 * time.Second)
	for lockedElsewhere(t, a.Path()) {
		if time.Now().After(deadline) {
			t.Fatal("the file is still open 20 s after a hold of 20 ms")
		}
		time.Sleep(5 * time.Millisecond)
	}
	if _, err := a.Add(context.Background(), Event{Session: "s1", Identity: "B", Text: "B"}); err != nil {
		t.Fatal(err)
	}
	if c, err := a.Count(context.Background()); err != nil || c.Pending != 2 {
		t.Fatalf("count: %+v, %v", c, err)
	}
}

// An operation that fails closes the file: the next one starts afresh.
func TestOutboxClosesTheFileAfterAFailure(t *testing.T) {
	dir := t.TempDir()
	a := holding(t, dir, time.Hour, "A")
	if err := a.Drop(context.Background(), []uint64{99}, "no such event"); !errors.Is(err, ErrNoEvent) {
		t.Fatalf("drop of no event: %v, want ErrNoEvent", err)
	}
	if lockedElsewhere(t, a.Path()) {
		t.Fatal("the file stayed open after a failed operation")
	}
}
