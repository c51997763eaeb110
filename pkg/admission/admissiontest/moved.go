package admissiontest

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// moveOnSettle is a real store with one real operation of another client
// (a compression, a switch) slipped in just before the drainer's next
// settle: the session moves between the drainer's decision and its write.
type moveOnSettle struct {
	backend.Store
	t    *testing.T
	mu   sync.Mutex
	move func(ctx context.Context, s backend.Store) error
}

// arm makes f run once, before the next Settle or SettleRun.
func (m *moveOnSettle) arm(f func(ctx context.Context, s backend.Store) error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.move = f
}

func (m *moveOnSettle) fire(ctx context.Context) {
	m.mu.Lock()
	f := m.move
	m.move = nil
	m.mu.Unlock()
	if f != nil {
		if err := f(ctx, m.Store); err != nil {
			m.t.Errorf("the move before the settle: %v", err)
		}
	}
}

func (m *moveOnSettle) Settle(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	m.fire(ctx)
	return m.Store.Settle(ctx, req)
}

func (m *moveOnSettle) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	m.fire(ctx)
	return m.Store.SettleRun(ctx, reqs)
}

// runMoved runs the scenarios in which the session moves between the
// drainer's decision and its settle: the store compares the current
// transcript the drainer decided on inside the settle, and the drainer
// decides again, so nothing lands in the transcript that just ended.
func runMoved(t *testing.T, newStore func(t *testing.T) backend.Store) {
	for _, sc := range []struct {
		name string
		fn   func(t *testing.T, h *harness, m *moveOnSettle)
	}{
		{"NoteFollowsCompression", noteFollowsCompression},
		{"TurnReplyFollowsCompression", turnReplyFollowsCompression},
		{"NoteSwitchedAwayIsMisrouted", noteSwitchedAwayIsMisrouted},
	} {
		t.Run("MovedBeforeSettle/"+sc.name, func(t *testing.T) {
			var m *moveOnSettle
			h := newHarness(t, func(t *testing.T) backend.Store {
				m = &moveOnSettle{Store: newStore(t), t: t}
				return m
			})
			sc.fn(t, h, m)
		})
	}
}

func compress(child string) func(ctx context.Context, s backend.Store) error {
	return func(ctx context.Context, s backend.Store) error {
		_, err := s.Compress(ctx, "s1", child, time.Now())
		return err
	}
}

// A completion decided as a note on s1, compressed into s1.2 before the
// note is written: the note goes to the tip, s1.2.
func noteFollowsCompression(t *testing.T, h *harness, m *moveOnSettle) {
	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_moved")}, process.text("proc_moved"), "")
	m.arm(compress("s1.2"))
	h.drain("s1")
	h.wantStrings("notes on s1 (ended)", h.notes("s1"), nil)
	h.wantStrings("notes on s1.2 (the tip)", h.notes("s1.2"), []string{process.text("proc_moved")})
	if got := h.admission(c.Admission.ID); got.DeliveredTo != "s1.2" || got.Outcome != backend.OutcomeCompleted {
		t.Errorf("admission delivered to %q, outcome %s; want s1.2, completed", got.DeliveredTo, got.Outcome)
	}
}

// A human turn decided on s1; the session is compressed while the handler
// runs: the input and the reply go to the tip, and s1 stays as it ended.
func turnReplyFollowsCompression(t *testing.T, h *harness, m *moveOnSettle) {
	h.openSession("s1")
	in := h.human("s1", "question asked before the compression")
	m.arm(compress("s1.2"))
	rep := h.drain("s1")
	if rep.Turns != 1 {
		t.Fatalf("%d turns, want 1", rep.Turns)
	}
	if n := len(h.messages("s1")); n != 0 {
		t.Errorf("%d messages written into s1 after it ended, want 0", n)
	}
	h.wantStrings("s1.2", h.roles("s1.2"), []string{
		"user:question asked before the compression",
		"assistant:reply to question asked before the compression notes_seen=0",
	})
	if got := h.admission(in.Admission.ID); got.DeliveredTo != "s1.2" || got.Outcome != backend.OutcomeCompleted {
		t.Errorf("admission delivered to %q, outcome %s; want s1.2, completed", got.DeliveredTo, got.Outcome)
	}
	if n := len(h.turns()); n != 1 {
		t.Errorf("handler ran %d times, want once", n)
	}
}

// A completion decided as a note on s1; the session is switched to another
// conversation before the note is written: it is misrouted (failed, kept),
// written nowhere.
func noteSwitchedAwayIsMisrouted(t *testing.T, h *harness, m *moveOnSettle) {
	h.openSession("s1")
	c := h.offer("s1", "process", []string{process.id("proc_away")}, process.text("proc_away"), "")
	m.arm(func(ctx context.Context, s backend.Store) error {
		_, err := s.Switch(ctx, "s1", "s1-other", time.Now())
		return err
	})
	if _, err := h.svc.Drain(h.ctx, "s1", h.opts()); !errors.Is(err, backend.ErrAttention) {
		t.Errorf("drain: %v, want attention (a misrouted completion)", err)
	}
	h.wantStrings("notes on s1", h.notes("s1"), nil)
	h.wantStrings("notes on s1-other", h.notes("s1-other"), nil)
	if got := h.admission(c.Admission.ID); got.Outcome != backend.OutcomeFailed || got.Error != "misrouted" {
		t.Errorf("admission %s/%q, want failed/misrouted", got.Outcome, got.Error)
	}
}
