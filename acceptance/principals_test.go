package acceptance

import (
	"encoding/json"
	"net/url"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// aclUser creates a Redis ACL user that may use every key and command but
// not manage ACL users (no @admin): an ordinary hermesq user.
func aclUser(t *testing.T, srv *redistest.Server, user, pass string) string {
	t.Helper()
	if _, err := srv.Do("ACL", "SETUSER", user, "on", ">"+pass, "~*", "&*", "+@all", "-@admin"); err != nil {
		t.Fatalf("acl setuser %s: %v", user, err)
	}
	u, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(user, pass)
	return u.String()
}

// TestRedisACLPrincipals (issue 11, acceptance 3): on a Redis with ACL
// users, the principal is the authenticated user. User B cannot admit human
// input into A's session, close, compress, switch, resolve, cancel or replay
// it, whatever --principal B passes (exit 7), and the store is unchanged; a
// granted reader inspects but does not write; a granted writer admits; an
// admin (granted by a user that manages ACL users) may act as another
// principal.
func TestRedisACLPrincipals(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
	ops := newCLI(t, srv.URL()) // manages ACL users: the store's administrator
	alice := newCLI(t, aclUser(t, srv, "alice", "alice-pw-1"))
	bob := newCLI(t, aclUser(t, srv, "bob", "bob-pw-1"))
	carol := newCLI(t, aclUser(t, srv, "carol", "carol-pw-1"))
	dave := newCLI(t, aclUser(t, srv, "dave", "dave-pw-1"))

	// alice's session: a queued input, a cancelled (done) one, an
	// automation input of hers.
	alice.ok("session", "open", "s1")
	if s := alice.session("s1"); s.Owner != "alice" {
		t.Fatalf("session owner %q, want the ACL user alice", s.Owner)
	}
	alice.exit(7, "--principal", "mallory", "admit", "s1", "--text", "alice claims to be mallory")
	queued := alice.admitHuman("s1", "hello").Admission.ID
	done := alice.admitHuman("s1", "to cancel").Admission.ID
	alice.ok("cancel", done)
	before := ops.export()

	refused := [][]string{
		{"admit", "s1", "--text", "from bob"},
		{"admit", "s1", "--producer", "process", "--identity", "b1", "--text", "from bob"},
		{"session", "close", "s1", "--reason", "cli_close"},
		{"session", "compress", "s1", "--child", "s1.bob"},
		{"session", "switch", "s1", "--transcript", "bobs"},
		{"session", "grant", "s1", "bob", "--role", "owner"},
		{"session", "revoke", "s1", "carol"},
		{"resolve", queued, "--as", "completed"},
		{"cancel", queued},
		{"replay", done},
		{"replay", "--session", "s1", "--outcome", "cancelled"},
		{"session", "show", "s1"},
		{"queue", "s1"},
		{"transcript", "--session", "s1"},
		{"show", queued},
		{"export"},
	}
	for _, principal := range []string{"", "alice", "bob", "hq-ops"} {
		for _, args := range refused {
			full := args
			if principal != "" {
				full = append([]string{"--principal", principal}, args...)
			}
			r := bob.run(nil, full...)
			if r.code != 7 {
				t.Errorf("bob: want exit 7: %v", r)
			}
			if err := oneLineError(r.stderr, false); err != nil {
				t.Errorf("bob: hermesq %s: %v", strings.Join(full, " "), err)
			}
		}
	}
	if got := ops.export(); got != before {
		t.Fatalf("refused commands changed the store:\n%s\nwant:\n%s", got, before)
	}
	var listed []map[string]any
	bob.jsonOut(&listed, "sessions")
	if len(listed) != 0 {
		t.Errorf("bob lists sessions he may not inspect: %v", listed)
	}

	// A granted reader inspects, and writes nothing.
	alice.ok("session", "grant", "s1", "carol", "--role", "reader")
	carol.ok("session", "show", "s1")
	carol.ok("queue", "s1")
	carol.ok("transcript", "--session", "s1")
	carol.ok("show", queued)
	before = ops.export()
	for _, args := range [][]string{
		{"admit", "s1", "--text", "from carol"},
		{"session", "close", "s1", "--reason", "cli_close"},
		{"cancel", queued},
		{"replay", done},
		{"session", "grant", "s1", "carol", "--role", "owner"},
	} {
		if r := carol.run(nil, args...); r.code != 7 {
			t.Errorf("reader carol: want exit 7: %v", r)
		}
	}
	if got := ops.export(); got != before {
		t.Fatal("a reader's refused commands changed the store")
	}

	// A granted writer admits human input (and automation only of the
	// producers named), but does not operate.
	alice.ok("session", "grant", "s1", "dave", "--role", "writer", "--producer", "watch")
	if a := dave.admitHuman("s1", "from dave").Admission; a.Principal != "dave" {
		t.Errorf("dave's admission has principal %q", a.Principal)
	}
	dave.admitAuto("s1", "watch", "[watch] matched", "", "w1")
	dave.exit(7, "admit", "s1", "--producer", "process", "--identity", "p1", "--text", "not his producer")
	dave.exit(7, "session", "close", "s1", "--reason", "cli_close")
	dave.exit(7, "cancel", queued)

	// The admin right: only a user that manages ACL users grants it; an
	// admin may act as another principal.
	bob.exit(7, "admin", "grant", "bob")
	ops.ok("admin", "grant", "bob")
	var admins []string
	ops.jsonOut(&admins, "admin", "list")
	if len(admins) != 1 || admins[0] != "bob" {
		t.Fatalf("admins %v", admins)
	}
	var res admitResult
	bob.jsonOut(&res, "--principal", "alice", "admit", "s1", "--text", "bob for alice")
	if res.Admission.Principal != "alice" {
		t.Errorf("an admin acting as alice admitted as %q", res.Admission.Principal)
	}
	ops.ok("admin", "revoke", "bob")
	bob.exit(7, "--principal", "alice", "admit", "s1", "--text", "no longer")

	// Revoke ends a grant.
	alice.ok("session", "revoke", "s1", "dave")
	dave.exit(7, "admit", "s1", "--text", "after revoke")
	var sess struct {
		Grants []json.RawMessage `json:"grants"`
	}
	alice.jsonOut(&sess, "session", "show", "s1")
	if len(sess.Grants) != 1 || !strings.Contains(string(sess.Grants[0]), `"carol"`) {
		t.Errorf("grants after revoke: %s", sess.Grants)
	}
}

// TestDoctorRedis: doctor on Redis reports the server, the principal, and
// an orphaned lookup (a key pointing at an admission no session holds) as
// a warning with its repair; exit 0 (warnings are not failures).
func TestDoctorRedis(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("hq-ops", "ops-pw-1"))
	c := newCLI(t, srv.URL())
	c.admitHuman("s1", "hello")
	r := c.ok("doctor")
	for _, want := range []string{"ok    server", "ok    orphaned lookups", "ok    principal          hq-ops (authenticated by the store, admin)"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("doctor does not say %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "ops-pw-1") || strings.Contains(r.stderr, "ops-pw-1") {
		t.Errorf("doctor prints the password")
	}
	u, _ := url.Parse(srv.URL())
	prefix := u.Query().Get("prefix")
	if prefix == "" {
		prefix = "hermesq"
	}
	if _, err := srv.Do("SET", prefix+":admission:{00112233445566778899aabbccddeeff}", "s1"); err != nil {
		t.Fatal(err)
	}
	r = c.ok("doctor")
	if !strings.Contains(r.stdout, "warn  orphaned lookups") || !strings.Contains(r.stdout, "00112233445566778899aabbccddeeff") || !strings.Contains(r.stdout, "repair:") {
		t.Errorf("doctor does not report the orphaned lookup:\n%s", r.stdout)
	}
}
