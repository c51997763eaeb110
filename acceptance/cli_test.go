package acceptance

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// cli runs the hermesq binary against one store, with a clean environment:
// no HERMESQ_* variable of the caller leaks in, XDG dirs point into a temp
// dir, and the example handler is on PATH as "handler".
type cli struct {
	t     testing.TB
	bin   string
	env   []string
	dir   string // working and scratch directory
	store string
	// handlerLog is the example handler's log (HERMESQ_EXAMPLE_LOG).
	handlerLog string
}

func newCLI(t testing.TB, storeURL string) *cli {
	t.Helper()
	bin := hermesqBin(t)
	handlerBin(t)
	dir := t.TempDir()
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "HERMESQ_") || strings.HasPrefix(kv, "XDG_") || strings.HasPrefix(kv, "PATH=") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env,
		"PATH="+filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"),
		"XDG_STATE_HOME="+filepath.Join(dir, "state"),
		"XDG_CONFIG_HOME="+filepath.Join(dir, "config"),
		"HERMESQ_STORE="+storeURL,
		"HERMESQ_EXAMPLE_LOG="+filepath.Join(dir, "handler.log"),
	)
	return &cli{t: t, bin: bin, env: env, dir: dir, store: storeURL, handlerLog: filepath.Join(dir, "handler.log")}
}

// result is one finished hermesq command.
type result struct {
	args   []string
	stdout string
	stderr string
	code   int
}

func (r result) String() string {
	return "hermesq " + strings.Join(r.args, " ") + ": exit " + itoa(r.code) +
		"\nstdout: " + abbrev(r.stdout) + "\nstderr: " + abbrev(r.stderr)
}

func itoa(i int) string { return strconv.Itoa(i) }

// command builds a hermesq command with the cli's environment plus env.
func (c *cli) command(env []string, args ...string) *exec.Cmd {
	cmd := exec.Command(c.bin, args...)
	cmd.Env = append(append([]string{}, c.env...), env...)
	cmd.Dir = c.dir
	// Its own process group, so a test can signal a drainer and its handler
	// separately from the test binary.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	return cmd
}

// run runs hermesq to completion (bounded by a generous deadline).
func (c *cli) run(env []string, args ...string) result {
	c.t.Helper()
	cmd := c.command(env, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("start hermesq: %v", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(2 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-done
		c.t.Fatalf("hermesq %s: still running after 2m", strings.Join(args, " "))
	}
	r := result{args: args, stdout: out.String(), stderr: errb.String(), code: exitCode(err)}
	if r.code < 0 {
		c.t.Fatalf("hermesq %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// ok runs hermesq and fails the test unless it exits 0.
func (c *cli) ok(args ...string) result {
	c.t.Helper()
	r := c.run(nil, args...)
	if r.code != 0 {
		c.t.Fatalf("%v", r)
	}
	return r
}

// exit runs hermesq and fails the test unless it exits code.
func (c *cli) exit(code int, args ...string) result {
	c.t.Helper()
	r := c.run(nil, args...)
	if r.code != code {
		c.t.Fatalf("want exit %d: %v", code, r)
	}
	return r
}

// jsonOut runs hermesq with -o json, requires exit 0 and decodes stdout into v.
func (c *cli) jsonOut(v any, args ...string) {
	c.t.Helper()
	r := c.ok(append([]string{"-o", "json"}, args...)...)
	if err := json.Unmarshal([]byte(r.stdout), v); err != nil {
		c.t.Fatalf("hermesq %s: stdout is not the JSON wanted: %v\n%s", strings.Join(args, " "), err, abbrev(r.stdout))
	}
}

// admitResult is the JSON of one admit result.
type admitResult struct {
	Result         string            `json:"result"`
	Admission      backend.Admission `json:"admission"`
	Identities     map[string]string `json:"identities"`
	PayloadDiffers bool              `json:"payload_differs"`
}

func (c *cli) admitHuman(session, text string) admitResult {
	c.t.Helper()
	var r admitResult
	c.jsonOut(&r, "admit", session, "--text", text)
	return r
}

func (c *cli) admitAuto(session, producer, text, target string, identities ...string) admitResult {
	c.t.Helper()
	args := []string{"admit", session, "--producer", producer, "--text", text}
	for _, id := range identities {
		args = append(args, "--identity", id)
	}
	if target != "" {
		args = append(args, "--target", target)
	}
	var r admitResult
	c.jsonOut(&r, args...)
	return r
}

func (c *cli) show(id string) backend.Admission {
	c.t.Helper()
	var a backend.Admission
	c.jsonOut(&a, "show", id)
	return a
}

// all lists every admission of a session, in seq order.
func (c *cli) all(session string) []backend.Admission {
	c.t.Helper()
	var as []backend.Admission
	c.jsonOut(&as, "queue", session, "--status", "queued,running,unknown,done")
	return as
}

func (c *cli) messages(transcript string) []backend.Message {
	c.t.Helper()
	var ms []backend.Message
	c.jsonOut(&ms, "transcript", transcript)
	return ms
}

// lineage returns the transcripts of t's lineage, root to tip.
func (c *cli) lineage(transcript string) []backend.Transcript {
	c.t.Helper()
	var ts []backend.Transcript
	c.jsonOut(&ts, "transcript", transcript, "--lineage")
	return ts
}

// sessionJSON is the session shape of docs/contract.md §11.
type sessionJSON struct {
	ID                string     `json:"id"`
	Owner             string     `json:"owner"`
	CurrentTranscript string     `json:"current_transcript"`
	State             string     `json:"state"`
	Depth             int        `json:"depth"`
	Viewers           int        `json:"viewers"`
	Epoch             uint64     `json:"epoch"`
	LeaseHolder       *string    `json:"lease_holder"`
	LeaseExpiresAt    *time.Time `json:"lease_expires_at"`
}

func (c *cli) session(id string) sessionJSON {
	c.t.Helper()
	var s sessionJSON
	c.jsonOut(&s, "session", "show", id)
	return s
}

// export returns the store's full listing.
func (c *cli) export() string {
	c.t.Helper()
	return c.ok("export").stdout
}

// bg is a hermesq process running in the background.
type bg struct {
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	errb bytes.Buffer
	done chan struct{}
	err  error
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

// start starts hermesq in the background; the test's cleanup kills what is
// still running (its whole process group: the drainer and its handler).
func (c *cli) start(env []string, args ...string) *bg {
	c.t.Helper()
	p := &bg{cmd: c.command(env, args...), done: make(chan struct{})}
	p.cmd.Stdout = lockedWriter{&p.mu, &p.out}
	p.cmd.Stderr = lockedWriter{&p.mu, &p.errb}
	if err := p.cmd.Start(); err != nil {
		c.t.Fatalf("start hermesq %s: %v", strings.Join(args, " "), err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	c.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGCONT)
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
	})
	return p
}

func (p *bg) pid() int { return p.cmd.Process.Pid }

// signal sends sig to the hermesq process only (not its handler).
func (p *bg) signal(sig syscall.Signal) { _ = syscall.Kill(p.pid(), sig) }

// wait waits for the process to end (at most d) and returns its exit code.
func (p *bg) wait(t testing.TB, d time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		t.Fatalf("hermesq %s: still running after %v\nstderr: %s", strings.Join(p.cmd.Args[1:], " "), d, p.stderr())
	}
	return exitCode(p.err)
}

// freeze stops the hermesq process (SIGSTOP) at a moment it does not have
// the store open. A bbolt store is one file under an exclusive lock, and a
// process keeps it open for a moment after its operations (up to the
// store's hold) for the next one: stopped inside that moment, it would keep
// every other process out for as long as it stays stopped, which is what
// the bbolt store is and not what a test of a frozen drainer is about. So
// freeze checks, with a read bounded by --timeout, that the store can be
// opened, and otherwise lets the process go on for a moment and stops it
// again. On Redis the first stop is the one kept.
func (p *bg) freeze(t testing.TB, c *cli) {
	t.Helper()
	for try := 1; ; try++ {
		p.signal(syscall.SIGSTOP)
		r := c.run(nil, "--timeout", "500ms", "sessions")
		if r.code == 0 {
			return
		}
		if r.code != 75 || try == 50 {
			t.Fatalf("the store with hermesq %s stopped (try %d): %v", strings.Join(p.cmd.Args[1:], " "), try, r)
		}
		p.signal(syscall.SIGCONT)
		time.Sleep(time.Duration(try) * 10 * time.Millisecond)
	}
}

func (p *bg) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *bg) stderr() string { p.mu.Lock(); defer p.mu.Unlock(); return p.errb.String() }

// eventually polls cond every 20 ms until it holds or d passes.
func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("after %v: still not %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// handlerCall is one line of the example handler's log.
type handlerCall struct {
	Admission    backend.Admission `json:"admission"`
	Session      string            `json:"session"`
	Target       string            `json:"target"`
	Text         string            `json:"text"`
	NotesSeen    int               `json:"notes_seen"`
	MessageCount int               `json:"message_count"`
	Handler      struct {
		PID       int   `json:"pid"`
		PPID      int   `json:"ppid"`
		GPPID     int   `json:"gppid"`
		StartedAt int64 `json:"started_at"`
		EndedAt   int64 `json:"ended_at"`
	} `json:"handler"`
}

// drainer is the pid of the drainer that ran the call: on Linux the
// handler's parent is the drainer's handler supervisor.
func (c handlerCall) drainer() int {
	if c.Handler.GPPID != 0 {
		return c.Handler.GPPID
	}
	return c.Handler.PPID
}

// calls reads the example handler's log.
func (c *cli) calls() []handlerCall {
	c.t.Helper()
	return readHandlerLog(c.t, c.handlerLog)
}

// readHandlerLog reads the example handler's log (missing: none).
func readHandlerLog(t testing.TB, file string) []handlerCall {
	t.Helper()
	data, err := os.ReadFile(file)
	if os.IsNotExist(err) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var calls []handlerCall
	for _, line := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if line == "" {
			continue
		}
		var c handlerCall
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("handler log line %q: %v", line, err)
		}
		calls = append(calls, c)
	}
	return calls
}

// with returns a copy of c reporting to t (for subtests sharing a store).
func (c *cli) with(t testing.TB) *cli {
	d := *c
	d.t = t
	return &d
}

// runStdin runs hermesq with stdin.
func (c *cli) runStdin(stdin string, args ...string) result {
	c.t.Helper()
	cmd := c.command(nil, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{args: args, stdout: out.String(), stderr: errb.String(), code: exitCode(err)}
	if r.code < 0 {
		c.t.Fatalf("hermesq %s: %v", strings.Join(args, " "), err)
	}
	return r
}

// aloneCopy copies the hermesq binary bin into a folder of its own, with
// neither hermesq-producers nor hermesq-top beside it.
func aloneCopy(t *testing.T, bin string) string {
	t.Helper()
	alone := filepath.Join(t.TempDir(), "hermesq")
	data, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(alone, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return alone
}
