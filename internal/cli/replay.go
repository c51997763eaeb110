package cli

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
)

type replayOptions struct {
	f *Factory

	IDs      []string
	Session  string
	Outcomes []string
	Since    string
	Target   string
	Again    bool
	DryRun   bool

	outcomeSet bool
}

// replayJSON is one replay result: {"result","original","admission"}.
type replayJSON struct {
	Result    string            `json:"result"`
	Original  string            `json:"original"`
	Admission backend.Admission `json:"admission"`
}

func newReplayCmd(f *Factory) *cobra.Command {
	o := &replayOptions{f: f}
	cmd := &cobra.Command{
		Use:   "replay (ADMISSION… | --session S [--outcome failed,interrupted] [--since D]) [--target T] [--again] [--dry-run]",
		Short: "Run settled admissions again, as new admissions",
		Long: `Replay admits each selected admission again as a new queued admission of the
same session, with the same kind, producer, principal and payload, and
replay_of set to the original; the original is not changed. A drain runs it
like any other input (a turn or a note).

Select admissions by id, or with --session S: its done admissions whose
outcome is one of --outcome (default failed,interrupted) settled within
--since (a duration such as 24h, or an RFC 3339 time). Replays that failed
again are not selected by --session: their original is, and it finds its
replay.

Replaying is idempotent: the replay's id is derived from the original's, so
replaying the same admission again (twice by hand, a cron job run twice, two
operators at once) finds the first replay ("duplicate") and creates nothing.
--again creates one more replay after the last one.

--target T pins automation replays to transcript T of the session: how a
completion settled failed "misrouted" (its session moved to another lineage)
is delivered where it now belongs. Human input always runs on the session's
current transcript, so --target with a human admission exits 2.

Every selected admission is checked before anything is written: one not
found exits 3, one not done (queued, running, unknown) exits 4, and nothing
is replayed. --dry-run prints what would be replayed ("planned") and writes
nothing. Output: one result a line; -o json an array of
{"result":"replayed|duplicate|planned","original","admission":{…}}.`,
		Example: `  hermesq replay 3f2a…
  hermesq replay --session s1 --outcome failed,interrupted --since 24h --dry-run
  hermesq replay 7c1e… --target s1.2`,
		ValidArgsFunction: completeAdmissionIDs(f),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.IDs = args
			o.outcomeSet = cmd.Flags().Changed("outcome")
			return o.run(cmd)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&o.Session, "session", "", "replay this session's done admissions selected by --outcome and --since")
	fl.StringSliceVar(&o.Outcomes, "outcome", nil, "with --session: these outcomes (default failed,interrupted)")
	fl.StringVar(&o.Since, "since", "", "with --session: settled within this duration (24h) or since this RFC 3339 time")
	fl.StringVar(&o.Target, "target", "", "pin automation replays to this transcript of the session")
	fl.BoolVar(&o.Again, "again", false, "replay admissions replayed before once more")
	fl.BoolVar(&o.DryRun, "dry-run", false, "print what would be replayed; write nothing")
	_ = cmd.RegisterFlagCompletionFunc("outcome", fixedCompletion("completed", "failed", "interrupted", "cancelled"))
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessionIDs(f))
	return cmd
}

func (o *replayOptions) request() (admission.ReplayRequest, error) {
	req := admission.ReplayRequest{IDs: o.IDs, Session: o.Session, Target: o.Target, Again: o.Again, DryRun: o.DryRun}
	var err error
	req.Outcomes, err = enumFlag("outcome", o.outcomeSet, o.Outcomes,
		backend.OutcomeCompleted, backend.OutcomeFailed, backend.OutcomeInterrupted, backend.OutcomeCancelled)
	if err != nil {
		return req, err
	}
	if o.Since != "" {
		if req.Since, err = parseSince(o.Since, o.f.Now()); err != nil {
			return req, err
		}
	}
	switch {
	case len(o.IDs) == 0 && o.Session == "":
		return req, backend.Errorf(backend.ErrInvalid, "replay: give admission ids, or --session S")
	case len(o.IDs) > 0 && o.Session != "":
		return req, backend.Errorf(backend.ErrInvalid, "replay: give admission ids or --session, not both")
	case len(o.IDs) > 0 && (o.outcomeSet || o.Since != ""):
		return req, backend.Errorf(backend.ErrInvalid, "replay: --outcome and --since go with --session, not with admission ids")
	}
	for _, id := range o.IDs {
		if err := backend.ValidateToken("admission id", id); err != nil {
			return req, err
		}
	}
	if o.Session != "" {
		if err := backend.ValidateID("session", o.Session); err != nil {
			return req, err
		}
	}
	if o.Target != "" {
		if err := backend.ValidateID("target", o.Target); err != nil {
			return req, err
		}
	}
	return req, nil
}

func (o *replayOptions) run(cmd *cobra.Command) error {
	var req admission.ReplayRequest
	check := func() (err error) {
		req, err = o.request()
		return err
	}
	return storeRun(o.f, check, func(p *printer, _ backend.Store, cfg *Config) error {
		svc, err := o.f.Admission()
		if err != nil {
			return err
		}
		req.Principal = cfg.Principal // replaying is an owner's
		bar := o.f.progress("replaying")
		results, err := svc.Replay(cmd.Context(), req, bar.add)
		bar.done()
		if err != nil {
			return err
		}
		var firstBad error
		var good []replayJSON
		for _, r := range results {
			if r.Err != nil {
				if firstBad == nil {
					firstBad = r.Err
				}
				printError(o.f.IO.ErrOut, p.format, string(backend.CodeOf(r.Err)), fmt.Sprintf("replay %s: %s", r.Original.ID, termtext.OneLine(r.Err.Error())))
				continue
			}
			good = append(good, replayJSON{Result: r.Result, Original: r.Original.ID, Admission: r.Admission})
		}
		if err := list(p, good, func(w io.Writer) error { return replayText(w, good) }); err != nil {
			return err
		}
		if firstBad != nil {
			return &reportedError{firstBad}
		}
		return nil
	})
}

func replayText(w io.Writer, rs []replayJSON) error {
	for _, r := range rs {
		target := ""
		if r.Admission.PinnedTarget != "" {
			target = ", target " + r.Admission.PinnedTarget
		}
		what := map[string]string{
			admission.ReplayReplayed: "replayed",
			admission.ReplayExisting: "already replayed",
			admission.ReplayPlanned:  "would replay",
		}[r.Result]
		if _, err := fmt.Fprintf(w, "%s %s as %s (session %s%s)\n", what, r.Original, r.Admission.ID, r.Admission.Session, target); err != nil {
			return err
		}
	}
	if len(rs) == 0 {
		_, err := io.WriteString(w, "nothing to replay\n")
		return err
	}
	return nil
}
