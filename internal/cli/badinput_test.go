package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Every kind of bad input is refused with its exit code, one line on
// stderr, and the store exactly as it was (a full export before and after).
func TestBadInputLeavesStoreUnchanged(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	e.ok("admit", "s1", "--text", "already here")
	before := e.export()

	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		{"invalid session id", "", []string{"admit", "bad id!", "--text", "x"}, ExitUsage, "session id"},
		{"session id too long", "", []string{"admit", strings.Repeat("a", 257), "--text", "x"}, ExitUsage, "257 bytes"},
		{"empty session id", "", []string{"admit", "", "--text", "x"}, ExitUsage, "session"},
		{"empty text", "", []string{"admit", "s1", "--text", ""}, ExitUsage, "text"},
		{"empty stdin", "", []string{"admit", "s1"}, ExitUsage, "text"},
		{"payload an array", "", []string{"admit", "s1", "--payload", "[1,2]"}, ExitUsage, "object"},
		{"payload a string", "", []string{"admit", "s1", "--payload", `"just a string"`}, ExitUsage, "payload"},
		{"payload not JSON", "", []string{"admit", "s1", "--payload", `{"text": "unterminated`}, ExitUsage, "payload"},
		{"payload without text", "", []string{"admit", "s1", "--payload", `{"no_text":1}`}, ExitUsage, "text"},
		{"payload empty", "", []string{"admit", "s1", "--payload", ""}, ExitUsage, "payload"},
		{"payload over the limit", "", []string{"admit", "s1", "--text", strings.Repeat("x", 1<<20+1)}, ExitUsage, "payload"},
		{"payload over the limit on stdin", strings.Repeat("y", 1<<20+10), []string{"admit", "s1"}, ExitUsage, "payload"},
		{"identity empty", "", []string{"admit", "s1", "--producer", "process", "--identity", "", "--text", "x"}, ExitUsage, "identity"},
		{"identity too long", "", []string{"admit", "s1", "--producer", "process", "--identity", strings.Repeat("i", 1025), "--text", "x"}, ExitUsage, "identity"},
		{"second identity empty", "", []string{"admit", "s1", "--producer", "process", "--identity", "ok", "--identity", "", "--text", "x"}, ExitUsage, "identity"},
		{"automation without identity", "", []string{"admit", "s1", "--producer", "process", "--text", "x"}, ExitUsage, "identit"},
		{"identity without producer", "", []string{"admit", "s1", "--identity", "a", "--text", "x"}, ExitUsage, "--producer"},
		{"request id too long", "", []string{"admit", "s1", "--request-id", strings.Repeat("r", 1025), "--text", "x"}, ExitUsage, "request"},
		{"principal too long", "", []string{"--principal", strings.Repeat("p", 1025), "admit", "s1", "--text", "x"}, ExitUsage, "principal"},
		{"text and payload", "", []string{"admit", "s1", "--text", "x", "--payload", `{"text":"y"}`}, ExitUsage, "text"},
		{"no session", "", []string{"admit", "--text", "x"}, ExitUsage, "SESSION"},
		{"unknown flag", "", []string{"admit", "s1", "--txt", "x"}, ExitUsage, "--txt"},
		{"unknown command", "", []string{"admitt", "s1"}, ExitUsage, "admitt"},
		{"unknown session subcommand", "", []string{"session", "reopen", "s1"}, ExitUsage, "reopen"},
		{"unknown viewer subcommand", "", []string{"viewer", "list"}, ExitUsage, "list"},
		{"extra argument", "", []string{"show", "a", "b"}, ExitUsage, "2"},
		{"bad output format", "", []string{"-o", "yaml", "admit", "s1", "--text", "x"}, ExitUsage, "yaml"},
		{"bad timeout", "", []string{"--timeout", "0s", "admit", "s1", "--text", "x"}, ExitUsage, "timeout"},
		{"unknown store scheme", "", []string{"--store", "nosuch:///x", "admit", "s1", "--text", "x"}, ExitUsage, "nosuch"},
		{"relative bbolt path", "", []string{"--store", "bbolt://rel.db", "admit", "s1", "--text", "x"}, ExitUsage, "bbolt"},
		{"unknown store parameter", "", []string{"--store", e.store + "?x=1", "admit", "s1", "--text", "x"}, ExitUsage, "parameter"},
		{"bad close reason", "", []string{"session", "close", "s1", "--reason", "because"}, ExitUsage, "because"},
		{"missing close reason", "", []string{"session", "close", "s1"}, ExitUsage, "reason"},
		{"bad queue status", "", []string{"queue", "s1", "--status", "waiting"}, ExitUsage, "waiting"},
		{"bad resolve", "", []string{"resolve", "abc", "--as", "done"}, ExitUsage, "done"},
		{"bad on-unknown", "", []string{"drain", "s1", "--on-unknown", "ignore"}, ExitUsage, "ignore"},
		{"drain lease too short", "", []string{"drain", "s1", "--lease", "2ns", "--", "true"}, ExitUsage, "lease"},
		{"attach ttl too short", "", []string{"attach", "s1", "--ttl", "2ns"}, ExitUsage, "ttl"},
		{"drain nothing", "", []string{"drain"}, ExitUsage, "--all"},
		{"drain both", "", []string{"drain", "s1", "--all"}, ExitUsage, "--all"},
		{"bad compression child", "", []string{"session", "compress", "s1", "--child", "no spaces"}, ExitUsage, "transcript"},
		{"empty compression child", "", []string{"session", "compress", "s1", "--child", ""}, ExitUsage, "transcript id is empty"},
		{"empty switch transcript", "", []string{"session", "switch", "s1", "--transcript", ""}, ExitUsage, "transcript id is empty"},
		{"json error shape", "", []string{"-o", "json", "admit", "bad id!", "--text", "x"}, ExitUsage, `"error":"invalid"`},
		{"json usage error shape", "", []string{"-o", "json", "admit", "s1", "--nope"}, ExitUsage, `"error":"invalid"`},
		{"unknown admission", "", []string{"show", "0123456789abcdef0123456789abcdef"}, ExitNotFound, "not found"},
		{"unknown session", "", []string{"session", "show", "nosuch"}, ExitNotFound, "not found"},
		{"json not found", "", []string{"-o", "json", "show", "0123456789abcdef"}, ExitNotFound, `"error":"not_found"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.runWith(c.stdin, false, c.args...)
			r.wantExit(t, c.code)
			contains(t, "stderr", r.err, c.stderr)
			if r.out != "" {
				t.Errorf("stdout not empty: %q", r.out)
			}
			if after := e.export(); after != before {
				t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// A payload limit from the environment applies, and refuses what the default
// would take.
func TestPayloadLimitFromEnvironment(t *testing.T) {
	e := newEnv(t)
	e.ok("admit", "s1", "--text", strings.Repeat("y", 200))
	before := e.export()
	t.Setenv("HERMESQ_PAYLOAD_LIMIT", "100")
	e.run("admit", "s1", "--text", strings.Repeat("y", 200)).wantExit(t, ExitUsage)
	if after := e.export(); after != before {
		t.Fatalf("store changed")
	}
	t.Setenv("HERMESQ_PAYLOAD_LIMIT", "5000000")
	r := e.run("admit", "s1", "--text", "x").wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "payload_limit")
}

// A request id makes admit idempotent: same id and payload → the same
// admission, "duplicate", exit 0; same id, other payload → exit 4. Neither
// changes the store.
func TestRequestID(t *testing.T) {
	e := newEnv(t)
	first := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--request-id", "r1", "--text", "hello"))
	if first.Result != "admitted" {
		t.Fatalf("first admit: %+v", first)
	}
	before := e.export()

	dup := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--request-id", "r1", "--payload", `{"text":"hello"}`))
	if dup.Result != "duplicate" || dup.Admission.ID != first.Admission.ID {
		t.Fatalf("duplicate admit: %+v, want duplicate of %s", dup, first.Admission.ID)
	}
	r := e.runWith("hello\n", false, "admit", "s1", "--request-id", "r1")
	r.wantExit(t, 0)
	if want := "duplicate " + first.Admission.ID + " seq 1 (s1)\n"; r.out != want {
		t.Fatalf("text duplicate: %q, want %q", r.out, want)
	}
	r = e.run("admit", "s1", "--request-id", "r1", "--text", "something else").wantExit(t, ExitConflict)
	contains(t, "stderr", r.err, "r1")
	if after := e.export(); after != before {
		t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	// Another principal's r1 is another key (and another principal may not
	// admit to s1 at all).
	e.run("--principal", "mallory", "admit", "s1", "--request-id", "r1", "--text", "hello").wantExit(t, ExitForbidden)
}

// An invalid NDJSON line in --batch: the earlier and later good lines are
// admitted and reported, the bad one reported with its line number, exit 2.
func TestAdmitBatch(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	batch := filepath.Join(e.dir, "in.ndjson")
	writeFile(t, batch, strings.Join([]string{
		`{"session":"s1","text":"one"}`,
		`{"session":"s1","text":"two"}`,
		`{"session":"s1", this is not json`,
		``,
		`{"session":"s1","text":"four","request_id":"q4"}`,
		`{"session":"s1","text":""}`,
		`{"session":"s1","text":"seven","colour":"blue"}`,
		`{"session":"s1","producer":"watch","identities":["w:1","w:2"],"text":"eight"}`,
	}, "\n")+"\n")

	r := e.run("-o", "json", "admit", "--batch", batch)
	if r.code != ExitUsage {
		t.Fatalf("exit %d, want 2\n%s\n%s", r.code, r.out, r.err)
	}
	lines := decodeLines[admitOut](t, r)
	if len(lines) != 7 {
		t.Fatalf("%d result lines, want 7 (blank line skipped):\n%s", len(lines), r.out)
	}
	wantText := map[int]string{0: "one", 1: "two", 3: "four", 6: "eight"}
	wantBad := map[int]int{2: 3, 4: 6, 5: 7}
	for i, l := range lines {
		if text, ok := wantText[i]; ok {
			if l.Error != "" || l.Admission.text(t) != text {
				t.Errorf("result %d: %+v, want admitted %q", i, l, text)
			}
			continue
		}
		if l.Line != wantBad[i] || l.Error != "invalid" || l.Message == "" {
			t.Errorf("result %d: %+v, want bad line %d", i, l, wantBad[i])
		}
	}
	if lines[6].Result != "coalesced" {
		t.Errorf("two identities: result %q, want coalesced", lines[6].Result)
	}
	errLines := strings.Split(strings.TrimSuffix(r.err, "\n"), "\n")
	if len(errLines) != 3 {
		t.Fatalf("stderr: %d lines, want one per bad line:\n%s", len(errLines), r.err)
	}
	for i, n := range []string{"line 3", "line 6", "line 7"} {
		contains(t, "stderr", errLines[i], n)
	}

	q := decode[[]admissionOut](t, e.ok("-o", "json", "queue", "s1"))
	var texts []string
	for _, a := range q {
		texts = append(texts, a.text(t))
	}
	if got := strings.Join(texts, ","); got != "one,two,four,eight" {
		t.Fatalf("queue holds %s, want one,two,four,eight", got)
	}

	// From stdin, in text: one line per input line, in order, and a bad
	// line on stderr as "hermesq: error: line N: …".
	r = e.runWith(`{"session":"s1","text":"five"}`+"\n"+`{"session":"s1","text":""}`, false, "admit", "--batch", "-")
	if r.code != ExitUsage {
		t.Fatalf("exit %d, want 2", r.code)
	}
	out := strings.Split(strings.TrimSuffix(r.out, "\n"), "\n")
	if len(out) != 2 || !strings.HasPrefix(out[0], "admitted ") || !strings.HasPrefix(out[1], "error line 2: ") {
		t.Fatalf("text output:\n%s", r.out)
	}
	if !strings.HasPrefix(r.err, "hermesq: error: line 2: ") || strings.Count(r.err, "\n") != 1 {
		t.Fatalf("stderr: %q", r.err)
	}

	// null members are absent values: "payload":null with a text is that
	// text; "payload":null alone has no text.
	r = e.runWith(`{"session":"s1","text":"nine","payload":null,"request_id":null,"producer":null,"identities":null,"target":null}`+"\n"+
		`{"session":"s1","payload":null}`+"\n", false, "-o", "jsonl", "admit", "--batch", "-")
	r.wantExit(t, ExitUsage)
	if got := decodeLines[admitOut](t, r); len(got) != 2 || got[0].Result != "admitted" || got[0].Admission.text(t) != "nine" ||
		got[1].Line != 2 || !strings.Contains(got[1].Message, "text") {
		t.Fatalf("batch with null members:\n%s", r.out)
	}

	// All good: exit 0; a duplicate request id in a batch is a success.
	r = e.runWith(`{"session":"s1","text":"four","request_id":"q4"}`+"\n", false, "-o", "jsonl", "admit", "--batch", "-")
	r.wantExit(t, 0)
	if got := decodeLines[admitOut](t, r); len(got) != 1 || got[0].Result != "duplicate" {
		t.Fatalf("batch duplicate: %s", r.out)
	}
	// A batch file that cannot be read is a usage error, nothing admitted.
	before := e.export()
	e.run("admit", "--batch", filepath.Join(e.dir, "missing.ndjson")).wantExit(t, ExitUsage)
	e.run("admit", "s1", "--batch", "-").wantExit(t, ExitUsage)
	if e.export() != before {
		t.Fatal("store changed")
	}
}

// Store failures: an unknown scheme is a usage error (2); an unreadable path
// or a corrupt file is exit 1 with one line and no panic, the file left as
// it was; a store locked past --timeout is 75.
func TestStoreErrors(t *testing.T) {
	e := newEnv(t)

	dirDB := filepath.Join(e.dir, "dir.db")
	if err := os.Mkdir(dirDB, 0o700); err != nil {
		t.Fatal(err)
	}
	plain := filepath.Join(e.dir, "plain.txt")
	writeFile(t, plain, "not a directory\n")
	corrupt := filepath.Join(e.dir, "corrupt.db")
	garbage := "this is not a bbolt file, though it is long enough to hold a header\n" + strings.Repeat("0123456789", 500)
	writeFile(t, corrupt, garbage)

	for _, path := range []string{dirDB, filepath.Join(plain, "hermesq.db"), corrupt} {
		for _, args := range [][]string{{"admit", "s1", "--text", "x"}, {"sessions"}, {"export"}, {"-o", "json", "queue", "s1"}} {
			r := e.run(append([]string{"--store", "bbolt://" + path}, args...)...)
			r.wantExit(t, ExitFailure)
			if strings.Contains(r.err, "panic") {
				t.Fatalf("panic: %s", r.err)
			}
		}
	}
	if b, _ := os.ReadFile(corrupt); string(b) != garbage {
		t.Fatal("corrupt file changed")
	}
	if b, _ := os.ReadFile(plain); string(b) != "not a directory\n" {
		t.Fatal("plain file changed")
	}

	// Locked: hold the store's lock as another process would.
	e.ok("admit", "s1", "--text", "x")
	before := e.export()
	lock := holdLock(t, strings.TrimPrefix(e.store, "bbolt://")+".lock")
	r := e.run("--timeout", "200ms", "admit", "s1", "--text", "y")
	r.wantExit(t, ExitUnavailable)
	t.Setenv("HERMESQ_TIMEOUT", "150ms")
	e.run("sessions").wantExit(t, ExitUnavailable)
	t.Setenv("HERMESQ_TIMEOUT", "")
	lock()
	if e.export() != before {
		t.Fatal("store changed while locked")
	}
}

// holdLock takes the exclusive flock a bbolt store takes on its sidecar lock
// file, and returns its release.
func holdLock(t *testing.T, path string) func() {
	t.Helper()
	fd, err := unix.Open(path, unix.O_RDWR|unix.O_CREAT|unix.O_CLOEXEC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	released := false
	release := func() {
		if !released {
			released = true
			_ = unix.Flock(fd, unix.LOCK_UN)
			_ = unix.Close(fd)
		}
	}
	t.Cleanup(release)
	return release
}

// A turn due with no handler: exit 2 with a clear message, the admission
// still queued and never started.
func TestDrainWithoutHandler(t *testing.T) {
	e := newEnv(t)
	a := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "needs a turn"))
	before := e.export()
	r := e.run("drain", "s1").wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "handler")
	if r := e.run("-o", "json", "drain", "s1").wantExit(t, ExitUsage); r.out != "" {
		t.Fatalf("-o json drain without handler: stdout %q, want empty", r.out)
	}
	if after := e.export(); after != before {
		t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	got := decode[admissionOut](t, e.ok("-o", "json", "show", a.Admission.ID))
	if got.Status != "queued" || got.Mode != nil {
		t.Fatalf("after drain without handler: status %s mode %s, want queued, null", got.Status, deref(got.Mode))
	}
	// --all reports the same.
	e.run("drain", "--all").wantExit(t, ExitUsage)
	if got := decode[admissionOut](t, e.ok("-o", "json", "show", a.Admission.ID)); got.Status != "queued" {
		t.Fatalf("after drain --all without handler: %s", got.Status)
	}
}

// Bad input is reported (exit 2) before the store is opened: a store that
// cannot be opened (here a directory, exit 1) does not hide a usage error.
func TestBadInputBeforeStore(t *testing.T) {
	e := newEnv(t)
	dirDB := filepath.Join(e.dir, "dir.db")
	if err := os.Mkdir(dirDB, 0o700); err != nil {
		t.Fatal(err)
	}
	e.store = "bbolt://" + dirDB
	for _, args := range [][]string{
		{"queue", "s1", "--status", "waiting"},
		{"queue", "s1", "--outcome", "lost"},
		{"queue", "s1", "--status", "queued,"},
		{"session", "close", "s1", "--reason", "because"},
		{"session", "compress", "s1", "--child", "no spaces"},
		{"session", "compress", "s1", "--child", ""},
		{"session", "switch", "s1", "--transcript", "no spaces"},
		{"session", "grant", "s1", ""},
		{"viewer", "add", "s1", "--ttl", "0s"},
		{"viewer", "rm", "s1", ""},
		{"show", ""},
		{"cancel", ""},
		{"resolve", "0123456789abcdef", "--as", "done"},
		{"resolve", "", "--as", "requeue"},
		{"find", ""},
		{"find", "id-1", "--session", "bad id"},
	} {
		r := e.run(args...).wantExit(t, ExitUsage)
		if r.out != "" {
			t.Errorf("hermesq %s: stdout %q", strings.Join(args, " "), r.out)
		}
	}
	// The same store with good input: the open error, exit 1.
	e.run("queue", "s1", "--status", "queued").wantExit(t, ExitFailure)
}

// A batch of several chunks (each committed while the next is checked and
// the one before printed) reports every line once, in input order, bad
// lines in their places, and each session's queue holds its inputs in
// input order.
func TestAdmitBatchChunksInOrder(t *testing.T) {
	e := newEnv(t)
	for _, s := range []string{"s0", "s1", "s2"} {
		e.ok("session", "open", s)
	}
	const n = 3*batchChunkLines + 500
	bad := func(i int) bool { return i%700 == 699 }
	var in strings.Builder
	for i := 0; i < n; i++ {
		text := fmt.Sprintf("t%d", i)
		if bad(i) {
			text = "" // an empty input: invalid
		}
		fmt.Fprintf(&in, `{"session":"s%d","text":%q}`+"\n", i%3, text)
	}
	batch := filepath.Join(e.dir, "in.ndjson")
	writeFile(t, batch, in.String())
	r := e.run("-o", "jsonl", "admit", "--batch", batch)
	if r.code != ExitUsage || strings.Count(r.err, "\n") != 5 {
		t.Fatalf("exit %d, want 2 with one stderr line a bad line:\n%s", r.code, r.err)
	}
	lines := decodeLines[admitOut](t, r)
	if len(lines) != n {
		t.Fatalf("%d result lines, want %d", len(lines), n)
	}
	want := map[string][]string{}
	for i, l := range lines {
		if bad(i) {
			if l.Line != i+1 || l.Error != "invalid" {
				t.Fatalf("result %d: %+v, want bad line %d", i, l, i+1)
			}
			continue
		}
		text := fmt.Sprintf("t%d", i)
		if l.Error != "" || l.Admission.text(t) != text {
			t.Fatalf("result %d: %+v, want %q admitted", i, l, text)
		}
		s := fmt.Sprintf("s%d", i%3)
		want[s] = append(want[s], text)
	}
	for s, texts := range want {
		var got []string
		for _, a := range decode[[]admissionOut](t, e.ok("-o", "json", "queue", s)) {
			got = append(got, a.text(t))
		}
		if !slices.Equal(got, texts) {
			t.Fatalf("queue %s holds %d inputs, not the %d admitted in input order", s, len(got), len(texts))
		}
	}
}

// A batch whose first chunk holds bad lines alone reports them even when
// the store, opened for the first good line, cannot be.
func TestAdmitBatchBadChunkThenStoreFails(t *testing.T) {
	e := newEnv(t)
	blocker := filepath.Join(e.dir, "not-a-dir")
	writeFile(t, blocker, "x")
	e.store = "bbolt://" + filepath.Join(blocker, "hermesq.db")
	var in strings.Builder
	for i := 0; i < batchChunkLines; i++ {
		in.WriteString(`{"session":"s1", not json` + "\n") // refused before the store is needed
	}
	in.WriteString(`{"session":"s1","text":"good"}` + "\n")
	batch := filepath.Join(e.dir, "in.ndjson")
	writeFile(t, batch, in.String())
	r := e.run("-o", "jsonl", "admit", "--batch", batch)
	if r.code == 0 || r.code == ExitUsage {
		t.Fatalf("exit %d, want the store's failure\n%s", r.code, r.err)
	}
	lines := decodeLines[admitOut](t, r)
	if len(lines) != batchChunkLines {
		t.Fatalf("%d result lines, want the %d bad lines reported\n%s", len(lines), batchChunkLines, r.err)
	}
	for i, l := range lines {
		if l.Line != i+1 || l.Error != "invalid" {
			t.Fatalf("result %d: %+v, want bad line %d", i, l, i+1)
		}
	}
	if !strings.Contains(r.err, "not-a-dir") {
		t.Fatalf("stderr does not name the store's failure:\n%s", r.err)
	}
}
