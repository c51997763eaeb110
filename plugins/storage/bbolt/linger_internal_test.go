package bbolt

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// openHeld opens the store at path (closed when tb ends) whose file, after
// an operation, stays open for an hour if nobody waits for it.
func openHeld(tb testing.TB, path string) *Store {
	tb.Helper()
	s, err := Open(context.Background(), path, backend.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = s.Close() })
	s.mu.Lock()
	s.hold = time.Hour
	s.mu.Unlock()
	return s
}

// lingering opens a store whose file, after an operation, would stay open
// for an hour if nobody waited for it, and runs one operation on it.
func lingering(t *testing.T, path string) *Store {
	t.Helper()
	ctx := context.Background()
	s := openHeld(t, path)
	if err := s.view(ctx, func(*txn) error { return nil }); err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	open, lock := s.db != nil, s.lock
	s.mu.Unlock()
	if !open {
		t.Fatal("the file closed after an operation with an hour's hold and nobody waiting")
	}
	if _, known := lock.othersWant(); !known {
		t.Skip("waiters for the lock cannot be seen on this system")
	}
	return s
}

// waitForWaiter returns once another Store marks a wait for s's file.
func waitForWaiter(t *testing.T, s *Store, opened <-chan error) {
	t.Helper()
	for {
		s.mu.Lock()
		if s.lock == nil { // its own linger timer saw the waiter first and yielded
			s.mu.Unlock()
			return
		}
		want, _ := s.lock.othersWant()
		s.mu.Unlock()
		if want {
			return
		}
		select {
		case err := <-opened:
			t.Fatalf("the second store opened while the first held the file: %v", err)
		case <-time.After(time.Millisecond):
		}
	}
}

func openAsync(path string) <-chan error {
	opened := make(chan error, 1)
	go func() {
		s, err := Open(context.Background(), path, backend.Options{Timeout: time.Minute})
		if err == nil {
			_ = s.Close()
		}
		opened <- err
	}()
	return opened
}

// TestLingerYieldsToWaiter: a store keeps its file open after its last
// operation while nobody waits (here for up to an hour), and gives it up to
// a process that comes to wait for it meanwhile.
func TestLingerYieldsToWaiter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	a := lingering(t, path)
	a.lingerEnd() // the linger timer's look: nobody waits
	a.mu.Lock()
	open := a.db != nil
	a.mu.Unlock()
	if !open {
		t.Fatal("the lingering file closed with nobody waiting")
	}

	opened := openAsync(path)
	waitForWaiter(t, a, opened)
	a.lingerEnd() // as the timer does every linger
	if err := <-opened; err != nil {
		t.Fatalf("open while the other store lingers: %v", err)
	}
	a.mu.Lock()
	open = a.db != nil
	a.mu.Unlock()
	if open {
		t.Fatal("the lingering store still has the file open after yielding")
	}
}

// TestReleaseYieldsToWaiter: the last operation of a store to end closes
// the file at once when another process waits for it.
func TestReleaseYieldsToWaiter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	a := lingering(t, path)
	if _, err := a.acquire(context.Background()); err != nil {
		t.Fatal(err)
	}
	opened := openAsync(path)
	waitForWaiter(t, a, opened)
	a.release(false)
	a.mu.Lock()
	open := a.db != nil
	a.mu.Unlock()
	if open {
		t.Fatal("the file stayed open after the last operation with another store waiting")
	}
	if err := <-opened; err != nil {
		t.Fatalf("open after the other store released: %v", err)
	}
}

// TestReopenedPastHold: past the hold, an operation does not share the
// file open since then even when nobody waits for it: the file is closed
// and opened afresh, which unmaps it and gives back the pages a long batch
// or drain read through the mapping. Within the hold it is shared.
func TestReopenedPastHold(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	a := lingering(t, path)
	a.mu.Lock()
	before := a.db
	a.mu.Unlock()
	db, err := a.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.release(false)
	if db != before {
		t.Fatal("the file was opened again within the hold")
	}
	a.mu.Lock()
	a.openedAt = time.Now().Add(-2 * a.hold) // the next operation starts past the hold
	a.mu.Unlock()
	db, err = a.acquire(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	a.release(false)
	if db == before {
		t.Fatal("the file open since before the hold was shared past it")
	}
}
