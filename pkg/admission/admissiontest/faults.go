package admissiontest

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// faultScenarios are the write-path faults of issue 14: store writes that
// fail before or after they commit, or stall, while the drainer lives on.
var faultScenarios = []scenario{
	{"Faults/TurnSettleReplyLost", turnSettleReplyLost},
	{"Faults/TurnSettleRetried", turnSettleRetried},
	{"Faults/NoteSettleReplyLost", noteSettleReplyLost},
	{"Faults/ClaimReplyLost", claimReplyLost},
	{"Faults/RequeueReplyLost", requeueReplyLost},
	{"Faults/ReleaseRetried", releaseRetried},
	{"Faults/LeaseFencedStopsHandler", leaseFencedStopsHandler},
	{"Faults/LeaseUnrenewedStopsHandler", leaseUnrenewedStopsHandler},
	{"Faults/ClaimStalledPastLease", claimStalledPastLease},
}

// oneTurn checks that the session's one human input ran its handler once
// and wrote its input and reply once.
func (h *harness) oneTurn(session, id, text string) {
	h.t.Helper()
	h.wantState(id, "done/completed/turn")
	h.wantStrings("handler runs", h.turnTexts(), []string{text + "/0"})
	h.wantStrings("transcript", h.roles(session), []string{"user:" + text, "assistant:reply to " + text + " notes_seen=0"})
}

// A turn's settle commits but its reply is lost: the drainer sees its
// retry refused, reads the admission done under its epoch and generation,
// and counts the turn as done: one handler run, one reply, exit 0.
func turnSettleReplyLost(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "Settle", Mode: backendtest.FailAfter})
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if err != nil {
		t.Fatalf("drain with the settle's reply lost: %v", err)
	}
	if rep.Turns != 1 || len(rep.Executed) != 1 {
		t.Errorf("report: %d turns, %d executed; want 1, 1", rep.Turns, len(rep.Executed))
	}
	h.oneTurn("s1", r.Admission.ID, "IN")
}

// A settle refused for now (the store unavailable) is retried.
func turnSettleRetried(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "Settle", Mode: backendtest.FailBefore, Times: 3})
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); err != nil {
		t.Fatalf("drain with the settle failing three times: %v", err)
	}
	h.oneTurn("s1", r.Admission.ID, "IN")
}

// A note's settle commits but its reply is lost: one note, done.
func noteSettleReplyLost(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.offer("s1", process.name, []string{process.id("lost")}, process.text("lost"), "")
	r2 := h.offer("s1", process.name, []string{process.id("lost-2")}, process.text("lost-2"), "")
	// Notes are written in runs: the run's reply is lost, then the first
	// note settled alone is too.
	h.faults.Inject(backendtest.Fault{Method: "SettleRun", Mode: backendtest.FailAfter})
	h.faults.Inject(backendtest.Fault{Method: "Settle", Mode: backendtest.FailAfter})
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if err != nil {
		t.Fatalf("drain with the note's reply lost: %v", err)
	}
	if rep.Notes != 2 {
		t.Errorf("report: %d notes, want 2", rep.Notes)
	}
	h.wantState(r.Admission.ID, "done/completed/note")
	h.wantState(r2.Admission.ID, "done/completed/note")
	h.wantStrings("notes", h.notes("s1"), []string{process.text("lost"), process.text("lost-2")})
	if h.faults.Struck("SettleRun") != 1 {
		t.Errorf("the note run's fault never struck")
	}
}

// A claim commits but its reply is lost: the drainer finds the admission
// running under its epoch and runs the turn once.
func claimReplyLost(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "Claim", Mode: backendtest.FailAfter})
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); err != nil {
		t.Fatalf("drain with the claim's reply lost: %v", err)
	}
	h.oneTurn("s1", r.Admission.ID, "IN")
}

// A handler that cannot start gives its admission back; the requeue's
// reply is lost: the admission is queued, and the drain reports only the
// handler's problem.
func requeueReplyLost(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "Requeue", Mode: backendtest.FailAfter})
	opt := h.opts()
	opt.Handler = &admission.Handler{Argv: []string{"/no/such/handler"}}
	_, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrInvalid) || strings.Contains(err.Error(), "requeue") {
		t.Errorf("drain with a handler that cannot start: %v, want only the start failure (exit 2)", err)
	}
	h.wantState(r.Admission.ID, "queued//")
}

// A lease release refused for now is retried: the next drain need not wait
// out the lease.
func releaseRetried(t *testing.T, h *harness) {
	h.openSession("s1")
	h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "ReleaseLease", Mode: backendtest.FailBefore, Times: 2})
	h.drain("s1")
	if l := h.session("s1"); l.LeaseHolder != "" && l.LeaseLive(time.Now()) {
		t.Errorf("lease still held by %s after the drain", l.LeaseHolder)
	}
	h.human("s1", "IN-2")
	h.drain("s1") // no Wait: a held lease would fail it
}

// A renewal fenced (another drainer took the session over) stops the
// running handler at once: it is killed, and the admission is left to the
// new epoch (running, to become unknown), never settled by the old one.
func leaseFencedStopsHandler(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "RenewLease", Mode: backendtest.FailBefore,
		Err: backend.Errorf(backend.ErrFenced, "renew lease of s1 (injected)")})
	opt := h.opts()
	opt.Lease = time.Second
	opt.Handler = h.handler("HQT_SLEEP=30s")
	start := time.Now()
	_, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrFenced) || !strings.Contains(err.Error(), "left running") {
		t.Errorf("drain whose lease was lost: %v, want fenced (exit 5), the admission left running", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the handler ran %s after its lease was lost", d.Round(time.Second))
	}
	h.wantState(r.Admission.ID, "running//turn")
}

// Renewals that keep failing as transient (a partition) stop the running
// handler before the lease can lapse: another drainer may take the session
// then, and two handlers of one session never run at once. Killed that
// way, the turn is left exactly as a drainer that lost its lease leaves it
// (running), whether or not another drainer took over: the next epoch
// marks it unknown and its --on-unknown policy decides (here requeue: the
// turn runs again, completed).
func leaseUnrenewedStopsHandler(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "RenewLease", Mode: backendtest.FailBefore, Times: 1 << 20})
	opt := h.opts()
	opt.Lease = time.Second
	opt.Handler = h.handler("HQT_SLEEP=30s")
	start := time.Now()
	_, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrFenced) || !strings.Contains(err.Error(), "not renewed") {
		t.Errorf("drain whose renewals failed: %v, want fenced (exit 5) saying the lease was not renewed", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Errorf("the handler ran %s with its lease unrenewed", d.Round(time.Second))
	}
	h.wantState(r.Admission.ID, "running//turn")
	h.faults.Disarm()

	opt = h.opts()
	opt.OnUnknown = admission.OnUnknownRequeue
	opt.Wait = true // the killed drainer's release may not have reached the store
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatalf("the next drain, --on-unknown requeue: %v", err)
	}
	if rep.Turns != 1 {
		t.Errorf("the next drain ran %d turns, want 1", rep.Turns)
	}
	h.wantState(r.Admission.ID, "done/completed/turn")
	h.wantStrings("handler runs", h.turnTexts(), []string{"IN/0", "IN/0"})
	h.wantStrings("transcript", h.roles("s1"), []string{"user:IN", "assistant:reply to IN notes_seen=0"})
}

// A claim that waits out a stalled store comes back when the lease, its
// renewals failing meanwhile, may be about to lapse: another drainer may
// take the session over any moment. The handler is not started then (a
// short one would otherwise run to its end before anything looked at the
// lease); the admission is given back and taken again once a renewal
// succeeds: one handler run in all, completed.
func claimStalledPastLease(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	h.faults.Inject(backendtest.Fault{Method: "RenewLease", Mode: backendtest.FailBefore, Times: 1 << 20})
	h.faults.Inject(backendtest.Fault{Method: "Claim", Mode: backendtest.Stall, Stall: 900 * time.Millisecond})
	opt := h.opts()
	opt.Lease = time.Second
	opt.Handler = h.handler("HQT_SLEEP=100ms")
	var mu sync.Mutex
	var logged []string
	opt.Log = func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, fmt.Sprintf(format, args...))
	}
	notStarted := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(strings.Join(logged, "\n"), "handler not started")
	}
	done := make(chan error, 1)
	go func() { _, err := h.svc.Drain(h.ctx, "s1", opt); done <- err }()
	h.eventually("the drainer to give the admission back unstarted, or to end", func() bool {
		return notStarted() || len(done) > 0
	})
	if runs := h.turnTexts(); len(runs) != 0 {
		t.Fatalf("a handler started under a lease about to lapse: %v (%s)", runs, state(h.admission(r.Admission.ID)))
	}
	h.faults.Disarm() // renewals succeed again
	if err := <-done; err != nil {
		t.Errorf("drain: %v", err)
	}
	h.oneTurn("s1", r.Admission.ID, "IN")
}
