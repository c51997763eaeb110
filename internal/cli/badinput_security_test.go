package cli

import (
	"fmt"
	"os"
	"strings"
	"testing"
)

// Issue 11, acceptance 1: bad input across the commands (principals,
// roles, grants, admin, limits, operator commands, producers, doctor,
// help): each exits with its code and one error line, prints nothing on
// stdout, and leaves the store exactly as it was (an export before and
// after is identical).
func TestBadInputAcrossCommands(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	e.ok("session", "open", "s2")
	queued := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "queued")).Admission.ID
	done := decode[admitOut](t, e.ok("-o", "json", "admit", "s1", "--text", "to cancel")).Admission.ID
	e.ok("cancel", done)
	e.ok("admit", "s1", "--producer", "process", "--identity", "i1", "--text", "note")
	e.ok("session", "grant", "s1", "rita", "--role", "reader")
	before := e.export()

	override := map[string]string{"HERMESQ_PRINCIPAL_OVERRIDE": "true"}
	as := func(p string, args ...string) []string { return append([]string{"--principal", p}, args...) }
	ids := func(n int) []string {
		out := []string{"admit", "s1", "--producer", "process", "--text", "x"}
		for i := 0; i < n; i++ {
			out = append(out, "--identity", fmt.Sprintf("id-%d", i))
		}
		return out
	}
	deep := `{"text":"x","a":` + strings.Repeat("[", 1001) + strings.Repeat("]", 1001) + `}`
	tooManyParts := `{"session":"s1","producer":"process","parts":[` + strings.TrimSuffix(strings.Repeat(`{"identity":"p","text":"x"},`, 1001), ",") + `]}` + "\n"

	cases := []struct {
		name   string
		env    map[string]string
		stdin  string
		args   []string
		code   int
		stderr string
	}{
		// A principal that cannot be claimed (a file store: principal_override).
		{"claim by flag without override", nil, "", as("mallory", "admit", "s1", "--text", "x"), ExitForbidden, "principal_override"},
		{"claim by environment without override", map[string]string{"HERMESQ_PRINCIPAL": "mallory"}, "", []string{"admit", "s1", "--text", "x"}, ExitForbidden, "principal_override"},
		{"override not a boolean", map[string]string{"HERMESQ_PRINCIPAL_OVERRIDE": "maybe"}, "", []string{"admit", "s1", "--text", "x"}, ExitUsage, "principal_override"},
		// Roles: a stranger neither writes, operates nor inspects.
		{"stranger admits", override, "", as("mallory", "admit", "s1", "--text", "x"), ExitForbidden, "may not"},
		{"stranger admits automation", override, "", as("mallory", "admit", "s1", "--producer", "process", "--identity", "m1", "--text", "x"), ExitForbidden, "producer"},
		{"stranger closes", override, "", as("mallory", "session", "close", "s1", "--reason", "cli_close"), ExitForbidden, "may not"},
		{"stranger compresses", override, "", as("mallory", "session", "compress", "s1"), ExitForbidden, "may not"},
		{"stranger switches", override, "", as("mallory", "session", "switch", "s1", "--transcript", "m"), ExitForbidden, "may not"},
		{"stranger grants", override, "", as("mallory", "session", "grant", "s1", "mallory", "--role", "owner"), ExitForbidden, "may not"},
		{"stranger revokes", override, "", as("mallory", "session", "revoke", "s1", "rita"), ExitForbidden, "may not"},
		{"stranger cancels", override, "", as("mallory", "cancel", queued), ExitForbidden, "may not"},
		{"stranger resolves", override, "", as("mallory", "resolve", queued, "--as", "completed"), ExitForbidden, "may not"},
		{"stranger replays by id", override, "", as("mallory", "replay", done), ExitForbidden, "may not"},
		{"stranger replays a session", override, "", as("mallory", "replay", "--session", "s1", "--outcome", "cancelled"), ExitForbidden, "may not"},
		{"stranger compacts", override, "", as("mallory", "compact", "--session", "s1", "--older-than", "1ns"), ExitForbidden, "may not"},
		{"stranger shows the session", override, "", as("mallory", "session", "show", "s1"), ExitForbidden, "inspect"},
		{"stranger lists the queue", override, "", as("mallory", "queue", "s1"), ExitForbidden, "inspect"},
		{"stranger shows an admission", override, "", as("mallory", "show", queued), ExitForbidden, "inspect"},
		{"stranger reads the transcript", override, "", as("mallory", "transcript", "s1"), ExitForbidden, "inspect"},
		{"stranger reads the current transcript", override, "", as("mallory", "transcript", "--session", "s1"), ExitForbidden, "inspect"},
		{"stranger finds an identity", override, "", as("mallory", "find", "i1"), ExitForbidden, "inspect"},
		{"stranger adds a viewer", override, "", as("mallory", "viewer", "add", "s1"), ExitForbidden, "inspect"},
		{"stranger attaches", override, "", as("mallory", "attach", "s1"), ExitForbidden, "inspect"},
		{"stranger drains", override, "", as("mallory", "drain", "s1", "--", "sh", "-c", "cat; echo x"), ExitForbidden, "--role drainer"},
		{"stranger drains with --wait", override, "", as("mallory", "drain", "s1", "--wait", "--", "sh", "-c", "cat; echo x"), ExitForbidden, "drain on session s1"},
		// A reader inspects only.
		{"reader drains", override, "", as("rita", "drain", "s1", "--", "sh", "-c", "cat; echo x"), ExitForbidden, "drain on session s1"},
		{"reader admits", override, "", as("rita", "admit", "s1", "--text", "x"), ExitForbidden, "may not"},
		{"reader cancels", override, "", as("rita", "cancel", queued), ExitForbidden, "may not"},
		{"reader attaches and closes", override, "", as("rita", "attach", "s1", "--end-reason", "tui_close"), ExitForbidden, "operate"},
		// Grants and the admin right: shape.
		{"grant of an unknown role", nil, "", []string{"session", "grant", "s1", "bob", "--role", "boss"}, ExitUsage, "role"},
		{"grant of producers to a reader", nil, "", []string{"session", "grant", "s1", "bob", "--role", "reader", "--producer", "watch"}, ExitUsage, "writer grant"},
		{"grant of a bad producer name", nil, "", []string{"session", "grant", "s1", "bob", "--producer", "Bad Name"}, ExitUsage, "producer name"},
		{"grant to the owner", nil, "", []string{"session", "grant", "s1", osUser()}, ExitUsage, "owner"},
		{"grant to a principal too long", nil, "", []string{"session", "grant", "s1", strings.Repeat("p", 1025)}, ExitUsage, "principal"},
		{"grant on an unknown session", nil, "", []string{"session", "grant", "nosuch", "bob"}, ExitNotFound, "not found"},
		{"revoke of no grant", nil, "", []string{"session", "revoke", "s1", "bob"}, ExitNotFound, "no grant"},
		{"revoke of an empty principal", nil, "", []string{"session", "revoke", "s1", ""}, ExitUsage, "principal"},
		{"admin revoke of a non-admin", nil, "", []string{"admin", "revoke", "bob"}, ExitNotFound, "not an admin"},
		{"admin grant of an empty principal", nil, "", []string{"admin", "grant", ""}, ExitUsage, "principal"},
		{"admin grant of a principal with terminal escapes", nil, "", []string{"admin", "grant", "\x1b]0;pwned\a\x1b[2J"}, ExitUsage, "U+001B not allowed in a principal"},
		{"session grant of a principal with terminal escapes", nil, "", []string{"session", "grant", "s1", "\x1b]0;pwned\a\x1b[2J"}, ExitUsage, "U+001B not allowed in a principal"},
		// A credential in the store URL's query is never shown.
		{"store url with a password in its query", nil, "", []string{"--store", "redis://127.0.0.1:1/0?password=S3cr3t", "queue", "s1"}, ExitUsage, "password=xxxxx"},
		{"store url with a token and a fragment", nil, "", []string{"--store", "redis://127.0.0.1:1/0?prefix=hq&token=S3cr3t#S3cr3t", "queue", "s1"}, ExitUsage, "token=xxxxx"},
		// Limits, each with its own message.
		{"producer name with capitals", nil, "", []string{"admit", "s1", "--producer", "Proc", "--identity", "x", "--text", "x"}, ExitUsage, "producer name"},
		{"producer name too long", nil, "", []string{"admit", "s1", "--producer", strings.Repeat("p", 65), "--identity", "x", "--text", "x"}, ExitUsage, "more than 64"},
		{"too many identities", nil, "", ids(1001), ExitUsage, "1001 identities, more than 1000"},
		{"too many parts", nil, tooManyParts, []string{"admit", "--batch", "-"}, ExitUsage, "1001 parts, more than 1000"},
		{"payload nested too deep", nil, "", []string{"admit", "s1", "--payload", deep}, ExitUsage, "nested deeper than 1000"},
		{"batch line too long", nil, strings.Repeat("z", 8<<20+10) + "\n", []string{"admit", "--batch", "-"}, ExitUsage, "line longer than"},
		// Operator commands.
		{"replay ids and session", nil, "", []string{"replay", done, "--session", "s1"}, ExitUsage, "not both"},
		{"replay since negative", nil, "", []string{"replay", "--session", "s1", "--since", "-1h"}, ExitUsage, "since"},
		{"replay of a queued admission", nil, "", []string{"replay", queued}, ExitConflict, "not done"},
		{"replay of an unknown admission", nil, "", []string{"replay", "0123456789abcdef0123456789abcdef"}, ExitNotFound, "not found"},
		{"cancel of an unknown admission", nil, "", []string{"cancel", "0123456789abcdef0123456789abcdef"}, ExitNotFound, "not found"},
		{"cancel of a done admission", nil, "", []string{"cancel", done}, ExitConflict, "conflict"},
		{"stats in an unknown format", nil, "", []string{"stats", "--format", "xml"}, ExitUsage, "xml"},
		{"doctor with an argument", nil, "", []string{"doctor", "now"}, ExitUsage, "now"},
		{"help of an unknown topic", nil, "", []string{"help", "nosuch"}, ExitUsage, "nosuch"},
		// Producers.
		{"delegate done without an id", nil, "", []string{"delegate", "done", "--session", "s1", "--target", "s1", "--result", "r"}, ExitUsage, "id"},
		{"delegate done with a bad session", nil, "", []string{"delegate", "done", "--session", "bad id", "--target", "s1", "--id", "d", "--result", "r"}, ExitUsage, "session"},
		{"delegate done with two results", nil, "", []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d", "--result", "r", "--result-file", "f"}, ExitUsage, "result"},
		// Record-time checks: refused at once, nothing recorded.
		{"delegate done to an unknown session", nil, "", []string{"delegate", "done", "--session", "nosuch", "--target", "nosuch", "--id", "d", "--result", "r"}, ExitNotFound, "session nosuch does not exist"},
		{"delegate done to an unknown target", nil, "", []string{"delegate", "done", "--session", "s1", "--target", "nosuch", "--id", "d", "--result", "r"}, ExitNotFound, "no such transcript"},
		{"delegate done to a target outside the lineage", nil, "", []string{"delegate", "done", "--session", "s1", "--target", "s2", "--id", "d", "--result", "r"}, ExitUsage, "not in session s1's lineage"},
		{"delegate done by a stranger", override, "", as("mallory", "delegate", "done", "--session", "s1", "--target", "s1", "--id", "d", "--result", "r"), ExitForbidden, `producer "delegation"`},
		{"delegate done by a reader", override, "", as("rita", "delegate", "done", "--session", "s1", "--target", "s1", "--id", "d", "--result", "r"), ExitForbidden, `producer "delegation"`},
		{"delegate done over the payload limit", nil, "", []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d", "--result", strings.Repeat("r", 2<<20)}, ExitUsage, "more than the limit of 1048576"},
		{"delegate done over a configured payload limit", map[string]string{"HERMESQ_PAYLOAD_LIMIT": "100"}, "", []string{"delegate", "done", "--session", "s1", "--target", "s1", "--id", "d", "--result", strings.Repeat(`"`, 40)}, ExitUsage, "more than the limit of 100"},
		{"proc run to an unknown session", nil, "", []string{"proc", "run", "--session", "nosuch", "--", "true"}, ExitNotFound, "session nosuch does not exist"},
		{"proc run to a target outside the lineage", nil, "", []string{"proc", "run", "--session", "s1", "--target", "s2", "--", "true"}, ExitUsage, "not in session s1's lineage"},
		{"proc run by a stranger", override, "", as("mallory", "proc", "run", "--session", "s1", "--", "true"), ExitForbidden, `producer "process"`},
		{"proc run of a command line over the payload limit", map[string]string{"HERMESQ_PAYLOAD_LIMIT": "200"}, "", []string{"proc", "run", "--session", "s1", "--", "true", strings.Repeat("a", 200)}, ExitUsage, "more than the limit of 200"},
		{"proc watch to an unknown session", nil, "", []string{"proc", "watch", "--session", "nosuch", fmt.Sprint(os.Getpid())}, ExitNotFound, "session nosuch does not exist"},
		{"producers run with a relative plugin folder", nil, "", []string{"producers", "run", "--once", "--plugin-dir", "rel/plugins"}, ExitUsage, "plugin"},
		{"outbox drop of a bad seq", nil, "", []string{"producers", "outbox", "drop", "delegation", "twelve"}, ExitUsage, "SEQ"},
		{"outbox drop of seq 0", nil, "", []string{"producers", "outbox", "drop", "delegation", "0"}, ExitUsage, "SEQ"},
		{"outbox drop without a seq", nil, "", []string{"producers", "outbox", "drop", "delegation"}, ExitUsage, "at least 2 arg"},
		{"outbox drop with a bad name", nil, "", []string{"producers", "outbox", "drop", "Bad", "1"}, ExitUsage, "producer name"},
		{"outbox drop with an empty reason", nil, "", []string{"producers", "outbox", "drop", "delegation", "1", "--reason", " "}, ExitUsage, "reason"},
		{"outbox drop of a producer without an outbox", nil, "", []string{"producers", "outbox", "drop", "nosuch", "1"}, ExitNotFound, "no outbox"},
		{"producer backoff cap below the backoff", map[string]string{"HERMESQ_PRODUCER_BACKOFF": "10s", "HERMESQ_PRODUCER_BACKOFF_CAP": "1s"}, "",
			[]string{"producers", "run", "--once"}, ExitUsage, "producer_backoff_cap"},
		{"producer poll deadline not a duration", map[string]string{"HERMESQ_PRODUCER_POLL_DEADLINE": "soon"}, "",
			[]string{"producers", "run", "--once"}, ExitUsage, "producer_poll_deadline"},
	}
	if len(cases) < 40 {
		t.Fatalf("%d cases, want at least 40", len(cases))
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				old, had := os.LookupEnv(k)
				os.Setenv(k, v)
				defer func() {
					if had {
						os.Setenv(k, old)
					} else {
						os.Unsetenv(k)
					}
				}()
			}
			r := e.runWith(c.stdin, false, c.args...)
			for k := range c.env {
				os.Setenv(k, "") // as newEnv left it, for the export below
			}
			r.wantExit(t, c.code)
			contains(t, "stderr", r.err, c.stderr)
			if strings.Contains(r.out+r.err, "S3cr3t") {
				t.Errorf("a credential is shown: %q", r.out+r.err)
			}
			if r.out != "" && !strings.Contains(strings.Join(c.args, " "), "--batch") {
				t.Errorf("stdout not empty: %q", r.out)
			}
			if after := e.export(); after != before {
				t.Fatalf("store changed:\nbefore:\n%s\nafter:\n%s", before, after)
			}
		})
	}
}
