package backendtest

import (
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

var drainSettleTests = []suiteTest{
	{name: "Settle/ExpectCurrent", fn: testSettleExpectCurrent},
	{name: "Settle/Messages", fn: testSettleMessages},
	{name: "Settle/Fenced", fn: testSettleFenced},
	{name: "Settle/Direct", fn: testSettleDirect},
	{name: "Settle/NoteOnEndedTranscript", fn: testSettleEndedTranscript},
	{name: "Settle/FencingRace", fn: testFencingRace},
	{name: "Requeue", fn: testRequeue},
	// Edges: what the stores once answered differently where the
	// contract's words decide (pkg/backend's role files, errors.go): every
	// store answers alike.
	{name: "Edges/SettleMalformed", fn: testSettleMalformed},
}

func testSettleMessages(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "question")
	l := acquire(t, s, "s1", "A", T0)
	c := claim(t, s, l, a.ID, at(time.Second))
	done := settleTurn(t, s, c, "answer", at(2*time.Second))
	want := c
	want.Status, want.Outcome, want.SettledAt = backend.StatusDone, backend.OutcomeCompleted, at(2*time.Second)
	diff(t, "settled admission", want, done)
	diff(t, "settled admission stored", done, getAdmission(t, s, a.ID))
	msgs := listMessages(t, s, "s1")
	wantMsgs := []backend.Message{
		{Transcript: "s1", Seq: 1, Role: backend.RoleUser, Content: "question", AdmissionID: a.ID, CreatedAt: at(2 * time.Second)},
		{Transcript: "s1", Seq: 2, Role: backend.RoleAssistant, Content: "answer", AdmissionID: a.ID, CreatedAt: at(2 * time.Second)},
	}
	diff(t, "messages", wantMsgs, msgs)

	// A note (direct settle) with metadata, then a failed turn.
	n := auto(t, s, "s1", "[finished] make (exit 0)", "p-1").Admission
	nm := noteMessage("s1", n)
	_, err := s.Settle(ctxOf(t), backend.SettleRequest{
		Session: "s1", AdmissionID: n.ID, Epoch: l.Epoch, Direct: true, Outcome: backend.OutcomeCompleted,
		Mode: backend.ModeNote, DeliveredTo: "s1", Messages: []backend.NewMessage{nm}, Now: at(3 * time.Second),
	})
	noErr(t, "settle note", err)
	f := human(t, s, "s1", "again")
	cf := claim(t, s, l, f.ID, at(4*time.Second))
	fd, err := s.Settle(ctxOf(t), backend.SettleRequest{
		Session: "s1", AdmissionID: f.ID, Epoch: cf.Epoch, Generation: cf.Generation,
		Outcome: backend.OutcomeFailed, Error: "exit status 3: boom", Now: at(5 * time.Second),
	})
	noErr(t, "settle failed", err)
	if fd.Outcome != backend.OutcomeFailed || fd.Error != "exit status 3: boom" || fd.Status != backend.StatusDone {
		t.Errorf("failed admission: status %s outcome %s error %q", fd.Status, fd.Outcome, fd.Error)
	}
	tr := getTranscript(t, s, "s1")
	if tr.MessageCount != 3 || tr.NoteCount != 1 {
		t.Errorf("transcript counts: messages %d notes %d, want 3 1", tr.MessageCount, tr.NoteCount)
	}
	msgs = listMessages(t, s, "s1")
	if len(msgs) != 3 {
		t.Fatalf("%d messages, want 3", len(msgs))
	}
	wantNote := backend.Message{
		Transcript: "s1", Seq: 3, Role: backend.RoleNote, Content: "[finished] make (exit 0)", AdmissionID: n.ID,
		CreatedAt: at(3 * time.Second), Metadata: map[string]any{"admission_id": n.ID, "producer": Producer, "identities": []any{"p-1"}},
	}
	diff(t, "note message", wantNote, msgs[2])

	// ListMessages: afterSeq and limit.
	part, err := s.ListMessages(ctxOf(t), "s1", 1, 1)
	noErr(t, "list messages after 1 limit 1", err)
	if len(part) != 1 || part[0].Seq != 2 {
		t.Errorf("after 1 limit 1: %+v, want seq 2", part)
	}
	part, err = s.ListMessages(ctxOf(t), "s1", 3, 0)
	noErr(t, "list messages after the last", err)
	if len(part) != 0 {
		t.Errorf("after the last: %d messages", len(part))
	}
	_, err = s.ListMessages(ctxOf(t), "ghost", 0, 0)
	wantErr(t, "messages of unknown transcript", err, backend.ErrNotFound)
	_, err = s.GetTranscript(ctxOf(t), "ghost")
	wantErr(t, "unknown transcript", err, backend.ErrNotFound)
}

func testSettleFenced(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "q")
	l := acquire(t, s, "s1", "A", T0)
	c := claim(t, s, l, a.ID, T0)
	bad := []backend.SettleRequest{
		{Epoch: c.Epoch + 1, Generation: c.Generation},
		{Epoch: c.Epoch - 1, Generation: c.Generation},
		{Epoch: c.Epoch, Generation: c.Generation + 1},
		{Epoch: c.Epoch, Generation: c.Generation - 1},
	}
	for _, r := range bad {
		r.Session, r.AdmissionID, r.Outcome, r.Now = "s1", a.ID, backend.OutcomeCompleted, T0
		r.Messages = turnMessages("s1", "q", "stale reply")
		_, err := s.Settle(ctxOf(t), r)
		wantErr(t, "settle with a stale epoch or generation", err, backend.ErrFenced)
		_, err = s.Requeue(ctxOf(t), r)
		wantErr(t, "requeue with a stale epoch or generation", err, backend.ErrFenced)
	}
	diff(t, "admission after fenced settles", c, getAdmission(t, s, a.ID))
	if tr := getTranscript(t, s, "s1"); tr.MessageCount != 0 || len(listMessages(t, s, "s1")) != 0 {
		t.Fatalf("fenced settles wrote messages: count %d", tr.MessageCount)
	}
	// Settling twice: the second is fenced and writes nothing.
	settleTurn(t, s, c, "reply", T0)
	_, err := s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: c.Epoch, Generation: c.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "q", "again"), Now: T0})
	wantErr(t, "settle a done admission", err, backend.ErrFenced)
	if n := len(listMessages(t, s, "s1")); n != 2 {
		t.Errorf("%d messages after a repeated settle, want 2", n)
	}
}

func testSettleDirect(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := auto(t, s, "s1", "result one", "r1").Admission
	b := auto(t, s, "s1", "result two", "r2").Admission
	l := acquire(t, s, "s1", "A", T0)
	gen := getSession(t, s, "s1").Generation
	direct := func(id string, epoch uint64, msgs ...backend.NewMessage) (backend.Admission, error) {
		return s.Settle(ctxOf(t), backend.SettleRequest{
			Session: "s1", AdmissionID: id, Epoch: epoch, Direct: true, Outcome: backend.OutcomeCompleted,
			Mode: backend.ModeNote, DeliveredTo: "s1", Messages: msgs, Now: at(time.Second),
		})
	}
	_, err := direct(b.ID, l.Epoch, noteMessage("s1", b))
	wantErr(t, "direct settle of a non-head", err, backend.ErrNotHead)
	_, err = direct(a.ID, l.Epoch+1, noteMessage("s1", a))
	wantErr(t, "direct settle with a wrong epoch", err, backend.ErrFenced)
	if n := getTranscript(t, s, "s1").MessageCount; n != 0 {
		t.Fatalf("refused direct settles wrote %d messages", n)
	}
	got, err := direct(a.ID, l.Epoch, noteMessage("s1", a))
	noErr(t, "direct settle of the head", err)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeCompleted || got.Mode != backend.ModeNote ||
		got.DeliveredTo != "s1" || got.Epoch != l.Epoch || !got.SettledAt.Equal(at(time.Second)) {
		t.Errorf("direct settled: %+v", got)
	}
	if g := getSession(t, s, "s1").Generation; g <= gen {
		t.Errorf("direct settle did not advance the generation (%d)", g)
	}
	// A misroute: failed, error, no message.
	m, err := s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: b.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeFailed, Error: "misrouted", Now: at(2 * time.Second)})
	noErr(t, "direct settle as misrouted", err)
	if m.Outcome != backend.OutcomeFailed || m.Error != "misrouted" {
		t.Errorf("misrouted: outcome %s error %q", m.Outcome, m.Error)
	}
	sess := getSession(t, s, "s1")
	tr := getTranscript(t, s, "s1")
	if sess.Queued != 0 || sess.Running != 0 || tr.MessageCount != 1 || tr.NoteCount != 1 {
		t.Errorf("after notes: queued %d running %d messages %d notes %d", sess.Queued, sess.Running, tr.MessageCount, tr.NoteCount)
	}
	_, err = direct(a.ID, l.Epoch)
	if err == nil {
		t.Errorf("direct settle of a done admission succeeded")
	}
}

func testSettleEndedTranscript(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	closed, err := s.CloseSession(ctxOf(t), "s1", "new_session", at(time.Minute))
	noErr(t, "close", err)
	a := auto(t, s, "s1", "late completion", "late").Admission
	l := acquire(t, s, "s1", "A", at(2*time.Minute))
	_, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: l.Epoch, Direct: true,
		Outcome: backend.OutcomeCompleted, Mode: backend.ModeNote, DeliveredTo: "s1",
		Messages: []backend.NewMessage{noteMessage("s1", a)}, Now: at(3 * time.Minute)})
	noErr(t, "note on a closed transcript", err)
	tr := getTranscript(t, s, "s1")
	if !tr.EndedAt.Equal(closed.EndedAt) || tr.EndReason != "new_session" || tr.MessageCount != closed.MessageCount+1 || tr.NoteCount != 1 {
		t.Errorf("closed transcript after a note: ended %v reason %q messages %d notes %d; want %v new_session %d 1",
			tr.EndedAt, tr.EndReason, tr.MessageCount, tr.NoteCount, closed.EndedAt, closed.MessageCount+1)
	}
	if sess := getSession(t, s, "s1"); !sess.Closed {
		t.Errorf("a note reopened the session")
	}
}

// testFencingRace: drainer A claims at epoch 1 and stalls past its lease;
// B takes over at epoch 2; A's late settle is refused and its reply is
// written nowhere; B resolves the unknown admission and goes on.
func testFencingRace(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "question")
	b := human(t, s, "s1", "next")
	la, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "A", TTL: 10 * time.Second, Now: T0})
	noErr(t, "A acquires", err)
	ca := claim(t, s, la, a.ID, at(time.Second))

	_, err = s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: 10 * time.Second, Now: at(5 * time.Second)})
	wantErr(t, "B while A's lease is live", err, backend.ErrLeaseHeld)
	lb, err := s.AcquireLease(ctxOf(t), backend.LeaseRequest{Principal: Owner, Session: "s1", Holder: "B", TTL: 10 * time.Second, Now: at(11 * time.Second)})
	noErr(t, "B after A's lease expired", err)
	if lb.Epoch != la.Epoch+1 {
		t.Fatalf("B's epoch %d, want %d", lb.Epoch, la.Epoch+1)
	}
	diff(t, "B recovers A's admission", []string{a.ID}, lb.Recovered)

	_, err = s.Settle(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: ca.Epoch, Generation: ca.Generation,
		Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "question", "A's late reply"), Now: at(12 * time.Second)})
	wantErr(t, "A settles after B took over", err, backend.ErrFenced)
	_, err = s.RenewLease(ctxOf(t), backend.LeaseRequest{Session: "s1", Holder: "A", Epoch: la.Epoch, TTL: 10 * time.Second, Now: at(12 * time.Second)})
	wantErr(t, "A renews after B took over", err, backend.ErrFenced)
	_, err = s.Claim(ctxOf(t), backend.ClaimRequest{Session: "s1", AdmissionID: b.ID, Epoch: la.Epoch, Mode: backend.ModeTurn, Now: at(12 * time.Second)})
	wantErr(t, "A claims after B took over", err, backend.ErrFenced)
	if msgs := listMessages(t, s, "s1"); len(msgs) != 0 {
		t.Fatalf("A's fenced reply was written: %+v", msgs)
	}
	if got := getAdmission(t, s, a.ID); got.Status != backend.StatusUnknown {
		t.Fatalf("A's admission after the fenced settle: %s, want unknown", got.Status)
	}

	r, err := s.Resolve(ctxOf(t), a.ID, backend.ResolveRequeue, at(13*time.Second))
	noErr(t, "B requeues the unknown admission", err)
	if r.Status != backend.StatusQueued || r.Seq != a.Seq {
		t.Fatalf("requeued: status %s seq %d, want queued at %d", r.Status, r.Seq, a.Seq)
	}
	cb := claim(t, s, lb, a.ID, at(14*time.Second))
	if cb.Epoch != lb.Epoch {
		t.Errorf("B's claim epoch %d, want %d", cb.Epoch, lb.Epoch)
	}
	settleTurn(t, s, cb, "B's reply", at(15*time.Second))
	cb2 := claim(t, s, lb, b.ID, at(16*time.Second))
	settleTurn(t, s, cb2, "B's second reply", at(17*time.Second))
	var contents []string
	for _, m := range listMessages(t, s, "s1") {
		contents = append(contents, m.Content)
	}
	diff(t, "transcript holds only B's work", []string{"question", "B's reply", "next", "B's second reply"}, contents)
}

func testRequeue(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	a := human(t, s, "s1", "one")
	human(t, s, "s1", "two")
	l := acquire(t, s, "s1", "A", T0)
	c := claim(t, s, l, a.ID, T0)
	r, err := s.Requeue(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: c.Epoch, Generation: c.Generation, Now: T0})
	noErr(t, "requeue", err)
	if r.Status != backend.StatusQueued || r.Outcome != "" || r.Seq != a.Seq {
		t.Errorf("requeued: status %s outcome %q seq %d", r.Status, r.Outcome, r.Seq)
	}
	sess := getSession(t, s, "s1")
	if sess.Queued != 2 || sess.Running != 0 {
		t.Errorf("after requeue: queued %d running %d", sess.Queued, sess.Running)
	}
	head := listAdmissions(t, s, "s1", backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusQueued}, Limit: 1})
	if len(head) != 1 || head[0].ID != a.ID {
		t.Fatalf("head after requeue: %v, want %s", head, a.ID)
	}
	c2 := claim(t, s, l, a.ID, at(time.Second))
	if c2.Generation <= c.Generation {
		t.Errorf("claim after requeue: generation %d not after %d", c2.Generation, c.Generation)
	}
	_, err = s.Requeue(ctxOf(t), backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: c.Epoch, Generation: c.Generation, Now: T0})
	wantErr(t, "requeue under the old generation", err, backend.ErrFenced)
}

// A settle with an outcome or message role outside the contract is
// ErrInvalid; a message for a transcript of another session is
// ErrNotFound (a session's settle writes only its own transcripts). Each
// writes nothing: the admission stays running and settles afterwards.
func testSettleMalformed(t *testing.T, s backend.Store) {
	openSession(t, s, "s1")
	openSession(t, s, "s2")
	l := acquire(t, s, "s1", "A", T0)
	a := claim(t, s, l, human(t, s, "s1", "q").ID, T0)
	req := func(mod func(r *backend.SettleRequest)) backend.SettleRequest {
		r := backend.SettleRequest{Session: "s1", AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation,
			Outcome: backend.OutcomeCompleted, Messages: turnMessages("s1", "q", "r"), Now: T0}
		mod(&r)
		return r
	}
	for what, c := range map[string]struct {
		req  backend.SettleRequest
		want error
	}{
		"no outcome":                   {req(func(r *backend.SettleRequest) { r.Outcome = "" }), backend.ErrInvalid},
		"unknown outcome":              {req(func(r *backend.SettleRequest) { r.Outcome = "skipped" }), backend.ErrInvalid},
		"unknown role":                 {req(func(r *backend.SettleRequest) { r.Messages[1].Role = "system" }), backend.ErrInvalid},
		"bad transcript id":            {req(func(r *backend.SettleRequest) { r.Messages[0].Transcript = "bad id" }), backend.ErrInvalid},
		"another session's transcript": {req(func(r *backend.SettleRequest) { r.Messages[1].Transcript = "s2" }), backend.ErrNotFound},
		"unknown transcript":           {req(func(r *backend.SettleRequest) { r.Messages[1].Transcript = "nowhere" }), backend.ErrNotFound},
	} {
		_, err := s.Settle(ctxOf(t), c.req)
		wantErr(t, "settle with "+what, err, c.want)
	}
	for _, tr := range []string{"s1", "s2"} {
		if n := len(listMessages(t, s, tr)); n != 0 {
			t.Errorf("refused settles wrote %d messages to %s", n, tr)
		}
	}
	if got := getAdmission(t, s, a.ID); got.Status != backend.StatusRunning {
		t.Errorf("after refused settles the admission is %s, want running", got.Status)
	}
	settleTurn(t, s, a, "r", T0)
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
