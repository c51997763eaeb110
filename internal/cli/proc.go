package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// processProducer is the process plugin's name: its binary is
// hermesq-producer-process and its outbox producer_state_dir/process.
const processProducer = "process"

// tailBytes is how much of a supervised command's output a completion
// keeps: the end of its stdout and stderr, as written.
const tailBytes = backend.MaxOutputTail

func newProcCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "proc",
		Short: "Record the completion of processes (process producer)",
		Args:  cobra.NoArgs,
		RunE:  groupRun,
	}
	cmd.AddCommand(newProcRunCmd(f), newProcWatchCmd(f))
	return cmd
}

type procOptions struct {
	f        *Factory
	Session  string
	Target   string
	Detach   bool
	detached bool // the re-executed, detached supervisor
	Args     []string
}

func (o *procOptions) flags(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&o.Session, "session", "", "the session the completion is for")
	fl.StringVar(&o.Target, "target", "", "the transcript the work started from (default: the session's current when admitted)")
	fl.BoolVar(&o.Detach, "detach", false, "return at once; a supervisor in a new session outlives the calling shell")
	fl.BoolVar(&o.detached, "detached", false, "internal: this is the detached supervisor")
	_ = fl.MarkHidden("detached")
	_ = cmd.MarkFlagRequired("session")
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessionArg(o.f))
}

func newProcRunCmd(f *Factory) *cobra.Command {
	o := &procOptions{f: f}
	cmd := &cobra.Command{
		Use:   "run --session S [--target T] [--detach] -- CMD ARGS…",
		Short: "Run a command under supervision and record its completion",
		Long: `Run runs CMD directly (no shell) under supervision and, when it ends,
records its completion in the process producer's outbox: the command, its
exit code, the tail of its output (the last 2000 bytes of stdout and
stderr), its start time and duration. 'hermesq producers run' then admits it
to session S: a note, or a turn when someone is attached.

The completion's identity is ["completion",<pid>,<started_at>] (started_at
in seconds since the epoch, written as Python writes a float, e.g.
1700000000.25) and its text "[finished] <command> (exit N)" followed by the
output tail. A command killed by a signal has exit 128+signal. SIGINT and
SIGTERM received by run are passed on to the command.

Without --detach the command's output goes to run's stdout and stderr, and
when it ends run prints the recorded completion; run exits 0 once the
completion is recorded, whatever the command's exit code (it is in the
completion). With --detach run prints the completion's identity and
returns at once; a supervisor in a new session (it outlives the calling
shell and its terminal) waits for the command and records the completion.
A command that cannot be started is refused (exit 2) and nothing is
recorded.

Before it starts the command, run asks the store what would refuse the
completion later and refuses a mistake at once, nothing run or recorded: a
session that does not exist (exit 3); a --target that does not exist
(exit 3) or that is neither S's current transcript nor one compressed into
it (exit 2: it would be misrouted); a caller who may not admit the process
producer's input to S (exit 7); a command line too long for a completion
within payload_limit (exit 2; the output tail is cut to fit). With the store
unreachable it runs and records anyway (the outbox keeps the completion
until producers run can deliver it) and says so in one warning line.`,
		Example: `  hermesq proc run --session s1 -- make test
  hermesq proc run --session s1 --detach -- ./long-job.sh --all`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if cmd.ArgsLenAtDash() != 0 {
				return fmt.Errorf("give the command after --, e.g. 'hermesq proc run --session S -- make test': %w", backend.ErrInvalid)
			}
			o.Args = args
			return runProcRun(cmd.Context(), o)
		},
	}
	o.flags(cmd)
	return cmd
}

func newProcWatchCmd(f *Factory) *cobra.Command {
	o := &procOptions{f: f}
	cmd := &cobra.Command{
		Use:   "watch --session S [--target T] [--detach] PID…",
		Short: "Record the completion of processes already running",
		Long: `Watch waits for running processes (not started by hermesq) to end and
records each completion in the process producer's outbox, like proc run.
The command is read from /proc/PID/cmdline and started_at from the
process's start time. On Linux the wait uses a pidfd (else /proc is polled).

A process that is not watch's child has no exit status it could read: its
completion says "(exit unknown)" and its exit_code is null. Every PID must
exist when watch starts (else exit 3, nothing recorded). Watch prints each
completion as it is recorded and returns when every process has ended;
with --detach it returns at once and a supervisor in a new session waits.

Before it waits, watch checks the session, the target and the caller's
grant on the store as proc run does (exit 3, 2 or 7, nothing recorded);
with the store unreachable it waits and records anyway, with one warning
line.`,
		Example: `  hermesq proc watch --session s1 4242
  hermesq proc watch --session s1 --detach $(pgrep -f nightly-build)`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.Args = args
			return runProcWatch(cmd.Context(), o)
		},
	}
	o.flags(cmd)
	return cmd
}

// completion is what the process producer records about an ended process.
type completion struct {
	PID        int      `json:"pid"`
	Command    []string `json:"command"`
	ExitCode   *int     `json:"exit_code"` // nil: unknown (a watched process)
	StartedAt  string   `json:"started_at"`
	DurationS  float64  `json:"duration_s"`
	OutputTail string   `json:"output_tail"`
}

// completionResult is what proc run and proc watch print.
type completionResult struct {
	eventResult
	Completion *completion `json:"completion,omitempty"`
}

func (o *procOptions) check() error {
	if err := backend.ValidateID("session", o.Session); err != nil {
		return err
	}
	if o.Target != "" {
		if err := backend.ValidateID("target", o.Target); err != nil {
			return err
		}
	}
	return nil
}

// event is the outbox event of a completion.
func (o *procOptions) event(c completion) (producer.Event, error) {
	exit := "unknown"
	if c.ExitCode != nil {
		exit = strconv.Itoa(*c.ExitCode)
	}
	text := fmt.Sprintf("[finished] %s (exit %s)", shellJoin(c.Command), exit)
	if t := strings.TrimRight(c.OutputTail, "\n"); t != "" {
		text += "\n" + t
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(struct {
		Text    string     `json:"text"`
		Process completion `json:"process"`
	}{text, c}); err != nil {
		return producer.Event{}, err
	}
	payload := bytes.TrimSpace(buf.Bytes())
	return producer.Event{
		Session:  o.Session,
		Target:   o.Target,
		Identity: producer.Identity("completion", strconv.Itoa(c.PID), c.StartedAt),
		Payload:  payload,
	}, nil
}

// checkBefore checks, before a process is run or waited for, what would
// refuse its completion (docs/contract.md §6): the session, the target and
// the grant, on the store when it can be reached (checkRecord), and that a
// completion of command fits the payload limit with no output at all (the
// output tail is cut to fit when recorded). The detached supervisor does not
// check again: its parent did. what names the completion(s) in a warning.
func (o *procOptions) checkBefore(ctx context.Context, what string, commands ...[]string) error {
	if o.detached {
		return nil
	}
	cfg, err := o.f.Config()
	if err != nil {
		return err
	}
	for _, command := range commands {
		// The largest figures a completion may hold, so that only the
		// tail can make it grow.
		code := -255
		ev, err := o.event(completion{PID: 1 << 22, Command: command, ExitCode: &code,
			StartedAt: producer.PyFloat(float64(time.Now().UnixMicro())/1e6 + 0.123456), DurationS: 1e9 + 0.123456})
		if err != nil {
			return err
		}
		if err := checkPayloadSize("", ev.Payload, cfg.PayloadLimit); err != nil {
			return fmt.Errorf("the command line is too long for a completion: %w", err)
		}
	}
	return checkRecord(ctx, o.f, processProducer, o.Session, o.Target, what)
}

// fit returns the event of completion c, its output tail cut from the start
// as much as the payload limit needs (checkBefore made sure the rest fits).
func (o *procOptions) fit(c completion) (producer.Event, error) {
	cfg, err := o.f.Config()
	if err != nil {
		return producer.Event{}, err
	}
	for {
		ev, err := o.event(c)
		if err != nil {
			return producer.Event{}, err
		}
		err = checkPayloadSize("", ev.Payload, cfg.PayloadLimit)
		if err == nil || c.OutputTail == "" {
			return ev, err
		}
		tail := c.OutputTail[len(c.OutputTail)/2:]
		for len(tail) > 0 && !utf8.RuneStart(tail[0]) {
			tail = tail[1:]
		}
		c.OutputTail = tail
	}
}

// record adds a completion to the process outbox and prints it.
func (o *procOptions) record(ctx context.Context, p *printer, c completion) error {
	ev, err := o.fit(c)
	if err != nil {
		return err
	}
	ob, err := o.f.outbox(processProducer)
	if err != nil {
		return err
	}
	added, err := ob.Add(ctx, ev)
	if err != nil {
		return outboxError(err)
	}
	r := completionResult{
		eventResult: eventResult{Producer: processProducer, Session: ev.Session, Target: ev.Target, Identity: ev.Identity, Result: "duplicate"},
		Completion:  &c,
	}
	if added {
		r.Result = "added"
	}
	exit := "unknown"
	if c.ExitCode != nil {
		exit = strconv.Itoa(*c.ExitCode)
	}
	return p.line(r, textf("%s %s (exit %s)\n", r.Result, r.Identity, exit))
}

func runProcRun(ctx context.Context, o *procOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if _, err := o.f.producerPaths(); err != nil {
		return err
	}
	if err := o.checkBefore(ctx, "its completion", o.Args); err != nil {
		return err
	}
	if o.Detach {
		return detachSupervisor(o.f, p, "proc run")
	}
	cmd := exec.Command(o.Args[0], o.Args[1:]...)
	tail := &tailBuffer{max: tailBytes}
	if o.detached {
		cmd.Stdin = nil
		cmd.Stdout, cmd.Stderr = tail, tail
	} else {
		cmd.Stdin = o.f.IO.In
		cmd.Stdout = io.MultiWriter(o.f.IO.Out, tail)
		cmd.Stderr = io.MultiWriter(o.f.IO.ErrOut, tail)
	}
	start := time.Now()
	if err := cmd.Start(); err != nil {
		err = fmt.Errorf("proc run: start %s: %v: %w", o.Args[0], err, backend.ErrInvalid)
		if o.detached {
			reportDetached(false, err.Error())
		}
		return err
	}
	c := completion{PID: cmd.Process.Pid, Command: o.Args, StartedAt: producer.PyFloat(float64(start.UnixMicro()) / 1e6)}
	if o.detached {
		ev, err := o.event(c)
		if err != nil {
			return err
		}
		reportDetached(true, "started "+ev.Identity)
	}
	// Signals for run go to the command; run records how it ended.
	sigs, stop := o.f.Signals(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	done := make(chan struct{})
	go func() {
		for {
			select {
			case s := <-sigs:
				_ = cmd.Process.Signal(s)
			case <-done:
				return
			}
		}
	}()
	werr := cmd.Wait()
	close(done)
	stop()
	code := 0
	var exitErr *exec.ExitError
	switch {
	case werr == nil:
	case errors.As(werr, &exitErr):
		code = exitErr.ExitCode()
		if ws, ok := exitErr.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			code = 128 + int(ws.Signal())
		}
	default:
		return fmt.Errorf("proc run: wait for %s: %w", o.Args[0], werr)
	}
	c.ExitCode = &code
	c.DurationS = time.Since(start).Seconds()
	c.OutputTail = tail.String()
	return o.record(ctx, p, c)
}

func runProcWatch(ctx context.Context, o *procOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	if err := o.check(); err != nil {
		return err
	}
	if _, err := o.f.producerPaths(); err != nil {
		return err
	}
	procs := make([]watchedProc, len(o.Args))
	for i, a := range o.Args {
		pid, err := strconv.Atoi(a)
		if err != nil || pid <= 0 {
			return fmt.Errorf("proc watch: %q is not a process id: %w", a, backend.ErrInvalid)
		}
		if procs[i], err = inspectProc(pid); err != nil {
			return err
		}
	}
	commands := make([][]string, len(procs))
	for i, w := range procs {
		commands[i] = w.command
	}
	if err := o.checkBefore(ctx, "each completion", commands...); err != nil {
		return err
	}
	if o.Detach {
		return detachSupervisor(o.f, p, "proc watch")
	}
	if o.detached {
		reportDetached(true, fmt.Sprintf("watching %d processes", len(procs)))
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, w := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := waitProc(ctx, w)
			if err == nil {
				c := completion{PID: w.pid, Command: w.command, StartedAt: producer.PyFloat(w.startedAt),
					DurationS: float64(time.Now().UnixMicro())/1e6 - w.startedAt}
				mu.Lock()
				err = o.record(ctx, p, c)
				mu.Unlock()
			}
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// watchedProc is a running process proc watch waits for.
type watchedProc struct {
	pid       int
	command   []string
	startedAt float64 // seconds since the epoch
	startTick string  // the kernel's start time, to tell a reused pid
}

// detachSupervisor re-executes this command in a new session (a supervisor that
// outlives the calling shell and its terminal) with --detached instead of
// --detach, waits for it to report that it started (or why not) on a pipe,
// prints that, and returns.
func detachSupervisor(_ *Factory, p *printer, what string) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("%s --detach: find own executable: %w", what, err)
	}
	args := make([]string, 0, len(os.Args))
	dash := false
	for _, a := range os.Args[1:] {
		if a == "--" {
			dash = true
		}
		if !dash && (a == "--detach" || a == "--detach=true") {
			a = "--detached"
		}
		args = append(args, a)
	}
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	defer r.Close()
	devnull, err := os.OpenFile(os.DevNull, os.O_RDWR, 0)
	if err != nil {
		w.Close()
		return err
	}
	defer devnull.Close()
	cmd := exec.Command(self, args...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = devnull, devnull, devnull
	cmd.ExtraFiles = []*os.File{w} // fd 3: the supervisor's report
	newSession(cmd)
	if err := cmd.Start(); err != nil {
		w.Close()
		return fmt.Errorf("%s --detach: start supervisor: %w", what, err)
	}
	w.Close()
	pid := cmd.Process.Pid
	_ = cmd.Process.Release()
	line, _ := bufio.NewReader(io.LimitReader(r, 64<<10)).ReadString('\n')
	line = strings.TrimSpace(line)
	msg, ok := strings.CutPrefix(line, "ok ")
	if !ok {
		if line == "" {
			line = "the supervisor ended without a report"
		}
		// The supervisor's error as it said it, without the command name
		// and the code it carried, which are said here once.
		detail := strings.TrimPrefix(strings.TrimPrefix(line, "error "), what+": ")
		detail = strings.TrimSuffix(detail, ": "+backend.ErrInvalid.Error())
		return fmt.Errorf("%s --detach: %s: %w", what, detail, backend.ErrInvalid)
	}
	return p.object(map[string]any{"supervisor_pid": pid, "status": msg},
		textf("%s (supervisor pid %d)\n", msg, pid))
}

// reportDetached tells the waiting detach (fd 3) how the start went, once.
func reportDetached(ok bool, msg string) {
	f := os.NewFile(3, "report")
	if f == nil {
		return
	}
	prefix := "ok "
	if !ok {
		prefix = "error "
	}
	_, _ = fmt.Fprintf(f, "%s%s\n", prefix, oneLine(msg))
	_ = f.Close()
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

// String is the tail, starting at a whole UTF-8 character, invalid bytes
// replaced.
func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	b := t.b
	for len(b) > 0 && !utf8.RuneStart(b[0]) {
		b = b[1:]
	}
	return strings.ToValidUTF8(string(b), "\uFFFD")
}

// shellJoin writes argv as a shell would need it typed.
func shellJoin(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		out[i] = shellQuote(a)
	}
	return strings.Join(out, " ")
}

func shellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("_@%+=:,./-", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'"
}
