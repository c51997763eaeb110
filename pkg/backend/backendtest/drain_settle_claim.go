package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainSettleClaimTests = []suiteTest{
	{name: "SettleClaim/BackToBack", fn: testSettleClaim},
	{name: "SettleClaim/ClaimRefused", fn: testSettleClaimRefused},
	{name: "SettleClaim/SettleRefused", fn: testSettleClaimSettleRefused},
}

func settleClaim(t *testing.T, s backend.Store, c backend.Admission, reply, next string, epoch uint64, now time.Time) (backend.SettleClaimResult, error) {
	t.Helper()
	return s.SettleClaim(ctxOf(t), backend.SettleRequest{
		Session: c.Session, AdmissionID: c.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages(c.DeliveredTo, c.Text(), reply), Now: now,
	}, backend.ClaimRequest{
		Session: c.Session, AdmissionID: next, Epoch: epoch, Mode: backend.ModeTurn, DeliveredTo: c.DeliveredTo, Now: now,
	})
}

// One call settles a turn exactly as Settle would and claims the next head
// exactly as Claim would.
func testSettleClaim(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	c := human(t, s, "s1", "three")
	l := acquire(t, s, "s1", "A", T0)
	ca := claim(t, s, l, a.ID, at(time.Second))
	r, err := settleClaim(t, s, ca, "reply one", b.ID, l.Epoch, at(2*time.Second))
	noErr(t, "settle one, claim two", err)
	noErr(t, "claim two", r.ClaimErr)
	wantA := ca
	wantA.Status, wantA.Outcome, wantA.SettledAt = backend.StatusDone, backend.OutcomeCompleted, at(2*time.Second)
	diff(t, "settled", wantA, r.Settled)
	diff(t, "settled, stored", r.Settled, getAdmission(t, s, a.ID))
	wantB := b
	wantB.Status, wantB.Epoch, wantB.Generation, wantB.StartedAt = backend.StatusRunning, l.Epoch, ca.Generation+1, at(2*time.Second)
	wantB.Mode, wantB.DeliveredTo = backend.ModeTurn, "s1"
	diff(t, "claimed", wantB, r.Claimed)
	diff(t, "claimed, stored", r.Claimed, getAdmission(t, s, b.ID))
	sess := getSession(t, s, "s1")
	if sess.Running != 1 || sess.Queued != 1 || sess.Generation != ca.Generation+1 {
		t.Errorf("session: running %d queued %d generation %d, want 1 1 %d", sess.Running, sess.Queued, sess.Generation, ca.Generation+1)
	}
	// Back to back: the claimed one settles and the last is claimed.
	r, err = settleClaim(t, s, r.Claimed, "reply two", c.ID, l.Epoch, at(3*time.Second))
	noErr(t, "settle two, claim three", err)
	noErr(t, "claim three", r.ClaimErr)
	settleTurn(t, s, r.Claimed, "reply three", at(4*time.Second))
	var got []string
	for _, m := range listMessages(t, s, "s1") {
		got = append(got, string(m.Role)+":"+m.Content)
	}
	diff(t, "messages", []string{"user:one", "assistant:reply one", "user:two", "assistant:reply two", "user:three", "assistant:reply three"}, got)
}

// A claim refused leaves the settle in place: nothing is claimed.
func testSettleClaimRefused(t *testing.T, s backend.Store) {
	openSession(t, s, "other")
	elsewhere := human(t, s, "other", "elsewhere")
	cases := []struct {
		what   string
		next   func(two, three backend.Admission) string
		epoch  uint64 // added to the lease's
		refuse error
	}{
		{"a claim that is not the head", func(_, three backend.Admission) string { return three.ID }, 0, backend.ErrNotHead},
		{"a claim under another epoch", func(two, _ backend.Admission) string { return two.ID }, 1, backend.ErrFenced},
		{"a claim of another session's admission", func(backend.Admission, backend.Admission) string { return elsewhere.ID }, 0, backend.ErrNotFound},
		{"a claim of no admission", func(backend.Admission, backend.Admission) string { return "0123456789abcdef0123456789abcdef" }, 0, backend.ErrNotFound},
	}
	for i, tc := range cases {
		sid := fmt.Sprintf("s%d", i)
		openSession(t, s, sid)
		one, two, three := human(t, s, sid, "one"), human(t, s, sid, "two"), human(t, s, sid, "three")
		l := acquire(t, s, sid, "A", T0)
		c := claim(t, s, l, one.ID, T0)
		r, err := settleClaim(t, s, c, "reply", tc.next(two, three), l.Epoch+tc.epoch, at(time.Second))
		noErr(t, "settle with "+tc.what, err)
		wantErr(t, tc.what, r.ClaimErr, tc.refuse)
		if r.Settled.Status != backend.StatusDone || getAdmission(t, s, one.ID).Status != backend.StatusDone {
			t.Errorf("%s: the settle did not hold", tc.what)
		}
		sess := getSession(t, s, sid)
		if sess.Running != 0 || sess.Queued != 2 || sess.Generation != c.Generation {
			t.Errorf("%s: session running %d queued %d generation %d, want 0 2 %d", tc.what, sess.Running, sess.Queued, sess.Generation, c.Generation)
		}
		diff(t, tc.what+": two", two, getAdmission(t, s, two.ID))
		diff(t, tc.what+": three", three, getAdmission(t, s, three.ID))
		if n := len(listMessages(t, s, sid)); n != 2 {
			t.Errorf("%s: %d messages, want 2", tc.what, n)
		}
	}
	diff(t, "the other session's admission", elsewhere, getAdmission(t, s, elsewhere.ID))
	// With nothing queued behind it, the claim is refused as not the head.
	openSession(t, s, "last")
	one := human(t, s, "last", "one")
	l := acquire(t, s, "last", "A", T0)
	r, err := settleClaim(t, s, claim(t, s, l, one.ID, T0), "reply", one.ID, l.Epoch, T0)
	noErr(t, "settle the last", err)
	wantErr(t, "claim with nothing queued", r.ClaimErr, backend.ErrNotHead)
	if got := getAdmission(t, s, one.ID); got.Status != backend.StatusDone {
		t.Errorf("last admission %s, want done", got.Status)
	}
}

// A settle refused writes nothing and tries no claim.
func testSettleClaimSettleRefused(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	b := human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	c := claim(t, s, l, a.ID, T0)
	stale := c
	stale.Generation++
	_, err := settleClaim(t, s, stale, "reply", b.ID, l.Epoch, T0)
	wantErr(t, "settle with a stale generation", err, backend.ErrFenced)
	moved := backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "one", "reply"), ExpectCurrent: "elsewhere", Now: T0}
	next := backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Mode: backend.ModeTurn, DeliveredTo: "s1", Now: T0}
	_, err = s.SettleClaim(ctxOf(t), moved, next)
	wantErr(t, "settle expecting another current transcript", err, backend.ErrMoved)
	direct := moved
	direct.ExpectCurrent, direct.Direct = "", true
	_, err = s.SettleClaim(ctxOf(t), direct, next)
	wantErr(t, "a direct settle", err, backend.ErrInvalid)
	elsewhere := next
	elsewhere.Session = "s2"
	_, err = s.SettleClaim(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "one", "reply"), Now: T0}, elsewhere)
	wantErr(t, "a claim in another session", err, backend.ErrInvalid)
	diff(t, "first admission after refused settles", c, getAdmission(t, s, a.ID))
	diff(t, "second admission after refused settles", b, getAdmission(t, s, b.ID))
	if n := len(listMessages(t, s, "s1")); n != 0 {
		t.Errorf("refused settles wrote %d messages", n)
	}
}
