package redis_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Issue 14 (7): a call's context deadline bounds it even when the client's
// own timeouts are far longer: a lease renewal with a short deadline against
// a Redis that pauses writes fails as unavailable instead of waiting.
func TestDeadlineBoundsAStalledCall(t *testing.T) {
	srv := redistest.Start(t)
	s, err := open(t, srv.FreshURL(), backend.Options{Timeout: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	bg := context.Background()
	if _, _, err := s.OpenSession(bg, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	l, err := s.AcquireLease(bg, backend.LeaseRequest{Session: "s1", Holder: "h", TTL: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Do("CLIENT", "PAUSE", "3600000", "WRITE"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = srv.Do("CLIENT", "UNPAUSE") })
	ctx, cancel := context.WithTimeout(bg, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.RenewLease(ctx, backend.LeaseRequest{Session: "s1", Holder: "h", Epoch: l.Epoch, TTL: time.Minute})
		done <- err
	}()
	select {
	case err = <-done:
	case <-time.After(time.Minute): // a hang guard: the pause lasts an hour
		t.Fatal("a renewal with a 300ms deadline still waits for a paused Redis after a minute")
	}
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("renewal past its deadline while Redis pauses writes: %v, want ErrUnavailable", err)
	}
	if _, err := srv.Do("CLIENT", "UNPAUSE"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.RenewLease(bg, backend.LeaseRequest{Session: "s1", Holder: "h", Epoch: l.Epoch, TTL: time.Minute}); err != nil {
		t.Fatalf("renewal once Redis answers again: %v", err)
	}
}
