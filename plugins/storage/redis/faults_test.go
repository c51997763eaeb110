package redis_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
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
	l, err := s.AcquireLease(bg, backend.LeaseRequest{Principal: "alice", Session: "s1", Holder: "h", TTL: time.Minute})
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

// Issue 14 (5): sessions racing to take one orphaned transcript id claim
// over (its claimer died before creating the transcript) cannot both win:
// exactly one switch to that id succeeds, the others are conflicts.
func TestOrphanClaimRace(t *testing.T) {
	srv := redistest.Start(t)
	const prefix = "orphanrace"
	s := mustOpen(t, srv.URLWithPrefix(prefix))
	bg := context.Background()
	const sessions, rounds = 8, 12
	for i := 0; i < sessions; i++ {
		if _, _, err := s.OpenSession(bg, backend.OpenSessionRequest{ID: fmt.Sprintf("s%d", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	old := strconv.FormatInt(time.Now().Add(-time.Hour).UnixNano(), 10)
	for r := 0; r < rounds; r++ {
		tid := fmt.Sprintf("orphan-%d", r)
		if _, err := srv.Do("SET", prefix+":transcript:{"+tid+"}", "ghost "+old); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make([]error, sessions)
		start := make(chan struct{})
		for i := 0; i < sessions; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				_, errs[i] = s.Switch(bg, fmt.Sprintf("s%d", i), tid, time.Now())
			}(i)
		}
		close(start)
		wg.Wait()
		won := 0
		for i, err := range errs {
			switch {
			case err == nil:
				won++
			case !errors.Is(err, backend.ErrConflict):
				t.Errorf("round %d: session s%d: %v, want a conflict when another won", r, i, err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d sessions took transcript %s over, want exactly 1", r, won, tid)
		}
	}
}

// The same for an admission id's lookup left by a session that never
// created the admission: of sessions admitting under that id at once,
// exactly one gets it.
func TestOrphanAdmissionIDRace(t *testing.T) {
	srv := redistest.Start(t)
	const prefix = "orphanadm"
	s := mustOpen(t, srv.URLWithPrefix(prefix))
	bg := context.Background()
	const sessions, rounds = 8, 12
	for i := 0; i < sessions; i++ {
		if _, _, err := s.OpenSession(bg, backend.OpenSessionRequest{ID: fmt.Sprintf("s%d", i), Owner: "alice"}); err != nil {
			t.Fatal(err)
		}
	}
	for r := 0; r < rounds; r++ {
		id := fmt.Sprintf("%032x", r+1)
		if _, err := srv.Do("SET", prefix+":admission:{"+id+"}", "ghost"); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		res := make([]backend.AdmitResult, sessions)
		start := make(chan struct{})
		for i := 0; i < sessions; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				<-start
				out, err := s.Admit(bg, []backend.AdmitRequest{{ID: id, Session: fmt.Sprintf("s%d", i),
					Kind: backend.KindHuman, Principal: "alice", Payload: []byte(`{"text":"x"}`)}})
				if err != nil {
					res[i].Err = err
					return
				}
				res[i] = out[0]
			}(i)
		}
		close(start)
		wg.Wait()
		won := 0
		for i, r := range res {
			switch {
			case r.Err == nil:
				won++
			case !errors.Is(r.Err, backend.ErrConflict):
				t.Errorf("session s%d: %v, want a conflict when another won", i, r.Err)
			}
		}
		if won != 1 {
			t.Fatalf("round %d: %d sessions admitted under id %s, want exactly 1", r, won, id)
		}
	}
}
