package stats

import (
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/hermesq/hermesq/pkg/admission"
)

// WritePrometheus writes s and the producers' figures ps in the Prometheus text exposition format.
func WritePrometheus(w io.Writer, s admission.Stats, ps []Producer) error {
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

// producerGauges are the producers' Prometheus gauges.
func producerGauges(ps []Producer) []*promGauges {
	pending := &promGauges{name: "hermesq_producer_pending", help: "Events pending in a producer's outbox (not yet admitted)."}
	waiting := &promGauges{name: "hermesq_producer_waiting", help: "Pending events the store refused, waiting for their next offer."}
	oldest := &promGauges{name: "hermesq_producer_waiting_oldest_age_seconds", help: "Age in seconds of the oldest event waiting after a refusal (0: none)."}
	rejected := &promGauges{name: "hermesq_producer_rejected", help: "Events rejected as invalid, kept until an operator drops them."}
	for _, s := range ps {
		pending.add(float64(s.Pending), "producer", s.Producer)
		waiting.add(float64(s.Waiting), "producer", s.Producer)
		oldest.add(s.OldestWaitingAge.Seconds(), "producer", s.Producer)
		rejected.add(float64(s.Rejected), "producer", s.Producer)
	}
	return []*promGauges{pending, waiting, oldest, rejected}
}
