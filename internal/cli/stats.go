package cli

import (
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
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
					return writePrometheus(p.ios.Out, s, ps)
				}
				out := statsOutput{Stats: s, Producers: ps}
				if out.Producers == nil {
					out.Producers = []producerStat{}
				}
				return p.object(out, func(w io.Writer) error {
					if err := statsTable(w, s); err != nil {
						return err
					}
					if len(ps) == 0 {
						return nil
					}
					fmt.Fprintln(w)
					return producerTable(w, ps)
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
	Producers []producerStat `json:"producers"`
}

func statsRow(name string, q admission.QueueStats) []string {
	row := []string{name, strconv.Itoa(q.Depth), termtext.Age(q.OldestQueuedAge, q.Depth > 0), strconv.Itoa(q.Running), strconv.Itoa(q.Unknown), strconv.Itoa(q.Viewers)}
	for _, o := range admission.AllOutcomes {
		row = append(row, strconv.Itoa(q.Outcomes[o]))
	}
	for _, m := range admission.AllModes {
		row = append(row, strconv.Itoa(q.Modes[m]))
	}
	return row
}

func statsTable(w io.Writer, s admission.Stats) error {
	rows := make([][]string, 0, len(s.Sessions)+1)
	for _, q := range s.Sessions {
		rows = append(rows, statsRow(q.Session, q))
	}
	rows = append(rows, statsRow("(total)", s.Total))
	return termtext.Table(w, []string{"SESSION", "DEPTH", "OLDEST", "RUNNING", "UNKNOWN", "VIEWERS", "COMPLETED", "FAILED", "INTERRUPTED", "CANCELLED", "TURNS", "NOTES"}, rows)
}

// writePrometheus writes s in the Prometheus text exposition format.
func writePrometheus(w io.Writer, s admission.Stats, ps []producerStat) error {
	type family struct {
		name, help string
		value      func(q admission.QueueStats) float64
	}
	simple := []family{
		{"hermesq_queue_depth", "Queued admissions (the FIFO depth).", func(q admission.QueueStats) float64 { return float64(q.Depth) }},
		{"hermesq_queue_oldest_age_seconds", "Age of the oldest queued admission in seconds (0: none queued).", func(q admission.QueueStats) float64 { return q.OldestQueuedAge.Seconds() }},
		{"hermesq_running", "Running admissions.", func(q admission.QueueStats) float64 { return float64(q.Running) }},
		{"hermesq_unknown", "Unknown admissions (the queue is paused until resolved).", func(q admission.QueueStats) float64 { return float64(q.Unknown) }},
		{"hermesq_viewers", "Live viewers.", func(q admission.QueueStats) float64 { return float64(q.Viewers) }},
	}
	var out []*promGauges
	sessions := &promGauges{name: "hermesq_sessions", help: "Sessions in the store."}
	sessions.add(float64(len(s.Sessions)))
	out = append(out, sessions)
	for _, fam := range simple {
		per := &promGauges{name: fam.name, help: fam.help + " Per session."}
		for _, q := range s.Sessions {
			per.add(fam.value(q), "session", q.Session)
		}
		all := &promGauges{name: fam.name + "_all", help: fam.help + " Every session together."}
		all.add(fam.value(s.Total))
		out = append(out, per, all)
	}
	done := &promGauges{name: "hermesq_done", help: "Done admissions by outcome. Per session."}
	doneAll := &promGauges{name: "hermesq_done_all", help: "Done admissions by outcome. Every session together."}
	exec := &promGauges{name: "hermesq_executed", help: "Done admissions by how they ran (turn, note). Per session."}
	execAll := &promGauges{name: "hermesq_executed_all", help: "Done admissions by how they ran (turn, note). Every session together."}
	for _, q := range s.Sessions {
		for _, o := range admission.AllOutcomes {
			done.add(float64(q.Outcomes[o]), "session", q.Session, "outcome", string(o))
		}
		for _, m := range admission.AllModes {
			exec.add(float64(q.Modes[m]), "session", q.Session, "mode", string(m))
		}
	}
	for _, o := range admission.AllOutcomes {
		doneAll.add(float64(s.Total.Outcomes[o]), "outcome", string(o))
	}
	for _, m := range admission.AllModes {
		execAll.add(float64(s.Total.Modes[m]), "mode", string(m))
	}
	out = append(out, done, doneAll, exec, execAll)
	out = append(out, producerGauges(ps)...)
	var b []byte
	for _, g := range out {
		b = g.appendText(b)
	}
	if _, err := w.Write(b); err != nil {
		return fmt.Errorf("stats: write prometheus text: %w", err)
	}
	return nil
}

// promGauges is one family of gauges, written in the Prometheus text
// exposition format exactly as expfmt.MetricFamilyToText writes a
// MetricFamily of type GAUGE (TestPromGaugesAsExpfmt holds it to that):
// by hand, because expfmt works on the protocol buffer types, and linking
// protocol buffers costs every hermesq command at start-up (their
// initialisation reads the executable to seed a hash).
type promGauges struct {
	name, help string // name: a legacy metric name
	samples    []promSample
}

type promSample struct {
	labels []string // name, value, name, value… (legacy label names)
	value  float64
}

func (g *promGauges) add(v float64, labels ...string) {
	g.samples = append(g.samples, promSample{labels: labels, value: v})
}

var (
	promHelpEscaper  = strings.NewReplacer("\\", `\\`, "\n", `\n`)
	promLabelEscaper = strings.NewReplacer("\\", `\\`, "\n", `\n`, "\"", `\"`)
)

// appendText appends the family; nothing when it has no sample (a family
// without samples is not worth a HELP line).
func (g *promGauges) appendText(b []byte) []byte {
	if len(g.samples) == 0 {
		return b
	}
	b = append(b, "# HELP "...)
	b = append(b, g.name...)
	b = append(b, ' ')
	b = append(b, promHelpEscaper.Replace(g.help)...)
	b = append(b, "\n# TYPE "...)
	b = append(b, g.name...)
	b = append(b, " gauge\n"...)
	for _, s := range g.samples {
		b = append(b, g.name...)
		for i := 0; i+1 < len(s.labels); i += 2 {
			if i == 0 {
				b = append(b, '{')
			} else {
				b = append(b, ',')
			}
			b = append(b, s.labels[i]...)
			b = append(b, `="`...)
			b = append(b, promLabelEscaper.Replace(s.labels[i+1])...)
			b = append(b, '"')
		}
		if len(s.labels) >= 2 {
			b = append(b, '}')
		}
		b = append(b, ' ')
		b = appendPromFloat(b, s.value)
		b = append(b, '\n')
	}
	return b
}

// appendPromFloat appends f as the exposition format writes a value.
func appendPromFloat(b []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(b, "NaN"...)
	case math.IsInf(f, +1):
		return append(b, "+Inf"...)
	case math.IsInf(f, -1):
		return append(b, "-Inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', -1, 64)
}

// Nagios plugin states: check's exit codes.
const (
	nagiosOK       = 0
	nagiosWarning  = 1
	nagiosCritical = 2
	nagiosUnknown  = 3
)

var nagiosNames = [...]string{"OK", "WARNING", "CRITICAL", "UNKNOWN"}

// checkStatus is how check ends: the Nagios state is the exit code; the
// status line has been printed. err is set for UNKNOWN (the check could not
// be made).
type checkStatus struct {
	state int
	err   error
}

func (e *checkStatus) Error() string {
	if e.err != nil {
		return e.err.Error()
	}
	return "check: " + nagiosNames[e.state]
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
				fmt.Fprintf(f.IO.Out, "HERMESQ UNKNOWN - %s\n", escapePerfText(err.Error()))
				return &checkStatus{state: nagiosUnknown, err: err}
			}
			return nil
		},
		ValidArgsFunction: cobra.NoFileCompletions,
		RunE: func(cmd *cobra.Command, _ []string) error {
			err := o.run(cmd, f)
			var cs *checkStatus
			if err != nil && !errors.As(err, &cs) {
				fmt.Fprintf(f.IO.Out, "HERMESQ UNKNOWN - %s\n", escapePerfText(termtext.OneLine(err.Error())))
				return &checkStatus{state: nagiosUnknown, err: err}
			}
			return err
		},
	}
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		fmt.Fprintf(f.IO.Out, "HERMESQ UNKNOWN - %s\n", escapePerfText(termtext.OneLine(err.Error())))
		return &checkStatus{state: nagiosUnknown, err: fmt.Errorf("%v (see '%s --help')", err, c.CommandPath())}
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
		scope := s.Sessions
		total := s.Total
		if o.Session != "" {
			scope = nil
			for _, q := range s.Sessions {
				if q.Session == o.Session {
					scope = append(scope, q)
					total = q
				}
			}
			if scope == nil {
				return backend.Errorf(backend.ErrNotFound, "check: session %s not found", o.Session)
			}
		}
		state := nagiosOK
		var reasons []string
		raise := func(to int, why string) {
			state = max(state, to)
			reasons = append(reasons, why)
		}
		for _, q := range scope {
			switch {
			case q.Unknown > 0:
				raise(nagiosCritical, fmt.Sprintf("%s has %d unknown (paused)", q.Session, q.Unknown))
			}
			switch {
			case o.DepthCrit > 0 && q.Depth >= o.DepthCrit:
				raise(nagiosCritical, fmt.Sprintf("%s depth %d >= %d", q.Session, q.Depth, o.DepthCrit))
			case o.DepthWarn > 0 && q.Depth >= o.DepthWarn:
				raise(nagiosWarning, fmt.Sprintf("%s depth %d >= %d", q.Session, q.Depth, o.DepthWarn))
			}
			if q.Depth > 0 {
				switch {
				case o.AgeCrit > 0 && q.OldestQueuedAge >= o.AgeCrit:
					raise(nagiosCritical, fmt.Sprintf("%s oldest queued %s >= %s", q.Session, termtext.Age(q.OldestQueuedAge, true), o.AgeCrit))
				case o.AgeWarn > 0 && q.OldestQueuedAge >= o.AgeWarn:
					raise(nagiosWarning, fmt.Sprintf("%s oldest queued %s >= %s", q.Session, termtext.Age(q.OldestQueuedAge, true), o.AgeWarn))
				}
			}
		}
		waitCrit := o.WaitCrit
		if !o.waitCritSet {
			waitCrit = defaultProducerWaitCrit
			if pc, err := f.producerConfig(); err == nil {
				waitCrit = pc.WaitCrit
			}
		}
		var waiting, rejected int
		var waitAge time.Duration
		for _, ps := range f.producerStatsOrWarn(cmd.Context()) {
			waiting += ps.Waiting
			rejected += ps.Rejected
			waitAge = max(waitAge, ps.OldestWaitingAge)
			switch {
			case ps.Waiting > 0 && waitCrit > 0 && ps.OldestWaitingAge > waitCrit:
				raise(nagiosCritical, fmt.Sprintf("producer %s: %d waiting after a refusal, oldest %s > %s: %s",
					ps.Producer, ps.Waiting, termtext.Age(ps.OldestWaitingAge, true), waitCrit, escapePerfText(termtext.OneLine(ps.LastReason))))
			case ps.Waiting > 0:
				reasons = append(reasons, fmt.Sprintf("producer %s: %d waiting after a refusal, oldest %s",
					ps.Producer, ps.Waiting, termtext.Age(ps.OldestWaitingAge, true)))
			}
			if ps.Rejected > 0 {
				raise(nagiosWarning, fmt.Sprintf("producer %s: %d rejected (producers outbox %s)", ps.Producer, ps.Rejected, ps.Producer))
			}
		}
		summary := fmt.Sprintf("%d sessions, depth %d, oldest %s, running %d, unknown %d",
			len(scope), total.Depth, termtext.Age(total.OldestQueuedAge, total.Depth > 0), total.Running, total.Unknown)
		if len(reasons) > 0 {
			summary = strings.Join(reasons, "; ") + " (" + summary + ")"
		}
		thr := func(v int) string {
			if v == 0 {
				return ""
			}
			return strconv.Itoa(v)
		}
		thrD := func(d time.Duration) string {
			if d == 0 {
				return ""
			}
			return strconv.FormatFloat(d.Seconds(), 'f', -1, 64)
		}
		perf := fmt.Sprintf("depth=%d;%s;%s;0 oldest_age=%ss;%s;%s;0 running=%d;;;0 unknown=%d;;1;0 producer_waiting=%d;;;0 producer_waiting_age=%ss;;%s;0 producer_rejected=%d;1;;0",
			total.Depth, thr(o.DepthWarn), thr(o.DepthCrit),
			strconv.FormatFloat(total.OldestQueuedAge.Seconds(), 'f', 3, 64), thrD(o.AgeWarn), thrD(o.AgeCrit),
			total.Running, total.Unknown, waiting, strconv.FormatFloat(waitAge.Seconds(), 'f', 3, 64), thrD(waitCrit), rejected)
		fmt.Fprintf(p.ios.Out, "HERMESQ %s - %s | %s\n", nagiosNames[state], summary, perf)
		if state != nagiosOK {
			return &reportedError{&checkStatus{state: state}}
		}
		return nil
	})
}

// escapePerfText keeps an error message from being read as perfdata: a
// "|" would start it early.
func escapePerfText(s string) string { return strings.ReplaceAll(s, "|", "/") }
