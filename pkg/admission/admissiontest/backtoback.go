package admissiontest

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend/backendtest"
)

// backToBackScenarios: turns queued one behind the other are settled and
// claimed together (Store.SettleClaim), and nothing else changes: each
// handler runs once, in order, seeing the transcript as it was before its
// turn; a fault on the joint write is retried write by write; a drain that
// stops between them gives the claimed turn back unstarted.
var backToBackScenarios = []scenario{
	{"BackToBack/Turns", backToBackTurns},
	{"BackToBack/Max", backToBackMax},
	{"BackToBack/ThenNote", backToBackThenNote},
	{"Faults/BackToBackReplyLost", backToBackReplyLost},
	{"Faults/BackToBackRetried", backToBackRetried},
	{"Faults/BackToBackStopped", backToBackStopped},
}

// threeTurns admits three human inputs to a new session s1.
func (h *harness) threeTurns() []string {
	h.openSession("s1")
	var ids []string
	for _, text := range []string{"A", "B", "C"} {
		ids = append(ids, h.human("s1", text).Admission.ID)
	}
	return ids
}

// wantThreeTurns checks that A, B and C ran once each, in order, each
// seeing the messages of the turns before it, and were written once each.
func (h *harness) wantThreeTurns(ids []string) {
	h.t.Helper()
	for _, id := range ids {
		h.wantState(id, "done/completed/turn")
	}
	var got []string
	for _, in := range h.turns() {
		got = append(got, fmt.Sprintf("%s/%d", in.Text, in.MessageCount))
	}
	h.wantStrings("handler runs (text/message_count)", got, []string{"A/0", "B/2", "C/4"})
	h.wantStrings("transcript", h.roles("s1"), []string{
		"user:A", "assistant:reply to A notes_seen=0",
		"user:B", "assistant:reply to B notes_seen=0",
		"user:C", "assistant:reply to C notes_seen=0",
	})
}

func backToBackTurns(t *testing.T, h *harness) {
	ids := h.threeTurns()
	rep := h.drain("s1")
	if rep.Turns != 3 {
		t.Errorf("report: %d turns, want 3", rep.Turns)
	}
	h.wantThreeTurns(ids)
	// A ends with B's claim, B with C's; C, the last, alone.
	if sc, c := h.faults.Calls("SettleClaim"), h.faults.Calls("Claim"); sc != 2 || c != 1 {
		t.Errorf("%d joint settle-and-claims and %d claims, want 2 and 1", sc, c)
	}
}

// A drain bounded by Max claims nothing past its bound.
func backToBackMax(t *testing.T, h *harness) {
	ids := h.threeTurns()
	opt := h.opts()
	opt.Max = 2
	rep, err := h.svc.Drain(h.ctx, "s1", opt)
	if err != nil || rep.Turns != 2 {
		t.Fatalf("drain --max 2: %d turns, %v", rep.Turns, err)
	}
	h.wantState(ids[1], "done/completed/turn")
	h.wantState(ids[2], "queued//")
	if s := h.session("s1"); s.Running != 0 || s.Queued != 1 {
		t.Errorf("session after drain --max 2: %d running, %d queued; want 0, 1", s.Running, s.Queued)
	}
}

// A turn followed by automation input nobody watches: the input is a note,
// never claimed as a turn.
func backToBackThenNote(t *testing.T, h *harness) {
	h.openSession("s1")
	r := h.human("s1", "IN")
	n := h.offer("s1", process.name, []string{process.id("n1")}, process.text("n1"), "")
	h.drain("s1")
	h.wantState(r.Admission.ID, "done/completed/turn")
	h.wantState(n.Admission.ID, "done/completed/note")
	if sc := h.faults.Calls("SettleClaim"); sc != 0 {
		t.Errorf("%d joint settle-and-claims before a note, want 0", sc)
	}
	h.wantStrings("handler runs", h.turnTexts(), []string{"IN/0"})
}

// The joint write commits and its reply is lost: each write sent again
// alone is found done; every handler still runs once.
func backToBackReplyLost(t *testing.T, h *harness) {
	ids := h.threeTurns()
	h.faults.Inject(backendtest.Fault{Method: "SettleClaim", Mode: backendtest.FailAfter})
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); err != nil {
		t.Fatalf("drain with the joint write's reply lost: %v", err)
	}
	h.wantThreeTurns(ids)
	if h.faults.Struck("SettleClaim") != 1 {
		t.Errorf("the fault never struck")
	}
}

// The joint write is refused for now (nothing written): retried.
func backToBackRetried(t *testing.T, h *harness) {
	ids := h.threeTurns()
	h.faults.Inject(backendtest.Fault{Method: "SettleClaim", Mode: backendtest.FailBefore, Times: 2})
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); err != nil {
		t.Fatalf("drain with the joint write failing: %v", err)
	}
	h.wantThreeTurns(ids)
}

// The drain is stopped while the joint write is in flight: the write
// completes (a turn's end is never lost), and the turn it claimed, not
// started, goes back to the queue as it was.
func backToBackStopped(t *testing.T, h *harness) {
	ids := h.threeTurns()
	h.faults.Inject(backendtest.Fault{Method: "SettleClaim", Mode: backendtest.Stall, Stall: 500 * time.Millisecond})
	ctx, cancel := context.WithCancel(h.ctx)
	defer cancel()
	go func() {
		// Stop while the joint write of A's end and B's claim stalls.
		for h.faults.Calls("SettleClaim") == 0 && ctx.Err() == nil {
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
	}()
	rep, err := h.svc.Drain(ctx, "s1", h.opts())
	if !errors.Is(err, context.Canceled) || rep.Turns != 1 {
		t.Fatalf("stopped drain: %d turns, %v; want 1 turn, stopped", rep.Turns, err)
	}
	h.wantState(ids[0], "done/completed/turn")
	b := h.wantState(ids[1], "queued//")
	if b.DeliveredTo != "" || !b.StartedAt.IsZero() {
		t.Errorf("given back: delivered_to %q started_at %v, want none", b.DeliveredTo, b.StartedAt)
	}
	h.wantState(ids[2], "queued//")
	h.wantStrings("handler runs", h.turnTexts(), []string{"A/0"})
	if s := h.session("s1"); s.Running != 0 || s.Queued != 2 {
		t.Errorf("session: %d running, %d queued; want 0, 2", s.Running, s.Queued)
	}
	// The next drain runs B and C.
	h.drain("s1")
	h.wantThreeTurns(ids)
}
