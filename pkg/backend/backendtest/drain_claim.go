package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainClaimTests = []suiteTest{
	{name: "Claim", fn: testClaim},
	{name: "Claim/Busy", fn: testClaimBusy},
}

func testClaim(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	gen := getSession(t, s, "s1").Generation

	_, err := s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: T0})
	wantErr(t, "claim a non-head", err, backend.ErrNotHead)
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch - 1, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: T0})
	wantErr(t, "claim with a stale epoch", err, backend.ErrFenced)
	if got := getAdmission(t, s, a.ID); got.Status != backend.StatusQueued {
		t.Fatalf("refused claims changed the head: %s", got.Status)
	}

	c := claim(t, s, l, a.ID, at(time.Second))
	want := a
	want.Status, want.Epoch, want.Generation, want.Mode, want.DeliveredTo, want.StartedAt =
		backend.StatusRunning, l.Epoch, gen+1, backend.ModeTurn, "s1", at(time.Second)
	diff(t, "claimed admission", want, c)
	diff(t, "claimed admission stored", c, getAdmission(t, s, a.ID))
	if g := getSession(t, s, "s1").Generation; g != gen+1 {
		t.Errorf("session generation %d, want %d", g, gen+1)
	}
	settleTurn(t, s, c, "r", at(2*time.Second))
	c2 := claim(t, s, l, b.ID, at(3*time.Second))
	if c2.Generation != gen+2 {
		t.Errorf("second claim generation %d, want %d", c2.Generation, gen+2)
	}
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, Now: T0})
	if err == nil {
		t.Errorf("claim of a done admission succeeded")
	}
}

func testClaimBusy(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	claim(t, s, l, a.ID, T0)
	// Once a is running, b is the lowest queued seq; it may still not start.
	_, err := s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, Now: T0})
	wantErr(t, "claim while running", err, backend.ErrBusy)
	l2 := acquire(t, s, "s1", "B", at(time.Hour))
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l2.Epoch, Mode: backend.ModeTurn, Now: at(time.Hour)})
	wantErr(t, "claim while unknown", err, backend.ErrBusy)
	_, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: b.ID, Epoch: l2.Epoch, Direct: true, Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, Now: at(time.Hour)})
	wantErr(t, "direct settle while unknown", err, backend.ErrBusy)
	_, err = s.Resolve(ctxOf(t), a.ID, backend.ResolveCompleted, at(time.Hour))
	noErr(t, "resolve", err)
	claim(t, s, l2, b.ID, at(time.Hour))
}
