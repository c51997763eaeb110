package acceptance

import (
	"context"
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// testLease is the producers' claim lease in these tests: short, so a lost
// acknowledgement is re-offered soon.
const testLease = time.Second

// withPlugins gives c a plugin folder holding the named plugins of the
// test build (delegation, process, or a name the misbehaving test plugin
// answers to), a short claim lease and a short handshake timeout.
func withPlugins(t *testing.T, c *cli, names ...string) *cli {
	t.Helper()
	bin, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.dir, "plugins")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, n := range names {
		src := filepath.Join(bin, "hermesq-producer-"+n)
		if n != "delegation" && n != "process" && n != "watch" {
			src = filepath.Join(bin, "badproducer")
		}
		if err := os.Symlink(src, filepath.Join(dir, "hermesq-producer-"+n)); err != nil {
			t.Fatal(err)
		}
	}
	d := *c
	d.env = append(slices.Clone(c.env),
		"HERMESQ_PLUGIN_DIR="+dir,
		"HERMESQ_PRODUCER_LEASE="+testLease.String(),
		"HERMESQ_PRODUCER_START_TIMEOUT=2s",
		"HERMESQ_PRODUCER_POLL=50ms",
	)
	return &d
}

// outbox returns producer name's outbox entries by identity.
func (c *cli) outbox(name string) map[string]producer.Entry {
	c.t.Helper()
	var es []producer.Entry
	c.jsonOut(&es, "producers", "outbox", name)
	m := map[string]producer.Entry{}
	for _, e := range es {
		m[e.Identity] = e
	}
	return m
}

// waitClaimExpired waits until the claim of identity id in producer name's
// outbox is past its lease.
func waitClaimExpired(t *testing.T, c *cli, name, id string) {
	t.Helper()
	e := c.outbox(name)[id]
	if e.Claim == "" {
		t.Fatalf("%s is not claimed: %+v", id, e)
	}
	time.Sleep(time.Until(e.ClaimedAt.Add(testLease + 50*time.Millisecond)))
}

func delegationID(d string) string { return producer.Identity("async_delegation", d, "") }

func notesWith(ms []backend.Message, s string) int {
	n := 0
	for _, m := range ms {
		if m.Role == backend.RoleNote && strings.Contains(m.Content, s) {
			n++
		}
	}
	return n
}

func findAdmission(as []backend.Admission, identity string) (backend.Admission, bool) {
	for _, a := range as {
		if slices.Contains(a.Identities, identity) {
			return a, true
		}
	}
	return backend.Admission{}, false
}

// runLostAck runs producers run --once with the plugin of producer name
// (delegation or process) replaced by the misbehaving test plugin in mode
// killhost: it serves the same outbox, and SIGKILLs the host at the first
// settle that completes a claim, before recording it: the admission is
// durable, its acknowledgement lost.
func runLostAck(t *testing.T, c *cli, name string) {
	t.Helper()
	bin, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(c.dir, "plugins", "hermesq-producer-"+name)
	swap := func(to string) {
		t.Helper()
		if err := os.Remove(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(bin, to), link); err != nil {
			t.Fatal(err)
		}
	}
	swap("badproducer")
	defer swap("hermesq-producer-" + name)
	cfg := filepath.Join(t.TempDir(), "killhost.yaml")
	yaml := fmt.Sprintf("producers:\n  %s:\n    config:\n      mode: killhost\n      coalesce: %v\n", name, name == "delegation")
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := c.command([]string{"HERMESQ_CONFIG=" + cfg}, "producers", "run", "--once")
	out, err := cmd.CombinedOutput()
	ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !ok || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("want the host killed by SIGKILL after the admit: %v\n%s", err, out)
	}
}

// TestProducerRegroupAfterNote is issue 8, acceptance 1, through the
// delegation plugin: A is admitted and noted but its acknowledgement lost;
// after A's lease the plugin offers [A, B] as one group with a part each:
// A resolves to its admission, B's admission holds B's part alone, and the
// transcript holds exactly one note with each result.
func TestProducerRegroupAfterNote(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.ok("session", "open", "s1")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
		runLostAck(t, c, "delegation")
		c.ok("drain", "s1")
		if n := notesWith(c.messages("s1"), "RESULT_alpha"); n != 1 {
			t.Fatalf("%d notes with A's result after the first drain, want 1", n)
		}
		waitClaimExpired(t, c, "delegation", delegationID("A"))
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "B", "--result", "RESULT_bravo")
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")

		ms := c.messages("s1")
		if a, b := notesWith(ms, "RESULT_alpha"), notesWith(ms, "RESULT_bravo"); a != 1 || b != 1 {
			t.Fatalf("notes with A's result %d, with B's %d; want 1 each: %+v", a, b, ms)
		}
		as := c.all("s1")
		if len(as) != 2 {
			t.Fatalf("%d admissions, want 2: %+v", len(as), as)
		}
		b, ok := findAdmission(as, delegationID("B"))
		if !ok || !slices.Equal(b.Identities, []string{delegationID("B")}) {
			t.Fatalf("B's admission %+v, want one holding B alone", b)
		}
		if got, want := string(b.Payload), `{"text":"[delegation B] RESULT_bravo"}`; got != want {
			t.Fatalf("B's payload %s, want only B's part %s", got, want)
		}
		ob := c.outbox("delegation")
		if ob[delegationID("A")].Attempts != 2 {
			t.Errorf("A's attempts %d, want 2 (offered, then re-offered with B)", ob[delegationID("A")].Attempts)
		}
		for _, id := range []string{delegationID("A"), delegationID("B")} {
			if ob[id].State != producer.StateDelivered {
				t.Errorf("outbox %s: %s, want delivered", id, ob[id].State)
			}
		}
	})
}

// TestProducerLostAckRestart is issue 8, acceptance 2: the host is killed
// (SIGKILL) after admitting A and before settling it; a new host after A's
// lease offers A again with a fresh B: A resolves to its admission, B is
// admitted; after a drain exactly one note each, two completed admissions,
// both outbox entries delivered.
func TestProducerLostAckRestart(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		c.ok("session", "open", "s1")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
		runLostAck(t, c, "delegation")
		as := c.all("s1")
		if len(as) != 1 || as[0].Status != backend.StatusQueued {
			t.Fatalf("after the killed host: %+v, want A's admission queued", as)
		}
		aID := as[0].ID
		if e := c.outbox("delegation")[delegationID("A")]; e.State != producer.StatePending || e.Claim == "" {
			t.Fatalf("A in the outbox: %+v, want pending under the dead host's claim", e)
		}
		waitClaimExpired(t, c, "delegation", delegationID("A"))
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "B", "--result", "RESULT_bravo")
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")

		as = c.all("s1")
		if len(as) != 2 {
			t.Fatalf("%d admissions, want 2: %+v", len(as), as)
		}
		if a, _ := findAdmission(as, delegationID("A")); a.ID != aID {
			t.Errorf("A resolved to %s, want its first admission %s", a.ID, aID)
		}
		for _, a := range as {
			if a.Outcome != backend.OutcomeCompleted {
				t.Errorf("admission %s: %s/%s, want completed", a.ID, a.Status, a.Outcome)
			}
		}
		ms := c.messages("s1")
		if a, b := notesWith(ms, "RESULT_alpha"), notesWith(ms, "RESULT_bravo"); a != 1 || b != 1 || len(ms) != 2 {
			t.Fatalf("notes with A %d, with B %d, messages %d; want 1, 1, 2", a, b, len(ms))
		}
		for id, e := range c.outbox("delegation") {
			if e.State != producer.StateDelivered {
				t.Errorf("outbox %s: %s, want delivered", id, e.State)
			}
		}
	})
}

// TestProducerPluginFailures is issue 8, acceptance 6: plugins that crash
// before the handshake, hang at it, speak another protocol version, fail
// their pinned checksum, or crash in a poll are each reported on stderr
// with their name and exit 8; the delegation plugin beside them delivers
// everything; nothing is lost or doubled (outbox and export compared).
func TestProducerPluginFailures(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation", "crash", "hang", "oldproto", "crashpoll", "pinned")
		c.env = append(c.env, "HERMESQ_PRODUCER_START_TIMEOUT=1s")
		// pinned is the delegation plugin, pinned to another checksum.
		bin, _ := buildAll()
		if err := os.Remove(filepath.Join(c.dir, "plugins", "hermesq-producer-pinned")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join(bin, "hermesq-producer-delegation"), filepath.Join(c.dir, "plugins", "hermesq-producer-pinned")); err != nil {
			t.Fatal(err)
		}
		cfg := filepath.Join(c.dir, "config.yaml")
		if err := os.WriteFile(cfg, []byte("producers:\n  pinned:\n    sha256: "+strings.Repeat("ab", 32)+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		c.env = append(c.env, "HERMESQ_CONFIG="+cfg)
		delegationBin, err := os.ReadFile(filepath.Join(bin, "hermesq-producer-delegation"))
		if err != nil {
			t.Fatal(err)
		}
		delegationSum := fmt.Sprintf("%x", sha256.Sum256(delegationBin))

		c.ok("session", "open", "s1")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "B", "--result", "RESULT_bravo")
		// The crashpoll plugin's own events, written to its outbox as the
		// commands of a producer would.
		ob, err := producer.OpenOutbox(filepath.Join(c.dir, "state", "hermesq", "producers", "crashpoll"), producer.OutboxOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{"C1", "C2"} {
			if _, err := ob.Add(context.Background(), producer.Event{Session: "s1", Target: "s1", Identity: id, Text: "[crashpoll] " + id}); err != nil {
				t.Fatal(err)
			}
		}
		before := c.export()

		r := c.exit(8, "producers", "run", "--once")
		for _, want := range []string{
			"hermesq: producer crash: failed: exited before the handshake: crash: giving up before the handshake (gave up after 3 starts)",
			"hermesq: producer crash: exited before the handshake: crash: giving up before the handshake; restarting in 200ms",
			"hermesq: producer crash: crash: giving up before the handshake",
			"hermesq: producer hang: failed: hung at handshake",
			"hermesq: producer oldproto: failed: speaks another protocol version",
			"hermesq: producer pinned: failed: sha256 checksum does not match the one pinned in the configuration; not started (" +
				filepath.Join(c.dir, "plugins", "hermesq-producer-pinned") + " has sha256 " + delegationSum + ", pinned " + strings.Repeat("ab", 32) + ")",
			"hermesq: producer crashpoll: crashing in poll with 2 offers claimed",
			"hermesq: producer crashpoll: plugin exited",
		} {
			if !strings.Contains(r.stderr, want) {
				t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
			}
		}
		last := strings.Split(strings.TrimSpace(r.stderr), "\n")
		if l := last[len(last)-1]; !strings.HasPrefix(l, "hermesq: error: producers: 4 plugins failed: crash (") {
			t.Errorf("last stderr line %q, want the one-line summary of the 4 failed plugins", l)
		}
		if strings.Contains(r.stderr, "crashpoll (") {
			t.Errorf("crashpoll was restarted and ended cleanly, but is reported failed:\n%s", r.stderr)
		}
		if r.stdout != "" {
			t.Errorf("stdout %q, want nothing", r.stdout)
		}

		as := c.all("s1")
		if len(as) != 1 || !slices.Equal(as[0].Identities, []string{delegationID("A"), delegationID("B")}) {
			t.Fatalf("admissions %+v, want the delegation plugin's one coalesced admission of A and B", as)
		}
		for id, e := range c.outbox("delegation") {
			if e.State != producer.StateDelivered || e.Attempts != 1 {
				t.Errorf("delegation outbox %s: %s after %d attempts, want delivered after 1", id, e.State, e.Attempts)
			}
		}
		// crashpoll's events were claimed by the poll it died in: kept,
		// offered again once the lease runs out (to its restarted self if
		// the restart came that late), admitted once.
		if e := c.outbox("crashpoll")["C1"]; e.State == producer.StatePending {
			waitClaimExpired(t, c, "crashpoll", "C1")
		}
		c.exit(8, "producers", "run", "--once")
		after := c.export()
		c.exit(8, "producers", "run", "--once")
		if again := c.export(); again != after {
			t.Errorf("a third run changed the store:\n%s\n---\n%s", after, again)
		}
		if before == after {
			t.Errorf("the store did not change")
		}
		as = c.all("s1")
		if len(as) != 3 {
			t.Fatalf("%d admissions, want 3 (A+B, C1, C2): %+v", len(as), as)
		}
		for id, e := range c.outbox("crashpoll") {
			if e.State != producer.StateDelivered {
				t.Errorf("crashpoll outbox %s: %s, want delivered", id, e.State)
			}
		}
		c.ok("drain", "s1")
		ms := c.messages("s1")
		if len(ms) != 3 || notesWith(ms, "C1") != 1 || notesWith(ms, "C2") != 1 || notesWith(ms, "RESULT_alpha") != 1 {
			t.Fatalf("transcript %+v, want 3 notes: A+B, C1, C2", ms)
		}
	})
}

// TestProducersRunKeepsOthersRunning: without --once, a plugin that keeps
// crashing is restarted with backoff while the delegation plugin delivers
// what arrives; SIGTERM stops the host (143) and its plugins with it.
func TestProducersRunKeepsOthersRunning(t *testing.T) {
	c := withPlugins(t, newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db")), "delegation", "crash")
	c.ok("session", "open", "s1")
	host := c.start(nil, "producers", "run")
	c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
	eventually(t, time.Minute, "A admitted by the running host", func() bool { return len(c.all("s1")) == 1 })
	eventually(t, time.Minute, "the crashing plugin restarted", func() bool {
		return strings.Contains(host.stderr(), "hermesq: producer crash: exited before the handshake: crash: giving up before the handshake; restarting in")
	})
	host.signal(syscall.SIGTERM)
	if code := host.wait(t, time.Minute); code != 143 {
		t.Fatalf("exit %d after SIGTERM, want 143\n%s", code, host.stderr())
	}
	if e := c.outbox("delegation")[delegationID("A")]; e.State != producer.StateDelivered {
		t.Fatalf("A: %+v, want delivered", e)
	}
}

// TestPluginPermissions (issue 11, acceptance 4): a plugin binary writable
// by group is not run (the plugin fails, saying how to repair), a plugin
// folder writable by others makes producers run refuse everything (exit 7,
// one line), and doctor reports both.
func TestPluginPermissions(t *testing.T) {
	c := withPlugins(t, newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db")))
	bin, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.dir, "plugins")
	data, err := os.ReadFile(filepath.Join(bin, "hermesq-producer-delegation"))
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(dir, "hermesq-producer-delegation")
	if err := os.WriteFile(plugin, data, 0o700); err != nil {
		t.Fatal(err)
	}
	c.ok("session", "open", "s1")
	c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
	before := c.export()

	if err := os.Chmod(plugin, 0o775); err != nil {
		t.Fatal(err)
	}
	r := c.exit(8, "producers", "run", "--once")
	if !strings.Contains(r.stderr, "writable by group or others") || !strings.Contains(r.stderr, "chmod go-w "+plugin) {
		t.Errorf("a group-writable plugin binary: %v", r)
	}
	if got := c.export(); got != before {
		t.Error("a refused plugin changed the store")
	}
	r = c.exit(1, "doctor")
	if !strings.Contains(r.stdout, "fail  plugin binary") {
		t.Errorf("doctor does not report the group-writable binary:\n%s", r.stdout)
	}

	if err := os.Chmod(plugin, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	r = c.exit(7, "producers", "run", "--once")
	if err := oneLineError(r.stderr, false); err != nil || !strings.Contains(r.stderr, "plugin folder "+dir+" is writable by group or others") {
		t.Errorf("a world-writable plugin folder: %v (%v)", r, err)
	}
	r = c.exit(1, "doctor")
	if !strings.Contains(r.stdout, "fail  plugin folder") {
		t.Errorf("doctor does not report the world-writable folder:\n%s", r.stdout)
	}

	// Repaired, the plugin runs.
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	c.ok("producers", "run", "--once")
	c.ok("doctor")
}

// TestProducersRunWithoutHost: hermesq hands `producers run` to
// hermesq-producers, found beside it (the other tests) or on PATH; with
// neither, it exits 1 with one line saying what to install, and starts
// nothing.
func TestProducersRunWithoutHost(t *testing.T) {
	c := withPlugins(t, newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db")), "delegation")
	c.bin = aloneCopy(t, c.bin)
	r := c.run([]string{"PATH=/usr/bin:/bin"}, "producers", "run", "--once")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "hermesq-producers") {
		t.Fatalf("producers run without hermesq-producers: want exit 1 and one line naming it: %v", r)
	}
	if strings.Contains(r.stderr, "producer delegation") {
		t.Errorf("a plugin was started: %s", r.stderr)
	}
	// doctor, with a plugin installed, says the host is missing.
	c.ok("session", "open", "s1")
	r = c.run([]string{"PATH=/usr/bin:/bin"}, "doctor")
	if r.code != 1 || !regexp.MustCompile(`(?m)^fail +producer host +hermesq-producers`).MatchString(r.stdout) {
		t.Errorf("doctor without hermesq-producers: want exit 1 and a failed producer host check: %v", r)
	}
	c.bin = hermesqBin(t)
	if r := c.ok("doctor"); !regexp.MustCompile(`(?m)^ok +producer host +/.*/hermesq-producers$`).MatchString(r.stdout) {
		t.Errorf("doctor beside hermesq-producers: want the producer host found: %v", r)
	}
}
