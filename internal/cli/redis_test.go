package cli

import (
	"net/url"
	"strconv"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// The CLI on a real Redis: the same commands and exit codes as on bbolt,
// a store moved from bbolt to Redis and back by export/import without loss,
// a refused password is exit 7 and never printed, an unreachable server 75.
func TestRedisStore(t *testing.T) {
	srv := redistest.Start(t, redistest.WithACL("hq", "s3cret-pw"))
	e := newEnv(t)
	bolt := e.store
	h := replyHandler(t, e.dir)

	e.ok("admit", "s1", "--text", "one")
	e.ok("admit", "s1", "--producer", "p", "--identity", "i:1", "--text", "note")
	e.ok(append([]string{"drain", "s1", "--"}, h...)...)
	e.ok("admit", "s2", "--text", "queued", "--request-id", "r1")
	dump := e.export()

	e.store = srv.FreshURL()
	// The sessions belong to the OS user; on Redis the ACL user hq, an
	// admin (it may manage ACL users), acts as that owner.
	t.Setenv("HERMESQ_PRINCIPAL", osUser())
	e.runWith(dump, false, "import").wantExit(t, 0)
	if got := e.export(); got != dump {
		t.Fatalf("bbolt → redis differs:\n%s\nwant:\n%s", got, dump)
	}
	// Idempotency and conflicts behave the same on Redis.
	dup := decode[admitOut](t, e.ok("-o", "json", "admit", "s2", "--text", "queued", "--request-id", "r1"))
	if dup.Result != "duplicate" {
		t.Fatalf("redis duplicate: %+v", dup)
	}
	e.run("admit", "s2", "--text", "other", "--request-id", "r1").wantExit(t, ExitConflict)
	e.run("admit", "bad id", "--text", "x").wantExit(t, ExitUsage)
	e.run("show", "0123456789abcdef").wantExit(t, ExitNotFound)
	r := e.ok(append([]string{"drain", "--all", "--"}, h...)...)
	if !strings.HasPrefix(r.out, "turn ") {
		t.Fatalf("drain on redis: %q", r.out)
	}
	back := e.export()

	// and back to a new bbolt file
	e.store = bolt + ".back"
	e.runWith(back, false, "import").wantExit(t, 0)
	if got := e.export(); got != back {
		t.Fatalf("redis → bbolt differs")
	}

	// A wrong password: exit 7, and the password appears nowhere.
	u, err := url.Parse(srv.FreshURL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword("hq", "wrong-pw")
	e.store = u.String()
	for _, format := range []string{"text", "json"} {
		r = e.run("-o", format, "sessions").wantExit(t, ExitForbidden)
		if strings.Contains(r.err, "wrong-pw") || strings.Contains(r.err, "s3cret-pw") {
			t.Fatalf("password in the error: %s", r.err)
		}
	}

	// Nobody listening: unavailable (75).
	port, err := redistest.FreePort(false)
	if err != nil {
		t.Fatal(err)
	}
	e.store = "redis://127.0.0.1:" + strconv.Itoa(port) + "/0"
	e.run("--timeout", "300ms", "sessions").wantExit(t, ExitUnavailable)
}

// Issue 14 (2): a batch spanning sessions where one session fails (its
// first transcript's id is another session's) prints every line's result,
// the committed ones as admitted, and exits with the worst line's code; on
// Redis, where each session is its own script, as on bbolt.
func TestAdmitBatchOneSessionFails(t *testing.T) {
	srv := redistest.Start(t)
	for _, st := range []string{"bbolt", "redis"} {
		t.Run(st, func(t *testing.T) {
			e := newEnv(t)
			if st == "redis" {
				e.store = srv.FreshURL()
			}
			e.ok("session", "open", "s1")
			e.ok("session", "compress", "s1", "--child", "taken")
			r := e.runWith(strings.Join([]string{
				`{"session":"new-1","text":"one","request_id":"r1"}`,
				`{"session":"taken","text":"two"}`,
				`{"session":"s1","text":"three"}`,
				`{"session":"s1","text":""}`,
			}, "\n")+"\n", false, "-o", "jsonl", "admit", "--batch", "-")
			if r.code != ExitConflict {
				t.Fatalf("exit %d, want 4 (conflict is worse than invalid)\n%s", r.code, r.err)
			}
			lines := decodeLines[admitOut](t, r)
			if len(lines) != 4 {
				t.Fatalf("%d result lines, want 4:\n%s", len(lines), r.out)
			}
			if lines[0].Result != "admitted" || lines[2].Result != "admitted" ||
				lines[1].Error != "conflict" || lines[3].Error != "invalid" {
				t.Errorf("results: %+v", lines)
			}
			q := decode[[]admissionOut](t, e.ok("-o", "json", "queue", "new-1"))
			if len(q) != 1 {
				t.Errorf("new-1 holds %d admissions, want 1", len(q))
			}
		})
	}
}
