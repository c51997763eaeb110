package cli

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// Hostile input, class by class, on both stores: each refused input exits
// with its code, prints one error line naming the problem, and leaves the
// store byte-for-byte as it was (a full export before and after).

// onBothStores runs fn on a bbolt store and on a real Redis (a fresh key
// prefix on one server per test).
func onBothStores(t *testing.T, fn func(t *testing.T, e *env, kind string)) {
	t.Run("bbolt", func(t *testing.T) { fn(t, newEnv(t), "bbolt") })
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		e := newEnv(t)
		e.store = srv.FreshURL()
		fn(t, e, "redis")
	})
}

// refusal is one hostile input and what it must be answered with.
type refusal struct {
	name  string
	stdin string
	args  []string
	code  int
	msg   string // in the one stderr line
}

// checkRefusals runs each case against e and checks code, one error line
// with msg, nothing on stdout but error results, and the store unchanged.
func checkRefusals(t *testing.T, e *env, cases []refusal) {
	t.Helper()
	before := e.export()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.runWith(c.stdin, false, c.args...)
			r.wantExit(t, c.code)
			contains(t, "stderr", r.err, c.msg)
			if after := e.export(); after != before {
				t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}

// Valid import records of a new session n1, to break one field at a time.
const (
	impSession    = `{"session":{"id":"n1","owner":"alice","grants":[],"current_transcript":"n1","epoch":3,"generation":2,"next_seq":3,"created_at":"2026-01-01T00:00:00Z"}}`
	impTranscript = `{"transcript":{"id":"n1","session":"n1","parent":null,"child":null,"ended_at":null,"end_reason":null,"message_count":1,"note_count":0,"created_at":"2026-01-01T00:00:00Z"}}`
	impMessage    = `{"message":{"transcript":"n1","seq":1,"role":"user","content":"hi","admission_id":"0123456789abcdef0123456789abcdef","created_at":"2026-01-01T00:00:00Z","metadata":{}}}`
	impAdmission  = `{"admission":{"id":"0123456789abcdef0123456789abcdef","session":"n1","seq":1,"kind":"human","producer":null,"principal":"alice","request_id":"r1","identities":[],"payload":{"text":"hi"},"pinned_target":null,"delivered_to":"n1","status":"done","outcome":"completed","mode":"turn","epoch":3,"generation":2,"admitted_at":"2026-01-01T00:00:00Z","started_at":"2026-01-01T00:00:01Z","settled_at":"2026-01-01T00:00:02Z","replay_of":null,"error":null}}`
	impAutomation = `{"admission":{"id":"fedcba9876543210fedcba9876543210","session":"n1","seq":2,"kind":"automation","producer":"ci","principal":"alice","request_id":null,"identities":["build:1"],"payload":{"text":"done"},"pinned_target":"n1","delivered_to":null,"status":"queued","outcome":null,"mode":null,"epoch":0,"generation":0,"admitted_at":"2026-01-01T00:00:00Z","started_at":null,"settled_at":null,"replay_of":null,"error":null}}`
)

func impFile(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// Class 1: an import is checked whole (types, ranges with room to grow,
// every reference present, ids by the live rules) before anything is
// written; a bad one is exit 2 naming its line.
func TestHostileImports(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "already here", "--request-id", "q1")
		e.ok("admit", "s1", "--producer", "ci", "--identity", "b:1", "--text", "automation")

		// The valid file imports (so each case below fails for its own
		// reason), into a fresh store of the same kind.
		good := impFile(impSession, impTranscript, impMessage, impAdmission, impAutomation)
		fresh := &env{t: t, dir: e.dir, store: e.store + "-fresh"}
		if kind == "bbolt" {
			fresh.store = "bbolt://" + filepath.Join(e.dir, "fresh.db")
		} else {
			fresh.store = strings.Replace(e.store, "prefix=", "prefix=fresh", 1)
		}
		fresh.runWith(good, false, "import").wantExit(t, 0)
		if got := fresh.export(); got != good {
			t.Fatalf("the valid import does not round-trip:\n%s\nwant:\n%s", got, good)
		}

		sub := func(line, old, new string) string {
			if !strings.Contains(line, old) {
				t.Fatalf("template has no %q", old)
			}
			return strings.Replace(line, old, new, 1)
		}
		imp := func(lines ...string) string { return impFile(lines...) }
		cases := []refusal{
			// The examples.
			{"current transcript not in the file", imp(sub(impSession, `"current_transcript":"n1"`, `"current_transcript":"gone"`), impTranscript),
				[]string{"import"}, ExitUsage, "line 1: session n1: current transcript gone is neither in the import nor in the store"},
			{"next_seq 2^64-1", imp(sub(impSession, `"next_seq":3`, `"next_seq":18446744073709551615`), impTranscript),
				[]string{"import"}, ExitUsage, "line 1: session n1: next_seq 18446744073709551615 is above the largest accepted (2^53"},
			{"epoch 2^64-1", imp(sub(impSession, `"epoch":3`, `"epoch":18446744073709551615`), impTranscript),
				[]string{"import"}, ExitUsage, "epoch 18446744073709551615 is above"},
			// Beyond them.
			{"generation just above 2^53", imp(sub(impSession, `"generation":2`, `"generation":9007199254740993`), impTranscript),
				[]string{"import"}, ExitUsage, "line 1: session n1: generation 9007199254740993 is above"},
			{"admission seq 2^60", imp(impSession, impTranscript, sub(impAutomation, `"seq":2`, `"seq":1152921504606846976`)),
				[]string{"import"}, ExitUsage, "line 3: admission fedcba9876543210fedcba9876543210: seq 1152921504606846976 is above"},
			{"negative seq", imp(impSession, impTranscript, sub(impAutomation, `"seq":2`, `"seq":-1`)),
				[]string{"import"}, ExitUsage, "line 3: field admission.seq: JSON number -1 where a whole number is wanted"},
			{"seq as a string", imp(impSession, impTranscript, sub(impAutomation, `"seq":2`, `"seq":"2"`)),
				[]string{"import"}, ExitUsage, "line 3: field admission.seq"},
			{"admission of a session not imported", imp(sub(impAutomation, `"session":"n1"`, `"session":"nowhere"`)),
				[]string{"import"}, ExitUsage, "line 1: admission fedcba9876543210fedcba9876543210: session nowhere is neither in the store nor before it"},
			{"message of an admission not present", imp(impSession, impTranscript, impMessage),
				[]string{"import"}, ExitUsage, "line 3: message 1 of transcript n1: admission 0123456789abcdef0123456789abcdef is neither"},
			{"transcript whose parent is missing", imp(impSession, sub(impTranscript, `"parent":null`, `"parent":"elsewhere"`)),
				[]string{"import"}, ExitUsage, "line 2: transcript n1: parent elsewhere is neither"},
			{"message after a gap", imp(impSession, impTranscript, sub(impMessage, `"seq":1`, `"seq":2`), impAdmission),
				[]string{"import"}, ExitUsage, "line 3: message 2 of transcript n1: the next message of the transcript is 1"},
			{"request id with an escape sequence", imp(impSession, impTranscript, impMessage, sub(impAdmission, `"request_id":"r1"`, `"request_id":"r\u001b[31m"`)),
				[]string{"import"}, ExitUsage, "line 4: admission 0123456789abcdef0123456789abcdef: U+001B not allowed in a request id"},
			{"request id empty", imp(impSession, impTranscript, impMessage, sub(impAdmission, `"request_id":"r1"`, `"request_id":"  "`)),
				[]string{"import"}, ExitUsage, "request id is only white space"},
			{"admission id not by the live rules", imp(impSession, impTranscript, sub(impAutomation, `"id":"fedcba9876543210fedcba9876543210"`, `"id":"A1"`)),
				[]string{"import"}, ExitUsage, `line 3: admission id "A1" is not 32 hex digits`},
			{"unknown status", imp(impSession, impTranscript, sub(impAutomation, `"status":"queued"`, `"status":"finished"`)),
				[]string{"import"}, ExitUsage, `line 3: admission fedcba9876543210fedcba9876543210: status "finished" is not`},
			{"done without an outcome", imp(impSession, impTranscript, sub(impAutomation, `"status":"queued"`, `"status":"done"`)),
				[]string{"import"}, ExitUsage, `status done with outcome ""`},
			{"admission seq at next_seq", imp(impSession, impTranscript, sub(impAutomation, `"seq":2`, `"seq":3`)),
				[]string{"import"}, ExitUsage, "seq 3 is not below its session's next_seq 3"},
			{"admission epoch above the session's", imp(impSession, impTranscript, sub(impAutomation, `"epoch":0`, `"epoch":4`)),
				[]string{"import"}, ExitUsage, "epoch 4 is above its session's epoch 3"},
			{"identity twice in the session", imp(impSession, impTranscript, impAutomation, sub(sub(impAutomation, `"seq":2`, `"seq":1`), `fedcba9876543210fedcba9876543210`, `00000000000000000000000000000001`)),
				[]string{"import"}, ExitUsage, `line 4: admission 00000000000000000000000000000001: identity "build:1" appears twice`},
			{"payload without text", imp(impSession, impTranscript, sub(impAutomation, `"payload":{"text":"done"}`, `"payload":{"Text":"done"}`)),
				[]string{"import"}, ExitUsage, `payload has no non-empty string "text"`},
			{"duplicate key", imp(sub(impSession, `"owner":"alice"`, `"owner":"alice","owner":"mallory"`), impTranscript),
				[]string{"import"}, ExitUsage, `line 1: duplicate key "owner"`},
			{"field in the wrong case", imp(sub(impSession, `"owner"`, `"Owner"`), impTranscript),
				[]string{"import"}, ExitUsage, `line 1: session: field "Owner" is spelled "owner"`},
			{"byte-order mark", "\ufeff" + imp(impSession, impTranscript),
				[]string{"import"}, ExitUsage, "line 1: byte-order mark not allowed"},
			{"invalid UTF-8", imp(impSession, impTranscript, sub(impAutomation, `"text":"done"`, "\"text\":\"d\xffne\"")),
				[]string{"import"}, ExitUsage, "line 3: invalid UTF-8 byte 0xff"},
			{"two kinds on one line", imp(`{"transcript":{},"message":{}}`),
				[]string{"import"}, ExitUsage, "line 1: want exactly one of session, transcript, message, admission, tombstone; got 2"},
			{"session twice", imp(impSession, impTranscript, impSession),
				[]string{"import"}, ExitUsage, "line 3: session n1 appears twice"},
			// Issue 24, item 4: a line is read with a bound.
			{"line longer than the bound", impSession + "\n" + strings.Repeat("z", maxInputRead+1),
				[]string{"import"}, ExitUsage, "line 2: line longer than 8388608 bytes"},
		}
		checkRefusals(t, e, cases)
	})
}

// Class 2: --batch lines are parsed strictly and refused with their line
// number, never repaired; the good lines of the batch are admitted.
func TestHostileBatchLines(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "already here")
		cases := []struct{ name, line, msg string }{
			// The examples.
			{"invalid UTF-8 in the text", "{\"session\":\"s1\",\"text\":\"caf\xe9\"}", "invalid UTF-8 byte 0xe9 at byte 27"},
			{"session twice", `{"session":"s1","session":"s2","text":"x"}`, `duplicate key "session" at byte 16`},
			{"Text for text", `{"session":"s1","Text":"x"}`, `input line: field "Text" is spelled "text"`},
			// Beyond them.
			{"byte-order mark", "\ufeff" + `{"session":"s1","text":"x"}`, "byte-order mark not allowed"},
			{"invalid UTF-8 in a request id", "{\"session\":\"s1\",\"text\":\"x\",\"request_id\":\"r\xff\"}", "invalid UTF-8 byte 0xff"},
			{"lone surrogate escape", `{"session":"s1","text":"\ud800x"}`, `lone surrogate escape \\ud800 at byte 24 (not valid unicode)`},
			{"duplicate key through an escape", `{"session":"s1","te\u0078t":"a","text":"b"}`, `duplicate key "text"`},
			{"duplicate key inside the payload", `{"session":"s1","payload":{"text":"a","text":"b"}}`, `duplicate key "text"`},
			{"SESSION in capitals", `{"SESSION":"s1","text":"x"}`, `input line: field "SESSION" is spelled "session"`},
			{"unknown field", `{"session":"s1","text":"x","priority":9}`, `input line: unknown field "priority"`},
			{"identities a string", `{"session":"s1","producer":"p","identities":"a","text":"x"}`, `field "identities": want a list of strings`},
			{"session a number", `{"session":7,"text":"x"}`, `field "session": want a string`},
			{"two values on the line", `{"session":"s1","text":"x"} {}`, `data after the JSON value: unexpected '{' at byte 28`},
			{"raw control character", "{\"session\":\"s1\",\"text\":\"a\x07b\"}", "raw control character 0x07"},
			{"not an object", `["s1","x"]`, "input line is not a JSON object"},
			{"empty request id", `{"session":"s1","text":"x","request_id":""}`, `field "request_id" is empty`},
			{"U+202E in the session id", `{"session":"s1\u202e","text":"x"}`, "U+202E not allowed in a session id"},
		}
		var rs []refusal
		for _, c := range cases {
			file := filepath.Join(e.dir, strings.ReplaceAll(c.name, " ", "_")+".ndjson")
			writeFile(t, file, c.line+"\n")
			rs = append(rs, refusal{name: c.name, args: []string{"admit", "--batch", file}, code: ExitUsage, msg: "line 1: " + c.msg})
		}
		checkRefusals(t, e, rs)

		// A bad line among good ones: the good ones are admitted, the bad
		// one reported by number, exit 2.
		file := filepath.Join(e.dir, "mixed.ndjson")
		writeFile(t, file, `{"session":"s1","text":"good 1"}`+"\n"+`{"session":"s1","Text":"bad"}`+"\n"+`{"session":"s1","text":"good 3"}`+"\n")
		r := e.run("-o", "jsonl", "admit", "--batch", file)
		r.wantExit(t, ExitUsage)
		lines := decodeLines[admitOut](t, r)
		if len(lines) != 3 || lines[0].Result != "admitted" || lines[1].Line != 2 || lines[2].Result != "admitted" {
			t.Fatalf("mixed batch: %+v", lines)
		}
	})
}

// Class 3: request ids follow the contract (1-256 bytes of valid UTF-8, no
// control characters), and are scoped to the session.
func TestHostileRequestIDs(t *testing.T) {
	r := newEnv(t).ok("admit", "--help")
	contains(t, "admit --help", r.out, "a request id is scoped to its session")
	if strings.Contains(r.out, "per principal") {
		t.Fatalf("admit --help still says a request id is per principal:\n%s", r.out)
	}
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "x", "--request-id", "ok-1")
		admit := func(id string) []string { return []string{"admit", "s1", "--text", "x", "--request-id", id} }
		checkRefusals(t, e, []refusal{
			// The examples.
			{"empty", "", admit(""), ExitUsage, "--request-id is empty"},
			{"white space only", "", admit("   "), ExitUsage, "request id is only white space"},
			{"escape sequence", "", admit("r\x1b[2J"), ExitUsage, "U+001B not allowed in a request id"},
			{"invalid UTF-8", "", admit("r\xff"), ExitUsage, "request id is not valid UTF-8 (byte 0xff at 1)"},
			{"257 bytes", "", admit(strings.Repeat("r", 257)), ExitUsage, "request id is 257 bytes, more than 256"},
			// Beyond them.
			{"NUL", "", admit("a\x00b"), ExitUsage, "request id contains a NUL byte"},
			{"carriage return", "", admit("a\rb"), ExitUsage, "U+000D not allowed in a request id"},
			{"tab", "", admit("a\tb"), ExitUsage, "U+0009 not allowed in a request id"},
			{"DEL", "", admit("a\x7fb"), ExitUsage, "U+007F not allowed in a request id"},
			{"C1 CSI", "", admit("a\u009bb"), ExitUsage, "U+009B not allowed in a request id"},
			{"right-to-left override", "", admit("a\u202eb"), ExitUsage, "U+202E not allowed in a request id"},
			{"in a batch line", "", []string{"admit", "--batch", writeTemp(t, e, `{"session":"s1","text":"x","request_id":"a\u0007"}`)}, ExitUsage, "line 1: U+0007 not allowed in a request id"},
		})
		// 256 bytes of UTF-8 (non-ASCII included) is a good id, and the
		// same id in another session is another input.
		id := strings.Repeat("é", 128)
		e.ok("admit", "s1", "--text", "x", "--request-id", id)
		a := decode[admitOut](t, e.ok("-o", "json", "admit", "s2", "--text", "x", "--request-id", id))
		if a.Result != "admitted" {
			t.Fatalf("the same request id in another session: %s, want admitted", a.Result)
		}
	})
}

func writeTemp(t *testing.T, e *env, content string) string {
	t.Helper()
	f, err := os.CreateTemp(e.dir, "batch*.ndjson")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(content + "\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	return f.Name()
}

// rawControl reports the first control or bidirectional formatting
// character of s other than newline, or -1.
func rawControl(s string) rune {
	for _, r := range s {
		if r == utf8.RuneError || (r != '\n' && (r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) || backend.IsBidiControl(r))) {
			return r
		}
	}
	return -1
}

// Class 4: stored text never reaches the terminal raw: every control and
// bidirectional formatting character is escaped in text output.
func TestHostileTextOutput(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		texts := []struct{ name, text, want string }{
			{"ESC CSI colour", "red \x1b[31malert\x1b[0m", `red \e[31malert\e[0m`},
			{"BEL", "ding\x07", `ding\a`},
			{"carriage return over the line", "safe\rEVIL", `safe\rEVIL`},
			{"OSC window title", "\x1b]0;pwned\x07", `\e]0;pwned\a`},
			{"C1 CSI", "a\u009b2Jb", `a\x9b2Jb`},
			{"right-to-left override", "file\u202etxt.exe", `file\u202etxt.exe`},
			{"backspace", "abc\b\b\bxyz", `abc\x08\x08\x08xyz`},
			{"DEL", "a\x7fb", `a\x7fb`},
		}
		h := replyHandler(t, e.dir)
		for _, c := range texts {
			e.ok("admit", "s1", "--text", c.text)
			e.ok("admit", "s1", "--producer", "ci", "--identity", "id\x1b[1m"+c.name, "--text", c.text)
		}
		e.ok(append([]string{"drain", "s1", "--"}, h...)...)
		ids := decodeLines[admissionOut](t, e.ok("-o", "jsonl", "queue", "s1"))
		outputs := map[string]string{
			"queue":        e.ok("queue", "s1").out,
			"transcript":   e.ok("transcript", "s1").out,
			"sessions":     e.ok("sessions").out,
			"session show": e.ok("session", "show", "s1").out,
			"find":         e.ok("find", "id\x1b[1mBEL", "--session", "s1").out,
		}
		for _, a := range ids {
			outputs["show "+a.ID] += e.ok("show", a.ID).out
		}
		for cmd, out := range outputs {
			if r := rawControl(out); r != -1 {
				t.Errorf("%s prints %U raw:\n%q", cmd, r, out)
			}
		}
		all := strings.Join([]string{outputs["queue"], outputs["transcript"]}, "")
		for _, c := range texts {
			for _, cmd := range []string{"queue", "transcript"} {
				if !strings.Contains(outputs[cmd], c.want) {
					t.Errorf("%s: %s does not show %q as %q:\n%s", c.name, cmd, c.text, c.want, outputs[cmd])
				}
			}
		}
		_ = all
		// An error message naming a hostile value is escaped too.
		r := e.run("show", "\x1b[2Jgone")
		if rawControl(r.err) != -1 {
			t.Errorf("error message printed raw: %q", r.err)
		}
	})
}

// Class 5: a setting that makes no sense is refused with exit 2 naming it;
// an unknown config key is warned about.
func TestHostileSettings(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "queued")
		cfg := func(name, body string) string {
			p := filepath.Join(e.dir, name+".yaml")
			writeFile(t, p, body)
			return p
		}
		cases := []refusal{
			// The examples.
			{"viewer ttl 50ms", "", []string{"viewer", "add", "s1", "--ttl", "50ms"}, ExitUsage, "viewer --ttl 50ms: must be at least 100ms"},
			{"drain lease 0", "", []string{"drain", "s1", "--lease", "0s", "--", "true"}, ExitUsage, "drain lease 0s: must be at least 100ms"},
			{"empty --store", "", []string{"--store", "", "queue", "s1"}, ExitUsage, "setting store is empty"},
			{"empty --principal", "", []string{"--principal", "", "admit", "s1", "--text", "x"}, ExitUsage, "setting principal is empty"},
			{"config store a list", "", []string{"--config", cfg("storelist", "store: [a, b]\n"), "queue", "s1"}, ExitUsage, "setting store is a list"},
			{"handler.command a string", "", []string{"--config", cfg("handlerstr", "handler:\n  command: sh -c 'echo hi'\n"), "drain", "s1"}, ExitUsage, "handler.command is a string: want a list of strings"},
			// Beyond them.
			{"viewer ttl negative", "", []string{"viewer", "add", "s1", "--ttl", "-1s"}, ExitUsage, "viewer --ttl -1s"},
			{"attach ttl 0", "", []string{"attach", "s1", "--ttl", "0s"}, ExitUsage, "attach --ttl 0s"},
			{"config drain lease 50ms", "", []string{"--config", cfg("lease", "drain:\n  lease: 50ms\n"), "drain", "s1", "--", "true"}, ExitUsage, "drain lease 50ms"},
			{"config payload_limit 0", "", []string{"--config", cfg("limit0", "payload_limit: 0\n"), "admit", "s1", "--text", "x"}, ExitUsage, `payload_limit "0"`},
			{"config principal a number", "", []string{"--config", cfg("principalnum", "principal: 1234\n"), "admit", "s1", "--text", "x"}, ExitUsage, "setting principal is int 1234: want a string"},
			{"config output empty", "", []string{"--config", cfg("outempty", "output: ''\n"), "queue", "s1"}, ExitUsage, "setting output is empty"},
			{"config timeout a map", "", []string{"--config", cfg("timeoutmap", "timeout:\n  read: 1s\n"), "queue", "s1"}, ExitUsage, "setting timeout is a map"},
			{"handler.command empty list", "", []string{"--config", cfg("handlerempty", "handler:\n  command: []\n"), "drain", "s1"}, ExitUsage, "handler.command is empty"},
			{"empty --config", "", []string{"--config", "", "queue", "s1"}, ExitUsage, "setting config is empty"},
			{"drain --max negative", "", []string{"drain", "s1", "--max", "-1", "--", "true"}, ExitUsage, "drain --max -1"},
			// Issue 24, item 4: a file read whole has a bound (the acceptance
			// test reads /dev/zero under a memory limit).
			{"config file of 2 MiB", "", []string{"--config", cfg("huge", "#"+strings.Repeat(" ", 2<<20)+"\n"), "queue", "s1"}, ExitUsage, "bytes, more than the limit of 1048576"},
			{"tls ca file of 2 MiB", "", []string{"--store", "rediss://127.0.0.1:1/0?ca=" + cfg("hugeca", strings.Repeat("A", 2<<20)), "queue", "s1"}, ExitUsage, "ca file"},
			{"tls key file of 2 MiB", "", []string{"--store", "rediss://127.0.0.1:1/0?cert=/dev/null&key=" + cfg("hugekey", strings.Repeat("A", 2<<20)), "queue", "s1"}, ExitUsage, "key file"},
		}
		if kind == "redis" {
			u := strings.Replace(e.store, "/0?", "/999?", 1)
			if u == e.store {
				t.Fatalf("store url %s has no /0?", e.store)
			}
			cases = append(cases,
				refusal{"redis db out of range", "", []string{"--store", u, "queue", "s1"}, ExitUsage, "the server has no database 999"},
				refusal{"redis db not a number", "", []string{"--store", strings.Replace(e.store, "/0?", "/x?", 1), "queue", "s1"}, ExitUsage, `database "x" is not a database number`},
			)
		}
		checkRefusals(t, e, cases)

		// HERMESQ_HANDLER_COMMAND must be a JSON list, never split.
		t.Setenv("HERMESQ_HANDLER_COMMAND", "sh -c true")
		r := e.run("drain", "s1").wantExit(t, ExitUsage)
		contains(t, "stderr", r.err, "HERMESQ_HANDLER_COMMAND: want a JSON list of strings")
		t.Setenv("HERMESQ_HANDLER_COMMAND", "")

		// A misspelled key: a warning naming it, and the command runs.
		r = e.run("--config", cfg("typo", "paylod_limit: 10\n"), "queue", "s1")
		r.wantExit(t, 0)
		contains(t, "stderr", r.err, `hermesq: warning: config file`)
		contains(t, "stderr", r.err, `unknown key "paylod_limit" is ignored`)
	})
}

// Class 6: reading a store that does not exist is exit 3 and creates
// nothing; only commands that write create the store.
func TestHostileReadOnlyCreatesNothing(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "no", "such", "dir")
	e.store = "bbolt://" + filepath.Join(dir, "q.db")
	id := "0123456789abcdef0123456789abcdef"
	for _, args := range [][]string{
		{"queue", "s1"}, {"sessions"}, {"session", "show", "s1"}, {"show", id}, {"find", "x"},
		{"transcript", "s1"}, {"export"}, {"attach", "s1"}, {"viewer", "add", "s1"}, {"stats"},
		{"resolve", id, "--as", "completed"}, {"cancel", id}, {"session", "close", "s1", "--reason", "cli_close"},
	} {
		t.Run(strings.Join(args, " "), func(t *testing.T) {
			r := e.run(args...)
			r.wantExit(t, ExitNotFound)
			contains(t, "stderr", r.err, "does not exist")
			if _, err := os.Stat(filepath.Join(e.dir, "no")); !os.IsNotExist(err) {
				t.Fatalf("%v created %s", args, filepath.Join(e.dir, "no"))
			}
		})
	}
	// A command that writes creates it.
	e.ok("admit", "s1", "--text", "x")
	e.ok("queue", "s1")

	// Redis has no store to create, but reading creates no key.
	srv := redistest.Start(t)
	e.store = srv.FreshURL()
	before, err := srv.Do("DBSIZE")
	if err != nil {
		t.Fatal(err)
	}
	e.run("queue", "s1").wantExit(t, ExitNotFound)
	e.run("session", "show", "s1").wantExit(t, ExitNotFound)
	e.ok("sessions")
	e.ok("export")
	if after, _ := srv.Do("DBSIZE"); after != before {
		t.Fatalf("reading an empty Redis store wrote keys: DBSIZE %s, then %s", before, after)
	}
}

// Class 10: messages name the problem rather than the bytes a parser
// tripped on.
func TestHostileMessagesNameTheProblem(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("admit", "s1", "--text", "x")
		checkRefusals(t, e, []refusal{
			{"U+202E in a session id", "", []string{"admit", "s\u202e1", "--text", "x"}, ExitUsage, "U+202E not allowed in a session id"},
			{"space in a session id", "", []string{"admit", "s 1", "--text", "x"}, ExitUsage, "a space not allowed in a session id"},
			{"invalid UTF-8 in a session id", "", []string{"admit", "s\xff", "--text", "x"}, ExitUsage, "byte 0xff (not UTF-8) not allowed in a session id"},
			{"ESC in a transcript id", "", []string{"session", "compress", "s1", "--child", "c\x1b"}, ExitUsage, "U+001B not allowed in a transcript id"},
			{"byte-order mark in a batch", "", []string{"admit", "--batch", writeTemp(t, e, "\ufeff{}")}, ExitUsage, "line 1: byte-order mark not allowed"},
			{"byte-order mark in an import", "\ufeff" + impSession + "\n", []string{"import"}, ExitUsage, "line 1: byte-order mark not allowed"},
			{"byte-order mark in a payload", "", []string{"admit", "s1", "--payload", "\ufeff{\"text\":\"x\"}"}, ExitUsage, "byte-order mark not allowed"},
			{"NUL in an identity", "", []string{"admit", "s1", "--producer", "p", "--identity", "a\x00", "--text", "x"}, ExitUsage, "identity contains a NUL byte"},
			{"control character in a principal", "", []string{"--principal", "bob\x1b", "admit", "s1", "--text", "x"}, ExitUsage, "U+001B not allowed in a principal"},
			// Issue 24, item 16.
			{"compress into the current transcript", "", []string{"session", "compress", "s1", "--child", "s1"}, ExitConflict, "transcript s1 exists"},
			{"empty parts", `{"session":"s1","producer":"process","identities":["a"],"parts":[]}` + "\n", []string{"admit", "--batch", "-"}, ExitUsage, `field "parts" is empty`},
			{"empty parts without identities", `{"session":"s1","producer":"process","parts":[]}` + "\n", []string{"admit", "--batch", "-"}, ExitUsage, `field "parts" is empty`},
			{"result file of 1 GiB", "", []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result-file", sparseFile(t, e, 1<<30)}, ExitUsage, "is 1073741824 bytes, more than the payload limit of 1048576"},
			{"result on stdin over the limit", strings.Repeat("r", 2<<20), []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d1", "--result-file", "-"}, ExitUsage, "result on stdin is more than the payload limit of 1048576 bytes"},
		})
	})
}

// Class 9: a batch is committed and printed chunk by chunk; whatever a
// later line does, every committed line's result is printed, and the exit
// code is the worst line's.
func TestHostileBatchLaterLineFails(t *testing.T) {
	onBothStores(t, func(t *testing.T, e *env, kind string) {
		e.ok("session", "open", "closed1")
		e.ok("session", "close", "closed1", "--reason", "cli_close")
		cases := []struct {
			name, last string
			code       int
			errCode    string
		}{
			{"conflicting request id", `{"session":"g0","text":"other","request_id":"q0"}`, ExitConflict, "conflict"},
			{"malformed line", `{"session":"g0","Text":"x"}`, ExitUsage, "invalid"},
			{"automation to an unknown session", `{"session":"nowhere","producer":"ci","identities":["i"],"text":"x"}`, ExitNotFound, "not_found"},
			{"closed session", `{"session":"closed1","text":"x"}`, ExitConflict, "conflict"},
			{"line too long", `{"session":"g0","text":"` + strings.Repeat("x", maxInputRead) + `"}`, ExitUsage, "invalid"},
			{"byte-order mark", "\ufeff" + `{"session":"g0","text":"x"}`, ExitUsage, "invalid"},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				var sb strings.Builder
				for j := 0; j < 300; j++ { // more than one chunk
					fmt.Fprintf(&sb, `{"session":"g%d","text":"x","request_id":"q%d"}`+"\n", j%3, i*1000+j)
				}
				if i == 0 {
					sb.Reset()
					for j := 0; j < 300; j++ {
						fmt.Fprintf(&sb, `{"session":"g%d","text":"x","request_id":"q%d"}`+"\n", j%3, j)
					}
				}
				sb.WriteString(c.last + "\n")
				r := e.run("-o", "jsonl", "admit", "--batch", writeTemp(t, e, strings.TrimSuffix(sb.String(), "\n")))
				if r.code != c.code {
					t.Fatalf("exit %d, want %d\n%s", r.code, c.code, r.err)
				}
				lines := decodeLines[admitOut](t, r)
				if len(lines) != 301 {
					t.Fatalf("%d result lines, want 301", len(lines))
				}
				for j, l := range lines[:300] {
					if l.Result != "admitted" {
						t.Fatalf("line %d: %+v, want admitted", j+1, l)
					}
				}
				if last := lines[300]; last.Line != 301 || last.Error != c.errCode {
					t.Fatalf("line 301: %+v, want error %s", last, c.errCode)
				}
				if n := strings.Count(r.err, "\n"); n != 1 {
					t.Fatalf("stderr: %d lines, want 1:\n%s", n, r.err)
				}
			})
		}
	})
}

// Issue 24, item 3: one principal check for every command. admin grant
// refuses what session grant refuses (a name with ESC, BEL, a newline, a
// bidirectional override), on both stores, writing nothing; admin list
// escapes a name a store holds from before the check.
func TestHostilePrincipalNames(t *testing.T) {
	const bad = "\x1b]0;pwned\a\x1b[2J"
	const shown = `\e]0;pwned\a\e[2J`
	refusals := func(t *testing.T, e *env) {
		e.ok("session", "open", "s1")
		var cases []refusal
		for _, p := range []string{bad, "bob\nmallory", "bo\u202eb", "  "} {
			cases = append(cases,
				refusal{"admin grant " + p, "", []string{"admin", "grant", p}, ExitUsage, "principal"},
				refusal{"session grant " + p, "", []string{"session", "grant", "s1", p}, ExitUsage, "principal"},
				refusal{"--principal " + p, "", []string{"--principal", p, "admit", "s1", "--text", "x"}, ExitUsage, "principal"},
			)
		}
		checkRefusals(t, e, cases)
	}
	listEscaped := func(t *testing.T, e *env) {
		out := e.ok("admin", "list").out
		if rawControl(out) != -1 || !strings.Contains(out, shown) {
			t.Errorf("admin list prints %q, want %q escaped", out, shown)
		}
	}
	t.Run("bbolt", func(t *testing.T) {
		e := newEnv(t)
		refusals(t, e)
		plantAdminBolt(t, strings.TrimPrefix(e.store, "bbolt://"), bad)
		listEscaped(t, e)
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		e := newEnv(t)
		prefix := redistest.UniquePrefix()
		e.store = srv.URLWithPrefix(prefix)
		refusals(t, e)
		if _, err := srv.Do("SADD", prefix+":admins", bad); err != nil {
			t.Fatal(err)
		}
		listEscaped(t, e)
		// A name planted before the check can still be revoked.
		e.ok("admin", "revoke", bad)
	})
}

// plantAdminBolt writes name into a bbolt store's admins as an older
// binary, which did not check the name, could have.
func plantAdminBolt(t *testing.T, path, name string) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		b, err := json.Marshal([]string{name})
		if err != nil {
			return err
		}
		return tx.Bucket([]byte("meta")).Put([]byte("admins"), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Issue 24, item 13: a store URL is taken whole or refused with exit 2,
// never partly ignored, never an internal error: a NUL in a bbolt path,
// cluster=1 against a standalone server, a host listed twice, a repeated
// parameter, a fragment.
func TestHostileStoreURLs(t *testing.T) {
	t.Run("bbolt", func(t *testing.T) {
		e := newEnv(t)
		e.ok("admit", "s1", "--text", "queued")
		checkRefusals(t, e, []refusal{
			{"NUL in the path", "", []string{"--store", "bbolt://" + e.dir + "/a%00b.db", "queue", "s1"}, ExitUsage, "NUL"},
			{"fragment", "", []string{"--store", e.store + "#frag", "queue", "s1"}, ExitUsage, "fragment"},
			{"query that cannot be decoded", "", []string{"--store", e.store + "?x=%zz", "queue", "s1"}, ExitUsage, "cannot be decoded"},
		})
	})
	t.Run("redis", func(t *testing.T) {
		srv := redistest.Start(t)
		e := newEnv(t)
		e.store = srv.FreshURL()
		e.ok("admit", "s1", "--text", "queued")
		u, err := url.Parse(e.store)
		if err != nil {
			t.Fatal(err)
		}
		with := func(host, query string) string {
			c := *u
			c.Host = host
			if query != "" {
				c.RawQuery += "&" + query
			}
			return c.String()
		}
		checkRefusals(t, e, []refusal{
			{"cluster=1 against a standalone server", "", []string{"--store", with(u.Host, "cluster=1"), "queue", "s1"}, ExitUsage, "not a Redis Cluster"},
			{"host listed twice", "", []string{"--store", with(u.Host+","+u.Host, ""), "queue", "s1"}, ExitUsage, "listed twice"},
			{"prefix given twice", "", []string{"--store", with(u.Host, "prefix=other"), "queue", "s1"}, ExitUsage, `parameter "prefix" is given 2 times`},
			{"fragment", "", []string{"--store", e.store + "#frag", "queue", "s1"}, ExitUsage, "fragment"},
		})
		// Item 15: a prefix with glob characters is no glob: doctor of an
		// empty store of prefix "h*" checks no other prefix's keys.
		r := e.run("--store", srv.URLWithPrefix("h*"), "doctor")
		contains(t, "stdout", r.out, "0 keys checked")
	})
}

// Issue 24, item 14: a store path that is no store (a loop of symbolic
// links, a file that is not a bbolt file, a torn one) is refused without
// leaving a "<path>.lock" beside it, by a command that reads and by one
// that writes.
func TestHostileStorePathLeavesNoLock(t *testing.T) {
	e := newEnv(t)
	loop := filepath.Join(e.dir, "loop.db")
	if err := os.Symlink(loop, loop); err != nil {
		t.Fatal(err)
	}
	garbage := filepath.Join(e.dir, "garbage.db")
	writeFile(t, garbage, strings.Repeat("not a bbolt file\n", 1000))
	short := filepath.Join(e.dir, "short.db")
	writeFile(t, short, "x")
	for _, c := range []struct {
		path string
		code int
		msg  string
	}{
		{loop, ExitUsage, "a loop of symbolic links"},
		{garbage, ExitFailure, "corrupt or truncated"},
		{short, ExitFailure, "corrupt or truncated"},
	} {
		for _, args := range [][]string{{"queue", "s1"}, {"admit", "s1", "--text", "x"}, {"doctor"}} {
			e.store = "bbolt://" + c.path
			r := e.run(args...)
			if args[0] != "doctor" {
				r.wantExit(t, c.code)
				contains(t, "stderr", r.err, c.msg)
			}
			if _, err := os.Lstat(c.path + ".lock"); err == nil {
				t.Errorf("hermesq %s on %s left %s.lock", strings.Join(args, " "), filepath.Base(c.path), filepath.Base(c.path))
				_ = os.Remove(c.path + ".lock")
			}
		}
	}
}

// sparseFile is a file of size bytes in e's folder that takes no disk space.
func sparseFile(t *testing.T, e *env, size int64) string {
	t.Helper()
	p := filepath.Join(e.dir, fmt.Sprintf("sparse-%d", size))
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	return p
}
