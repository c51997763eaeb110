package backendtest

import (
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainSettleRunTests = []suiteTest{
	{name: "SettleRun/Notes", fn: testSettleRunNotes},
	{name: "SettleRun/StopsAtFirstFailure", fn: testSettleRunStops},
	{name: "SettleRun/Fenced", fn: testSettleRunFenced},
	{name: "SettleRun/Malformed", fn: testSettleRunMalformed},
	{name: "Settle/Unwatched", fn: testSettleUnwatched},
}

// noteReq is the direct settle of automation admission a as a note on
// transcript under epoch, unwatched.
func noteReq(a backend.Admission, transcript string, epoch uint64, now time.Time) backend.SettleRequest {
	return backend.SettleRequest{
		Session: a.Session, AdmissionID: a.ID, Epoch: epoch, Direct: true, Unwatched: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: transcript,
		Messages: []backend.NewMessage{noteMessage(transcript, a)}, Now: now,
	}
}

// queueNotes admits n automation inputs to session and returns them in order.
func queueNotes(t *testing.T, s backend.Store, session string, n int) []backend.Admission {
	t.Helper()
	out := make([]backend.Admission, n)
	for i := range out {
		out[i] = auto(t, s, session, fmt.Sprintf("[finished] job %d", i), fmt.Sprintf("job-%d", i)).Admission
	}
	return out
}

func testSettleRunNotes(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	as := queueNotes(t, s, "s1", 3)
	l := acquire(t, s, "s1", "A", T0)
	before := getSession(t, s, "s1")
	reqs := make([]backend.SettleRequest, len(as))
	for i, a := range as {
		reqs[i] = noteReq(a, "s1", l.Epoch, at(time.Duration(i+1)*time.Second))
	}
	got, err := s.SettleRun(ctxOf(t), reqs)
	noErr(t, "settle run", err)
	if len(got) != len(as) {
		t.Fatalf("settled %d, want %d", len(got), len(as))
	}
	for i, a := range as {
		want := a
		want.Status, want.Outcome, want.Mode, want.DeliveredTo = backend.StatusDone, backend.OutcomeCompleted, backend.ModeNote, "s1"
		want.Epoch, want.Generation = l.Epoch, before.Generation+uint64(i)+1
		want.StartedAt, want.SettledAt = at(time.Duration(i+1)*time.Second), at(time.Duration(i+1)*time.Second)
		diff(t, fmt.Sprintf("settled admission %d", i), want, got[i])
		diff(t, fmt.Sprintf("stored admission %d", i), got[i], getAdmission(t, s, a.ID))
	}
	msgs := listMessages(t, s, "s1")
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	for i, m := range msgs {
		if m.Seq != uint64(i+1) || m.Role != backend.RoleNote || m.AdmissionID != as[i].ID || m.Content != as[i].Text() {
			t.Errorf("message %d: %+v, want the note of %s", i, m, as[i].ID)
		}
	}
	tr := getTranscript(t, s, "s1")
	if tr.MessageCount != 3 || tr.NoteCount != 3 {
		t.Errorf("transcript counts: messages %d notes %d, want 3 3", tr.MessageCount, tr.NoteCount)
	}
	sess := getSession(t, s, "s1")
	if sess.Queued != 0 || sess.Generation != before.Generation+3 {
		t.Errorf("session after the run: queued %d generation %d, want 0 %d", sess.Queued, sess.Generation, before.Generation+3)
	}
	// An empty run settles nothing.
	got, err = s.SettleRun(ctxOf(t), nil)
	noErr(t, "empty run", err)
	if len(got) != 0 {
		t.Errorf("empty run settled %d", len(got))
	}
}

// testSettleRunStops: a run whose second request is not the head once the
// first is settled (the third was named out of order) commits the first and
// leaves the rest queued, untouched.
func testSettleRunStops(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	as := queueNotes(t, s, "s1", 3)
	l := acquire(t, s, "s1", "A", T0)
	got, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{
		noteReq(as[0], "s1", l.Epoch, at(time.Second)),
		noteReq(as[2], "s1", l.Epoch, at(time.Second)),
		noteReq(as[1], "s1", l.Epoch, at(time.Second)),
	})
	wantErr(t, "run out of order", err, backend.ErrNotHead)
	if len(got) != 1 || got[0].ID != as[0].ID {
		t.Fatalf("settled %+v, want only %s", got, as[0].ID)
	}
	for _, a := range as[1:] {
		diff(t, "untouched admission "+a.ID, a, getAdmission(t, s, a.ID))
	}
	if n := len(listMessages(t, s, "s1")); n != 1 {
		t.Errorf("%d messages, want 1", n)
	}
	// A request naming a transcript of no session stops the run there too.
	got, err = s.SettleRun(ctxOf(t), []backend.SettleRequest{
		noteReq(as[1], "s1", l.Epoch, at(2*time.Second)),
		noteReq(as[2], "nowhere", l.Epoch, at(2*time.Second)),
	})
	wantErr(t, "run to a missing transcript", err, backend.ErrNotFound)
	if len(got) != 1 || got[0].ID != as[1].ID {
		t.Fatalf("settled %+v, want only %s", got, as[1].ID)
	}
	diff(t, "untouched admission", as[2], getAdmission(t, s, as[2].ID))
	if sess := getSession(t, s, "s1"); sess.Queued != 1 {
		t.Errorf("queued %d, want 1", sess.Queued)
	}
}

// testSettleRunFenced: a run under an old epoch settles nothing.
func testSettleRunFenced(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	as := queueNotes(t, s, "s1", 2)
	old := acquire(t, s, "s1", "A", T0)
	acquire(t, s, "s1", "B", at(time.Minute)) // A's lease expired; B took over
	got, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{
		noteReq(as[0], "s1", old.Epoch, at(time.Minute)),
		noteReq(as[1], "s1", old.Epoch, at(time.Minute)),
	})
	wantErr(t, "fenced run", err, backend.ErrFenced)
	if len(got) != 0 {
		t.Errorf("fenced run settled %d", len(got))
	}
	for _, a := range as {
		diff(t, "untouched admission", a, getAdmission(t, s, a.ID))
	}
	if n := len(listMessages(t, s, "s1")); n != 0 {
		t.Errorf("%d messages, want 0", n)
	}
}

// testSettleRunMalformed: a request that is not direct, of another session
// or malformed refuses the whole run before anything is written.
func testSettleRunMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	as := queueNotes(t, s, "s1", 2)
	l := acquire(t, s, "s1", "A", T0)
	notDirect := noteReq(as[1], "s1", l.Epoch, at(time.Second))
	notDirect.Direct, notDirect.Unwatched = false, false
	other := noteReq(as[1], "s1", l.Epoch, at(time.Second))
	other.Session = "s2"
	bad := noteReq(as[1], "s1", l.Epoch, at(time.Second))
	bad.Outcome = "maybe"
	for name, second := range map[string]backend.SettleRequest{"not direct": notDirect, "other session": other, "bad outcome": bad} {
		got, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{noteReq(as[0], "s1", l.Epoch, at(time.Second)), second})
		wantErr(t, "run with a request "+name, err, backend.ErrInvalid)
		if len(got) != 0 {
			t.Errorf("run with a request %s settled %d", name, len(got))
		}
	}
	for _, a := range as {
		diff(t, "untouched admission", a, getAdmission(t, s, a.ID))
	}
	// Unwatched without Direct is malformed for Settle too.
	_, err := s.Settle(ctxOf(t), notDirectUnwatched(as[0], l.Epoch))
	wantErr(t, "settle unwatched without direct", err, backend.ErrInvalid)
}

func notDirectUnwatched(a backend.Admission, epoch uint64) backend.SettleRequest {
	r := noteReq(a, a.Session, epoch, at(time.Second))
	r.Direct = false
	return r
}

// testSettleUnwatched: a note decided with nobody watching is refused once a
// viewer is live (the admission is due as a turn), by Settle and SettleRun,
// and goes through again once the viewer is gone.
func testSettleUnwatched(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	as := queueNotes(t, s, "s1", 2)
	l := acquire(t, s, "s1", "A", T0)
	v, err := s.AddViewer(ctxOf(t), "s1", time.Minute, time.Now())
	noErr(t, "add viewer", err)
	_, err = s.Settle(ctxOf(t), noteReq(as[0], "s1", l.Epoch, at(time.Second)))
	wantErr(t, "settle unwatched with a viewer", err, backend.ErrWatched)
	got, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{
		noteReq(as[0], "s1", l.Epoch, at(time.Second)), noteReq(as[1], "s1", l.Epoch, at(time.Second)),
	})
	wantErr(t, "run unwatched with a viewer", err, backend.ErrWatched)
	if len(got) != 0 {
		t.Errorf("run with a viewer settled %d", len(got))
	}
	for _, a := range as {
		diff(t, "untouched admission", a, getAdmission(t, s, a.ID))
	}
	// Without Unwatched the same settle goes through (a turn-or-note
	// decision made elsewhere is the caller's).
	plain := noteReq(as[0], "s1", l.Epoch, at(time.Second))
	plain.Unwatched = false
	_, err = s.Settle(ctxOf(t), plain)
	noErr(t, "settle direct with a viewer, not unwatched", err)
	noErr(t, "remove viewer", s.RemoveViewer(ctxOf(t), "s1", v.ID))
	got, err = s.SettleRun(ctxOf(t), []backend.SettleRequest{noteReq(as[1], "s1", l.Epoch, at(2*time.Second))})
	noErr(t, "run unwatched once the viewer left", err)
	if len(got) != 1 {
		t.Errorf("settled %d, want 1", len(got))
	}
	// A note to an ended transcript is a note whoever watches: a live
	// viewer does not refuse it.
	last := auto(t, s, "s1", "[finished] late", "late-1").Admission
	_, err = s.AddViewer(ctxOf(t), "s1", time.Minute, time.Now())
	noErr(t, "add viewer again", err)
	_, err = s.Compress(ctxOf(t), "s1", "s1-tip", at(3*time.Second))
	noErr(t, "compress", err)
	got, err = s.SettleRun(ctxOf(t), []backend.SettleRequest{noteReq(last, "s1", l.Epoch, at(4*time.Second))})
	noErr(t, "run unwatched to an ended transcript with a viewer", err)
	if len(got) != 1 {
		t.Errorf("settled %d, want 1", len(got))
	}
}
