//go:build unix

package bbolt_test

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/hermesq/hermesq/pkg/backend"
	boltstore "github.com/hermesq/hermesq/plugins/storage/bbolt"
)

// Issue 14 (7): every store call honours its context's deadline, writes
// included (the group commit used to drop it), even when the store's own
// lock wait is far longer.
func TestDeadlineBoundsEveryCall(t *testing.T) {
	path := filepath.Join(t.TempDir(), "hermesq.db")
	s, err := boltstore.Open(context.Background(), path, backend.Options{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	if _, _, err := s.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	// Another process holds the store (its sidecar lock) and does not let go.
	fd, err := unix.Open(path+".lock", unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	unlocked := false
	unlock := func() {
		if !unlocked {
			unlocked = true
			_ = unix.Flock(fd, unix.LOCK_UN)
			_ = unix.Close(fd)
		}
	}
	t.Cleanup(unlock)

	calls := map[string]func(ctx context.Context) error{
		"admit": func(ctx context.Context) error {
			_, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice",
				Payload: []byte(`{"text":"hi"}`)}})
			return err
		},
		"acquire lease": func(ctx context.Context) error {
			_, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "alice", Session: "s1", Holder: "h"})
			return err
		},
		"renew lease": func(ctx context.Context) error {
			_, err := s.RenewLease(ctx, backend.LeaseRequest{Session: "s1", Holder: "h", Epoch: 1})
			return err
		},
		"settle": func(ctx context.Context) error {
			_, err := s.Settle(ctx, backend.SettleRequest{Session: "s1", AdmissionID: "a", Epoch: 1, Generation: 1,
				Outcome: backend.OutcomeCompleted})
			return err
		},
		"get session": func(ctx context.Context) error {
			_, err := s.GetSession(ctx, "s1", time.Time{})
			return err
		},
	}
	for name, call := range calls {
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		done := make(chan error, 1)
		go func() { done <- call(ctx) }()
		select {
		case err := <-done:
			if !errors.Is(err, backend.ErrUnavailable) {
				t.Errorf("%s past its deadline: %v, want ErrUnavailable", name, err)
			}
		case <-time.After(time.Minute): // a hang guard: the store's own wait is an hour
			t.Fatalf("%s ignores its context's deadline", name)
		}
		cancel()
	}
	// Let go: a write queued now commits after the one still in flight,
	// and the store is quiet again before its files are removed.
	unlock()
	if _, _, err := s.OpenSession(context.Background(), backend.OpenSessionRequest{ID: "s2", Owner: "alice"}); err != nil {
		t.Fatalf("a write once the store is free again: %v", err)
	}
}
