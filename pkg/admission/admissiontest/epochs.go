package admissiontest

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Issue 3: queued work survives a new drainer (a new epoch) untouched.
func queuedWorkSurvivesNewDrainer(t *testing.T, h *harness) {
	h.human("s1", "FIRST")
	h.offer("s1", "process", []string{process.id("proc_restart")}, process.text("proc_restart"), "")
	before := h.admissions("s1", backend.AdmissionFilter{})
	// A drainer starts (new epoch) and dies before taking anything.
	l, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "s1", Holder: "died", TTL: time.Second, Now: time.Now().Add(-time.Hour)})
	if err != nil {
		t.Fatal(err)
	}
	if len(l.Recovered) != 0 {
		t.Errorf("new epoch recovered %q, want nothing", l.Recovered)
	}
	after := h.admissions("s1", backend.AdmissionFilter{})
	if len(after) != len(before) {
		t.Fatalf("%d admissions after the new epoch, want %d", len(after), len(before))
	}
	for i := range before {
		if state(after[i]) != state(before[i]) || after[i].Epoch != before[i].Epoch || after[i].Seq != before[i].Seq {
			t.Errorf("admission %s changed by a new epoch: %s epoch %d → %s epoch %d",
				before[i].ID, state(before[i]), before[i].Epoch, state(after[i]), after[i].Epoch)
		}
	}
	rep := h.drain("s1")
	if rep.Epoch <= l.Epoch {
		t.Errorf("drain epoch %d, want > %d", rep.Epoch, l.Epoch)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"FIRST/0"})
	h.wantStrings("notes", h.notes("s1"), []string{process.text("proc_restart")})
}

// Issue 3: a watched completion ran as a turn; the viewer leaves, a new
// drainer starts, the producer re-offers: duplicate, no turn, no note.
func executedTurnStaysATurn(t *testing.T, h *harness) {
	for _, p := range producers {
		session := "s-" + p.name
		name := p.name + "_ran"
		h.openSession(session)
		v, err := h.svc.AddViewer(h.ctx, session, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		r := h.offer(session, p.name, []string{p.id(name)}, p.text(name), "")
		h.drain(session)
		h.wantState(r.Admission.ID, "done/completed/turn")
		if err := h.store.RemoveViewer(h.ctx, session, v.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: session, Holder: "restarted", TTL: time.Second, Now: time.Now().Add(-time.Hour)}); err != nil {
			t.Fatal(err)
		}
		again := h.offer(session, p.name, []string{p.id(name)}, p.text(name), "")
		if again.Result != backend.ResultDuplicate || again.Admission.ID != r.Admission.ID {
			t.Errorf("%s re-offer: %q %s, want duplicate of %s", p.name, again.Result, again.Admission.ID, r.Admission.ID)
		}
		if rep := h.drain(session); len(rep.Executed) != 0 {
			t.Errorf("%s: the drain after the re-offer executed %d", p.name, len(rep.Executed))
		}
		if n := h.notes(session); len(n) != 0 {
			t.Errorf("%s: notes %q, want none", p.name, n)
		}
		if n := len(h.admissions(session, backend.AdmissionFilter{})); n != 1 {
			t.Errorf("%s: %d admissions, want 1", p.name, n)
		}
	}
	h.wantStrings("turns", h.turnTexts(), []string{process.text("process_ran") + "/0", producers[1].text("delegation_ran") + "/0"})
}

// Issue 3: drainer A's turn is in its handler past A's lease; drainer B
// takes over (new epoch), finds A's admission unknown, interrupts it under
// --on-unknown interrupt and runs the next. A's settle is fenced: its reply
// is written nowhere.
func fencingRace(t *testing.T, h *harness) {
	a := h.human("s1", "A-TEXT")
	b := h.human("s1", "B-TEXT")
	release := filepath.Join(t.TempDir(), "release")
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := admission.DrainOptions{Principal: owner, Holder: "drainer-a", Lease: 30 * time.Second, Handler: h.handler("HQT_WAIT=" + release)}
		rep, err := h.svc.Drain(h.ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("A's handler to start", func() bool { return len(h.turns()) == 1 })
	epochA := h.session("s1").Epoch

	// B's clock is past A's lease expiry.
	late := &admission.Service{Store: h.store, Now: func() time.Time { return time.Now().Add(time.Hour) }}
	repB, err := late.Drain(h.ctx, "s1", admission.DrainOptions{
		Principal: owner, Holder: "drainer-b", Lease: 30 * time.Second, Handler: h.handler(), OnUnknown: admission.OnUnknownInterrupt,
	})
	if err != nil {
		t.Fatalf("drainer B: %v", err)
	}
	if repB.Epoch <= epochA || repB.Turns != 1 {
		t.Errorf("drainer B: epoch %d (A had %d), %d turns; want a newer epoch and 1 turn", repB.Epoch, epochA, repB.Turns)
	}
	h.wantState(a.Admission.ID, "done/interrupted/turn")
	h.wantState(b.Admission.ID, "done/completed/turn")

	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	var ra result
	select {
	case ra = <-done:
	case <-time.After(waitLimit):
		t.Fatal("drainer A did not return")
	}
	if !errors.Is(ra.err, backend.ErrFenced) {
		t.Errorf("drainer A: %v, want fenced", ra.err)
	}
	if ra.rep.Turns != 0 || len(ra.rep.Executed) != 0 {
		t.Errorf("drainer A reported %d turns, %d executed; want none", ra.rep.Turns, len(ra.rep.Executed))
	}
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:B-TEXT", "assistant:reply to B-TEXT notes_seen=0"})
	h.wantState(a.Admission.ID, "done/interrupted/turn")
	h.wantStrings("turns", h.turnTexts(), []string{"A-TEXT/0", "B-TEXT/0"})
}

// Issue 3: by default an unknown admission pauses the queue (ErrPaused
// naming it); after an operator requeues it, the next drain runs it.
func unknownPausesByDefault(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	u2 := h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, admission.ErrPaused) || !errors.Is(err, backend.ErrAttention) {
		t.Fatalf("drain: %v, want paused", err)
	}
	if !contains(err.Error(), u1.Admission.ID) {
		t.Errorf("pause error %q does not name %s", err, u1.Admission.ID)
	}
	if len(rep.Executed) != 0 {
		t.Errorf("paused drain executed %d", len(rep.Executed))
	}
	h.wantState(u1.Admission.ID, "unknown//turn")
	h.wantState(u2.Admission.ID, "queued//")
	h.wantStrings("turns", h.turnTexts(), nil)
	if s := h.session("s1"); s.State() != backend.StatePaused {
		t.Errorf("session state %s, want paused", s.State())
	}
	// Paused stays paused until someone resolves it.
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); !errors.Is(err, admission.ErrPaused) {
		t.Errorf("second drain: %v, want paused", err)
	}
	if _, err := h.store.Resolve(h.ctx, u1.Admission.ID, backend.ResolveRequeue, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"U1/0", "U2/0"})
	h.wantState(u1.Admission.ID, "done/completed/turn")
	h.wantState(u2.Admission.ID, "done/completed/turn")
}

func unknownRequeuePolicy(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	opt := h.opts()
	opt.OnUnknown = admission.OnUnknownRequeue
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatal(err)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"U1/0", "U2/0"})
	h.wantState(u1.Admission.ID, "done/completed/turn")
	if rep.Turns != 2 {
		t.Errorf("%d turns, want 2", rep.Turns)
	}
}

func unknownInterruptPolicy(t *testing.T, h *harness) {
	u1 := h.human("s1", "U1")
	h.human("s1", "U2")
	h.makeUnknown("s1", u1.Admission.ID)
	opt := h.opts()
	opt.OnUnknown = admission.OnUnknownInterrupt
	if _, err := h.svc.Drain(h.ctx, "s1", opt); err != nil {
		t.Fatal(err)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"U2/0"})
	h.wantState(u1.Admission.ID, "done/interrupted/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:U2", "assistant:reply to U2 notes_seen=0"})
}
