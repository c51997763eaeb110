package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

func maxBound(t *testing.T, h *harness) {
	var ids []string
	for _, text := range []string{"M1", "M2", "M3"} {
		ids = append(ids, h.human("s1", text).Admission.ID)
	}
	opt := h.opts()
	opt.Max = 2
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Executed) != 2 {
		t.Errorf("executed %d, want 2", len(rep.Executed))
	}
	h.wantStrings("turns", h.turnTexts(), []string{"M1/0", "M2/0"})
	h.wantState(ids[2], "queued//")
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"M1/0", "M2/0", "M3/0"})
}

// No handler: a turn at the head fails with ErrNoHandler before anything is
// written (not even a new epoch); notes still happen, and a due turn after
// them leaves its admission queued.
func noHandler(t *testing.T, h *harness) {
	first := h.human("s0", "FIRST")
	before := h.session("s0")
	if _, err := h.svc.Drain(h.ctx, "s0", admission.DrainOptions{Principal: owner}); !errors.Is(err, admission.ErrNoHandler) {
		t.Fatalf("drain: %v, want no handler", err)
	}
	if after := h.session("s0"); after.Epoch != before.Epoch || after.Generation != before.Generation || after.LeaseHolder != before.LeaseHolder {
		t.Errorf("session after a drain with no handler: epoch %d→%d, generation %d→%d, holder %q→%q; want unchanged",
			before.Epoch, after.Epoch, before.Generation, after.Generation, before.LeaseHolder, after.LeaseHolder)
	}
	h.wantState(first.Admission.ID, "queued//")

	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_nh")}, process.text("proc_nh"), "")
	u := h.human("s1", "NEEDS-A-HANDLER")
	rep, err := h.svc.Drain(h.ctx, "s1", admission.DrainOptions{Principal: owner})
	if !errors.Is(err, admission.ErrNoHandler) || !errors.Is(err, backend.ErrInvalid) {
		t.Fatalf("drain: %v, want no handler", err)
	}
	if rep.Notes != 1 {
		t.Errorf("%d notes, want 1", rep.Notes)
	}
	h.wantState(c.Admission.ID, "done/completed/note")
	h.wantState(u.Admission.ID, "queued//")
	if s := h.session("s1"); s.Queued != 1 || s.Running != 0 {
		t.Errorf("session: %d queued, %d running; want 1, 0", s.Queued, s.Running)
	}
}

// A failed turn is settled failed with the stderr tail; the drain goes on
// and then reports attention.
func handlerFails(t *testing.T, h *harness) {
	ok1 := h.human("s1", "ok-1")
	bad := h.human("s1", "bad-2")
	ok3 := h.human("s1", "ok-3")
	opt := h.opts()
	opt.Handler = h.handler("HQT_FAIL_ON=bad", "HQT_FAIL_CODE=3")
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrAttention) || errors.Is(err, admission.ErrPaused) {
		t.Errorf("drain: %v, want attention (not paused)", err)
	}
	if rep.Turns != 2 || rep.Failed != 1 {
		t.Errorf("report: %d turns, %d failed; want 2, 1", rep.Turns, rep.Failed)
	}
	h.wantState(ok1.Admission.ID, "done/completed/turn")
	a := h.wantState(bad.Admission.ID, "done/failed/turn")
	if !contains(a.Error, "exit status 3") || !contains(a.Error, "boom: bad-2") {
		t.Errorf("failed turn error %q, want the exit status and the stderr tail", a.Error)
	}
	h.wantState(ok3.Admission.ID, "done/completed/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{
		"user:ok-1", "assistant:reply to ok-1 notes_seen=0", "user:ok-3", "assistant:reply to ok-3 notes_seen=0",
	})
	failed := h.admissions("s1", backend.AdmissionFilter{Outcomes: []backend.Outcome{backend.OutcomeFailed}})
	if len(failed) != 1 || failed[0].ID != bad.Admission.ID {
		t.Errorf("failed admissions %v, want [%s]", failed, bad.Admission.ID)
	}
}

func handlerTimeout(t *testing.T, h *harness) {
	slow := h.human("s1", "slow")
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	opt := h.opts()
	opt.Handler = h.handler("HQT_SLEEP=10m", "HQT_CHILD="+pidFile)
	// Long enough for the handler to start its child and write to stderr
	// on a busy machine; the assertions below do not depend on the time.
	opt.Handler.Timeout = 3 * time.Second
	_, err := h.svc.Drain(h.ctx, "s1", opt)
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want attention", err)
	}
	a := h.wantState(slow.Admission.ID, "done/failed/turn")
	if !contains(a.Error, "timeout after 3s") || !contains(a.Error, "sleeping 10m0s") {
		t.Errorf("timed-out turn error %q, want the timeout and the stderr tail", a.Error)
	}
	if n := len(h.messages("s1")); n != 0 {
		t.Errorf("%d messages after a timeout, want 0", n)
	}
	// The timeout killed the handler's whole process group, its child too.
	pid, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("the handler's child pid: %v", err)
	}
	h.eventually("the handler's child to be killed", func() bool { return processGone(string(pid)) })
}

// ctx ends while a turn runs: the turn finishes within the grace, is
// settled, the lease is released, and Drain reports ctx's error.
func graceLetsTheTurnFinish(t *testing.T, h *harness) {
	g := h.human("s1", "G")
	h.human("s1", "NOT-TAKEN")
	release := filepath.Join(t.TempDir(), "release")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Handler = h.handler("HQT_WAIT=" + release)
		opt.Grace = 10 * time.Minute
		rep, err := h.svc.Drain(ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	cancel()
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("drain: %v, want canceled", r.err)
	}
	if r.rep.Turns != 1 {
		t.Errorf("%d turns, want 1", r.rep.Turns)
	}
	h.wantState(g.Admission.ID, "done/completed/turn")
	h.wantStrings("transcript s1", h.roles("s1"), []string{"user:G", "assistant:reply to G notes_seen=0"})
	if s := h.session("s1"); s.LeaseLive(time.Now()) || s.Queued != 1 {
		t.Errorf("after the stop: lease live %v (holder %q), %d queued; want released, 1", s.LeaseLive(time.Now()), s.LeaseHolder, s.Queued)
	}
}

func graceExpiredInterrupts(t *testing.T, h *harness) {
	g := h.human("s1", "G")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		opt := h.opts()
		opt.Handler = h.handler("HQT_SLEEP=10m")
		_, err := h.svc.Drain(ctx, "s1", opt) // Grace 0
		done <- err
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("drain: %v, want canceled", err)
	}
	a := h.wantState(g.Admission.ID, "done/interrupted/turn")
	if !contains(a.Error, "drain was stopped") {
		t.Errorf("interrupted turn error %q", a.Error)
	}
	if n := len(h.messages("s1")); n != 0 {
		t.Errorf("%d messages, want 0", n)
	}
}

// The drain lease is renewed while a turn runs longer than it.
func leaseRenewed(t *testing.T, h *harness) {
	h.human("s1", "LONG")
	release := filepath.Join(t.TempDir(), "release")
	done := make(chan error, 1)
	go func() {
		opt := h.opts()
		opt.Lease = 1500 * time.Millisecond
		opt.Handler = h.handler("HQT_WAIT=" + release)
		_, err := h.svc.Drain(h.ctx, "s1", opt)
		done <- err
	}()
	h.eventually("the handler to start", func() bool { return len(h.turns()) == 1 })
	first := h.session("s1").LeaseExpiresAt
	h.eventually("the lease to be renewed", func() bool { return h.session("s1").LeaseExpiresAt.After(first) })
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Errorf("drain: %v", err)
	}
}

// A live lease held by another drainer: ErrLeaseHeld at once, nothing run.
func leaseHeld(t *testing.T, h *harness) {
	u := h.human("s1", "HELD")
	if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "s1", Holder: "other", TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	_, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, backend.ErrLeaseHeld) || !errors.Is(err, backend.ErrFenced) {
		t.Errorf("drain: %v, want lease held", err)
	}
	h.wantState(u.Admission.ID, "queued//")
	// With Wait it waits until ctx ends.
	ctx, cancel := context.WithTimeout(h.ctx, 600*time.Millisecond)
	defer cancel()
	opt := h.opts()
	opt.Wait = true
	if _, err := h.svc.Drain(ctx, "s1", opt); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("drain --wait: %v, want the deadline", err)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
}

// Follow: inputs admitted while the drainer waits are executed as they
// arrive, woken by store events.
func follow(t *testing.T, h *harness) {
	h.openSession("s1")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		rep admission.DrainReport
		err error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Follow = true
		opt.Holder = "follower"
		rep, err := h.svc.Drain(ctx, "s1", opt)
		done <- result{rep, err}
	}()
	h.eventually("the follower to take the lease", func() bool { return h.session("s1").LeaseHolder == "follower" })
	f1 := h.human("s1", "F1")
	h.eventually("F1 to run", func() bool { return h.admission(f1.Admission.ID).Status == backend.StatusDone })
	f2 := h.offer("s1", "process", []string{process.id("proc_follow")}, process.text("proc_follow"), "")
	h.eventually("the completion to be noted", func() bool { return h.admission(f2.Admission.ID).Status == backend.StatusDone })
	cancel()
	r := <-done
	if !errors.Is(r.err, context.Canceled) {
		t.Errorf("follow: %v, want canceled", r.err)
	}
	if r.rep.Turns != 1 || r.rep.Notes != 1 {
		t.Errorf("follow report: %d turns, %d notes; want 1, 1", r.rep.Turns, r.rep.Notes)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"F1/0"})
	h.wantStrings("notes", h.notes("s1"), []string{process.text("proc_follow")})
}

// DrainAll drains every session with work, skipping one whose lease is
// held elsewhere.
func drainAll(t *testing.T, h *harness) {
	for _, s := range []string{"a", "b", "c", "held"} {
		h.human(s, "IN-"+s)
	}
	h.openSession("idle")
	if _, err := h.store.AcquireLease(h.ctx, backend.LeaseRequest{Principal: owner, Session: "held", Holder: "other", TTL: time.Hour, Now: time.Now()}); err != nil {
		t.Fatal(err)
	}
	reports, err := h.svc.DrainAll(h.ctx, h.opts(), 2)
	if err != nil {
		t.Fatalf("drain --all: %v", err)
	}
	var got []string
	for _, r := range reports {
		got = append(got, fmt.Sprintf("%s:%d", r.Session, r.Turns))
	}
	h.wantStrings("reports", got, []string{"a:1", "b:1", "c:1"})
	if s := h.session("held"); s.Queued != 1 {
		t.Errorf("held session: %d queued, want 1", s.Queued)
	}
	if n := len(h.turns()); n != 3 {
		t.Errorf("%d turns, want 3", n)
	}
}

// DrainAll with Follow drains sessions as work arrives, each under its own
// lease, woken by store events, until ctx ends.
func drainAllFollow(t *testing.T, h *harness) {
	h.openSession("a")
	h.openSession("b")
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	type result struct {
		reps []admission.DrainReport
		err  error
	}
	done := make(chan result, 1)
	go func() {
		opt := h.opts()
		opt.Follow = true
		reps, err := h.svc.DrainAll(ctx, opt, 2)
		done <- result{reps, err}
	}()
	ra := h.human("a", "IN-a")
	rb := h.offer("b", "process", []string{process.id("proc_all")}, process.text("proc_all"), "")
	h.eventually("both admissions to run", func() bool {
		return h.admission(ra.Admission.ID).Status == backend.StatusDone && h.admission(rb.Admission.ID).Status == backend.StatusDone
	})
	rc := h.human("a", "IN-a-2")
	h.eventually("the third admission to run", func() bool { return h.admission(rc.Admission.ID).Status == backend.StatusDone })
	cancel()
	var r result
	select {
	case r = <-done:
	case <-time.After(waitLimit):
		t.Fatal("DrainAll with Follow did not return after ctx ended")
	}
	if !errors.Is(r.err, context.Canceled) || errors.Is(r.err, backend.ErrAttention) {
		t.Errorf("drain --all --follow: %v, want only canceled", r.err)
	}
	turns, notes := 0, 0
	for _, rep := range r.reps {
		if len(rep.Executed) == 0 {
			t.Errorf("report of %s with nothing executed: %+v err=%v", rep.Session, rep, r.err)
		}
		turns += rep.Turns
		notes += rep.Notes
	}
	if turns != 2 || notes != 1 {
		t.Errorf("reports: %d turns, %d notes; want 2, 1", turns, notes)
	}
	h.wantStrings("turns", h.turnTexts(), []string{"IN-a/0", "IN-a-2/0"})
	h.wantStrings("notes on b", h.notes("b"), []string{process.text("proc_all")})
}
