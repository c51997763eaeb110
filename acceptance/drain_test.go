package acceptance

import (
	"fmt"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// forEachStore runs f as a subtest per store, each with a fresh store.
func forEachStore(t *testing.T, f func(t *testing.T, c *cli)) {
	for _, st := range storeURLs(t) {
		t.Run(st.Name, func(t *testing.T) { f(t, newCLI(t, st.URL(t))) })
	}
}

// waitStatus polls until admission id has status want.
func waitStatus(t *testing.T, c *cli, id string, want backend.Status, d time.Duration) {
	t.Helper()
	eventually(t, d, fmt.Sprintf("admission %s %s", id, want), func() bool {
		return c.show(id).Status == want
	})
}

// waitLeaseExpired polls until the session's drain lease has expired.
func waitLeaseExpired(t *testing.T, c *cli, session string, d time.Duration) {
	t.Helper()
	eventually(t, d, "the drain lease of "+session+" expired", func() bool {
		s := c.session(session)
		return s.LeaseExpiresAt == nil || time.Now().After(s.LeaseExpiresAt.Add(200*time.Millisecond))
	})
}

func countRole(ms []backend.Message, role backend.Role) int {
	n := 0
	for _, m := range ms {
		if m.Role == role {
			n++
		}
	}
	return n
}

// TestRestartKeepsQueued is issue 3, acceptance 1: queued work survives a
// drainer killed (SIGKILL) before it took anything; a new drainer runs FIRST
// once (notes_seen 0) and writes exactly one note.
func TestRestartKeepsQueued(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c.ok("session", "open", "s1")
		// holder keeps s1's lease (short, so it lapses once holder is gone)
		// while the drainer that will be killed waits for it.
		holder := c.start(nil, "drain", "s1", "--follow", "--lease", "5s", "--", "handler")
		eventually(t, 30*time.Second, "the holder holds the lease", func() bool {
			return c.session("s1").LeaseHolder != nil
		})
		holder.freeze(t, c)
		first := c.admitHuman("s1", "FIRST")
		comp := c.admitAuto("s1", "process", "[finished] make test (exit 0)", "", `["completion","proc_a","1700000000.0"]`)

		victim := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=2s"}, "drain", "s1", "--wait", "--", "handler")
		time.Sleep(300 * time.Millisecond) // let it start and wait; nothing is asserted on time
		victim.signal(syscall.SIGKILL)
		victim.wait(t, 10*time.Second)
		_ = syscall.Kill(-holder.pid(), syscall.SIGKILL)
		holder.wait(t, 10*time.Second)
		if a := c.show(first.Admission.ID); a.Status != backend.StatusQueued {
			t.Fatalf("FIRST is %s after the killed drainer, want queued", a.Status)
		}
		if a := c.show(comp.Admission.ID); a.Status != backend.StatusQueued {
			t.Fatalf("the completion is %s after the killed drainer, want queued", a.Status)
		}

		c.ok("drain", "s1", "--wait", "--", "handler")
		c.ok("drain", "s1", "--wait", "--", "handler")

		calls := c.calls()
		if len(calls) != 1 || calls[0].Text != "FIRST" || calls[0].NotesSeen != 0 {
			t.Errorf("handler calls %+v, want FIRST once with notes_seen 0", calls)
		}
		ms := c.messages("s1")
		if n := countRole(ms, backend.RoleNote); n != 1 {
			t.Errorf("%d notes, want 1: %+v", n, ms)
		}
		for _, id := range []string{first.Admission.ID, comp.Admission.ID} {
			if a := c.show(id); a.Outcome != backend.OutcomeCompleted {
				t.Errorf("admission %s: %s %q, want completed", id, a.Status, a.Outcome)
			}
		}
	})
}

// TestExecutedTurnStaysTurn is issue 3, acceptance 2: a completion executed
// as a turn (a viewer was there) is not executed again: after the viewer
// leaves and a new drainer (new epoch) starts, re-offering its identities is
// a duplicate, and draining runs no second turn and writes no note.
func TestExecutedTurnStaysTurn(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c.ok("session", "open", "s1")
		viewer := strings.TrimSpace(c.ok("viewer", "add", "s1", "--ttl", "10m").stdout)
		ids := []string{`["completion","proc_a","1700000000.0"]`, `["completion","proc_b","1700000000.0"]`}
		adm := c.admitAuto("s1", "process", "[finished] proc_a and proc_b", "", ids...)
		c.ok("drain", "s1", "--", "handler")
		if a := c.show(adm.Admission.ID); a.Mode != backend.ModeTurn || a.Outcome != backend.OutcomeCompleted {
			t.Fatalf("with a viewer: mode %q outcome %q, want a completed turn", a.Mode, a.Outcome)
		}
		epoch := c.session("s1").Epoch
		c.ok("viewer", "rm", "s1", viewer)
		if v := c.session("s1").Viewers; v != 0 {
			t.Fatalf("viewers %d after viewer rm, want 0", v)
		}
		c.ok("drain", "s1", "--", "handler") // a new drainer: a new epoch
		if e := c.session("s1").Epoch; e <= epoch {
			t.Errorf("epoch %d after a new drainer, want more than %d", e, epoch)
		}
		again := c.admitAuto("s1", "process", "[finished] proc_a and proc_b", "", ids...)
		if again.Result != backend.ResultDuplicate || again.Admission.ID != adm.Admission.ID {
			t.Errorf("re-offer: %s of %s, want duplicate of %s", again.Result, again.Admission.ID, adm.Admission.ID)
		}
		c.ok("drain", "s1", "--", "handler")
		if n := len(c.calls()); n != 1 {
			t.Errorf("handler ran %d times, want once", n)
		}
		ms := c.messages("s1")
		if len(ms) != 2 || countRole(ms, backend.RoleNote) != 0 {
			t.Errorf("transcript %+v, want the one turn's 2 messages and no note", ms)
		}
		if as := c.all("s1"); len(as) != 1 {
			t.Errorf("%d admissions, want 1", len(as))
		}
	})
}

// TestFencing is issue 3, acceptance 3: drainer A, stopped past its lease
// in the middle of a turn, is fenced: B takes epoch+1, settles A's admission
// interrupted and drains the next one; A, continued, exits 5 and its reply is
// written nowhere.
func TestFencing(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		first := c.admitHuman("s1", "FIRST")
		second := c.admitHuman("s1", "SECOND")
		a := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=3s"}, "drain", "s1", "--lease", "1s", "--", "handler")
		waitStatus(t, c, first.Admission.ID, backend.StatusRunning, 30*time.Second)
		a.freeze(t, c)
		epochA := c.show(first.Admission.ID).Epoch
		waitLeaseExpired(t, c, "s1", 30*time.Second)

		b := c.run(nil, "drain", "s1", "--on-unknown", "interrupt", "--", "handler")
		if b.code != 0 {
			t.Errorf("drainer B: %v", b)
		}
		if s := c.session("s1"); s.Epoch != epochA+1 {
			t.Errorf("epoch %d after B, want %d", s.Epoch, epochA+1)
		}
		if got := c.show(first.Admission.ID); got.Status != backend.StatusDone || got.Outcome != backend.OutcomeInterrupted {
			t.Errorf("FIRST after B: %s %q, want done interrupted", got.Status, got.Outcome)
		}
		if got := c.show(second.Admission.ID); got.Outcome != backend.OutcomeCompleted || got.Epoch != epochA+1 {
			t.Errorf("SECOND after B: %s %q epoch %d, want completed at epoch %d", got.Status, got.Outcome, got.Epoch, epochA+1)
		}
		before := c.export()

		a.signal(syscall.SIGCONT)
		if code := a.wait(t, 60*time.Second); code != 5 {
			t.Errorf("drainer A exit %d, want 5 (fenced)\nstderr: %s", code, a.stderr())
		}
		ms := c.messages("s1")
		for _, m := range ms {
			if strings.Contains(m.Content, "FIRST") {
				t.Errorf("transcript holds %q: the fenced drainer's work was written", m.Content)
			}
		}
		if len(ms) != 2 || ms[0].Content != "SECOND" || ms[1].Content != "echo: SECOND (notes seen: 0)" {
			t.Errorf("transcript %+v, want SECOND's turn only", ms)
		}
		if got := c.show(first.Admission.ID); got.Outcome != backend.OutcomeInterrupted {
			t.Errorf("FIRST after A's reply: %s %q, want interrupted still", got.Status, got.Outcome)
		}
		if after := c.export(); after != before {
			t.Errorf("the store changed after the fenced drainer went on:\nbefore:\n%s\nafter:\n%s", before, after)
		}
	})
}

// TestConcurrentDrainAll is issue 3, acceptance 5: two `drain --all` at once
// never run one session's admissions at the same time, and every admission
// runs exactly once.
func TestConcurrentDrainAll(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		const sessions, per = 4, 4
		want := map[string]bool{}
		for s := 0; s < sessions; s++ {
			for i := 0; i < per; i++ {
				r := c.admitHuman(fmt.Sprintf("s%d", s), fmt.Sprintf("s%d-%d", s, i))
				want[r.Admission.ID] = true
			}
		}
		env := []string{"HERMESQ_EXAMPLE_SLEEP=100ms"}
		d1 := c.start(env, "drain", "--all", "--parallel", "4", "--", "handler")
		d2 := c.start(env, "drain", "--all", "--parallel", "4", "--", "handler")
		for i, d := range []*bg{d1, d2} {
			if code := d.wait(t, 2*time.Minute); code != 0 {
				t.Errorf("drainer %d: exit %d\nstderr: %s", i+1, code, d.stderr())
			}
		}
		// A drainer that found a session held skips it; whatever is left runs now.
		c.ok("drain", "--all", "--", "handler")

		calls := c.calls()
		checkNoOverlap(t, calls)
		ran := map[string]int{}
		for _, call := range calls {
			ran[call.Admission.ID]++
		}
		for id := range want {
			if ran[id] != 1 {
				t.Errorf("admission %s ran %d times, want once", id, ran[id])
			}
			if a := c.show(id); a.Outcome != backend.OutcomeCompleted {
				t.Errorf("admission %s: %s %q, want completed", id, a.Status, a.Outcome)
			}
		}
		for s := 0; s < sessions; s++ {
			checkFIFO(t, c, fmt.Sprintf("s%d", s))
		}
	})
}

// checkNoOverlap fails when two handler calls of one session overlap in time.
func checkNoOverlap(t *testing.T, calls []handlerCall) {
	t.Helper()
	bySession := map[string][]handlerCall{}
	for _, c := range calls {
		bySession[c.Session] = append(bySession[c.Session], c)
	}
	for s, cs := range bySession {
		sort.Slice(cs, func(i, j int) bool { return cs[i].Handler.StartedAt < cs[j].Handler.StartedAt })
		for i := 1; i < len(cs); i++ {
			if cs[i].Handler.StartedAt < cs[i-1].Handler.EndedAt {
				t.Errorf("session %s: handler for %q started while the one for %q ran", s, cs[i].Text, cs[i-1].Text)
			}
		}
	}
}

// checkFIFO checks that a session's transcript holds its completed turns'
// inputs in admission order, each followed by its reply.
func checkFIFO(t *testing.T, c *cli, session string) {
	t.Helper()
	var texts []string
	for _, a := range c.all(session) {
		if a.Outcome == backend.OutcomeCompleted && a.Mode == backend.ModeTurn {
			texts = append(texts, a.Text())
		}
	}
	var users []string
	ms := c.messages(session)
	for i, m := range ms {
		if m.Role == backend.RoleUser {
			users = append(users, m.Content)
			if i+1 >= len(ms) || ms[i+1].Role != backend.RoleAssistant || !strings.HasPrefix(ms[i+1].Content, "echo: "+m.Content+" ") {
				t.Errorf("%s: input %q is not followed by its reply", session, m.Content)
			}
		}
	}
	if strings.Join(users, "\n") != strings.Join(texts, "\n") {
		t.Errorf("%s: transcript inputs %q, want the admission order %q", session, users, texts)
	}
}

// TestBusySessionSecondDrainer is issue 3, acceptance 5 (second part): a
// second drainer on a session being drained exits 5 at once, or with --wait
// waits for the lease and then drains what is left, never overlapping.
func TestBusySessionSecondDrainer(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		first := c.admitHuman("s1", "FIRST")
		second := c.admitHuman("s1", "SECOND")
		a := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=2s"}, "drain", "s1", "--max", "1", "--", "handler")
		waitStatus(t, c, first.Admission.ID, backend.StatusRunning, 30*time.Second)

		r := c.run(nil, "drain", "s1", "--", "handler")
		if r.code != 5 {
			t.Errorf("second drainer on a busy session: %v\nwant exit 5", r)
		}
		w := c.start(nil, "drain", "s1", "--wait", "--", "handler")
		if code := a.wait(t, time.Minute); code != 0 {
			t.Errorf("first drainer: exit %d\nstderr: %s", code, a.stderr())
		}
		if code := w.wait(t, time.Minute); code != 0 {
			t.Errorf("waiting drainer: exit %d\nstderr: %s", code, w.stderr())
		}
		for _, id := range []string{first.Admission.ID, second.Admission.ID} {
			if got := c.show(id); got.Outcome != backend.OutcomeCompleted {
				t.Errorf("admission %s: %s %q, want completed", id, got.Status, got.Outcome)
			}
		}
		calls := c.calls()
		if len(calls) != 2 {
			t.Errorf("%d handler calls, want 2", len(calls))
		}
		checkNoOverlap(t, calls)
		checkFIFO(t, c, "s1")
	})
}

// TestPauseOnUnknown is issue 3, acceptance 6: by default a drain meeting an
// unknown admission stops with exit 6 naming it; after `resolve --as
// requeue` the next drain runs it.
func TestPauseOnUnknown(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		first := c.admitHuman("s1", "FIRST")
		second := c.admitHuman("s1", "SECOND")
		a := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=1m"}, "drain", "s1", "--lease", "1s", "--", "handler")
		waitStatus(t, c, first.Admission.ID, backend.StatusRunning, 30*time.Second)
		_ = syscall.Kill(-a.pid(), syscall.SIGKILL) // the drainer and its handler: a crash
		a.wait(t, 10*time.Second)

		r := c.run(nil, "drain", "s1", "--wait", "--", "handler")
		if r.code != 6 {
			t.Errorf("drain meeting an unknown admission: %v\nwant exit 6", r)
		}
		if !strings.Contains(r.stderr, first.Admission.ID) {
			t.Errorf("stderr %q does not name the unknown admission %s", r.stderr, first.Admission.ID)
		}
		if got := c.show(first.Admission.ID); got.Status != backend.StatusUnknown {
			t.Errorf("FIRST: %s, want unknown", got.Status)
		}
		if got := c.show(second.Admission.ID); got.Status != backend.StatusQueued {
			t.Errorf("SECOND: %s, want queued behind the paused head", got.Status)
		}
		if st := c.session("s1").State; st != backend.StatePaused {
			t.Errorf("session state %q, want paused", st)
		}
		if n := len(c.calls()); n != 0 {
			t.Errorf("%d handler calls, want 0", n)
		}

		c.ok("resolve", first.Admission.ID, "--as", "requeue")
		if got := c.show(first.Admission.ID); got.Status != backend.StatusQueued {
			t.Errorf("FIRST after resolve: %s, want queued", got.Status)
		}
		c.ok("drain", "s1", "--wait", "--", "handler")
		calls := c.calls()
		if len(calls) != 2 || calls[0].Text != "FIRST" || calls[1].Text != "SECOND" {
			t.Errorf("handler calls %+v, want FIRST then SECOND", calls)
		}
		checkFIFO(t, c, "s1")
	})
}

// TestDrainSignals: SIGINT or SIGTERM during a turn stops taking work: the
// running turn finishes within --grace and is settled, the lease is
// released, and the drainer exits 130 or 143.
func TestDrainSignals(t *testing.T) {
	for _, sig := range []struct {
		name string
		sig  syscall.Signal
		code int
	}{{"SIGINT", syscall.SIGINT, 130}, {"SIGTERM", syscall.SIGTERM, 143}} {
		t.Run(sig.name, func(t *testing.T) {
			forEachStore(t, func(t *testing.T, c *cli) {
				first := c.admitHuman("s1", "FIRST")
				second := c.admitHuman("s1", "SECOND")
				d := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=1s"}, "drain", "s1", "--grace", "1m", "--lease", "1m", "--", "handler")
				waitStatus(t, c, first.Admission.ID, backend.StatusRunning, 30*time.Second)
				d.signal(sig.sig)
				if code := d.wait(t, 2*time.Minute); code != sig.code {
					t.Errorf("drainer exit %d, want %d\nstderr: %s", code, sig.code, d.stderr())
				}
				if got := c.show(first.Admission.ID); got.Outcome != backend.OutcomeCompleted {
					t.Errorf("FIRST: %s %q, want the running turn completed", got.Status, got.Outcome)
				}
				if got := c.show(second.Admission.ID); got.Status != backend.StatusQueued {
					t.Errorf("SECOND: %s, want still queued (no new work after the signal)", got.Status)
				}
				if s := c.session("s1"); s.LeaseHolder != nil && s.LeaseExpiresAt != nil && time.Now().Before(*s.LeaseExpiresAt) {
					t.Errorf("lease still held by %s until %v, want released", *s.LeaseHolder, *s.LeaseExpiresAt)
				}
				// Released: a new drainer without --wait gets it at once.
				c.ok("drain", "s1", "--", "handler")
				checkFIFO(t, c, "s1")
			})
		})
	}
}
