package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var movedTests = []suiteTest{
	{name: "Settle/ExpectCurrent", fn: testSettleExpectCurrent},
}

// testSettleExpectCurrent: a settle that names the current transcript its
// drainer decided on is refused (ErrMoved, nothing written) once the
// session names another, for a claimed turn, a direct note and a note run;
// with the right one it goes through.
func testSettleExpectCurrent(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	h := human(t, s, "s1", "question")
	n1 := auto(t, s, "s1", "note one", "n1").Admission
	n2 := auto(t, s, "s1", "note two", "n2").Admission
	l := acquire(t, s, "s1", "A", T0)
	c := claim(t, s, l, h.ID, at(time.Second))
	_, err := s.Compress(ctxOf(t), "s1", "s1.2", at(2*time.Second))
	noErr(t, "compress", err)
	before := export(t, s)

	turn := backend.SettleRequest{
		Session: "s1", AdmissionID: h.ID, Epoch: c.Epoch, Generation: c.Generation, Outcome: backend.OutcomeCompleted,
		Messages: turnMessages("s1", "question", "answer"), ExpectCurrent: "s1", Now: at(3 * time.Second),
	}
	_, err = s.Settle(ctxOf(t), turn)
	wantErr(t, "turn settle decided on s1 after the compression", err, backend.ErrMoved)
	diff(t, "store after the refused settle", before, export(t, s))

	turn.ExpectCurrent, turn.Messages, turn.DeliveredTo = "s1.2", turnMessages("s1.2", "question", "answer"), "s1.2"
	got, err := s.Settle(ctxOf(t), turn)
	noErr(t, "turn settle decided on s1.2", err)
	if got.DeliveredTo != "s1.2" || got.Status != backend.StatusDone {
		t.Errorf("settled turn: delivered to %q, status %s", got.DeliveredTo, got.Status)
	}

	note := func(a backend.Admission, current, target string) backend.SettleRequest {
		return backend.SettleRequest{
			Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Direct: true, Outcome: backend.OutcomeCompleted,
			Mode: backend.ModeNote, DeliveredTo: target, Messages: []backend.NewMessage{noteMessage(target, a)},
			ExpectCurrent: current, Now: at(4 * time.Second),
		}
	}
	before = export(t, s)
	_, err = s.Settle(ctxOf(t), note(n1, "s1", "s1"))
	wantErr(t, "direct note decided on s1", err, backend.ErrMoved)
	done, err := s.SettleRun(ctxOf(t), []backend.SettleRequest{note(n1, "s1", "s1"), note(n2, "s1", "s1")})
	wantErr(t, "note run decided on s1", err, backend.ErrMoved)
	if len(done) != 0 {
		t.Errorf("a refused run settled %d admissions", len(done))
	}
	diff(t, "store after the refused notes", before, export(t, s))

	done, err = s.SettleRun(ctxOf(t), []backend.SettleRequest{note(n1, "s1.2", "s1.2"), note(n2, "s1.2", "s1.2")})
	noErr(t, "note run decided on s1.2", err)
	if len(done) != 2 {
		t.Fatalf("run settled %d, want 2", len(done))
	}
	if n := getTranscript(t, s, "s1").MessageCount; n != 0 {
		t.Errorf("s1 (ended) has %d messages, want 0", n)
	}
	if tr := getTranscript(t, s, "s1.2"); tr.MessageCount != 4 || tr.NoteCount != 2 {
		t.Errorf("s1.2: %d messages, %d notes; want 4, 2", tr.MessageCount, tr.NoteCount)
	}
}
