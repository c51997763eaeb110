package cli

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/internal/top/tui"
)

// env is one test's world: a bbolt store in a temp dir, and a clean
// environment (no HERMESQ_* of the caller, XDG dirs in the temp dir).
type env struct {
	t     *testing.T
	dir   string
	store string
	// configure, when set, adjusts each invocation's factory and streams.
	configure func(f *Factory)
	// noStoreFlag leaves --store out, for tests of where the store URL
	// comes from.
	noStoreFlag bool
	// partial builds each invocation's tree as hermesq does
	// (NewRootCmdFor: the named command alone) instead of whole; built
	// records the number of top-level commands of the last such tree (the
	// tests that set partial run one invocation at a time).
	partial bool
	built   int
}

// result is one finished invocation.
type result struct {
	args []string
	out  string
	err  string
	code int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	for _, k := range configKeys {
		t.Setenv(envName(k), "")
	}
	t.Setenv("XDG_CONFIG_HOME", filepath.Join(dir, "config"))
	t.Setenv("XDG_STATE_HOME", filepath.Join(dir, "state"))
	return &env{t: t, dir: dir, store: "bbolt://" + filepath.Join(dir, "hermesq.db")}
}

// run runs hermesq args in-process against the env's store, with empty
// stdin and no terminal.
func (e *env) run(args ...string) result { return e.runWith("", false, args...) }

// runWith runs with stdin and terminal detection set (tty: every stream).
func (e *env) runWith(stdin string, tty bool, args ...string) result {
	e.t.Helper()
	ios, in, out, errOut := Test()
	in.WriteString(stdin)
	ios.SetStdinTTY(tty)
	ios.SetStdoutTTY(tty)
	ios.SetStderrTTY(tty)
	f := NewFactory(ios)
	f.Launch = testLaunch // never the hermesq-producers binary: it would replace the test process
	f.Top = tui.Run       // nor hermesq-top
	if e.configure != nil {
		e.configure(f)
	}
	full := args
	if !e.noStoreFlag {
		full = append([]string{"--store", e.store}, args...)
	}
	root := NewRootCmd(f)
	if e.partial {
		root = NewRootCmdFor(f, full)
		e.built = len(root.Commands())
	}
	root.SetArgs(full)
	err := root.ExecuteContext(context.Background())
	code := f.Exit(err)
	return result{args: args, out: out.String(), err: errOut.String(), code: code}
}

// ok runs and fails the test unless it exits 0.
func (e *env) ok(args ...string) result {
	e.t.Helper()
	r := e.run(args...)
	if r.code != 0 {
		e.t.Fatalf("hermesq %s: exit %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), r.code, r.out, r.err)
	}
	return r
}

// export is the store's full export: the "store unchanged" witness.
func (e *env) export() string {
	e.t.Helper()
	return e.ok("export").out
}

// wantExit checks the exit code and that stderr is exactly one error line.
func (r result) wantExit(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("hermesq %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(r.args, " "), r.code, code, r.out, r.err)
	}
	if code != 0 {
		checkOneErrorLine(t, r)
	}
	return r
}

func checkOneErrorLine(t *testing.T, r result) {
	t.Helper()
	s := strings.TrimSuffix(r.err, "\n")
	if s == "" || strings.Contains(s, "\n") {
		t.Fatalf("hermesq %s: stderr is not one line: %q", strings.Join(r.args, " "), r.err)
	}
	if strings.HasPrefix(s, "{") {
		var e struct{ Error, Message string }
		if err := json.Unmarshal([]byte(s), &e); err != nil || e.Error == "" || e.Message == "" {
			t.Fatalf("stderr %q is not {\"error\",\"message\"}", s)
		}
		return
	}
	if !strings.HasPrefix(s, "hermesq: error: ") {
		t.Fatalf("stderr %q does not read \"hermesq: error: …\"", s)
	}
}

// decode parses stdout as one JSON value.
func decode[T any](t *testing.T, r result) T {
	t.Helper()
	var v T
	if err := json.Unmarshal([]byte(r.out), &v); err != nil {
		t.Fatalf("hermesq %s: stdout is not JSON (%v):\n%s", strings.Join(r.args, " "), err, r.out)
	}
	return v
}

// decodeLines parses stdout as NDJSON.
func decodeLines[T any](t *testing.T, r result) []T {
	t.Helper()
	var out []T
	dec := json.NewDecoder(strings.NewReader(r.out))
	for dec.More() {
		var v T
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("hermesq %s: stdout is not NDJSON (%v):\n%s", strings.Join(r.args, " "), err, r.out)
		}
		out = append(out, v)
	}
	return out
}

// admitOut is the admit result shape (admission.AdmitJSON).
type admitOut struct {
	Result         string            `json:"result"`
	Admission      admissionOut      `json:"admission"`
	Identities     map[string]string `json:"identities"`
	PayloadDiffers bool              `json:"payload_differs"`
	Line           int               `json:"line"`
	Error          string            `json:"error"`
	Message        string            `json:"message"`
}

type admissionOut struct {
	ID          string          `json:"id"`
	Session     string          `json:"session"`
	Seq         uint64          `json:"seq"`
	Kind        string          `json:"kind"`
	Principal   *string         `json:"principal"`
	Status      string          `json:"status"`
	Outcome     *string         `json:"outcome"`
	Mode        *string         `json:"mode"`
	DeliveredTo *string         `json:"delivered_to"`
	Payload     json.RawMessage `json:"payload"`
	Identities  []string        `json:"identities"`
}

func (a admissionOut) text(t *testing.T) string {
	t.Helper()
	var p struct{ Text string }
	if err := json.Unmarshal(a.Payload, &p); err != nil {
		t.Fatal(err)
	}
	return p.Text
}

func deref(p *string) string {
	if p == nil {
		return "<null>"
	}
	return *p
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func contains(t *testing.T, what, s, sub string) {
	t.Helper()
	if !strings.Contains(s, sub) {
		t.Fatalf("%s does not contain %q:\n%s", what, sub, s)
	}
}
