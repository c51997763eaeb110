package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"unicode/utf8"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// delegationProducer is the delegation plugin's name: its binary is
// hermesq-producer-delegation and its outbox producer_state_dir/delegation.
const delegationProducer = "delegation"

func newDelegateCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "delegate",
		Short: "Record the results of delegated sub-tasks (delegation producer)",
		Args:  cobra.NoArgs,
		RunE:  groupRun,
	}
	cmd.AddCommand(newDelegateDoneCmd(f))
	return cmd
}

type delegateDoneOptions struct {
	f          *Factory
	Session    string
	Target     string
	ID         string
	Result     string
	ResultFile string
}

func newDelegateDoneCmd(f *Factory) *cobra.Command {
	o := &delegateDoneOptions{f: f}
	cmd := &cobra.Command{
		Use:   "done --session S --target T --id D (--result TEXT | --result-file F)",
		Short: "Record a delegated sub-task's result in the delegation producer's outbox",
		Long: `Done records the result of delegated sub-task D, started from transcript T
of session S, in the delegation producer's outbox: 'hermesq producers run'
offers the outbox's ready results, those of one session and target as one
group with a part each, and each result becomes an admission (a note, or a
turn when someone is attached) exactly once.

Before recording, done asks the store what would refuse the result later
and refuses a mistake at once, nothing recorded: a session that does not
exist (exit 3); a target that does not exist (exit 3) or that is neither
S's current transcript nor one compressed into it (exit 2: it would be
misrouted); a caller who may not admit the delegation producer's input to S
(exit 7); a result whose payload, canonical, is over payload_limit (exit 2).
With the store unreachable it records anyway (the outbox keeps the result
until producers run can deliver it) and says so in one warning line.

The event's identity is ["async_delegation","D",""] and its text
"[delegation D] RESULT". Recording the same D for the same session again
changes nothing ("duplicate", exit 0): the first result recorded wins.
--result-file - reads the result from stdin.

Prints "added" or "duplicate" and the identity; with -o json
{"producer","session","target","identity","result":"added|duplicate"}.`,
		Example: `  hermesq delegate done --session s1 --target s1 --id research-7 --result "3 papers found"
  hermesq delegate done --session s1 --target s1 --id build-2 --result-file build.log`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDelegateDone(cmd.Context(), o) },
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Session, "session", "", "the session the result is for")
	fl.StringVar(&o.Target, "target", "", "the transcript the sub-task was started from")
	fl.StringVar(&o.ID, "id", "", "the delegation id")
	fl.StringVar(&o.Result, "result", "", "the sub-task's result")
	fl.StringVar(&o.ResultFile, "result-file", "", "read the result from FILE (- for stdin)")
	_ = cmd.MarkFlagRequired("session")
	_ = cmd.MarkFlagRequired("target")
	_ = cmd.MarkFlagRequired("id")
	cmd.MarkFlagsOneRequired("result", "result-file")
	cmd.MarkFlagsMutuallyExclusive("result", "result-file")
	_ = cmd.MarkFlagFilename("result-file")
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessionArg(f))
	return cmd
}

// eventResult is what delegate done and proc run print.
type eventResult struct {
	Producer string `json:"producer"`
	Session  string `json:"session"`
	Target   string `json:"target"`
	Identity string `json:"identity"`
	Result   string `json:"result"` // added or duplicate
}

func runDelegateDone(ctx context.Context, o *delegateDoneOptions) error {
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, p, err := o.f.configAndPrinter()
	if err != nil {
		return err
	}
	if err := backend.ValidateID("session", o.Session); err != nil {
		return err
	}
	if err := backend.ValidateID("target", o.Target); err != nil {
		return err
	}
	if err := backend.ValidateToken("delegation id", o.ID); err != nil {
		return err
	}
	result := o.Result
	if o.ResultFile != "" {
		if result, err = readResultFile(o.f.IO.In, o.ResultFile, cfg.PayloadLimit); err != nil {
			return err
		}
	}
	ev := producer.Event{
		Session:  o.Session,
		Target:   o.Target,
		Identity: producer.Identity("async_delegation", o.ID, ""),
		Text:     fmt.Sprintf("[delegation %s] %s", o.ID, result),
	}
	if err := checkEvent(ev, result, cfg.PayloadLimit); err != nil {
		return err
	}
	if err := checkRecord(ctx, o.f, delegationProducer, o.Session, o.Target, "the result"); err != nil {
		return err
	}
	return addEvent(ctx, o.f, p, delegationProducer, ev)
}

// readResultFile reads a result from a file or stdin ("-"), one trailing
// newline removed. A result longer than the payload limit (0: the default)
// is refused naming the file's real size (or, read from a stream, the
// limit), after reading no more than the limit.
func readResultFile(stdin io.Reader, name string, limit int) (string, error) {
	if limit == 0 {
		limit = admission.DefaultMaxPayload
	}
	var r io.Reader = stdin
	what := "result on stdin"
	if name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return "", fmt.Errorf("result file: %v: %w", err, backend.ErrInvalid)
		}
		defer f.Close()
		what = "result file " + name
		if fi, err := f.Stat(); err == nil && fi.Mode().IsRegular() && fi.Size() > int64(limit)+2 {
			return "", fmt.Errorf("%s is %d bytes, more than the payload limit of %d: %w", what, fi.Size(), limit, backend.ErrInvalid)
		}
		r = f
	}
	// limit+2: room for the trailing newline (\r\n) that is removed.
	b, err := io.ReadAll(io.LimitReader(r, int64(limit)+3))
	if err != nil {
		return "", fmt.Errorf("read result: %v: %w", err, backend.ErrInvalid)
	}
	if len(b) > limit+2 {
		return "", fmt.Errorf("%s is more than the payload limit of %d bytes: %w", what, limit, backend.ErrInvalid)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// checkEvent refuses, before anything is written, an event the store would
// refuse: empty or non-UTF-8 result, identity too long, a payload over the
// payload limit (canonical, as the store counts it).
func checkEvent(ev producer.Event, result string, limit int) error {
	if strings.TrimSpace(result) == "" {
		return backend.Errorf(backend.ErrInvalid, "result is empty")
	}
	if !utf8.ValidString(ev.Text) {
		return backend.Errorf(backend.ErrInvalid, "result is not valid utf-8")
	}
	if err := backend.ValidateToken("identity", ev.Identity); err != nil {
		return err
	}
	return checkPayloadSize(ev.Text, nil, limit)
}

// addEvent records ev in producer name's outbox and prints the result.
func addEvent(ctx context.Context, f *Factory, p *printer, name string, ev producer.Event) error {
	ob, err := f.outbox(name)
	if err != nil {
		return err
	}
	added, err := ob.Add(ctx, ev)
	if err != nil {
		return outboxError(err)
	}
	r := eventResult{Producer: name, Session: ev.Session, Target: ev.Target, Identity: ev.Identity, Result: "duplicate"}
	if added {
		r.Result = "added"
	}
	return p.object(r, textf("%s %s\n", r.Result, r.Identity))
}
