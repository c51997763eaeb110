package bbolt

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestGroupCommit: concurrent writers of one process share commits, and a
// refused request in a group leaves the others admitted.
func TestGroupCommit(t *testing.T) {
	ctx := context.Background()
	s := openWithSession(t)
	const writers = 64
	before := s.group.commits.Load()
	var wg sync.WaitGroup
	start := make(chan struct{})
	errs := make([]error, writers)
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			principal := "alice"
			if i%4 == 0 {
				principal = "mallory" // refused: forbidden
			}
			res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: principal,
				Payload: []byte(fmt.Sprintf(`{"text":"%d"}`, i))}})
			if err == nil {
				err = res[0].Err
			}
			errs[i] = err
		}()
	}
	close(start)
	wg.Wait()
	commits := s.group.commits.Load() - before
	for i, err := range errs {
		if (i%4 == 0) != (err != nil) {
			t.Errorf("writer %d: %v", i, err)
		}
	}
	all, err := s.ListAdmissions(ctx, "s1", backend.AdmissionFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != writers*3/4 {
		t.Fatalf("%d admissions, want %d", len(all), writers*3/4)
	}
	t.Logf("%d concurrent writers: %d commits", writers, commits)
	if commits >= writers {
		t.Errorf("%d concurrent writers took %d commits: nothing was grouped", writers, commits)
	}
}

// TestSettleClaimOneCommit: ending a turn and starting the next is one
// commit (two fdatasyncs), not one for the settle and one for the claim.
func TestSettleClaimOneCommit(t *testing.T) {
	ctx := context.Background()
	s := openWithSession(t)
	var ids []string
	for i := 0; i < 2; i++ {
		res, err := s.Admit(ctx, []backend.AdmitRequest{{Session: "s1", Kind: backend.KindHuman, Principal: "alice",
			Payload: []byte(fmt.Sprintf(`{"text":"%d"}`, i))}})
		if err != nil || res[0].Err != nil {
			t.Fatal(err, res[0].Err)
		}
		ids = append(ids, res[0].Admission.ID)
	}
	l, err := s.AcquireLease(ctx, backend.LeaseRequest{Principal: "alice", Session: "s1", Holder: "A"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := s.Claim(ctx, backend.ClaimRequest{Session: "s1", AdmissionID: ids[0], Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1"})
	if err != nil {
		t.Fatal(err)
	}
	before := s.group.commits.Load()
	r, err := s.SettleClaim(ctx, backend.SettleRequest{Session: "s1", AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted}, backend.ClaimRequest{Session: "s1", AdmissionID: ids[1], Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1"})
	if err != nil || r.ClaimErr != nil {
		t.Fatal(err, r.ClaimErr)
	}
	if n := s.group.commits.Load() - before; n != 1 {
		t.Errorf("settle and claim took %d commits, want 1", n)
	}
}

// openWithSession opens a store in a fresh file holding session s1, owned
// by alice; the test closes it at its end.
func openWithSession(t *testing.T) *Store {
	t.Helper()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "hermesq.db"), backend.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, _, err := s.OpenSession(ctx, backend.OpenSessionRequest{ID: "s1", Owner: "alice"}); err != nil {
		t.Fatal(err)
	}
	return s
}
