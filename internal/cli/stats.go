package cli

import (
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/stats"
)

// Output formats of stats besides the global -o ones.
const formatPrometheus = "prometheus"

func newStatsCmd(f *Factory) *cobra.Command {
	var format string
	cmd := &cobra.Command{
		Use:   "stats [--format prometheus]",
		Short: "Queue figures per session and in total; Prometheus text format",
		Long: `Stats prints, for each session and in total: depth (queued admissions), the
age of the oldest queued admission, running and unknown admissions, live
viewers, and the done admissions counted by outcome (completed, failed,
interrupted, cancelled) and by mode (turn, note).

-o json prints {"at","sessions":[…],"total":{…}}. --format prometheus prints
the Prometheus text exposition format for the node-exporter textfile
collector (write it to a temp file, then rename it into the collector's
directory; see examples/). Metric names:

  hermesq_sessions                           sessions in the store
  hermesq_queue_depth{session}               queued admissions
  hermesq_queue_oldest_age_seconds{session}  age of the oldest queued admission (0: none)
  hermesq_running{session}                   running admissions
  hermesq_unknown{session}                   unknown admissions (the queue is paused)
  hermesq_viewers{session}                   live viewers
  hermesq_done{session,outcome}              done admissions by outcome
  hermesq_executed{session,mode}             done admissions by mode (turn, note)

and the same names with the suffix _all and no session label for the total
(hermesq_queue_oldest_age_seconds_all is the largest age). Then, for each
producer outbox in producer_state_dir:

  hermesq_producer_pending{producer}                      events not yet admitted
  hermesq_producer_waiting{producer}                      of them, refused by the store and waiting
  hermesq_producer_waiting_oldest_age_seconds{producer}   age of the oldest waiting event (0: none)
  hermesq_producer_rejected{producer}                     rejected as invalid (kept until dropped)

The text and -o json outputs list the producers too ("producers": pending,
claimed, waiting, oldest_waiting, oldest_waiting_age_seconds, last_reason,
rejected, delivered, dropped).`,
		Args:              cobra.NoArgs,
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			check := func() error {
				if format != "" && format != formatPrometheus {
					return backend.Errorf(backend.ErrInvalid, "stats --format %q: want prometheus", format)
				}
				return nil
			}
			return storeRun(f, check, func(p *printer, st backend.Store, cfg *Config) error {
				svc := &admission.Service{Store: st, Now: f.Now}
				s, err := svc.Stats(cmd.Context())
				if err != nil {
					return err
				}
				ps := f.producerStatsOrWarn(cmd.Context())
				if format == formatPrometheus {
					return stats.WritePrometheus(p.ios.Out, s, ps)
				}
				out := statsOutput{Stats: s, Producers: ps}
				if out.Producers == nil {
					out.Producers = []stats.Producer{}
				}
				return p.object(out, func(w io.Writer) error {
					if err := termtext.StatsTable(w, s); err != nil {
						return err
					}
					if len(ps) == 0 {
						return nil
					}
					fmt.Fprintln(w)
					return termtext.ProducerTable(w, ps)
				})
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "", "prometheus: the Prometheus text exposition format")
	_ = cmd.RegisterFlagCompletionFunc("format", fixedCompletion(formatPrometheus))
	return cmd
}

// statsOutput is what stats prints: the queues' figures and the
// producers'.
type statsOutput struct {
	admission.Stats
	Producers []stats.Producer `json:"producers"`
}

// checkStatus is how check ends: the Nagios state is the exit code; the
// status line has been printed. err is set for UNKNOWN (the check could not
// be made).
type checkStatus struct {
	state stats.State
	err   error
}

func (e *checkStatus) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "check: " + e.state.String()
}
func (e *checkStatus) Unwrap() error { return e.err }

type checkOptions struct {
	DepthWarn, DepthCrit int
	AgeWarn, AgeCrit     time.Duration
	Session              string
	WaitCrit             time.Duration
	waitCritSet          bool
}

func newCheckCmd(f *Factory) *cobra.Command {
	o := &checkOptions{}
	cmd := &cobra.Command{
		Use:   "check [--depth-warn N] [--depth-crit N] [--age-warn D] [--age-crit D] [--session S] [--producer-wait-crit D]",
		Short: "Nagios-style check of queue depth, oldest queued age, unknown admissions and producer events",
		Long: `Check follows the Nagios plugin conventions: one status line on stdout,
"HERMESQ OK|WARNING|CRITICAL|UNKNOWN - summary | perfdata", and the exit
code 0 (OK), 1 (WARNING), 2 (CRITICAL) or 3 (UNKNOWN).

CRITICAL when any session has an unknown admission (its queue is paused
until 'hermesq resolve'), or a depth of at least --depth-crit, or an oldest
queued admission at least --age-crit old; WARNING at --depth-warn or
--age-warn; OK otherwise. A threshold of 0 is not checked.

Producers: CRITICAL when an event has waited after a refusal of the store
(its session not open, a grant missing…) for longer than
--producer-wait-crit (default producer_wait_crit, 1h); WARNING when a
producer holds rejected events (invalid, kept until 'hermesq producers
outbox drop'). Events waiting for less are named in the summary.

UNKNOWN (3) when
the check cannot be made: a bad flag, an unreachable store; the reason is
also printed on stderr as "hermesq: error: …". These exit codes replace
hermesq's usual ones for this command.

Perfdata: depth, oldest_age (seconds), running, unknown (totals, or those
of --session), with their thresholds; producer_waiting,
producer_waiting_age (seconds, the oldest) and producer_rejected (every
producer).`,
		Example: `  hermesq check --depth-warn 50 --depth-crit 200 --age-warn 10m --age-crit 1h`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) > 0 {
				err := fmt.Errorf("check takes no arguments, got %q", args)
				fmt.Fprintln(f.IO.Out, stats.UnknownLine(err))
				return &checkStatus{state: stats.Unknown, err: err}
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.run(cmd, f)
			var cs *checkStatus
			if err != nil && !errors.As(err, &cs) {
				fmt.Fprintln(f.IO.Out, stats.UnknownLine(err))
				return &checkStatus{state: stats.Unknown, err: err}
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintln(f.IO.Out, stats.UnknownLine(err))
		return &checkStatus{state: stats.Unknown, err: fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())}
	})
	fl := cmd.Flags()
	fl.IntVar(&o.DepthWarn, "depth-warn", 0, "WARNING when a session's depth is at least N (0: off)")
	fl.IntVar(&o.DepthCrit, "depth-crit", 0, "CRITICAL when a session's depth is at least N (0: off)")
	fl.DurationVar(&o.AgeWarn, "age-warn", 0, "WARNING when an oldest queued admission is at least this old (0: off)")
	fl.DurationVar(&o.AgeCrit, "age-crit", 0, "CRITICAL when an oldest queued admission is at least this old (0: off)")
	fl.StringVar(&o.Session, "session", "", "check only this session")
	fl.DurationVar(&o.WaitCrit, "producer-wait-crit", 0, "CRITICAL when a producer event waited after a refusal longer than this (default producer_wait_crit, 1h)")
	_ = cmd.RegisterFlagCompletionFunc("session", completeSessionIDs(f))
	return cmd
}

func (o *checkOptions) validate() error {
	switch {
	case o.DepthWarn < 0 || o.DepthCrit < 0 || o.AgeWarn < 0 || o.AgeCrit < 0 || o.WaitCrit < 0:
		return backend.Errorf(backend.ErrInvalid, "check: thresholds cannot be negative")
	case o.DepthWarn > 0 && o.DepthCrit > 0 && o.DepthWarn > o.DepthCrit:
		return backend.Errorf(backend.ErrInvalid, "check: --depth-warn %d is above --depth-crit %d", o.DepthWarn, o.DepthCrit)
	case o.AgeWarn > 0 && o.AgeCrit > 0 && o.AgeWarn > o.AgeCrit:
		return backend.Errorf(backend.ErrInvalid, "check: --age-warn %v is above --age-crit %v", o.AgeWarn, o.AgeCrit)
	}
	if o.Session != "" {
		return backend.ValidateID("session", o.Session)
	}
	return nil
}

func (o *checkOptions) run(cmd *cobra.Command, f *Factory) error {
	o.waitCritSet = cmd.Flags().Changed("producer-wait-crit")
	return storeRun(f, o.validate, func(p *printer, st backend.Store, _ *Config) error {
		svc := &admission.Service{Store: st, Now: f.Now}
		s, err := svc.Stats(cmd.Context())
		if err != nil {
			return err
		}
		scope, total, err := stats.Scope(s, o.Session)
		if err != nil {
			return err
		}
		waitCrit := o.WaitCrit
		if !o.waitCritSet {
			waitCrit = defaultProducerWaitCrit
			if pc, err := f.producerConfig(); err == nil {
				waitCrit = pc.WaitCrit
			}
		}
		r := stats.Check(scope, total, f.producerStatsOrWarn(cmd.Context()), stats.Thresholds{
			DepthWarn: o.DepthWarn, DepthCrit: o.DepthCrit, AgeWarn: o.AgeWarn, AgeCrit: o.AgeCrit, WaitCrit: waitCrit})
		fmt.Fprintln(p.ios.Out, r.Line)
		if r.State != stats.OK {
			return &reportedError{&checkStatus{state: r.State}}
		}
		return nil
	})
}
