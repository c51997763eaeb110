package cli

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Configuration precedence: flag > HERMESQ_* environment > config file >
// default, for the principal, the output format and the store.
func TestConfigPrecedence(t *testing.T) {
	e := newEnv(t)
	principal := func(session string, args ...string) string {
		t.Helper()
		r := e.ok(append(append([]string{"-o", "json"}, args...), "admit", session, "--text", "x")...)
		return deref(decode[admitOut](t, r).Admission.Principal)
	}

	// default: the OS user name
	if got, want := principal("p0"), osUser(); got != want {
		t.Fatalf("default principal %q, want the OS user %q", got, want)
	}
	// the default config file ($XDG_CONFIG_HOME/hermesq/config.yaml); on
	// a file store another principal than the OS user needs
	// principal_override, else exit 7
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "principal: file-user\n")
	e.run("admit", "p1", "--text", "x").wantExit(t, ExitForbidden)
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "principal: file-user\nprincipal_override: true\n")
	if got := principal("p1"); got != "file-user" {
		t.Fatalf("principal from config file: %q", got)
	}
	// environment over file
	t.Setenv("HERMESQ_PRINCIPAL", "env-user")
	if got := principal("p2"); got != "env-user" {
		t.Fatalf("principal from environment: %q", got)
	}
	// flag over environment
	if got := principal("p3", "--principal", "flag-user"); got != "flag-user" {
		t.Fatalf("principal from flag: %q", got)
	}
	t.Setenv("HERMESQ_PRINCIPAL", "")

	// --config names another file, over the default one; HERMESQ_CONFIG too.
	other := filepath.Join(e.dir, "other.yaml")
	writeFile(t, other, "principal: other-file-user\nprincipal_override: true\n")
	if got := principal("p4", "--config", other); got != "other-file-user" {
		t.Fatalf("principal from --config: %q", got)
	}
	t.Setenv("HERMESQ_CONFIG", other)
	if got := principal("p5"); got != "other-file-user" {
		t.Fatalf("principal from HERMESQ_CONFIG: %q", got)
	}
	t.Setenv("HERMESQ_CONFIG", "")

	// output: file < env < flag
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "principal: file-user\nprincipal_override: true\noutput: json\n")
	r := e.ok("session", "show", "p1")
	if !strings.HasPrefix(r.out, "{") {
		t.Fatalf("output json from config file: %q", r.out)
	}
	t.Setenv("HERMESQ_OUTPUT", "text")
	if r := e.ok("session", "show", "p1"); !strings.HasPrefix(r.out, "id:") {
		t.Fatalf("output text from environment: %q", r.out)
	}
	if r := e.ok("-o", "jsonl", "sessions"); strings.HasPrefix(r.out, "[") || !strings.HasPrefix(r.out, "{") {
		t.Fatalf("output jsonl from flag: %q", r.out)
	}
	t.Setenv("HERMESQ_OUTPUT", "")

	// store: file < env < flag
	e.noStoreFlag = true
	dbFile := filepath.Join(e.dir, "file.db")
	dbEnv := filepath.Join(e.dir, "env.db")
	dbFlag := filepath.Join(e.dir, "flag.db")
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "store: bbolt://"+dbFile+"\n")
	e.ok("session", "open", "in-file")
	t.Setenv("HERMESQ_STORE", "bbolt://"+dbEnv)
	e.ok("session", "open", "in-env")
	e.ok("--store", "bbolt://"+dbFlag, "session", "open", "in-flag")
	t.Setenv("HERMESQ_STORE", "")
	for db, want := range map[string]string{dbFile: "in-file", dbEnv: "in-env", dbFlag: "in-flag"} {
		r := e.ok("--store", "bbolt://"+db, "sessions")
		if !strings.Contains(r.out, want) || strings.Count(r.out, "\n") != 2 {
			t.Errorf("%s holds:\n%s\nwant only %s", db, r.out, want)
		}
	}
	// default store: $XDG_STATE_HOME/hermesq/hermesq.db
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "{}\n")
	e.ok("session", "open", "in-default")
	if _, err := os.Stat(filepath.Join(e.dir, "state", "hermesq", "hermesq.db")); err != nil {
		t.Fatalf("default store: %v", err)
	}
}

// The handler and drain settings come from the config file; a flag wins.
func TestConfigHandlerAndDrain(t *testing.T) {
	e := newEnv(t)
	reply := filepath.Join(e.dir, "reply.sh")
	writeFile(t, reply, "#!/bin/sh\ncat >/dev/null\necho \"reply from $1\"\n")
	if err := os.Chmod(reply, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"),
		"handler:\n  command: ["+reply+", config]\n  timeout: 1m\ndrain:\n  lease: 20s\n  on_unknown: requeue\n")
	e.ok("admit", "s1", "--text", "one")
	e.ok("drain", "s1")
	e.ok("admit", "s1", "--text", "two")
	e.ok("drain", "s1", "--", reply, "argv")
	r := e.ok("transcript", "s1")
	want := "[1] user: one\n[2] assistant: reply from config\n[3] user: two\n[4] assistant: reply from argv\n"
	if r.out != want {
		t.Fatalf("transcript:\n%s\nwant:\n%s", r.out, want)
	}

	// A bad value in the file is a usage error naming the key.
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "drain:\n  lease: soon\n")
	r = e.run("drain", "s1").wantExit(t, ExitUsage)
	contains(t, "stderr", r.err, "drain.lease")
	// and the flag overrides the file's bad value
	e.ok("drain", "s1", "--lease", "10s", "--", reply)
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "payload_limit: lots\n")
	e.run("admit", "s1", "--text", "x").wantExit(t, ExitUsage)
	writeFile(t, filepath.Join(e.dir, "config", "hermesq", "config.yaml"), "output: [unclosed\n")
	e.run("sessions").wantExit(t, ExitUsage)
	// A named config file that does not exist is an error; a missing default
	// one is not.
	e.run("--config", filepath.Join(e.dir, "nope.yaml"), "sessions").wantExit(t, ExitUsage)
}

// producers.NAME.config is a plugin's own settings: a map, handed over as
// JSON; anything else is refused naming the setting.
func TestProducerPluginConfig(t *testing.T) {
	e := newEnv(t)
	conf := filepath.Join(e.dir, "config", "hermesq", "config.yaml")
	writeFile(t, conf, "producers:\n  watch:\n    config:\n      watches:\n        - name: app\n          path: /var/log/app.log\n          rate: 2/1m\n")
	ios, _, _, _ := Test()
	pc, err := NewFactory(ios).producerConfig()
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(pc.Plugins["watch"].Config), `{"watches":[{"name":"app","path":"/var/log/app.log","rate":"2/1m"}]}`; got != want {
		t.Errorf("config handed to the plugin %s, want %s", got, want)
	}
	for _, bad := range []string{"producers:\n  watch:\n    config: [1, 2]\n", "producers:\n  watch:\n    config: on\n"} {
		writeFile(t, conf, bad)
		r := e.run("producers", "ls")
		r.wantExit(t, ExitUsage)
		if !strings.Contains(r.err, "producers.watch.config: want a map") {
			t.Errorf("%q: stderr %q, want it to name producers.watch.config", bad, r.err)
		}
	}
}

// TestProducerPinAndConfigErrors is issue 23: a pin YAML reads as a number
// (an unquoted 0000…0000) is read from the file's own text; a pin that is
// not 64 hex digits says so and how to write it; and a mistake in
// producers.NAME fails only the commands that start or check the plugins
// (producers …, doctor), never those that record events or admit.
func TestProducerPinAndConfigErrors(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	conf := filepath.Join(e.dir, "config", "hermesq", "config.yaml")
	ios, _, _, _ := Test()
	for _, c := range []struct{ yaml, want string }{
		{"producers:\n  watch:\n    sha256: " + strings.Repeat("0", 64) + "\n", strings.Repeat("0", 64)},
		{"producers:\n  watch:\n    SHA256: " + strings.Repeat("1", 64) + "\n", strings.Repeat("1", 64)},
		{"producers:\n  watch:\n    sha256: \"" + strings.Repeat("0", 64) + "\"\n", strings.Repeat("0", 64)},
		{"producers:\n  watch:\n    sha256: " + strings.Repeat("ab", 32) + "\n", strings.Repeat("ab", 32)},
	} {
		writeFile(t, conf, c.yaml)
		pc, err := NewFactory(ios).producerConfig()
		if err != nil {
			t.Errorf("%q: %v", c.yaml, err)
			continue
		}
		if got := fmt.Sprintf("%x", pc.Plugins["watch"].SHA256); got != c.want {
			t.Errorf("%q: pin %s, want %s", c.yaml, got, c.want)
		}
	}
	for _, c := range []struct{ yaml, want string }{
		{"producers:\n  watch:\n    sha256: 12345\n", `producers.watch.sha256 "12345": want 64 hex digits, the binary's sha256sum (quote it`},
		{"producers:\n  watch:\n    sha256: [1]\n", `producers.watch.sha256 [1]: want 64 hex digits`},
		{"producers:\n  watch:\n    sha256: " + strings.Repeat("g", 64) + "\n", `want 64 hex digits`},
		{"producers:\n  watch:\n    enabled: maybe\n", "producers.watch.enabled: want true or false"},
		{"producers:\n  watch:\n    confg: {}\n", "producers.watch.confg: unknown setting"},
	} {
		writeFile(t, conf, c.yaml)
		for _, args := range [][]string{{"producers", "ls"}, {"producers", "run", "--once"}, {"producers", "outbox", "watch"}} {
			r := e.run(args...)
			r.wantExit(t, ExitUsage)
			if !strings.Contains(r.err, c.want) {
				t.Errorf("%q: %s: stderr %q, want %q", c.yaml, args, r.err, c.want)
			}
		}
		r := e.run("doctor")
		if r.code == 0 || !strings.Contains(r.out, c.want) {
			t.Errorf("%q: doctor: exit %d, stdout %q, want a failure naming %q", c.yaml, r.code, r.out, c.want)
		}
		// Commands that need no plugin setting are not stopped by it.
		e.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "d-"+fmt.Sprint(len(c.yaml)), "--result", "r")
		e.ok("proc", "run", "--session", "s1", "--", "true")
		e.ok("admit", "s1", "--text", "x")
	}
}

// TestDoctorShowsPinMismatch: doctor checks a pinned plugin's checksum and
// shows the binary's own when it differs, and how to pin it.
func TestDoctorShowsPinMismatch(t *testing.T) {
	e := newEnv(t)
	e.ok("session", "open", "s1")
	dir := filepath.Join(e.dir, "plugins")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hermesq-producer-watch")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o700); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte("#!/bin/sh\n"))
	conf := filepath.Join(e.dir, "config", "hermesq", "config.yaml")
	writeFile(t, conf, fmt.Sprintf("plugin_dir: %s\nproducers:\n  watch:\n    sha256: %s\n", dir, strings.Repeat("0", 64)))
	r := e.run("doctor")
	want := fmt.Sprintf("%s has sha256 %x, not the pinned %s", bin, sum, strings.Repeat("0", 64))
	if r.code == 0 || !strings.Contains(r.out, want) || !strings.Contains(r.out, fmt.Sprintf(`producers.watch.sha256: "%x"`, sum)) {
		t.Errorf("doctor with a wrong pin: exit %d\n%s\nwant a failure with %q", r.code, r.out, want)
	}
	writeFile(t, conf, fmt.Sprintf("plugin_dir: %s\nproducers:\n  watch:\n    sha256: %x\n", dir, sum))
	if r := e.run("doctor"); !strings.Contains(r.out, "matches its pin") {
		t.Errorf("doctor with the right pin:\n%s", r.out)
	}
}
