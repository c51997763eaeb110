package acceptance

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/internal/redistest"
)

// TestNoCredentialsAnywhere (issue 11, acceptance 5): a scripted run against
// a password-protected Redis (the URL with its password in HERMESQ_STORE and
// in a config file) never shows the password: not in any command's stdout
// or stderr (text and JSON, successes and failures, doctor included), nor in
// the environment handed to a handler or to a producer plugin.
func TestNoCredentialsAnywhere(t *testing.T) {
	const user, pass = "hq-app", "Zq9-S3cr3t-Pa55w0rd-8Kx"
	srv := redistest.Start(t, redistest.WithACL(user, pass))
	c := withPlugins(t, newCLI(t, srv.URL()), "delegation")
	envDir := filepath.Join(c.dir, "envs")
	if err := os.MkdirAll(envDir, 0o700); err != nil {
		t.Fatal(err)
	}

	// A handler that records its environment, then replies.
	handler := filepath.Join(c.dir, "envdump-handler.sh")
	script := "#!/bin/sh\nenv > '" + envDir + "/handler.'$$\ncat >/dev/null\necho 'reply'\n"
	if err := os.WriteFile(handler, []byte(script), 0o700); err != nil {
		t.Fatal(err)
	}
	// The delegation plugin behind a wrapper that records its environment.
	bin, err := buildAll()
	if err != nil {
		t.Fatal(err)
	}
	plugin := filepath.Join(c.dir, "plugins", "hermesq-producer-delegation")
	if err := os.Remove(plugin); err != nil {
		t.Fatal(err)
	}
	wrapper := "#!/bin/sh\nenv > '" + envDir + "/plugin.'$$\nexec '" + filepath.Join(bin, "hermesq-producer-delegation") + "' \"$@\"\n"
	if err := os.WriteFile(plugin, []byte(wrapper), 0o700); err != nil {
		t.Fatal(err)
	}
	// The same URL in a config file, for the commands run with --config.
	cfg := filepath.Join(c.dir, "config.yaml")
	if err := os.WriteFile(cfg, []byte("store: \""+srv.URL()+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	var all []result
	run := func(env []string, args ...string) result {
		t.Helper()
		r := c.run(env, args...)
		all = append(all, r)
		return r
	}
	mustOK := func(args ...string) {
		t.Helper()
		if r := run(nil, args...); r.code != 0 {
			t.Fatalf("%v", r)
		}
	}
	mustOK("session", "open", "s1")
	mustOK("admit", "s1", "--text", "hello")
	mustOK("-o", "json", "admit", "s1", "--producer", "process", "--identity", "p1", "--text", "[finished] job (exit 0)")
	mustOK("viewer", "add", "s1")
	mustOK("drain", "s1", "--", handler)
	mustOK("delegate", "done", "--session", "s1", "--target", "s1", "--id", "D1", "--result", "RESULT_one")
	mustOK("producers", "run", "--once")
	mustOK("-o", "json", "drain", "--all", "--", handler)
	mustOK("sessions")
	mustOK("-o", "json", "session", "show", "s1")
	mustOK("queue", "s1")
	mustOK("transcript", "--session", "s1")
	mustOK("stats")
	mustOK("export")
	mustOK("doctor")
	mustOK("-o", "json", "doctor")
	mustOK("admin", "list")
	run([]string{"HERMESQ_STORE="}, "--config", cfg, "sessions")
	// Failures, in text and JSON: a bad input, a refused principal, a wrong
	// password with the right one elsewhere in the environment, the server
	// gone.
	run(nil, "admit", "bad id", "--text", "x")
	run(nil, "-o", "json", "session", "close", "s1", "--reason", "nope")
	run(nil, "--principal", "someone-else", "-o", "json", "admit", "s1", "--text", "x")
	run([]string{"HERMESQ_STORE=" + strings.Replace(srv.URL(), pass, "wrong-password", 1)}, "sessions")
	run([]string{"HERMESQ_STORE=" + strings.Replace(srv.URL(), pass, "wrong-password", 1)}, "-o", "json", "doctor")
	// The password in the URL's query (issue 24, item 2): by flag, by
	// environment, in a config file, to doctor; refused (an unknown
	// parameter), never shown.
	qu, err := url.Parse(srv.URL())
	if err != nil {
		t.Fatal(err)
	}
	qu.User, qu.RawQuery = nil, "password="+url.QueryEscape(pass)
	qcfg := filepath.Join(c.dir, "config-query.yaml")
	if err := os.WriteFile(qcfg, []byte("store: \""+qu.String()+"\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range []result{
		run(nil, "--store", qu.String(), "sessions"),
		run([]string{"HERMESQ_STORE=" + qu.String()}, "sessions"),
		run([]string{"HERMESQ_STORE="}, "--config", qcfg, "sessions"),
		run(nil, "--store", qu.String(), "doctor"),
		run([]string{"HERMESQ_STORE=" + qu.String()}, "-o", "json", "doctor"),
		run(nil, "--store", qu.String()+"#"+pass, "sessions"),
	} {
		if r.code == 0 || !strings.Contains(r.stdout+r.stderr, "password=xxxxx") {
			t.Errorf("a URL with a password in its query: want refused, naming password=xxxxx: %v", r)
		}
	}
	srv.Kill()
	run(nil, "--timeout", "1s", "admit", "s1", "--text", "down")
	run(nil, "--timeout", "1s", "-o", "json", "doctor")

	for _, r := range all {
		if strings.Contains(r.stdout, pass) || strings.Contains(r.stderr, pass) {
			t.Errorf("the password appears in the output of hermesq %s:\nstdout: %s\nstderr: %s",
				strings.Join(redactArgs(r.args, pass), " "), r.stdout, r.stderr)
		}
	}
	envs, err := filepath.Glob(filepath.Join(envDir, "*"))
	if err != nil {
		t.Fatal(err)
	}
	var handlers, plugins int
	for _, f := range envs {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(filepath.Base(f), "handler.") {
			handlers++
		} else {
			plugins++
		}
		if strings.Contains(string(b), pass) {
			t.Errorf("the password is in the environment handed to a child (%s):\n%s", filepath.Base(f), strings.ReplaceAll(string(b), pass, "<PASSWORD>"))
		}
		if strings.Contains(string(b), "HERMESQ_STORE=redis") {
			t.Errorf("the store URL is in the environment handed to a child (%s)", filepath.Base(f))
		}
	}
	if handlers == 0 || plugins == 0 {
		t.Fatalf("environments recorded: %d of handlers, %d of plugins; want some of each", handlers, plugins)
	}
}
