package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

const defaultGrace = 10 * time.Second

type drainOptions struct {
	f *Factory

	Sessions []string
	Handler  []string // the words after --
	All      bool
	Max      int
	Follow   bool
	Wait     bool
	Parallel int
	Grace    time.Duration
}

func newDrainCmd(f *Factory) *cobra.Command {
	o := &drainOptions{f: f}
	cmd := &cobra.Command{
		Use:   "drain (SESSION… | --all) [flags] [-- HANDLER ARGS…]",
		Short: "Execute sessions' queues in FIFO order",
		Long: `Drain executes a session's queued admissions in FIFO order under the
session's drain lease. Human input is a turn: the handler runs with the turn
input as JSON on stdin and its stdout is the reply. Automation input is a turn
when the target transcript is open and someone is attached; otherwise its text
is appended to the transcript as a note, with no handler call.

The handler is the argv after --, or the config key handler.command; it is
run directly, never through a shell. A turn due with no handler leaves the
admission queued and exits 2. The turn is judged when the handler exits: by
its exit status and what it wrote until then (what it left running in its
process group is killed; output still coming a second later is discarded).

Draining needs a right: the principal must own the session or be granted
drainer or owner on it (hermesq session grant S P --role drainer); an admin
acting as itself drains each session as its owner. The store checks it when
the lease is taken and at every claim. Without it, drain S exits 7 and changes nothing; --all
(and --all --follow) leaves such sessions out and says on stderr how many.

--all drains every session with queued work (what cron runs); --follow keeps
draining as inputs arrive until SIGINT or SIGTERM. On a signal the running
turn may finish within --grace, then the drain stops and exits 130 (SIGINT)
or 143 (SIGTERM); with -o json the error object's code is "unavailable"
(what is queued stays queued: drain again to go on).

Two handlers of one session never run at once: a drainer that loses its
lease, or cannot renew it before it could lapse (a stalled store), kills its
running handler and stops draining that session (exit 5), leaving the turn
to the next drainer, which marks it unknown and applies --on-unknown. On
Linux the handler runs under a supervisor process that kills it when the
lease could lapse even if the drainer itself is stopped or starved; handlers
get HERMESQ_EPOCH to fence their own side effects against what remains (a
whole machine frozen).

Prints what it executed, one line each as soon as it is settled:
"turn|note|failed <admission> seq N -> <transcript>"; with -o json, when
it stops, the drain report (an array of reports with
--all or several sessions). A drain that could not take its session's lease
(held by another drainer, no handler for the head) prints no report.
Progress goes to stderr when it is a terminal, and always with --follow.`,
		Example: `  hermesq drain s1 -- ./agent.sh --fast
  hermesq drain --all --max 100
  hermesq drain s1 --follow --on-unknown requeue -- /usr/local/bin/agent`,
		ValidArgsFunction: completeSessionArg(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			f.MayCreateStore() // a command that writes may create the store
			o.Sessions = args
			if dash := cmd.ArgsLenAtDash(); dash >= 0 {
				o.Sessions, o.Handler = args[:dash], args[dash:]
			}
			return runDrain(cmd.Context(), o)
		},
	}
	fl := cmd.Flags()
	fl.BoolVar(&o.All, "all", false, "drain every session with queued work")
	fl.IntVar(&o.Max, "max", 0, "execute at most N admissions per session (0: no bound)")
	fl.BoolVar(&o.Follow, "follow", false, "keep draining as inputs arrive, until SIGINT or SIGTERM")
	fl.BoolVar(&o.Wait, "wait", false, "wait for a drain lease held by another drainer instead of exiting 5")
	fl.Duration("lease", 0, "drain lease TTL, renewed while working, at least 100ms (config drain.lease; default 30s)")
	fl.Duration("handler-timeout", 0, "kill a turn's handler after this long; the turn fails (config handler.timeout; default none)")
	fl.String("on-unknown", "pause", "what to do with an admission left unknown by a lost drainer: pause (exit 6), requeue or interrupt (config drain.on_unknown)")
	fl.IntVar(&o.Parallel, "parallel", 1, "with --all or several sessions: how many sessions to drain at once")
	fl.DurationVar(&o.Grace, "grace", defaultGrace, "on SIGINT/SIGTERM, how long a running turn may still finish")
	_ = f.v.BindPFlag(keyDrainLease, fl.Lookup("lease"))
	_ = f.v.BindPFlag(keyHandlerTimeout, fl.Lookup("handler-timeout"))
	_ = f.v.BindPFlag(keyOnUnknown, fl.Lookup("on-unknown"))
	_ = cmd.RegisterFlagCompletionFunc("on-unknown", fixedCompletion("pause", "requeue", "interrupt"))
	return cmd
}

// drainReportJSON is a drain report as -o json prints it.
type drainReportJSON struct {
	Session  string              `json:"session"`
	Epoch    uint64              `json:"epoch"`
	Turns    int                 `json:"turns"`
	Notes    int                 `json:"notes"`
	Failed   int                 `json:"failed"`
	Deferred int                 `json:"deferred"`
	Executed []backend.Admission `json:"executed"`
}

func reportJSON(r admission.DrainReport) drainReportJSON {
	ex := r.Executed
	if ex == nil {
		ex = []backend.Admission{}
	}
	return drainReportJSON{Session: r.Session, Epoch: r.Epoch, Turns: r.Turns, Notes: r.Notes,
		Failed: r.Failed, Deferred: r.Deferred, Executed: ex}
}

func (o *drainOptions) validate() error {
	switch {
	case o.All && len(o.Sessions) > 0:
		return backend.Errorf(backend.ErrInvalid, "drain: give SESSION… or --all, not both")
	case !o.All && len(o.Sessions) == 0:
		return backend.Errorf(backend.ErrInvalid, "drain: give SESSION… or --all")
	case o.Max < 0:
		return backend.Errorf(backend.ErrInvalid, "drain --max %d: must not be negative", o.Max)
	case o.Parallel < 1:
		return backend.Errorf(backend.ErrInvalid, "drain --parallel %d: must be at least 1", o.Parallel)
	case o.Grace < 0:
		return backend.Errorf(backend.ErrInvalid, "drain --grace %s: must not be negative", o.Grace)
	}
	for _, s := range o.Sessions {
		if err := backend.ValidateID("session", s); err != nil {
			return err
		}
	}
	return nil
}

func runDrain(ctx context.Context, o *drainOptions) error {
	cfg, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	if err := o.validate(); err != nil {
		return err
	}
	opt := admission.DrainOptions{
		Lease:     cfg.DrainLease,
		Wait:      o.Wait,
		Max:       o.Max,
		OnUnknown: admission.OnUnknown(cfg.OnUnknown),
		Follow:    o.Follow,
		Grace:     o.Grace,
	}
	argv := o.Handler
	if len(argv) == 0 {
		argv = cfg.HandlerCommand
	}
	if len(argv) > 0 {
		opt.Handler = &admission.Handler{Argv: argv, Timeout: cfg.HandlerTimeout, Secrets: storeSecrets(cfg.Store)}
	}
	// Progress lines on stderr: for a person at a terminal, and for a
	// long-running --follow owner whose stderr is its log.
	if o.f.IO.IsStderrTTY() || o.Follow {
		opt.Log = func(format string, args ...any) {
			fmt.Fprintf(o.f.IO.ErrOut, "hermesq: "+format+"\n", escArgs(args)...)
		}
	}
	// Text: one line per executed admission as soon as it is settled, so
	// a long drain (a --follow owner above all) shows its work as it goes.
	var outMu sync.Mutex
	var outErr error
	if p.text() {
		opt.NoExecuted = true // each is printed as it is settled; the report is not
		var buf bytes.Buffer
		opt.Settled = func(as []backend.Admission) {
			outMu.Lock()
			defer outMu.Unlock()
			buf.Reset()
			for _, a := range as {
				executedText(&buf, a)
			}
			if _, err := p.ios.Out.Write(buf.Bytes()); err != nil && outErr == nil {
				outErr = err
			}
		}
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	// Who drains, as resolved when the store opened: the owner of a
	// session, or a principal granted drainer or owner on it. An admin
	// acting as itself (who may act as any principal) drains each session
	// as its owner; one acting as another principal (--principal) drains
	// with that principal's rights.
	opt.Principal, opt.AsOwner = cfg.Principal, cfg.Admin && cfg.Principal == cfg.Caller
	opt.LeftOut = func(n int) {
		fmt.Fprintf(o.f.IO.ErrOut, "hermesq: drain: left out %d session(s) with work that principal %s may not drain (its owner may grant it: hermesq session grant SESSION %s --role drainer)\n",
			n, termtext.Esc(cfg.Principal), termtext.Esc(cfg.Principal))
	}

	// SIGINT/SIGTERM cancel the drain: the running turn gets the grace,
	// is settled, the lease is released, then we exit 130/143.
	ctx, signals := o.f.watchSignals(ctx, "drain")
	defer signals.Stop()

	var reports []admission.DrainReport
	if o.All {
		reports, err = svc.DrainAll(ctx, opt, o.Parallel)
	} else {
		reports, err = drainSessions(ctx, svc, o.Sessions, opt, o.Parallel)
	}
	sig := signals.Caught()

	if perr := printReports(p, reports, !o.All && len(o.Sessions) == 1); perr != nil && err == nil {
		err = perr
	}
	outMu.Lock()
	if outErr != nil && err == nil {
		err = fmt.Errorf("write stdout: %w", outErr)
	}
	outMu.Unlock()
	if sig != nil {
		return sig
	}
	if errors.Is(err, backend.ErrForbidden) && !o.All {
		return fmt.Errorf("%w (its owner may grant it: hermesq session grant SESSION %s --role drainer)", err, termtext.Esc(cfg.Principal))
	}
	if errors.Is(err, admission.ErrNoHandler) {
		return fmt.Errorf("%w (give the handler after --, e.g. 'hermesq drain S -- ./agent.sh', or set handler.command in the config file)", err)
	}
	return err
}

// drainSessions drains the named sessions, up to parallel at once (all at
// once with --follow, which never ends on its own), and returns their reports
// in the order given with the first error in that order.
func drainSessions(ctx context.Context, svc *admission.Service, sessions []string, opt admission.DrainOptions, parallel int) ([]admission.DrainReport, error) {
	if opt.Follow {
		parallel = len(sessions)
	}
	reports := make([]admission.DrainReport, len(sessions))
	errs := make([]error, len(sessions))
	sem := make(chan struct{}, parallel)
	var wg sync.WaitGroup
	for i, s := range sessions {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			reports[i], errs[i] = svc.Drain(ctx, s, opt)
			if reports[i].Session == "" {
				reports[i].Session = s
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return reports, err
		}
	}
	return reports, nil
}

// printReports prints the drain reports for -o json and jsonl (text lines
// are printed as each admission is settled). A drain that never took
// its session's lease (held by another drainer, no handler for the head,
// unknown session) did nothing and has no report: stdout stays empty and
// the error says why.
func printReports(p *printer, all []admission.DrainReport, single bool) error {
	var reports []admission.DrainReport
	for _, r := range all {
		if r.Epoch != 0 || len(r.Executed) > 0 {
			reports = append(reports, r)
		}
	}
	if p.text() {
		return nil // printed as each was settled (runDrain)
	}
	if single {
		if len(reports) == 0 {
			return nil
		}
		return p.object(reportJSON(reports[0]), nil)
	}
	out := make([]drainReportJSON, 0, len(reports))
	for _, r := range reports {
		out = append(out, reportJSON(r))
	}
	return list(p, out, nil)
}

// executedText is one executed admission: "turn|note|failed <adm> seq N -> <transcript>".
func executedText(w io.Writer, a backend.Admission) error {
	what := string(a.Mode)
	switch {
	case a.Outcome == backend.OutcomeFailed:
		what = "failed"
	case a.Outcome == backend.OutcomeInterrupted:
		what = "interrupted"
	case what == "":
		what = string(a.Status)
	}
	_, err := fmt.Fprintf(w, "%s %s seq %d -> %s\n", what, a.ID, a.Seq, termtext.OrDash(a.DeliveredTo))
	return err
}

// storeSecrets are the credentials in a store URL, which a handler must
// never receive: the password, or a lone user part (which a Redis URL reads
// as the password), and whatever else the one redaction hides
// (backend.URLSecrets).
func storeSecrets(store string) []string { return backend.URLSecrets(store) }
