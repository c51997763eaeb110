package acceptance

import (
	"fmt"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestClosedSessionCompletions is issue 4, acceptance 1 and 2, through the
// binary on every store: a completion that arrives after its session was
// closed (for each close reason and producer) becomes exactly one note on
// the closed transcript — or on the tip when the transcript was compressed
// first — never a turn, never reopening it, never reaching the session
// opened next.
func TestClosedSessionCompletions(t *testing.T) {
	for _, st := range storeURLs(t) {
		t.Run(st.Name, func(t *testing.T) {
			c := newCLI(t, st.URL(t))
			for _, compressed := range []bool{false, true} {
				for _, reason := range backend.CloseReasons {
					for _, producer := range []string{"process", "delegation"} {
						variant := "closed"
						if compressed {
							variant = "compressed-closed"
						}
						name := fmt.Sprintf("%s/%s/%s", variant, reason, producer)
						t.Run(name, func(t *testing.T) {
							c := c.with(t)
							closedCase(t, c, fmt.Sprintf("%s.%s.%s", variant, reason, producer), reason, producer, compressed)
						})
					}
				}
			}
		})
	}
}

func closedCase(t *testing.T, c *cli, s, reason, producer string, compressed bool) {
	s2 := s + ".next"
	tip := s
	c.ok("session", "open", s)
	if compressed {
		tip = s + ".tip"
		c.ok("session", "compress", s, "--child", tip)
	}
	c.ok("session", "close", s, "--reason", reason)
	before := c.lineage(s)
	c.ok("session", "open", s2)
	c.ok("viewer", "add", s2, "--ttl", "10m")

	identity := `["completion","proc-` + s + `","1700000000.0"]`
	if producer == "delegation" {
		identity = `["async_delegation","del-` + s + `",""]`
	}
	text := "[finished] late work of " + s + " (exit 0)"
	adm := c.admitAuto(s, producer, text, s, identity)
	if adm.Result != backend.ResultAdmitted {
		t.Fatalf("admit: result %q, want admitted", adm.Result)
	}
	calls := len(c.calls())
	c.ok("drain", s, "--", "handler")
	c.ok("drain", s2, "--", "handler")

	if n := len(c.calls()); n != calls {
		t.Errorf("the handler ran %d times: a closed session's completion must be a note, never a turn", n-calls)
	}
	got := c.show(adm.Admission.ID)
	if got.Status != backend.StatusDone || got.Outcome != backend.OutcomeCompleted || got.Mode != backend.ModeNote {
		t.Errorf("admission: status %s outcome %q mode %q, want done completed note", got.Status, got.Outcome, got.Mode)
	}
	if got.DeliveredTo != tip {
		t.Errorf("admission delivered_to %q, want %q", got.DeliveredTo, tip)
	}
	tipMsgs := c.messages(tip)
	if len(tipMsgs) != 1 || tipMsgs[0].Role != backend.RoleNote || tipMsgs[0].Content != text || tipMsgs[0].AdmissionID != adm.Admission.ID {
		t.Errorf("transcript %s: %+v, want exactly one note %q of %s", tip, tipMsgs, text, adm.Admission.ID)
	}
	if compressed {
		if ms := c.messages(s); len(ms) != 0 {
			t.Errorf("ancestor %s has %d messages, want none", s, len(ms))
		}
	}
	after := c.lineage(s)
	if len(after) != len(before) {
		t.Fatalf("lineage of %s: %d transcripts, was %d", s, len(after), len(before))
	}
	for i := range after {
		b, a := before[i], after[i]
		if !a.EndedAt.Equal(b.EndedAt) || a.EndReason != b.EndReason || a.EndedAt.IsZero() {
			t.Errorf("transcript %s: ended_at %v end_reason %q, want it still ended at %v with %q", a.ID, a.EndedAt, a.EndReason, b.EndedAt, b.EndReason)
		}
	}
	if tipT := after[len(after)-1]; tipT.ID != tip || tipT.EndReason != reason || tipT.MessageCount != 1 {
		t.Errorf("tip %+v: want %s ended with %q holding 1 message", tipT, tip, reason)
	}
	if compressed && after[0].EndReason != backend.ReasonCompression {
		t.Errorf("ancestor end_reason %q, want compression", after[0].EndReason)
	}
	if as := c.all(s); len(as) != 1 || as[0].Outcome != backend.OutcomeCompleted {
		t.Errorf("session %s admissions: %+v, want one completed", s, as)
	}
	if as := c.all(s2); len(as) != 0 {
		t.Errorf("session %s admissions: %+v, want none", s2, as)
	}
	if ms := c.messages(s2); len(ms) != 0 {
		t.Errorf("session %s messages: %+v, want none", s2, ms)
	}
}
