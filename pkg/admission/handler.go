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

// outputWait bounds how long, once the handler has exited and what was
// left of its process group was killed, its stdout and stderr are read on:
// only a process that left the group (setsid) can still hold them then.
// What such a process writes later is discarded and its pipe closed.
const outputWait = time.Second

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
	// leaseErr: killed because the drain lease was lost or could lapse
	// (by this drainer or, on Linux, by the handler supervisor at the
	// lease deadline), or the handler's end is not known: why. The turn
	// is then not settled (the other fields are unset).
	leaseErr error
	// end is how and when the handler process ended.
	end procEnd
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

// tailText is the tail of a handler's stderr as a failed turn's error
// carries it.
func tailText(b []byte) string {
	return strings.TrimSpace(strings.ToValidUTF8(string(b), ""))
}

// runHandler runs one turn's handler process: argv executed directly (never
// through a shell), the turn input as JSON on stdin, HERMESQ_* variables in
// its environment, stdout as the reply. It is stopped (its whole process
// group killed) after h.Timeout, grace after stop is done, or at once when
// lease.fence is done (the drain lease lost or about to lapse: another
// drainer may run the session next, and two handlers of one session never
// run at once); on Linux the handler supervisor also kills it at the lease
// deadline, should this drainer be stopped or starved (supervisor.go). A
// handler that cannot be started is an error (a configuration problem, the
// turn is not spent), and so is one not started because the lease may
// already have lapsed (wrapping errLeaseLost); everything else is a
// turnResult.
//
// The turn is judged by the handler's exit status and what it wrote until
// it exited: then whatever it left running in its process group is killed,
// its output is read for at most outputWait more (a process that left the
// group may still hold the pipes), and the pipes are closed.
func runHandler(stop context.Context, lease *turnLease, h *Handler, grace time.Duration, in TurnInput, epoch uint64) (turnResult, error) {
	if len(h.Argv) == 0 || h.Argv[0] == "" {
		return turnResult{}, fmt.Errorf("handler command is empty: %w", backend.ErrInvalid)
	}
	stdin, err := json.Marshal(in)
	if err != nil {
		return turnResult{}, fmt.Errorf("encode turn input: %w", backend.ErrInternal)
	}
	// exec.Command looks the program up as it would run it.
	cmd := exec.Command(h.Argv[0], h.Argv[1:]...)
	if cmd.Err != nil {
		return turnResult{}, fmt.Errorf("start handler %q: %s: %w", h.Argv[0], oneLine(cmd.Err), backend.ErrInvalid)
	}
	if cause := context.Cause(lease.fence); cause != nil {
		// Never started under a lease that may already have lapsed.
		return turnResult{}, fmt.Errorf("handler not started: %w: %w", errLeaseLost, cause)
	}
	dir, _ := os.Getwd() // "": the drainer's, whatever it is
	p, err := lease.start(procSpec{
		path: cmd.Path, argv: cmd.Args, env: handlerEnv(os.Environ(), h, in, epoch), dir: dir,
		input: stdin, replyCap: maxReply, tailSize: stderrTail,
	})
	if err != nil {
		if errors.Is(err, errLeaseLost) {
			return turnResult{}, fmt.Errorf("handler not started: %w", err)
		}
		if errors.Is(err, errSupervisorLost) {
			// Maybe started, and killed: as a handler whose end is not known.
			return turnResult{leaseErr: err, end: procEnd{err: err}}, nil
		}
		return turnResult{}, fmt.Errorf("start handler %q: %w", h.Argv[0], err)
	}

	// The timeout and the grace run from the start of the process, never
	// before it: a start they cancelled would read as a handler that cannot
	// be started (a configuration error, the turn given back) instead of
	// the turn timing out or being interrupted.
	var timeout <-chan time.Time
	if h.Timeout > 0 {
		t := time.NewTimer(h.Timeout)
		defer t.Stop()
		timeout = t.C
	}
	var graceEnd <-chan time.Time
	stopped, fenced := stop.Done(), lease.fence.Done()
	var cause error // why this drainer killed it; nil: it was not killed
	kill := func(why error) {
		select {
		case <-p.ended():
			// It ended on its own before (a drainer that was stopped sees
			// both at once): judged by how it ended.
		default:
			if cause == nil {
				cause = why
				p.kill()
			}
		}
	}
wait:
	for {
		select {
		case <-p.ended():
			break wait
		case <-timeout:
			timeout = nil
			kill(errTimeout)
		case <-fenced:
			fenced = nil
			kill(fmt.Errorf("%w: %w", errLeaseLost, context.Cause(lease.fence)))
		case <-stopped:
			stopped = nil
			t := time.NewTimer(grace)
			defer t.Stop()
			graceEnd = t.C
		case <-graceEnd:
			graceEnd = nil
			kill(errGrace)
		}
	}
	end, out := p.end(), p.output()
	tail := tailText(out.stderr)
	withTail := func(s string) string {
		if tail == "" {
			return s
		}
		return s + ": " + tail
	}
	res := turnResult{end: end}
	killed := end.killed() // by SIGKILL: ours, the supervisor's or anyone's
	switch {
	case end.err != nil:
		// The supervisor was lost: whether the handler ran, and how it
		// ended, is not known.
		res.leaseErr = end.err
		return res, nil
	case killed && end.deadlineKill:
		res.leaseErr = fmt.Errorf("killed by the handler supervisor at the lease deadline: %w", errLeaseLost)
		return res, nil
	case killed && errors.Is(cause, errTimeout):
		res.outcome, res.errText = backend.OutcomeFailed, withTail(fmt.Sprintf("timeout after %s", h.Timeout))
		return res, nil
	case killed && errors.Is(cause, errLeaseLost):
		res.leaseErr = cause
		return res, nil
	case killed && errors.Is(cause, errGrace):
		res.outcome, res.errText = backend.OutcomeInterrupted, withTail(fmt.Sprintf("killed %s after the drain was stopped", grace))
		return res, nil
	case !end.success():
		res.outcome, res.errText = backend.OutcomeFailed, withTail("handler "+end.status)
		return res, nil
	case out.over:
		res.outcome, res.errText = backend.OutcomeFailed, withTail(fmt.Sprintf("reply is larger than %d bytes", maxReply))
		return res, nil
	}
	// Like the shell's $(…), trailing newlines are not part of the reply.
	res.reply = strings.TrimRight(strings.ToValidUTF8(string(out.stdout), "\uFFFD"), "\r\n")
	res.outcome = backend.OutcomeCompleted
	return res, nil
}

// timeOfDay formats the times of a handler's end in messages.
const timeOfDay = "15:04:05.000"
