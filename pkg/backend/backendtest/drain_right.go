package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Draining needs a right (docs/contract.md §10): the owner, or a grant of
// drainer or owner. The store checks it when the lease is taken and again
// in the same step as every claim, so a grant revoked meanwhile stops the
// next claim.
var drainRightTests = []suiteTest{
	{name: "DrainRight/Lease", fn: testDrainRightLease},
	{name: "DrainRight/Claims", fn: testDrainRightClaims},
}

// Who may take the drain lease: the owner, a drainer or owner grant; not a
// reader, a writer, a stranger or no one. A refusal writes nothing: not the
// epoch, not the holder, and an admission left running by a vanished
// drainer stays running (taking the lease would have made it unknown).
func testDrainRightLease(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "private")
	human(t, s, "s1", "later")
	for _, g := range []backend.Grant{
		{Principal: "rita", Role: backend.RoleReader},
		{Principal: "will", Role: backend.RoleWriter},
		{Principal: "dora", Role: backend.RoleDrainer},
		{Principal: "otto", Role: backend.RoleOwner},
	} {
		noErr(t, "grant "+g.Principal, s.Grant(ctxOf(t), "s1", g))
	}
	// A drainer that claimed the head and vanished.
	l := acquire(t, s, "s1", "vanished", T0)
	claim(t, s, l, a.ID, T0)
	before := getSession(t, s, "s1")

	late := at(time.Hour) // the vanished drainer's lease has lapsed
	for _, p := range []string{Other, "rita", "will", ""} {
		_, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "thief", Principal: p, TTL: time.Minute, Now: late})
		wantErr(t, "acquire lease as "+p, err, backend.ErrForbidden)
	}
	after := getSession(t, s, "s1")
	if after.Epoch != before.Epoch || after.LeaseHolder != before.LeaseHolder || after.Generation != before.Generation {
		t.Errorf("after refused leases: epoch %d→%d, holder %q→%q, generation %d→%d; want unchanged",
			before.Epoch, after.Epoch, before.LeaseHolder, after.LeaseHolder, before.Generation, after.Generation)
	}
	if got := getAdmission(t, s, a.ID).Status; got != backend.StatusRunning {
		t.Errorf("admission left running, after refused leases: %s, want running", got)
	}

	for i, p := range []string{"dora", "otto", Owner} {
		now := late.Add(time.Duration(i) * time.Hour)
		l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "h-" + p, Principal: p, TTL: time.Minute, Now: now})
		noErr(t, "acquire lease as "+p, err)
		if l.Epoch != before.Epoch+1+uint64(i) {
			t.Errorf("lease of %s: epoch %d, want %d", p, l.Epoch, before.Epoch+1+uint64(i))
		}
	}
	// An unknown session is not found, whoever asks.
	_, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Session: "ghost", Holder: "h", Principal: Owner, TTL: time.Minute, Now: T0})
	wantErr(t, "acquire lease of an unknown session", err, backend.ErrNotFound)
}

// A drainer whose grant is revoked while it holds the lease can claim
// nothing more: Claim, a direct Settle (a note), SettleRun and the claim of
// SettleClaim are refused in the same step, writing nothing; granted
// again, it claims.
func testDrainRightClaims(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	noErr(t, "grant dora", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "dora", Role: backend.RoleDrainer}))
	l, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "D", Principal: "dora", TTL: time.Minute, Now: T0})
	noErr(t, "acquire lease as dora", err)
	ca := claim(t, s, l, a.ID, T0)

	noErr(t, "revoke dora", s.Revoke(ctxOf(t), "s1", "dora"))
	// The turn already claimed settles (it ran); the next is not claimed.
	r, err := s.SettleClaim(ctxOf(t), backend.SettleRequest{
		Session: "s1", AdmissionID: ca.ID, Epoch: ca.Epoch, Generation: ca.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "one", "reply"), Now: at(time.Second),
	}, backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: at(time.Second)})
	noErr(t, "settle the claimed turn", err)
	wantErr(t, "claim of SettleClaim after the revoke", r.ClaimErr, backend.ErrForbidden)

	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: at(2 * time.Second)})
	wantErr(t, "claim after the revoke", err, backend.ErrForbidden)
	note := backend.SettleRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Direct: true, Outcome: backend.OutcomeCompleted,
		Mode: backend.ModeNote, DeliveredTo: "s1", Messages: []backend.NewMessage{{Transcript: "s1", Role: backend.RoleNote, Content: "x"}}, Now: at(2 * time.Second)}
	_, err = s.Settle(ctxOf(t), note)
	wantErr(t, "direct settle after the revoke", err, backend.ErrForbidden)
	settled, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{note})
	wantErr(t, "settle run after the revoke", err, backend.ErrForbidden)
	if len(settled) != 0 {
		t.Errorf("settle run after the revoke settled %d", len(settled))
	}
	if got := getAdmission(t, s, b.ID); got.Status != backend.StatusQueued {
		t.Errorf("second admission after refused claims: %s, want queued", got.Status)
	}
	if n := len(listMessages(t, s, "s1")); n != 2 {
		t.Errorf("transcript after refused claims: %d messages, want the first turn's 2", n)
	}

	noErr(t, "grant dora again", s.Grant(ctxOf(t), "s1", backend.Grant{Principal: "dora", Role: backend.RoleDrainer}))
	claim(t, s, l, b.ID, at(3*time.Second))
}
