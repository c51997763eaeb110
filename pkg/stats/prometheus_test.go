package stats

import (
	"bytes"
	"math"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"google.golang.org/protobuf/proto"
)

// expfmtText is what expfmt writes for g as a MetricFamily of gauges.
func expfmtText(t testing.TB, g *promGauges) string {
	t.Helper()
	mf := &dto.MetricFamily{Name: proto.String(g.name), Help: proto.String(g.help), Type: dto.MetricType_GAUGE.Enum()}
	for _, s := range g.samples {
		m := &dto.Metric{Gauge: &dto.Gauge{Value: proto.Float64(s.value)}}
		for i := 0; i+1 < len(s.labels); i += 2 {
			m.Label = append(m.Label, &dto.LabelPair{Name: proto.String(s.labels[i]), Value: proto.String(s.labels[i+1])})
		}
		mf.Metric = append(mf.Metric, m)
	}
	var b bytes.Buffer
	if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
		t.Fatalf("expfmt: %v", err)
	}
	return b.String()
}

// TestPromGaugesAsExpfmt: the hand-written writer of stats --format
// prometheus writes exactly what the Prometheus library writes.
func TestPromGaugesAsExpfmt(t *testing.T) {
	g := &promGauges{name: "hermesq_done", help: "Done admissions by outcome.\nPer session, with a back\\slash."}
	g.add(0, "session", "s1", "outcome", "completed")
	g.add(1, "session", `we"ird\name`+"\n", "outcome", "failed")
	g.add(-1)
	g.add(2.5e-7, "session", "é")
	g.add(123456789012, "session", "")
	g.add(math.Inf(1), "session", "a")
	g.add(math.Inf(-1), "session", "b")
	g.add(math.NaN(), "session", "c")
	g.add(0.1)
	if got, want := string(g.appendText(nil)), expfmtText(t, g); got != want {
		t.Errorf("got\n%s\nwant (expfmt)\n%s", got, want)
	}
	if got := (&promGauges{name: "hermesq_empty", help: "none"}).appendText(nil); len(got) != 0 {
		t.Errorf("a family without samples wrote %q", got)
	}
}

func FuzzPromGaugesAsExpfmt(f *testing.F) {
	f.Add("help", "s1", "completed", 1.0)
	f.Add("a\\b\nc", `"q"`, "\n\\", -0.5)
	f.Fuzz(func(t *testing.T, help, session, outcome string, v float64) {
		g := &promGauges{name: "hermesq_done", help: help}
		g.add(v, "session", session, "outcome", outcome)
		g.add(v)
		if got, want := string(g.appendText(nil)), expfmtText(t, g); got != want {
			t.Errorf("got\n%q\nwant (expfmt)\n%q", got, want)
		}
	})
}
