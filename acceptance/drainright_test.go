package acceptance

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
)

// TestDrainRightRedis (issue 24, item 1): on a Redis with ACL users, a user
// with no grant on alice's session cannot drain it — not by name (exit 7),
// not with --principal alice (exit 7), not with --all or --all --follow
// (left out, said on stderr) — and alice's queue and transcript are
// untouched, the handler never ran. Granted drainer, the same user drains.
func TestDrainRightRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
	ops := newCLI(t, srv.URL())
	alice := newCLI(t, aclUser(t, srv, "alice", "alice-pw-1"))
	bob := newCLI(t, aclUser(t, srv, "bob", "bob-pw-1"))
	drainRight(t, ops, alice, bob)

	// The store's administrator is an admin: it drains as the owner; acting
	// as bob (--principal), with bob's rights only.
	alice.admitHuman("as1", "for the admin")
	alice.ok("session", "revoke", "as1", "bob")
	ops.exit(7, "--principal", "bob", "drain", "as1", "--", "sh", "-c", "cat >/dev/null; echo admin")
	ops.ok("drain", "as1", "--", "sh", "-c", "cat >/dev/null; echo admin")
	if tr := alice.ok("transcript", "--session", "as1").stdout; !strings.Contains(tr, "assistant: admin") {
		t.Errorf("transcript after the admin's drain:\n%s", tr)
	}
}

// TestDrainRightBbolt: the same on a file store whose principals are
// claimed with principal_override.
func TestDrainRightBbolt(t *testing.T) {
	c := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))
	c.env = append(c.env, "HERMESQ_PRINCIPAL_OVERRIDE=true")
	as := func(p string) *cli {
		d := *c
		d.env = append(append([]string{}, c.env...), "HERMESQ_PRINCIPAL="+p)
		return &d
	}
	drainRight(t, as("alice"), as("alice"), as("bob"))
}

func drainRight(t *testing.T, ops, alice, bob *cli) {
	t.Helper()
	alice.ok("session", "open", "as1")
	alice.admitHuman("as1", "alice's private input")
	before := ops.export()
	stolen := filepath.Join(bob.dir, "stolen")
	thief := []string{"--", "sh", "-c", "cat >" + stolen + "; echo x"}

	untouched := func(what string) {
		t.Helper()
		if _, err := os.Stat(stolen); err == nil {
			t.Fatalf("%s: the handler ran and read alice's input", what)
		}
		if got := ops.export(); got != before {
			t.Fatalf("%s changed the store:\n%s\nwant:\n%s", what, got, before)
		}
	}

	r := bob.exit(7, append([]string{"drain", "as1"}, thief...)...)
	if err := oneLineError(r.stderr, false); err != nil {
		t.Errorf("drain as1: %v", err)
	}
	if !strings.Contains(r.stderr, "drain") || !strings.Contains(r.stderr, "--role drainer") {
		t.Errorf("drain as1 refused without saying what grant is needed: %q", r.stderr)
	}
	untouched("drain as1")
	bob.exit(7, append([]string{"drain", "as1", "--wait", "--follow"}, thief...)...)
	untouched("drain as1 --wait --follow")

	r = bob.ok(append([]string{"drain", "--all"}, thief...)...)
	if !strings.Contains(r.stderr, "left out 1 session(s)") {
		t.Errorf("drain --all does not say it left a session out: %q", r.stderr)
	}
	untouched("drain --all")

	p := bob.start(nil, append([]string{"drain", "--all", "--follow"}, thief...)...)
	eventually(t, 20*time.Second, "drain --all --follow to say it left a session out", func() bool {
		return strings.Contains(p.stderr(), "left out 1 session(s)")
	})
	alice.admitHuman("as1", "more of alice's input")
	time.Sleep(500 * time.Millisecond) // a follower that drained it would start its handler by now
	p.signal(syscall.SIGTERM)
	if code := p.wait(t, 20*time.Second); code != 143 {
		t.Errorf("drain --all --follow: exit %d after SIGTERM, want 143; stderr %q", code, p.stderr())
	}
	if _, err := os.Stat(stolen); err == nil {
		t.Fatal("drain --all --follow ran the handler on alice's session")
	}
	if q := alice.session("as1"); q.Depth != 2 {
		t.Errorf("alice's queue after the refused follower: depth %d, want 2", q.Depth)
	}

	// Granted drainer, bob drains; a reader or writer grant is not enough.
	for _, role := range []string{"reader", "writer"} {
		alice.ok("session", "grant", "as1", "bob", "--role", role)
		bob.exit(7, append([]string{"drain", "as1"}, thief...)...)
	}
	alice.ok("session", "grant", "as1", "bob", "--role", "drainer")
	bob.ok("drain", "as1", "--", "sh", "-c", "cat >/dev/null; echo served")
	tr := alice.ok("transcript", "--session", "as1").stdout
	if strings.Count(tr, "assistant: served") != 2 {
		t.Errorf("transcript after the granted drain:\n%s", tr)
	}
}
