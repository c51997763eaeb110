package admissiontest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// Issue 4 (4): human input to a closed session is refused unless Reopen.
func humanToClosedSession(t *testing.T, h *harness) {
	h.openSession("s1")
	if _, err := h.store.CloseSession(h.ctx, "s1", "cli_close", time.Now()); err != nil {
		t.Fatal(err)
	}
	in := admission.Input{Session: "s1", Text: "LATE", Principal: owner}
	if _, err := h.svc.Admit(h.ctx, in); !errors.Is(err, backend.ErrClosed) || !errors.Is(err, backend.ErrConflict) {
		t.Errorf("admit to a closed session: %v, want closed", err)
	}
	if n := len(h.admissions("s1", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("%d admissions after the refusal, want 0", n)
	}
	in.Reopen = true
	r, err := h.svc.Admit(h.ctx, in)
	if err != nil || r.Result != backend.ResultAdmitted {
		t.Fatalf("admit --reopen: %q %v", r.Result, err)
	}
	if tr := h.transcript("s1"); tr.Ended() || tr.EndReason != "" {
		t.Errorf("transcript after --reopen: ended %v reason %q, want open", tr.EndedAt, tr.EndReason)
	}
	h.drain("s1")
	h.wantStrings("turns", h.turnTexts(), []string{"LATE/0"})
}

// A human input admitted while the session's transcript was open, whose
// session is then switched to a closed transcript of its own, is not run as
// a turn into the closed transcript: it is settled failed ("closed"), kept
// and visible, and the closed transcript is unchanged.
func humanQueuedThenSwitchedToClosed(t *testing.T, h *harness) {
	h.openSession("s1")
	if _, err := h.store.CloseSession(h.ctx, "s1", "cli_close", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Switch(h.ctx, "s1", "s1-b", time.Now()); err != nil {
		t.Fatal(err)
	}
	a := h.human("s1", "QUEUED").Admission
	if _, err := h.store.Switch(h.ctx, "s1", "s1", time.Now()); err != nil {
		t.Fatal(err)
	}
	rep, err := h.svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want an error needing attention", err)
	}
	if rep.Failed != 1 {
		t.Errorf("report: %d failed, want 1", rep.Failed)
	}
	got := h.admission(a.ID)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeFailed || got.Mode != "" ||
		got.Error != "closed: transcript s1 ended (cli_close)" {
		t.Errorf("admission: %s/%s mode %q error %q, want done/failed, no mode, closed", got.Status, got.Outcome, got.Mode, got.Error)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
	if tr := h.transcript("s1"); tr.MessageCount != 0 || tr.EndReason != "cli_close" {
		t.Errorf("closed transcript: %d messages, reason %q; want 0, cli_close", tr.MessageCount, tr.EndReason)
	}
}

// Issue 4 (1): a completion for a session closed with reason becomes one
// note on that closed transcript; it does not reopen it and never reaches
// the session opened next.
func closedSessionNote(t *testing.T, h *harness, p producer, reason string) {
	name := p.name + "_after_close"
	h.openSession("lc7")
	if _, err := h.store.CloseSession(h.ctx, "lc7", reason, time.Now()); err != nil {
		t.Fatal(err)
	}
	closed := h.transcript("lc7")
	h.openSession("lc7-next")
	if _, err := h.svc.AddViewer(h.ctx, "lc7-next", time.Hour); err != nil {
		t.Fatal(err)
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	if r.Result != backend.ResultAdmitted {
		t.Fatalf("offer: %q", r.Result)
	}
	h.drain("lc7")
	h.drain("lc7-next")
	h.wantStrings("notes on lc7", h.notes("lc7"), []string{p.text(name)})
	tr := h.transcript("lc7")
	if !tr.Ended() || tr.EndReason != reason || !tr.EndedAt.Equal(closed.EndedAt) {
		t.Errorf("lc7 after the note: ended %v reason %q, want %v %q", tr.EndedAt, tr.EndReason, closed.EndedAt, reason)
	}
	if tr.MessageCount != closed.MessageCount+1 {
		t.Errorf("lc7: %d messages, want %d", tr.MessageCount, closed.MessageCount+1)
	}
	h.wantStrings("turns", h.turnTexts(), nil)
	a := h.wantState(r.Admission.ID, "done/completed/note")
	if a.DeliveredTo != "lc7" {
		t.Errorf("delivered to %q, want lc7", a.DeliveredTo)
	}
	if n := len(h.admissions("lc7-next", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("lc7-next: %d admissions, want 0", n)
	}
	if n := len(h.messages("lc7-next")); n != 0 {
		t.Errorf("lc7-next: %d messages, want 0", n)
	}
}

// Issue 4 (2): compressed, then the tip closed: a completion pinned to the
// ancestor is one note on the closed tip (even with a viewer), none on the
// ancestor, nothing on the next session.
func compressedThenClosed(t *testing.T, h *harness, p producer, reason string) {
	name := p.name + "_compressed"
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if cur := h.session("lc7").CurrentTranscript; cur != "lc7-tip" {
		t.Fatalf("current transcript after compress: %q", cur)
	}
	if _, err := h.store.CloseSession(h.ctx, "lc7", reason, time.Now()); err != nil {
		t.Fatal(err)
	}
	h.openSession("lc7-next")
	for _, s := range []string{"lc7", "lc7-next"} {
		if _, err := h.svc.AddViewer(h.ctx, s, time.Hour); err != nil {
			t.Fatal(err)
		}
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	h.drain("lc7")
	h.drain("lc7-next")
	h.wantStrings("turns", h.turnTexts(), nil)
	h.wantStrings("notes on lc7-tip", h.notes("lc7-tip"), []string{p.text(name)})
	h.wantStrings("notes on lc7", h.notes("lc7"), nil)
	if tip := h.transcript("lc7-tip"); !tip.Ended() || tip.EndReason != reason {
		t.Errorf("lc7-tip: ended %v reason %q, want ended %q", tip.EndedAt, tip.EndReason, reason)
	}
	if anc := h.transcript("lc7"); anc.EndReason != backend.ReasonCompression {
		t.Errorf("lc7: end reason %q, want compression", anc.EndReason)
	}
	var outcomes []string
	for _, a := range h.admissions("lc7", backend.AdmissionFilter{}) {
		outcomes = append(outcomes, string(a.Outcome))
	}
	h.wantStrings("lc7 outcomes", outcomes, []string{"completed"})
	if a := h.admission(r.Admission.ID); a.DeliveredTo != "lc7-tip" || a.Mode != backend.ModeNote {
		t.Errorf("delivered to %q as %q, want lc7-tip note", a.DeliveredTo, a.Mode)
	}
	if n := len(h.admissions("lc7-next", backend.AdmissionFilter{})); n != 0 {
		t.Errorf("lc7-next: %d admissions, want 0", n)
	}
	if n := len(h.messages("lc7-next")); n != 0 {
		t.Errorf("lc7-next: %d messages, want 0", n)
	}
}

// Issue 4 (3): once the session names another lineage, a completion pinned
// to the old ancestor is misrouted: failed "misrouted", kept, listed, and
// written to no transcript.
func misrouted(t *testing.T, h *harness, p producer) {
	name := p.name + "_misrouted"
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-other", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.svc.AddViewer(h.ctx, "lc7", time.Hour); err != nil {
		t.Fatal(err)
	}
	r := h.offer("lc7", p.name, []string{p.id(name)}, p.text(name), "lc7")
	rep, err := h.svc.Drain(h.ctx, "lc7", h.opts())
	if !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want attention", err)
	}
	if rep.Failed != 1 || rep.Turns != 0 || rep.Notes != 0 {
		t.Errorf("report: %d failed, %d turns, %d notes; want 1, 0, 0", rep.Failed, rep.Turns, rep.Notes)
	}
	a := h.wantState(r.Admission.ID, "done/failed/")
	if a.Error != "misrouted" {
		t.Errorf("error %q, want misrouted", a.Error)
	}
	failed := h.admissions("lc7", backend.AdmissionFilter{Outcomes: []backend.Outcome{backend.OutcomeFailed}})
	if len(failed) != 1 || failed[0].ID != r.Admission.ID {
		t.Errorf("failed admissions %d, want exactly %s", len(failed), r.Admission.ID)
	}
	for _, tr := range []string{"lc7", "lc7-tip", "lc7-other"} {
		if n := len(h.messages(tr)); n != 0 {
			t.Errorf("%s: %d messages, want 0", tr, n)
		}
	}
	h.wantStrings("turns", h.turnTexts(), nil)
}

// Issue 4 (route must name the tip): ResolveTarget and Lineage directly.
func lineageAndResolveTarget(t *testing.T, h *harness) {
	h.openSession("lc7")
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-mid", time.Now()); err != nil {
		t.Fatal(err)
	}
	if _, err := h.store.Compress(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	lin, err := h.svc.Lineage(h.ctx, "lc7-mid")
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, tr := range lin {
		ids = append(ids, tr.ID)
	}
	h.wantStrings("lineage", ids, []string{"lc7", "lc7-mid", "lc7-tip"})
	pinned := backend.Admission{Kind: backend.KindAutomation, PinnedTarget: "lc7", Session: "lc7"}
	resolve := func() (string, bool) {
		target, mis, err := h.svc.ResolveTarget(h.ctx, h.session("lc7"), pinned)
		if err != nil {
			t.Fatal(err)
		}
		return target, mis
	}
	if target, mis := resolve(); target != "lc7-tip" || mis {
		t.Errorf("pinned to the root, tip current: %q misrouted %v; want lc7-tip", target, mis)
	}
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-other", time.Now()); err != nil {
		t.Fatal(err)
	}
	if target, mis := resolve(); !mis {
		t.Errorf("after switching away: %q, want misrouted", target)
	}
	// Switching back to the tip makes it deliverable again.
	if _, err := h.store.Switch(h.ctx, "lc7", "lc7-tip", time.Now()); err != nil {
		t.Fatal(err)
	}
	if target, mis := resolve(); target != "lc7-tip" || mis {
		t.Errorf("after switching back: %q misrouted %v; want lc7-tip", target, mis)
	}
	human := backend.Admission{Kind: backend.KindHuman, Session: "lc7"}
	if target, mis, err := h.svc.ResolveTarget(h.ctx, h.session("lc7"), human); err != nil || target != "lc7-tip" || mis {
		t.Errorf("human: %q %v %v, want the current transcript", target, mis, err)
	}
}

var errInjected = errors.New("injected fault: not a store condition")

// Issue 4 (5): a transient target read defers (stays queued, Deferred > 0,
// then delivered); any other error surfaces with the admission queued.
func transientTargetRead(t *testing.T, newStore func(t *testing.T) backend.Store, p producer) {
	h := newHarness(t, newStore)
	fail := func(n int, err error) {
		h.faults.Inject(backendtest.Fault{Method: "GetTranscript", Times: n, Err: err})
	}
	svc := h.svc
	h.openSession("s1")
	r := h.offer("s1", p.name, []string{p.id(p.name + "_deferred")}, p.text(p.name+"_deferred"), "")
	fail(2, fmt.Errorf("read transcript s1: database is locked: %w", backend.ErrUnavailable))
	rep, err := svc.Drain(h.ctx, "s1", h.opts())
	if err != nil {
		t.Fatalf("drain: %v", err)
	}
	if rep.Deferred != 2 || rep.Notes != 1 {
		t.Errorf("report: %d deferred, %d notes; want 2, 1", rep.Deferred, rep.Notes)
	}
	h.wantState(r.Admission.ID, "done/completed/note")
	h.wantStrings("notes", h.notes("s1"), []string{p.text(p.name + "_deferred")})

	r2 := h.offer("s1", p.name, []string{p.id(p.name + "_bug")}, p.text(p.name+"_bug"), "")
	fail(1, errInjected)
	_, err = svc.Drain(h.ctx, "s1", h.opts())
	if !errors.Is(err, errInjected) || errors.Is(err, backend.ErrUnavailable) {
		t.Errorf("drain with an unexpected error: %v, want the injected error surfaced", err)
	}
	if code := backend.CodeOf(err); code != backend.CodeInternal {
		t.Errorf("drain with an unexpected error: code %s, want internal (exit 1)", code)
	}
	h.wantState(r2.Admission.ID, "queued//")
	if n := len(h.notes("s1")); n != 1 {
		t.Errorf("%d notes after the failed drain, want 1", n)
	}
	// A target the store says is not found (the session's current
	// transcript is gone: a store that contradicts itself) is a bug too:
	// exit 1, not the not-found of an unknown session.
	fail(1, backend.Errorf(backend.ErrNotFound, "transcript s1"))
	_, err = svc.Drain(h.ctx, "s1", h.opts())
	if code := backend.CodeOf(err); code != backend.CodeInternal || !errors.Is(err, backend.ErrNotFound) {
		t.Errorf("drain with the current transcript not found: %v (code %s), want code internal wrapping the not-found", err, code)
	}
	h.wantState(r2.Admission.ID, "queued//")
	h.drain("s1")
	h.wantState(r2.Admission.ID, "done/completed/note")
}
