package acceptance

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// stateOutbox opens producer name's outbox in c's state folder, as the
// commands that record events do.
func stateOutbox(t *testing.T, c *cli, name string) *producer.Outbox {
	t.Helper()
	ob, err := producer.OpenOutbox(filepath.Join(c.dir, "state", "hermesq", "producers", name), producer.OutboxOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ob
}

func record(t *testing.T, ob *producer.Outbox, evs ...producer.Event) {
	t.Helper()
	if n, err := ob.AddAll(context.Background(), evs); err != nil || n != len(evs) {
		t.Fatalf("outbox: added %d of %d: %v", n, len(evs), err)
	}
}

// noteCounts counts, for each marker, the notes of transcript s holding it
// and how often it occurs in them.
func noteCounts(ms []backend.Message, marker string) (notes, occurrences int) {
	for _, m := range ms {
		if m.Role == backend.RoleNote && strings.Contains(m.Content, marker) {
			notes++
			occurrences += strings.Count(m.Content, marker)
		}
	}
	return notes, occurrences
}

// TestProducerGroupsFitTheLimit (issue 23, acceptance 1): 256 delegation
// results of 2,100 bytes and 2 of 600 KB for one session: each alone fits
// the payload limit, together they compose far more (each text is held
// twice in a composed payload). Every one is admitted, in as many
// admissions as the limit needs, and noted exactly once; none rejected.
func TestProducerGroupsFitTheLimit(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.ok("session", "open", "s1")
		var ids []string
		for i := range 256 {
			id := fmt.Sprintf("small-%03d", i)
			ids = append(ids, id)
			result := fmt.Sprintf("MARK<%s>", id) + strings.Repeat("r", 2100-len(id)-6)
			c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", id, "--result", result)
		}
		for i := range 2 {
			id := fmt.Sprintf("large-%d", i)
			ids = append(ids, id)
			f := filepath.Join(t.TempDir(), id)
			if err := os.WriteFile(f, []byte(fmt.Sprintf("MARK<%s>", id)+strings.Repeat("L", 600<<10)), 0o600); err != nil {
				t.Fatal(err)
			}
			c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", id, "--result-file", f)
		}
		c.ok("producers", "run", "--once")

		as := c.all("s1")
		if len(as) < 3 || len(as) > 8 {
			t.Errorf("%d admissions, want a few: as many as the limit needs", len(as))
		}
		n := 0
		for _, a := range as {
			n += len(a.Identities)
		}
		if n != len(ids) {
			t.Errorf("admissions hold %d identities, want %d", n, len(ids))
		}
		for id, e := range c.outbox("delegation") {
			if e.State != producer.StateDelivered {
				t.Errorf("outbox %s: %s (%s), want delivered", id, e.State, e.Reason)
			}
		}
		c.ok("drain", "s1")
		ms := c.messages("s1")
		for _, id := range ids {
			if notes, occ := noteCounts(ms, "MARK<"+id+">"); notes != 1 || occ != 1 {
				t.Errorf("%s: in %d notes, %d times; want once", id, notes, occ)
			}
		}
	})
}

// TestProducerWaitsForTheSession (issue 23, acceptance 2): an event for a
// session not yet opened is not dropped: producers run --once exits 6 with
// one line saying what waits and why; the event stays pending with its
// reason and a not-before time that grows at each refusal (producers
// outbox). Once the session is open and the not-before time has passed,
// the next run admits it, noted once.
func TestProducerWaitsForTheSession(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.env = append(c.env, "HERMESQ_PRODUCER_BACKOFF=300ms")
		c.ok("session", "open", "other") // the store exists
		record(t, stateOutbox(t, c, "delegation"),
			producer.Event{Session: "later", Target: "later", Identity: delegationID("A"), Text: "[delegation A] RESULT_later"})
		id := delegationID("A")

		var delays []time.Duration
		for range 3 {
			r := c.exit(6, "producers", "run", "--once")
			if !regexp.MustCompile(`hermesq: producer delegation: 1 event waiting after a refusal \(oldest added .* ago; producers outbox delegation\): .*later`).MatchString(r.stderr) {
				t.Errorf("stderr does not say what waits and why:\n%s", r.stderr)
			}
			e := c.outbox("delegation")[id]
			if e.State != producer.StatePending || !strings.Contains(e.Reason, "later") || e.NotBefore.IsZero() || e.RefusedAt.IsZero() {
				t.Fatalf("A after a refusal: %+v, want pending with the reason and a not-before time", e)
			}
			delays = append(delays, e.NotBefore.Sub(e.RefusedAt))
			time.Sleep(time.Until(e.NotBefore.Add(20 * time.Millisecond)))
		}
		if !(delays[0] < delays[1] && delays[1] < delays[2]) {
			t.Errorf("waits %v, want each longer than the last", delays)
		}
		if r := c.ok("producers", "outbox", "delegation"); !strings.Contains(r.stdout, "NOT BEFORE") || !strings.Contains(r.stdout, "session later") {
			t.Errorf("producers outbox does not show the wait and its reason:\n%s", r.stdout)
		}

		c.ok("session", "open", "later")
		deliveredOnce(t, c, c, "later", id, "RESULT_later", "A after the session opened")
	})
}

// TestProducerWaitsForTheGrant (issue 23, acceptance 2, Redis ACL users):
// the host admits as ACL user dave, who has no grant on alice's session:
// the event waits (exit 6, the reason forbidden) instead of being
// dropped; once alice grants dave the delegation producer, the next run
// admits it, noted once.
func TestProducerWaitsForTheGrant(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
	alice := newCLI(t, aclUser(t, srv, "alice", "alice-pw-1"))
	dave := withPlugins(t, newCLI(t, aclUser(t, srv, "dave", "dave-pw-1")), "delegation")
	dave.env = append(dave.env, "HERMESQ_PRODUCER_BACKOFF=200ms")
	alice.ok("session", "open", "s1")
	id := delegationID("G")
	record(t, stateOutbox(t, dave, "delegation"),
		producer.Event{Session: "s1", Target: "s1", Identity: id, Text: "[delegation G] RESULT_granted"})

	r := dave.exit(6, "producers", "run", "--once")
	if !strings.Contains(r.stderr, "1 event waiting after a refusal") {
		t.Errorf("stderr:\n%s", r.stderr)
	}
	e := dave.outbox("delegation")[id]
	if e.State != producer.StatePending || e.Reason == "" || e.NotBefore.IsZero() {
		t.Fatalf("G refused: %+v, want pending with the reason and a not-before time", e)
	}
	if len(alice.all("s1")) != 0 {
		t.Fatal("admitted without a grant")
	}

	alice.ok("session", "grant", "s1", "dave", "--role", "writer", "--producer", "delegation")
	deliveredOnce(t, dave, alice, "s1", id, "RESULT_granted", "G after the grant")
}

// TestProducerCallDeadlines (issue 23, acceptance 3): plugins that hang in
// Poll and in Settle are killed at their deadline and named; producers run
// --once returns within its documented bound with exit 8, and the
// delegation plugin beside them delivers its events.
func TestProducerCallDeadlines(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation", "hangpoll", "hangsettle")
		c.env = append(c.env, "HERMESQ_PRODUCER_POLL_DEADLINE=1s", "HERMESQ_PRODUCER_SETTLE_DEADLINE=1s")
		c.ok("session", "open", "s1")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
		record(t, stateOutbox(t, c, "hangsettle"), producer.Event{Session: "s1", Target: "s1", Identity: "H1", Text: "[hangsettle] H1"})

		start := time.Now()
		r := c.exit(8, "producers", "run", "--once")
		// The bound: 3 x (start timeout 2s + 1s + 1s + 3s) + 0.6s.
		if took := time.Since(start); took > 60*time.Second {
			t.Errorf("producers run --once took %s", took)
		}
		for _, want := range []string{
			"hermesq: producer hangpoll: poll did not return within 1s (producer_poll_deadline); plugin killed; restarting in 200ms",
			"hermesq: producer hangsettle: settle did not return within 1s (producer_settle_deadline); plugin killed; restarting in 200ms",
			"hangpoll (poll did not return within 1s (producer_poll_deadline); plugin killed (gave up after 3 starts))",
			"hangsettle (settle did not return within 1s (producer_settle_deadline); plugin killed",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		if e := c.outbox("delegation")[delegationID("A")]; e.State != producer.StateDelivered {
			t.Errorf("delegation's A: %+v, want delivered", e)
		}
		// hangsettle's event was admitted, its settle lost: once, and
		// pending until its lease brings it back.
		if as := c.all("s1"); len(as) != 2 {
			t.Errorf("%d admissions, want A and H1", len(as))
		}
		if e := c.outbox("hangsettle")["H1"]; e.State != producer.StatePending {
			t.Errorf("H1: %+v, want pending", e)
		}
	})
}

// TestProducerOutcomes (issue 23): a plugin reporting a permanent failure
// is started once, its message shown, exit 8; a poll error says what
// happens, without "poll: poll:"; a panic's stack is logged once.
func TestProducerOutcomes(t *testing.T) {
	c := withPlugins(t, newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db")), "badconfig", "pollerror", "panicpoll")
	c.ok("session", "open", "s1")
	record(t, stateOutbox(t, c, "panicpoll"), producer.Event{Session: "s1", Target: "s1", Identity: "P1", Text: "[panicpoll] P1"})
	record(t, stateOutbox(t, c, "pollerror"), producer.Event{Session: "s1", Target: "s1", Identity: "E1", Text: "[pollerror] E1"})
	r := c.exit(8, "producers", "run", "--once")
	for _, want := range []string{
		`hermesq: producer badconfig: failed: configuration: watches[0].path "log" is not absolute (a permanent failure: not restarted)`,
		"hermesq: producer pollerror: poll failed: disk on fire; polling again in 1s",
		"hermesq: producer pollerror: failed: poll failed: disk on fire (3 polls in a row)",
		"hermesq: producer panicpoll: panic: panicking in poll with 1 offers claimed",
	} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, bad := range []string{"poll: poll:", "badconfig: failed: configuration: watches[0].path \"log\" is not absolute; restarting"} {
		if strings.Contains(r.stderr, bad) {
			t.Errorf("stderr holds %q:\n%s", bad, r.stderr)
		}
	}
	if n := strings.Count(r.stderr, "badconfig: failed"); n != 1 {
		t.Errorf("badconfig reported %d times, want once:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "panic: panicking in poll"); n != 1 {
		t.Errorf("the panic is logged %d times, want once:\n%s", n, r.stderr)
	}
	if n := strings.Count(r.stderr, "goroutine "); n < 1 || n > 2 {
		t.Errorf("the panic's stack: %d goroutine headers, want it once:\n%s", n, r.stderr)
	}
}

// TestProducerReports (issue 23, acceptance 7): events waiting after a
// refusal and rejected events are reported by stats (Prometheus, parsed
// with expfmt; JSON), producers ls and check, which turns critical once an
// event has waited longer than its threshold.
func TestProducerReports(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.env = append(c.env, "HERMESQ_PRODUCER_BACKOFF=1h")
		c.ok("session", "open", "s1")
		record(t, stateOutbox(t, c, "delegation"),
			producer.Event{Session: "nosuch", Target: "nosuch", Identity: delegationID("W1"), Text: "[delegation W1] waits"},
			producer.Event{Session: "nosuch", Target: "nosuch", Identity: delegationID("W2"), Text: "[delegation W2] waits"},
			producer.Event{Session: "s1", Target: "s1", Identity: delegationID("OK"), Text: "[delegation OK] goes in"},
			producer.Event{Session: "s1", Target: "bad target", Identity: delegationID("BAD"), Text: "[delegation BAD] invalid"})
		r := c.exit(6, "producers", "run", "--once")
		if !strings.Contains(r.stderr, "hermesq: producer delegation: 1 event rejected as invalid in this run") ||
			!strings.Contains(r.stderr, "hermesq: producer delegation: 2 events waiting after a refusal") {
			t.Errorf("stderr:\n%s", r.stderr)
		}

		fams := promStats(t, c)
		for name, want := range map[string]float64{
			"hermesq_producer_pending": 2, "hermesq_producer_waiting": 2, "hermesq_producer_rejected": 1,
		} {
			if got := sample(t, fams, name, "producer", "delegation"); got != want {
				t.Errorf("%s = %v, want %v", name, got, want)
			}
		}
		if age := sample(t, fams, "hermesq_producer_waiting_oldest_age_seconds", "producer", "delegation"); age <= 0 || age > 600 {
			t.Errorf("oldest waiting age %v s", age)
		}
		var js struct {
			Producers []struct {
				Producer   string `json:"producer"`
				Waiting    int    `json:"waiting"`
				Rejected   int    `json:"rejected"`
				Delivered  int    `json:"delivered"`
				LastReason string `json:"last_reason"`
			} `json:"producers"`
		}
		c.jsonOut(&js, "stats")
		if len(js.Producers) != 1 || js.Producers[0].Waiting != 2 || js.Producers[0].Rejected != 1 || js.Producers[0].Delivered != 1 ||
			!strings.Contains(js.Producers[0].LastReason, "nosuch") {
			t.Errorf("stats -o json producers: %+v", js.Producers)
		}
		if r := c.ok("producers", "ls"); !strings.Contains(r.stdout, "2/2/1/1/0") {
			t.Errorf("producers ls:\n%s", r.stdout)
		}

		// Waiting for less than the threshold: named, not critical; the
		// rejected event: WARNING.
		r = c.exit(1, "check", "--producer-wait-crit", "1h")
		if !strings.Contains(r.stdout, "producer delegation: 2 waiting after a refusal") || !strings.Contains(r.stdout, "producer delegation: 1 rejected") ||
			!strings.Contains(r.stdout, "producer_waiting=2;") || !strings.Contains(r.stdout, "producer_rejected=1;") {
			t.Errorf("check below the threshold: %s", r.stdout)
		}
		time.Sleep(1100 * time.Millisecond)
		r = c.exit(2, "check", "--producer-wait-crit", "1s")
		if !strings.HasPrefix(r.stdout, "HERMESQ CRITICAL - producer delegation: 2 waiting after a refusal, oldest ") {
			t.Errorf("check past the threshold: %s", r.stdout)
		}
		c.env = append(c.env, "HERMESQ_PRODUCER_WAIT_CRIT=1s")
		c.exit(2, "check")

		// The operator drops them: nothing left to report.
		var es []producer.Entry
		c.jsonOut(&es, "producers", "outbox", "delegation")
		var seqs []string
		for _, e := range es {
			if e.State == producer.StatePending || e.State == producer.StateRejected {
				seqs = append(seqs, fmt.Sprint(e.Seq))
			}
		}
		c.exit(3, append([]string{"producers", "outbox", "drop", "delegation", "999"}, seqs...)...)
		c.ok(append([]string{"producers", "outbox", "drop", "delegation"}, seqs...)...)
		c.ok("check")
		c.ok("producers", "run", "--once")
		if got := sample(t, promStats(t, c), "hermesq_producer_waiting", "producer", "delegation"); got != 0 {
			t.Errorf("waiting after the drop: %v", got)
		}
	})
}

// deliveredOnce checks that delegation event id, refused and waiting until
// its not-before time, is delivered by the next producers run --once of
// host once that time has passed, and noted once in session (drained by
// owner), marked by marker. what names the event and the mend.
func deliveredOnce(t *testing.T, host, owner *cli, session, id, marker, what string) {
	t.Helper()
	e := host.outbox("delegation")[id]
	time.Sleep(time.Until(e.NotBefore.Add(20 * time.Millisecond)))
	host.ok("producers", "run", "--once")
	if e := host.outbox("delegation")[id]; e.State != producer.StateDelivered {
		t.Fatalf("%s: %+v, want delivered", what, e)
	}
	owner.ok("drain", session)
	if notes, occ := noteCounts(owner.messages(session), marker); notes != 1 || occ != 1 {
		t.Fatalf("%s: noted in %d notes, %d times; want once", what, notes, occ)
	}
}
