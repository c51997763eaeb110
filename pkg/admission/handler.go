package admission

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Handler is the program a turn runs (docs/contract.md §3).
type Handler struct {
	Argv    []string      // the words after `--`, or config handler.command; never a shell string
	Timeout time.Duration // 0: none
	Env     []string      // extra KEY=VALUE; the caller's environment is passed through, scrubbed
	// Secrets are values the handler must never see (the store's
	// password): every inherited variable holding one is dropped. A
	// HERMESQ_STORE URL carrying credentials is dropped whatever Secrets
	// say.
	Secrets []string
}

// handlerEnv is the environment of a handler: the caller's, without any
// variable carrying a store credential, then h.Env, then the documented
// HERMESQ_* variables of the turn (which win over inherited ones).
func handlerEnv(base []string, h *Handler, in TurnInput, epoch uint64) []string {
	turn := []string{
		"HERMESQ_SESSION=" + in.Session,
		"HERMESQ_ADMISSION=" + in.Admission.ID,
		"HERMESQ_TARGET=" + in.Target,
		"HERMESQ_EPOCH=" + strconv.FormatUint(epoch, 10),
		"HERMESQ_KIND=" + string(in.Admission.Kind),
		"HERMESQ_PRODUCER=" + in.Admission.Producer,
	}
	set := map[string]bool{}
	for _, kv := range turn {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	out := make([]string, 0, len(base)+len(h.Env)+len(turn))
	for _, kv := range base {
		k, v, _ := strings.Cut(kv, "=")
		if set[k] || carriesSecret(k, v, h.Secrets) {
			continue
		}
		out = append(out, kv)
	}
	for _, kv := range h.Env {
		k, v, _ := strings.Cut(kv, "=")
		if set[k] || carriesSecret(k, v, h.Secrets) {
			continue
		}
		out = append(out, kv)
	}
	return append(out, turn...)
}

// carriesSecret reports whether the variable k=v would hand a store
// credential to the handler.
func carriesSecret(k, v string, secrets []string) bool {
	u, uerr := url.Parse(v)
	for _, s := range secrets {
		switch {
		case s == "":
		case v == s:
			return true
		case len(s) >= minSecretMatch && strings.Contains(v, s):
			return true
		case uerr == nil && u.User != nil && strings.Contains(u.User.String(), s):
			return true // a URL carrying it (a short one is not searched for everywhere)
		}
	}
	if k == "HERMESQ_STORE" && (uerr != nil || u.User != nil) {
		return true // credentials, or not a URL that can be checked
	}
	return false
}

// minSecretMatch: a secret at least this long is looked for inside every
// variable; a shorter one (which would match ordinary values, PATH
// included) only as a whole value or inside a URL's user part.
const minSecretMatch = 6

// TurnInput is the JSON written to the handler's stdin.
type TurnInput struct {
	Admission    backend.Admission `json:"admission"`
	Session      string            `json:"session"`
	Target       string            `json:"target"`
	Text         string            `json:"text"`
	NotesSeen    int               `json:"notes_seen"`
	MessageCount int               `json:"message_count"`
}

// stderrTail is how much of the handler's stderr a failed turn keeps in its
// error.
const stderrTail = backend.MaxErrorTail

// maxReply bounds the reply kept from a handler's stdout; a longer reply
// fails the turn instead of filling memory and the transcript.
const maxReply = backend.MaxHandlerReply

// capWriter keeps at most n bytes and remembers whether more came.
type capWriter struct {
	n    int
	buf  bytes.Buffer
	over bool
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.n - w.buf.Len(); len(p) > room {
		w.over = true
		if room > 0 {
			w.buf.Write(p[:room])
		}
		return len(p), nil
	}
	return w.buf.Write(p)
}

// waitDelay bounds how long a killed handler's pipes may stay open (held by
// a grandchild that escaped the process group) before they are closed.
const waitDelay = 5 * time.Second

// Why a handler process was stopped early.
var (
	errTimeout = errors.New("timeout")
	errGrace   = errors.New("drain stopped")
	// errLeaseLost: the drain lease was lost or could lapse unrenewed.
	errLeaseLost = errors.New("the drain lease was lost")
)

// turnResult is how a handler run ended.
type turnResult struct {
	reply   string
	outcome backend.Outcome // completed, failed, or interrupted (killed after the grace)
	errText string          // for a failed or interrupted turn
	// leaseErr: killed because the drain lease was lost or could lapse:
	// why. The turn is then not settled (the other fields are unset).
	leaseErr error
}

// tailWriter keeps the last n bytes written to it.
type tailWriter struct {
	n   int
	buf []byte
}

func (w *tailWriter) Write(p []byte) (int, error) {
	w.buf = append(w.buf, p...)
	if len(w.buf) > w.n {
		w.buf = append(w.buf[:0], w.buf[len(w.buf)-w.n:]...)
	}
	return len(p), nil
}

func (w *tailWriter) String() string {
	return strings.TrimSpace(strings.ToValidUTF8(string(w.buf), ""))
}

// runHandler runs one turn's handler process: argv executed directly (never
// through a shell), the turn input as JSON on stdin, HERMESQ_* variables in
// its environment, stdout as the reply. It is stopped (its whole process
// group killed) after h.Timeout, grace after stop is done, or at once when
// fence is done (the drain lease lost or about to lapse: another drainer
// may run the session next, and two handlers of one session never run at
// once). A handler that cannot be started is an error (a configuration
// problem, the turn is not spent), and so is one not started because fence
// is already done (wrapping errLeaseLost); everything else is a turnResult.
func runHandler(stop, fence context.Context, h *Handler, grace time.Duration, in TurnInput, epoch uint64) (turnResult, error) {
	if len(h.Argv) == 0 || h.Argv[0] == "" {
		return turnResult{}, fmt.Errorf("handler command is empty: %w", backend.ErrInvalid)
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return turnResult{}, fmt.Errorf("encode turn input: %w", backend.ErrInternal)
	}
	runCtx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)

	cmd := exec.CommandContext(runCtx, h.Argv[0], h.Argv[1:]...)
	cmd.Stdin = bytes.NewReader(stdin)
	stdout := &capWriter{n: maxReply}
	stderr := &tailWriter{n: stderrTail}
	cmd.Stdout = stdout
	cmd.Stderr = stderr
	cmd.Env = handlerEnv(os.Environ(), h, in, epoch)
	setProcessGroup(cmd)
	cmd.WaitDelay = waitDelay
	// The handler dies with this thread (Linux: the parent-death signal is
	// tied to the thread that started it), so the thread stays this
	// goroutine's until the handler has been waited for.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if cause := context.Cause(fence); cause != nil {
		// Never started under a lease that may already have lapsed.
		return turnResult{}, fmt.Errorf("handler not started: %w: %w", errLeaseLost, cause)
	}
	if err := cmd.Start(); err != nil {
		return turnResult{}, fmt.Errorf("start handler %q: %s: %w", h.Argv[0], oneLine(err), backend.ErrInvalid)
	}
	// Whatever way the handler ends, what it left running in its process
	// group (a shell's background job) is killed with it.
	defer killGroup(cmd)
	// The timeout and the grace run from the start of the process, never
	// before it: a start they cancelled would read as a handler that cannot
	// be started (a configuration error, the turn given back) instead of
	// the turn timing out or being interrupted.
	if h.Timeout > 0 {
		t := time.AfterFunc(h.Timeout, func() { cancel(errTimeout) })
		defer t.Stop()
	}
	finished := make(chan struct{})
	defer close(finished)
	go func() {
		select {
		case <-finished:
		case <-fence.Done():
			cancel(fmt.Errorf("%w: %w", errLeaseLost, context.Cause(fence)))
		}
	}()
	go func() {
		select {
		case <-finished:
			return
		case <-stop.Done():
		}
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-finished:
		case <-t.C:
			cancel(errGrace)
		}
	}()
	err = cmd.Wait()
	tail := stderr.String()
	withTail := func(s string) string {
		if tail == "" {
			return s
		}
		return s + ": " + tail
	}
	if err != nil {
		switch cause := context.Cause(runCtx); {
		case errors.Is(cause, errTimeout):
			return turnResult{outcome: backend.OutcomeFailed, errText: withTail(fmt.Sprintf("timeout after %s", h.Timeout))}, nil
		case errors.Is(cause, errLeaseLost):
			return turnResult{leaseErr: context.Cause(fence)}, nil
		case errors.Is(cause, errGrace):
			return turnResult{outcome: backend.OutcomeInterrupted, errText: withTail(fmt.Sprintf("killed %s after the drain was stopped", grace))}, nil
		}
		var ee *exec.ExitError
		msg := oneLine(err)
		if errors.As(err, &ee) {
			msg = ee.ProcessState.String() // "exit status 3", "signal: killed"
		}
		return turnResult{outcome: backend.OutcomeFailed, errText: withTail("handler " + msg)}, nil
	}
	if stdout.over {
		return turnResult{outcome: backend.OutcomeFailed, errText: withTail(fmt.Sprintf("reply is larger than %d bytes", maxReply))}, nil
	}
	// Like the shell's $(…), trailing newlines are not part of the reply.
	reply := strings.TrimRight(strings.ToValidUTF8(stdout.buf.String(), "\uFFFD"), "\r\n")
	return turnResult{reply: reply, outcome: backend.OutcomeCompleted}, nil
}
