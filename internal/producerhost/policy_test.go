package producerhost

import (
	"fmt"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

// TestDecide holds the refusal-to-action policy for every kind of refusal.
func TestDecide(t *testing.T) {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	b := Backoff{Base: time.Second, Cap: 5 * time.Minute}
	big := &admission.GroupTooLargeError{Size: 2400243, Limit: 1 << 20}
	for _, c := range []struct {
		name     string
		err      error
		parts    int
		attempts int
		want     Outcome
		wait     time.Duration
	}{
		{"admitted", nil, 3, 1, Deliver, 0},
		{"invalid", fmt.Errorf("text is empty: %w", backend.ErrInvalid), 1, 1, Reject, 0},
		{"invalid after attempts", fmt.Errorf("bad: %w", backend.ErrInvalid), 1, 9, Reject, 0},
		{"group too large", big, 256, 1, Split, 0},
		{"one event too large", big, 1, 1, Reject, 0},
		{"not found", fmt.Errorf("session nosuch: %w", backend.ErrNotFound), 1, 1, Wait, time.Second},
		{"not found again", fmt.Errorf("session nosuch: %w", backend.ErrNotFound), 1, 2, Wait, 2 * time.Second},
		{"forbidden", fmt.Errorf("no grant: %w", backend.ErrForbidden), 2, 4, Wait, 8 * time.Second},
		{"conflict", fmt.Errorf("closed: %w", backend.ErrConflict), 1, 3, Wait, 4 * time.Second},
		{"unavailable", fmt.Errorf("OOM: %w", backend.ErrUnavailable), 1, 1, Wait, time.Second},
		{"internal", fmt.Errorf("boom: %w", backend.ErrInternal), 1, 1, Wait, time.Second},
		{"fenced", fmt.Errorf("epoch: %w", backend.ErrFenced), 1, 1, Wait, time.Second},
		{"unclassified", fmt.Errorf("what"), 1, 1, Wait, time.Second},
		{"capped", fmt.Errorf("no grant: %w", backend.ErrForbidden), 1, 40, Wait, 5 * time.Minute},
		{"attempts not counted", fmt.Errorf("no grant: %w", backend.ErrForbidden), 1, 0, Wait, time.Second},
	} {
		t.Run(c.name, func(t *testing.T) {
			d := Decide(RefusalOf(c.err, c.parts), c.attempts, now, b)
			if d.Outcome != c.want {
				t.Fatalf("outcome %s, want %s", d.Outcome, c.want)
			}
			if c.want == Wait {
				if got := d.NotBefore.Sub(now); got != c.wait {
					t.Errorf("not before now+%s, want now+%s", got, c.wait)
				}
			} else if !d.NotBefore.IsZero() {
				t.Errorf("not before %s on %s", d.NotBefore, d.Outcome)
			}
			if c.err != nil && d.Reason == "" {
				t.Error("no reason")
			}
		})
	}
}
