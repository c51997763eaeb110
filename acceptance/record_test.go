package acceptance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// TestRecordTimeChecks is issue 23, acceptance 5 (and 1's last point) on
// both stores: delegate done, proc run and proc watch refuse at once, with
// nothing recorded, an event for a session that does not exist (exit 3), a
// target outside the session's lineage (exit 2) or that does not exist
// (exit 3), a caller without a grant for the producer (exit 7), and an
// event that alone is over the payload limit (exit 2 naming the limit).
func TestRecordTimeChecks(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation", "process")
		c.ok("session", "open", "s1")
		c.ok("session", "open", "s2")
		ran := filepath.Join(c.dir, "ran")
		big := filepath.Join(c.dir, "big")
		if err := os.WriteFile(big, []byte(strings.Repeat("r", 2<<20)), 0o600); err != nil {
			t.Fatal(err)
		}
		pid := strconv.Itoa(os.Getpid())
		bob := []string{"HERMESQ_PRINCIPAL=bob", "HERMESQ_PRINCIPAL_OVERRIDE=true"}
		for _, r := range []struct {
			env  []string
			args []string
			code int
			want string
		}{
			{nil, []string{"delegate", "done", "--session", "s1", "--target", "s2", "--id", "d1", "--result", "x"}, 2, "target s2 is not in session s1's lineage"},
			{nil, []string{"delegate", "done", "--session", "s1", "--target", "nosuch", "--id", "d1", "--result", "x"}, 3, "target nosuch: no such transcript"},
			{nil, []string{"delegate", "done", "--session", "nosuch", "--target", "nosuch", "--id", "d1", "--result", "x"}, 3, "session nosuch does not exist"},
			{nil, []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result-file", big}, 2, "more than the payload limit of 1048576"},
			{bob, []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result", "x"}, 7, `producer "delegation" on session s1: principal "bob" may not`},
			{nil, []string{"proc", "run", "--session", "nosuch", "--", "touch", ran}, 3, "session nosuch does not exist"},
			{nil, []string{"proc", "run", "--session", "s1", "--target", "s2", "--", "touch", ran}, 2, "target s2 is not in session s1's lineage"},
			{nil, []string{"proc", "run", "--session", "s1", "--target", "s2", "--detach", "--", "touch", ran}, 2, "target s2 is not in session s1's lineage"},
			{bob, []string{"proc", "run", "--session", "s1", "--", "touch", ran}, 7, `producer "process" on session s1: principal "bob" may not`},
			{nil, []string{"proc", "watch", "--session", "nosuch", pid}, 3, "session nosuch does not exist"},
			{nil, []string{"proc", "watch", "--session", "s1", "--target", "s2", pid}, 2, "target s2 is not in session s1's lineage"},
		} {
			res := c.run(r.env, r.args...)
			if res.code != r.code || !strings.Contains(res.stderr, r.want) || strings.Count(res.stderr, "\n") != 1 {
				t.Errorf("want exit %d and one line with %q: %v", r.code, r.want, res)
			}
		}
		if _, err := os.Stat(ran); err == nil {
			t.Errorf("a refused proc run ran its command")
		}
		for _, name := range []string{"delegation", "process"} {
			// Nothing recorded, no outbox even created.
			if r := c.run(nil, "producers", "outbox", name); r.code != 3 || !strings.Contains(r.stderr, "has no outbox") {
				t.Errorf("%s outbox after the refusals: %v, want none", name, r)
			}
		}

		// What may be delivered is recorded: the session's own target, an
		// ancestor whose compression tip is current, no target, and a
		// caller granted the producer.
		c.ok("session", "compress", "s1", "--child", "s1b")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result", "RESULT_one")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1b", "--id", "d2", "--result", "RESULT_two")
		c.ok("session", "grant", "s1", "bob", "--role", "writer", "--producer", "process")
		if r := c.run(bob, "proc", "run", "--session", "s1", "--", "touch", ran); r.code != 0 {
			t.Fatalf("granted bob: %v", r)
		}
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")
		ms := c.messages("s1b")
		if notesWith(ms, "RESULT_one") != 1 || notesWith(ms, "RESULT_two") != 1 || notesWith(ms, "touch") != 1 {
			t.Errorf("notes on s1b: %+v, want one for each recorded event", ms)
		}
	})
}

// TestRecordStoreUnavailable is issue 23, acceptance 5's second half: with
// the store unreachable (a bbolt file locked by another process past
// --timeout; a Redis server stopped) delegate done and proc run still
// record, say so on stderr in one line and exit 0; once the store is back,
// producers run --once delivers the events.
func TestRecordStoreUnavailable(t *testing.T) {
	check := func(t *testing.T, c *cli, down, up func()) {
		c = withPlugins(t, c, "delegation", "process")
		c.ok("session", "open", "s1")
		down()
		for _, args := range [][]string{
			{"--timeout", "1s", "delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result", "RESULT_offline"},
			{"--timeout", "1s", "proc", "run", "--session", "s1", "--", "echo", "PROC_offline"},
		} {
			r := c.run(nil, args...)
			if r.code != 0 || strings.Count(r.stderr, "\n") != 1 ||
				!strings.Contains(r.stderr, "hermesq: warning: the store cannot be reached") || !strings.Contains(r.stderr, "producers run delivers it once the store is back") {
				t.Errorf("with the store unreachable: want exit 0 and one warning line: %v", r)
			}
		}
		up()
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")
		ms := c.messages("s1")
		if notesWith(ms, "RESULT_offline") != 1 || notesWith(ms, "PROC_offline") != 1 {
			t.Errorf("notes: %+v, want the result and the completion recorded while the store was down, once each", ms)
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "hermesq.db")
		c := newCLI(t, "bbolt://"+db)
		var fd int
		check(t, c, func() {
			// The store's lock, held by this process as another hermesq
			// would hold it.
			var err error
			if fd, err = syscall.Open(db+".lock", syscall.O_RDWR|syscall.O_CREAT|syscall.O_CLOEXEC, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Flock(fd, syscall.LOCK_EX); err != nil {
				t.Fatal(err)
			}
		}, func() { _ = syscall.Close(fd) })
	})
	t.Run("redis", func(t *testing.T) {
		redistest.Require(t)
		srv := redistest.Start(t, redistest.WithAOF())
		check(t, newCLI(t, srv.FreshURL()), srv.Kill, srv.Restart)
	})
	// No store where the configuration points yet (a bbolt file not
	// created): nothing to check against; the result waits in the outbox
	// until the session is opened.
	t.Run("bbolt-not-created", func(t *testing.T) {
		c := withPlugins(t, newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db")), "delegation")
		r := c.run(nil, "delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result", "RESULT_early")
		if r.code != 0 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "hermesq: warning: the store cannot be reached") ||
			!strings.Contains(r.stderr, "does not exist") {
			t.Errorf("with no store yet: want exit 0 and one warning line: %v", r)
		}
		c.ok("session", "open", "s1")
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1")
		if n := notesWith(c.messages("s1"), "RESULT_early"); n != 1 {
			t.Errorf("%d notes with the result recorded before the store existed, want 1", n)
		}
	})
}

// TestRecordChecksACLUsers: on a Redis with ACL users the caller is the
// authenticated user: dave, with no grant on alice's session, is refused
// delegate done and proc run at once (exit 7, nothing recorded); granted
// the delegation producer only, his result is recorded and delivered, and
// proc run is still refused.
func TestRecordChecksACLUsers(t *testing.T) {
	redistest.Require(t)
	srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
	alice := newCLI(t, aclUser(t, srv, "alice", "alice-pw-1"))
	dave := withPlugins(t, newCLI(t, aclUser(t, srv, "dave", "dave-pw-1")), "delegation")
	alice.ok("session", "open", "s1")
	done := []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "D", "--result", "RESULT_dave"}
	for _, args := range [][]string{done, {"proc", "run", "--session", "s1", "--", "true"}} {
		r := dave.exit(7, args...)
		if !strings.Contains(r.stderr, `on session s1: principal "dave" may not`) || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("want one line refusing dave: %v", r)
		}
	}
	if r := dave.run(nil, "producers", "outbox", "delegation"); r.code != 3 {
		t.Errorf("a refused result was recorded: %v", r)
	}
	alice.ok("session", "grant", "s1", "dave", "--role", "writer", "--producer", "delegation")
	dave.ok(done...)
	dave.exit(7, "proc", "run", "--session", "s1", "--", "true")
	dave.ok("producers", "run", "--once")
	alice.ok("drain", "s1")
	if n := notesWith(alice.messages("s1"), "RESULT_dave"); n != 1 {
		t.Errorf("%d notes with dave's result, want 1", n)
	}
}
