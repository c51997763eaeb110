package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/process"
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
		return detachSupervisor(p, "proc run")
	}
	var sup *process.Supervised
	if o.detached {
		sup, err = process.Start(o.Args, tailBytes, nil, nil, nil)
	} else {
		sup, err = process.Start(o.Args, tailBytes, o.f.IO.In, o.f.IO.Out, o.f.IO.ErrOut)
	}
	if err != nil {
		err = fmt.Errorf("proc run: start %s: %v: %w", o.Args[0], err, backend.ErrInvalid)
		if o.detached {
			process.ReportDetached(false, err.Error())
		}
		return err
	}
	c := completion{PID: sup.PID, Command: o.Args, StartedAt: producer.PyFloat(float64(sup.Start.UnixMicro()) / 1e6)}
	if o.detached {
		ev, err := o.event(c)
		if err != nil {
			return err
		}
		process.ReportDetached(true, "started "+ev.Identity)
	}
	// Signals for run go to the command; run records how it ended.
	sigs, stop := o.f.Signals(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	end, werr := sup.Wait(sigs)
	stop()
	if werr != nil {
		return fmt.Errorf("proc run: wait for %s: %w", o.Args[0], werr)
	}
	c.ExitCode = &end.ExitCode
	c.DurationS = end.Duration.Seconds()
	c.OutputTail = end.OutputTail
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
	procs := make([]process.Watched, len(o.Args))
	for i, a := range o.Args {
		pid, err := strconv.Atoi(a)
		if err != nil || pid <= 0 {
			return fmt.Errorf("proc watch: %q is not a process id: %w", a, backend.ErrInvalid)
		}
		if procs[i], err = process.Inspect(pid); err != nil {
			return err
		}
	}
	commands := make([][]string, len(procs))
	for i, w := range procs {
		commands[i] = w.Command
	}
	if err := o.checkBefore(ctx, "each completion", commands...); err != nil {
		return err
	}
	if o.Detach {
		return detachSupervisor(p, "proc watch")
	}
	if o.detached {
		process.ReportDetached(true, fmt.Sprintf("watching %d processes", len(procs)))
	}
	return process.WaitEach(ctx, procs, func(w process.Watched, at time.Time) error {
		return o.record(ctx, p, completion{PID: w.PID, Command: w.Command, StartedAt: producer.PyFloat(w.StartedAt),
			DurationS: float64(at.UnixMicro())/1e6 - w.StartedAt})
	})
}

// detachSupervisor starts the detached supervisor of this command
// (process.Detach) and prints what it reported.
func detachSupervisor(p *printer, what string) error {
	pid, msg, err := process.Detach(what)
	if err != nil {
		return err
	}
	return p.object(map[string]any{"supervisor_pid": pid, "status": msg},
		textf("%s (supervisor pid %d)\n", msg, pid))
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
