package backendtest

import (
	"errors"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// faultTests are the facts about a write whose reply was lost (it
// committed, the caller saw a transient error) that callers build their
// recovery on: a re-sent admit finds what the first one committed, and a
// re-sent settle, requeue or release is refused or a no-op, never done
// twice, while a read shows the first one's effect.
var faultTests = []suiteTest{
	{name: "Faults/AdmitReplyLost", fn: testAdmitReplyLost},
	{name: "Faults/SettleReplyLost", fn: testSettleReplyLost},
	{name: "Faults/DirectSettleReplyLost", fn: testDirectSettleReplyLost},
	{name: "Faults/RequeueReplyLost", fn: testRequeueReplyLost},
	{name: "Faults/ReleaseReplyLost", fn: testReleaseReplyLost},
	{name: "Faults/FailBeforeWritesNothing", fn: testFailBeforeWritesNothing},
}

// faulty returns s (every store of the suite is a FaultStore).
func faulty(t *testing.T, s backend.Store) *FaultStore {
	t.Helper()
	f, ok := s.(*FaultStore)
	if !ok {
		t.Fatalf("store %T is not wrapped in a FaultStore", s)
	}
	return f
}

func lost(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, backend.ErrUnavailable) {
		t.Fatalf("%s with its reply lost: %v, want the injected ErrUnavailable", what, err)
	}
}

func testAdmitReplyLost(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	h := backend.AdmitRequest{Session: "s1", Kind: backend.KindHuman, Principal: Owner, RequestID: "r-1",
		Payload: Payload("hello"), Now: T0}
	a := autoReq("s1", "[finished] make (exit 0)", "p-1", "p-2")
	f.Inject(Fault{Method: "Admit", Mode: FailAfter})
	_, err := s.Admit(ctxOf(t), []backend.AdmitRequest{h, a})
	lost(t, "admit", err)
	res, err := s.Admit(ctxOf(t), []backend.AdmitRequest{h, a})
	noErr(t, "admit re-sent", err)
	for i, r := range res {
		noErr(t, "admit re-sent", r.Err)
		if r.Result != backend.ResultDuplicate {
			t.Errorf("re-sent request %d: result %q, want duplicate of what the lost reply committed", i, r.Result)
		}
	}
	if n := len(listAdmissions(t, s, "s1", backend.AdmissionFilter{})); n != 2 {
		t.Errorf("%d admissions after a re-sent admit, want 2", n)
	}
}

func testSettleReplyLost(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	in := human(t, s, "s1", "hello")
	l := acquire(t, s, "s1", "A", at(time.Second))
	c := claim(t, s, l, in.ID, at(2*time.Second))
	req := backend.SettleRequest{Session: "s1", AdmissionID: in.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "hello", "hi!"), Now: at(3 * time.Second)}
	f.Inject(Fault{Method: "Settle", Mode: FailAfter})
	_, err := s.Settle(ctxOf(t), req)
	lost(t, "settle", err)
	_, err = s.Settle(ctxOf(t), req)
	wantErr(t, "settle re-sent after it committed", err, backend.ErrFenced)
	got := getAdmission(t, s, in.ID)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeCompleted ||
		got.Epoch != c.Epoch || got.Generation != c.Generation {
		t.Errorf("after the lost reply: %s/%s epoch %d generation %d; want done/completed under %d/%d",
			got.Status, got.Outcome, got.Epoch, got.Generation, c.Epoch, c.Generation)
	}
	if n := len(listMessages(t, s, "s1")); n != 2 {
		t.Errorf("%d messages after a settle re-sent, want 2 (written once)", n)
	}
}

func testDirectSettleReplyLost(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	n := auto(t, s, "s1", "[finished] make (exit 0)", "p-1").Admission
	l := acquire(t, s, "s1", "A", at(time.Second))
	req := backend.SettleRequest{Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", n)}, Now: at(2 * time.Second)}
	f.Inject(Fault{Method: "Settle", Mode: FailAfter})
	_, err := s.Settle(ctxOf(t), req)
	lost(t, "note settle", err)
	_, err = s.Settle(ctxOf(t), req)
	wantErr(t, "note settle re-sent after it committed", err, backend.ErrNotHead)
	got := getAdmission(t, s, n.ID)
	if got.Status != backend.StatusDone || got.Mode != backend.ModeNote || got.Epoch != l.Epoch {
		t.Errorf("after the lost reply: %s/%s epoch %d, want done/note under epoch %d", got.Status, got.Mode, got.Epoch, l.Epoch)
	}
	if tr := getTranscript(t, s, "s1"); tr.NoteCount != 1 || tr.MessageCount != 1 {
		t.Errorf("transcript after a re-sent note: %d messages, %d notes; want 1, 1", tr.MessageCount, tr.NoteCount)
	}
}

func testRequeueReplyLost(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	in := human(t, s, "s1", "hello")
	l := acquire(t, s, "s1", "A", at(time.Second))
	c := claim(t, s, l, in.ID, at(2*time.Second))
	req := backend.SettleRequest{Session: "s1", AdmissionID: in.ID, Epoch: c.Epoch, Generation: c.Generation, Now: at(3 * time.Second)}
	f.Inject(Fault{Method: "Requeue", Mode: FailAfter})
	_, err := s.Requeue(ctxOf(t), req)
	lost(t, "requeue", err)
	_, err = s.Requeue(ctxOf(t), req)
	wantErr(t, "requeue re-sent after it committed", err, backend.ErrFenced)
	if got := getAdmission(t, s, in.ID); got.Status != backend.StatusQueued {
		t.Errorf("after the lost reply: %s, want queued", got.Status)
	}
}

func testReleaseReplyLost(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	l := acquire(t, s, "s1", "A", at(time.Second))
	req := backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: l.Epoch, Now: at(2 * time.Second)}
	f.Inject(Fault{Method: "ReleaseLease", Mode: FailAfter})
	lost(t, "release", s.ReleaseLease(ctxOf(t), req))
	noErr(t, "release re-sent after it committed", s.ReleaseLease(ctxOf(t), req))
	b := acquire(t, s, "s1", "B", at(3*time.Second))
	if b.Epoch != l.Epoch+1 {
		t.Errorf("epoch after the release: %d, want %d", b.Epoch, l.Epoch+1)
	}
}

func testFailBeforeWritesNothing(t *testing.T, s backend.Store) {
	f := faulty(t, s)
	openSession(t, s, "s1")
	in := human(t, s, "s1", "hello")
	l := acquire(t, s, "s1", "A", at(time.Second))
	c := claim(t, s, l, in.ID, at(2*time.Second))
	f.Inject(Fault{Method: "Settle", Mode: FailBefore, Times: 2})
	f.Inject(Fault{Method: "GetAdmission", Mode: Stall, Stall: time.Hour})
	req := backend.SettleRequest{Session: "s1", AdmissionID: in.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "hello", "hi!"), Now: at(3 * time.Second)}
	for i := 0; i < 2; i++ {
		_, err := s.Settle(ctxOf(t), req)
		wantErr(t, "settle refused before it was sent", err, backend.ErrUnavailable)
	}
	ctx, cancel := contextWithCancel(t)
	cancel()
	_, err := s.GetAdmission(ctx, in.ID)
	wantErr(t, "a stalled read whose context ended", err, backend.ErrUnavailable)
	if got := getAdmission(t, s, in.ID); got.Status != backend.StatusRunning {
		t.Errorf("after two refused settles: %s, want running", got.Status)
	}
	if f.Struck("Settle") != 2 || f.Struck("GetAdmission") != 1 {
		t.Errorf("faults struck: settle %d, get admission %d; want 2, 1", f.Struck("Settle"), f.Struck("GetAdmission"))
	}
	settleTurn(t, s, c, "hi!", at(4*time.Second))
}
