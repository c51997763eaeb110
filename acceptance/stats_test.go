package acceptance

import (
	"strings"
	"syscall"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestStatsAndCheck is issue 9, acceptance 3, on both stores: the output of
// `stats --format prometheus` parses with expfmt and matches what `queue`
// lists for every session; `stats -o json` agrees; `check` exits 0, 1 and 2
// (and 3 when it cannot check) for states built here, with perfdata after
// "|".
func TestStatsAndCheck(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		// An empty store: OK, and the totals are zero. (Reading never
		// creates a store: an empty import creates it.)
		c.ok("import")
		r := c.ok("check", "--depth-warn", "1")
		if !strings.HasPrefix(r.stdout, "HERMESQ OK - 0 sessions") || !strings.Contains(r.stdout, " | depth=0;1;;0 ") {
			t.Errorf("check on an empty store: %q", r.stdout)
		}

		// s1: two queued; s2: a turn, a note and a failed turn; s3: a
		// cancelled admission and a queued one.
		c.admitHuman("s1", "one")
		c.admitHuman("s1", "two")
		c.admitHuman("s2", "turn")
		c.admitAuto("s2", "process", "[finished] x (exit 0)", "", "p:1")
		c.ok("drain", "s2", "--", "handler")
		c.admitHuman("s2", "fails")
		if r := c.run([]string{"HERMESQ_EXAMPLE_FAIL=1"}, "drain", "s2", "--", "handler"); r.code != 6 {
			t.Fatalf("failing turn: %v", r)
		}
		c.ok("cancel", c.admitHuman("s3", "cancel me").Admission.ID)
		c.admitHuman("s3", "waits")

		fams := promStats(t, c)
		for _, s := range []string{"s1", "s2", "s3"} {
			as := c.all(s)
			queued := 0
			outcomes := map[string]float64{}
			modes := map[string]float64{}
			for _, a := range as {
				if a.Status == backend.StatusQueued {
					queued++
				}
				if a.Status == backend.StatusDone {
					outcomes[string(a.Outcome)]++
					if a.Mode != "" {
						modes[string(a.Mode)]++
					}
				}
			}
			if got := sample(t, fams, "hermesq_queue_depth", "session", s); got != float64(queued) {
				t.Errorf("%s: hermesq_queue_depth %v, queue lists %d queued", s, got, queued)
			}
			for _, o := range []string{"completed", "failed", "interrupted", "cancelled"} {
				if got := sample(t, fams, "hermesq_done", "session", s, "outcome", o); got != outcomes[o] {
					t.Errorf("%s: hermesq_done{outcome=%q} %v, queue lists %v", s, o, got, outcomes[o])
				}
			}
			for _, m := range []string{"turn", "note"} {
				if got := sample(t, fams, "hermesq_executed", "session", s, "mode", m); got != modes[m] {
					t.Errorf("%s: hermesq_executed{mode=%q} %v, queue lists %v", s, m, got, modes[m])
				}
			}
			if age := sample(t, fams, "hermesq_queue_oldest_age_seconds", "session", s); (queued > 0) != (age > 0) {
				t.Errorf("%s: oldest age %v with %d queued", s, age, queued)
			}
		}
		if got := sample(t, fams, "hermesq_queue_depth_all"); got != 3 {
			t.Errorf("hermesq_queue_depth_all %v, want 3", got)
		}
		if got := sample(t, fams, "hermesq_done_all", "outcome", "completed"); got != 2 {
			t.Errorf("hermesq_done_all{completed} %v, want 2", got)
		}
		if got := sample(t, fams, "hermesq_sessions"); got != 3 {
			t.Errorf("hermesq_sessions %v, want 3", got)
		}
		var js struct {
			Sessions []struct {
				Session  string         `json:"session"`
				Depth    int            `json:"depth"`
				Outcomes map[string]int `json:"outcomes"`
			} `json:"sessions"`
			Total struct {
				Depth int `json:"depth"`
			} `json:"total"`
		}
		c.jsonOut(&js, "stats")
		if len(js.Sessions) != 3 || js.Sessions[0].Depth != 2 || js.Sessions[1].Outcomes["failed"] != 1 || js.Total.Depth != 3 {
			t.Errorf("stats -o json: %+v", js)
		}
		if r := c.ok("stats"); !strings.Contains(r.stdout, "(total)") || !strings.HasPrefix(r.stdout, "SESSION") {
			t.Errorf("stats text:\n%s", r.stdout)
		}

		// check: 0, 1 and 2 for depth and age thresholds.
		nagios := func(want int, args ...string) string {
			t.Helper()
			r := c.run(nil, append([]string{"check"}, args...)...)
			if r.code != want {
				t.Fatalf("check %v: exit %d, want %d\n%s%s", args, r.code, want, r.stdout, r.stderr)
			}
			head, perf, ok := strings.Cut(strings.TrimSuffix(r.stdout, "\n"), " | ")
			if !ok || strings.Contains(r.stdout[:len(r.stdout)-1], "\n") || !strings.HasPrefix(perf, "depth=") {
				t.Fatalf("check %v: not one status line with perfdata: %q", args, r.stdout)
			}
			return head
		}
		if h := nagios(0, "--depth-warn", "3", "--depth-crit", "5"); !strings.HasPrefix(h, "HERMESQ OK - 3 sessions, depth 3") {
			t.Errorf("OK line %q", h)
		}
		if h := nagios(1, "--depth-warn", "2", "--depth-crit", "5"); !strings.Contains(h, "WARNING - s1 depth 2 >= 2") {
			t.Errorf("WARNING line %q", h)
		}
		if h := nagios(2, "--depth-warn", "1", "--depth-crit", "2"); !strings.Contains(h, "CRITICAL - s1 depth 2 >= 2") {
			t.Errorf("CRITICAL line %q", h)
		}
		nagios(1, "--age-warn", "1ns", "--age-crit", "24h")
		nagios(2, "--age-crit", "1ns")
		nagios(0, "--session", "s2", "--depth-warn", "1", "--age-warn", "1ns")
		// UNKNOWN: the check cannot be made.
		for _, args := range [][]string{{"--depth-warn", "x"}, {"--depth-warn", "5", "--depth-crit", "2"}, {"extra"}, {"--session", "nosuch"}} {
			r := c.run(nil, append([]string{"check"}, args...)...)
			if r.code != 3 || !strings.HasPrefix(r.stdout, "HERMESQ UNKNOWN - ") || !strings.HasPrefix(r.stderr, "hermesq: error: ") {
				t.Errorf("check %v: %v, want exit 3 and an UNKNOWN line", args, r)
			}
		}

		// An unknown admission is critical whatever the thresholds.
		crash := c.admitHuman("s4", "CRASHES").Admission.ID
		d := c.start([]string{"HERMESQ_EXAMPLE_SLEEP=1m"}, "drain", "s4", "--lease", "1s", "--", "handler")
		waitStatus(t, c, crash, backend.StatusRunning, 30*time.Second)
		_ = syscall.Kill(-d.pid(), syscall.SIGKILL)
		d.wait(t, 10*time.Second)
		c.exit(6, "drain", "s4", "--wait", "--", "handler") // pauses on it: unknown
		if h := nagios(2); !strings.Contains(h, "CRITICAL - s4 has 1 unknown") {
			t.Errorf("unknown line %q", h)
		}
		if got := sample(t, promStats(t, c), "hermesq_unknown", "session", "s4"); got != 1 {
			t.Errorf("hermesq_unknown{s4} %v, want 1", got)
		}
	})
}

// promStats runs stats --format prometheus and parses it with expfmt.
func promStats(t *testing.T, c *cli) map[string]*dto.MetricFamily {
	t.Helper()
	r := c.ok("stats", "--format", "prometheus")
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(r.stdout))
	if err != nil {
		t.Fatalf("stats --format prometheus does not parse: %v\n%s", err, r.stdout)
	}
	return fams
}

// sample is the value of the gauge name with exactly these labels.
func sample(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) float64 {
	t.Helper()
	mf, ok := fams[name]
	if !ok {
		t.Fatalf("no metric family %s", name)
	}
next:
	for _, m := range mf.GetMetric() {
		if len(m.GetLabel())*2 != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			found := false
			for i := 0; i < len(labels); i += 2 {
				if labels[i] == l.GetName() && labels[i+1] == l.GetValue() {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		return m.GetGauge().GetValue()
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}
