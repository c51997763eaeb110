package acceptance

import (
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// replayOut is one result of replay -o json.
type replayOut struct {
	Result    string            `json:"result"`
	Original  string            `json:"original"`
	Admission backend.Admission `json:"admission"`
}

// TestReplay is issue 9, acceptance 1, on both stores: a failed, an
// interrupted and a misrouted admission are replayed; two identical replays
// started at once, and a third after them, create one new admission each
// (each then runs once); --target re-delivers the misrouted completion as a
// note on the new target; show prints replay_of; the originals are
// unchanged; --dry-run writes nothing; bad selections exit with the
// documented code and write nothing.
func TestReplay(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		// A failed turn.
		failed := c.admitHuman("s1", "FAILS").Admission.ID
		if r := c.run([]string{"HERMESQ_EXAMPLE_FAIL=1"}, "drain", "s1", "--", "handler"); r.code != 6 {
			t.Fatalf("failing turn: %v, want exit 6", r)
		}
		// An interrupted turn: its drainer killed, the next drainer settles
		// it interrupted.
		interrupted := c.admitHuman("s1", "CRASHES").Admission.ID
		d := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=1m"}, "drain", "s1", "--lease", "1s", "--", "handler")
		waitStatus(t, c, interrupted, backend.StatusRunning, 30*time.Second)
		_ = syscall.Kill(-d.pid(), syscall.SIGKILL)
		d.wait(t, 10*time.Second)
		c.ok("drain", "s1", "--wait", "--on-unknown", "interrupt", "--", "handler")
		// A misrouted completion: s2 moved to another lineage.
		c.ok("session", "open", "s2")
		c.ok("session", "switch", "s2", "--transcript", "elsewhere")
		misrouted := c.admitAuto("s2", "process", "[finished] build (exit 0)", "s2", `["completion","p1","1"]`).Admission.ID
		c.exit(6, "drain", "s2", "--", "handler")
		for id, want := range map[string]backend.Outcome{failed: backend.OutcomeFailed, interrupted: backend.OutcomeInterrupted, misrouted: backend.OutcomeFailed} {
			if a := c.show(id); a.Outcome != want {
				t.Fatalf("setup: %s is %s/%s, want %s", id, a.Status, a.Outcome, want)
			}
		}
		if a := c.show(misrouted); a.Error != "misrouted" {
			t.Fatalf("setup: %s error %q, want misrouted", misrouted, a.Error)
		}
		calls0 := len(c.calls())
		before := c.export()

		// --dry-run plans and writes nothing.
		var plan []replayOut
		c.jsonOut(&plan, "replay", "--session", "s1", "--dry-run")
		if len(plan) != 2 || plan[0].Result != "planned" || plan[0].Original != failed || plan[1].Original != interrupted {
			t.Fatalf("dry run: %+v", plan)
		}
		if c.export() != before {
			t.Fatal("replay --dry-run changed the store")
		}

		// Bad selections: nothing written.
		c.exit(4, "replay", c.admitHuman("s3", "QUEUED").Admission.ID)
		before = c.export()
		c.exit(3, "replay", "0123456789abcdef0123456789abcdef")
		c.exit(2, "replay")
		c.exit(2, "replay", failed, "--target", "s1")
		c.exit(2, "replay", failed, "--session", "s1")
		c.exit(2, "replay", "--session", "s1", "--outcome", "bogus")
		c.exit(3, "replay", "--session", "nosuch")
		c.exit(2, "replay", misrouted, "--target", "s1") // a transcript of another session
		if c.export() != before {
			t.Fatal("a refused replay changed the store")
		}

		// Two identical replays at once, then a third: one new admission per
		// original.
		p1 := c.start(nil, "-o", "json", "replay", "--session", "s1", "--outcome", "failed,interrupted")
		p2 := c.start(nil, "-o", "json", "replay", "--session", "s1", "--outcome", "failed,interrupted")
		for _, p := range []*bg{p1, p2} {
			if code := p.wait(t, time.Minute); code != 0 {
				t.Fatalf("concurrent replay exit %d: %s", code, p.stderr())
			}
		}
		var again []replayOut
		c.jsonOut(&again, "replay", "--session", "s1")
		if len(again) != 2 || again[0].Result != "duplicate" || again[1].Result != "duplicate" {
			t.Fatalf("second replay: %+v, want two duplicates", again)
		}
		var byID []replayOut
		c.jsonOut(&byID, "replay", failed)
		if len(byID) != 1 || byID[0].Result != "duplicate" || byID[0].Admission.ID != again[0].Admission.ID {
			t.Fatalf("replay by id after replay by session: %+v", byID)
		}
		as := c.all("s1")
		if len(as) != 4 {
			t.Fatalf("s1 has %d admissions after three identical replays, want 4", len(as))
		}
		replays := map[string]string{} // original → replay
		for _, a := range as[2:] {
			if a.Status != backend.StatusQueued || a.ReplayOf == "" || a.Kind != backend.KindHuman {
				t.Fatalf("replay %+v", a)
			}
			replays[a.ReplayOf] = a.ID
		}
		if replays[failed] == "" || replays[interrupted] == "" {
			t.Fatalf("replays %v do not name %s and %s", replays, failed, interrupted)
		}
		if r := c.ok("show", replays[failed]); !hasLine(r.stdout, "replay of:", failed) {
			t.Fatalf("show does not print replay_of:\n%s", r.stdout)
		}
		if a := c.show(replays[failed]); a.ReplayOf != failed {
			t.Fatalf("show -o json replay_of %q, want %s", a.ReplayOf, failed)
		}
		// The originals are untouched.
		if a := c.show(failed); a.Status != backend.StatusDone || a.Outcome != backend.OutcomeFailed {
			t.Fatalf("original changed: %+v", a)
		}

		// Each replay runs once.
		c.ok("drain", "s1", "--", "handler")
		calls := c.calls()[calls0:]
		if len(calls) != 2 || calls[0].Text != "FAILS" || calls[1].Text != "CRASHES" {
			t.Fatalf("handler calls after replay: %+v, want FAILS then CRASHES once each", calls)
		}
		for _, id := range replays {
			if a := c.show(id); a.Outcome != backend.OutcomeCompleted || a.Mode != backend.ModeTurn {
				t.Fatalf("replay %s: %s/%s %s", id, a.Status, a.Outcome, a.Mode)
			}
		}
		// Replaying by session again after they ran creates nothing; --again
		// does, once.
		c.jsonOut(&again, "replay", "--session", "s1", "--outcome", "failed,interrupted,completed")
		for _, r := range again {
			if r.Result != "duplicate" {
				t.Fatalf("replay by session after the replays ran: %+v", again)
			}
		}
		var more []replayOut
		c.jsonOut(&more, "replay", failed, "--again")
		if len(more) != 1 || more[0].Result != "replayed" || more[0].Admission.ID == replays[failed] || more[0].Admission.ReplayOf != failed {
			t.Fatalf("replay --again: %+v", more)
		}
		if n := len(c.all("s1")); n != 5 {
			t.Fatalf("%d admissions after --again, want 5", n)
		}

		// --target re-delivers the misrouted completion as a note on the new
		// target (nobody watches s2).
		var moved []replayOut
		c.jsonOut(&moved, "replay", misrouted, "--target", "elsewhere")
		if len(moved) != 1 || moved[0].Result != "replayed" || moved[0].Admission.PinnedTarget != "elsewhere" {
			t.Fatalf("replay --target: %+v", moved)
		}
		c.jsonOut(&moved, "replay", misrouted, "--target", "elsewhere")
		if len(moved) != 1 || moved[0].Result != "duplicate" {
			t.Fatalf("second replay --target: %+v", moved)
		}
		c.ok("drain", "s2", "--", "handler")
		ms := c.messages("elsewhere")
		if len(ms) != 1 || ms[0].Role != backend.RoleNote || ms[0].Content != "[finished] build (exit 0)" || ms[0].AdmissionID != moved[0].Admission.ID {
			t.Fatalf("transcript elsewhere: %+v, want the one note of the replay", ms)
		}
		if len(c.messages("s2")) != 0 {
			t.Fatal("the old target got a message")
		}
		if a := c.show(moved[0].Admission.ID); a.Mode != backend.ModeNote || a.DeliveredTo != "elsewhere" || a.ReplayOf != misrouted {
			t.Fatalf("re-delivered replay: %+v", a)
		}
		if n := len(c.calls()) - calls0; n != 2 {
			t.Fatalf("%d handler calls in all, want 2 (the note called none)", n)
		}
	})
}

// hasLine reports whether text has a line starting with prefix and ending
// with suffix.
func hasLine(text, prefix, suffix string) bool {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, prefix) && strings.HasSuffix(strings.TrimSpace(l), suffix) {
			return true
		}
	}
	return false
}

// TestReplayVolume is issue 9, acceptance 1 at admit --batch volume, on both
// stores: 600 settled admissions replayed by session (several store calls),
// then again: 600 new admissions the first time, none the second.
func TestReplayVolume(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		const n = 600
		var b strings.Builder
		for i := 0; i < n; i++ {
			fmt.Fprintf(&b, `{"session":"s1","producer":"ci","identities":["build:%d"],"text":"[finished] build %d"}`+"\n", i, i)
		}
		c.ok("session", "open", "s1")
		if r := c.runStdin(b.String(), "admit", "--batch", "-"); r.code != 0 {
			t.Fatalf("%v", r)
		}
		c.ok("drain", "s1") // notes: nobody watches
		var first, second []replayOut
		c.jsonOut(&first, "replay", "--session", "s1", "--outcome", "completed")
		c.jsonOut(&second, "replay", "--session", "s1", "--outcome", "completed")
		count := func(rs []replayOut, result string) int {
			k := 0
			for _, r := range rs {
				if r.Result == result {
					k++
				}
			}
			return k
		}
		if len(first) != n || count(first, "replayed") != n {
			t.Fatalf("first replay: %d results, %d replayed; want %d", len(first), count(first, "replayed"), n)
		}
		if len(second) != n || count(second, "duplicate") != n {
			t.Fatalf("second replay: %d results, %d duplicates; want %d", len(second), count(second, "duplicate"), n)
		}
		var queued []backend.Admission
		c.jsonOut(&queued, "queue", "s1", "--status", "queued")
		if len(queued) != n {
			t.Fatalf("%d replays queued, want %d", len(queued), n)
		}
		for i, a := range queued {
			if a.ReplayOf != first[i].Original || a.Text() != fmt.Sprintf("[finished] build %d", i) {
				t.Fatalf("replay %d: %+v", i, a)
			}
		}
	})
}
