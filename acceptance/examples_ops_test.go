package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/hermesq/hermesq/pkg/backend"
)

// examplesDir is the absolute path of examples/.
func examplesDir(t *testing.T) string {
	t.Helper()
	d, err := filepath.Abs(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// runScript runs an example shell script with c's environment.
func runScript(t *testing.T, c *cli, stdin string, name string, args ...string) result {
	t.Helper()
	cmd := exec.Command("bash", append([]string{filepath.Join(examplesDir(t), name)}, args...)...)
	cmd.Env, cmd.Dir = c.env, c.dir
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	return result{args: append([]string{name}, args...), stdout: out.String(), stderr: errb.String(), code: exitCode(err)}
}

// unitFile reads an example systemd unit with its binaries pointed at the
// ones built for the tests and, for a template, %i replaced by instance.
func unitFile(t *testing.T, name, instance string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(examplesDir(t), "systemd", name))
	if err != nil {
		t.Fatal(err)
	}
	s := strings.ReplaceAll(string(data), "/usr/local/bin/hermesq-agent", handlerBin(t))
	s = strings.ReplaceAll(s, "/usr/local/bin/hermesq", hermesqBin(t))
	if instance != "" {
		s = strings.ReplaceAll(s, "%i", instance)
	}
	return s
}

// execStart returns the argv of a unit's ExecStart line.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "ExecStart="); ok {
			return strings.Fields(v)
		}
	}
	t.Fatal("no ExecStart in the unit")
	return nil
}

// TestExampleSystemdUnits is issue 9, acceptance 7: the systemd units of
// examples/systemd pass `systemd-analyze verify` (when it is installed)
// and their ExecStart lines work on every store: the timer's service drains
// every session once; the template follows one session until SIGTERM, which
// it ends with 143, an exit status the unit counts as success.
func TestExampleSystemdUnits(t *testing.T) {
	units := map[string]string{
		"hermesq-drain-all.service": unitFile(t, "hermesq-drain-all.service", ""),
		"hermesq-drain-all.timer":   unitFile(t, "hermesq-drain-all.timer", ""),
		"hermesq-drain@s1.service":  unitFile(t, "hermesq-drain@.service", "s1"),
	}
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		dir := t.TempDir()
		var paths []string
		for name, body := range units {
			p := filepath.Join(dir, name)
			if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
			paths = append(paths, p)
		}
		out, err := exec.Command(sa, append([]string{"verify"}, paths...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze not installed: units not verified")
	}
	for _, u := range []string{units["hermesq-drain-all.service"], units["hermesq-drain@s1.service"]} {
		if !strings.Contains(u, "SuccessExitStatus=") {
			t.Errorf("unit without SuccessExitStatus:\n%s", u)
		}
	}
	forEachStore(t, func(t *testing.T, c *cli) {
		// The timer's oneshot service: every session with work, once.
		c.admitHuman("s1", "one")
		c.admitHuman("s2", "two")
		argv := execStart(t, units["hermesq-drain-all.service"])
		r := c.run(nil, argv[1:]...)
		if r.code != 0 {
			t.Fatalf("drain-all ExecStart: %v", r)
		}
		if len(c.calls()) != 2 {
			t.Fatalf("%d handler calls, want 2", len(c.calls()))
		}
		// The template: follows s1 until systemctl stop (SIGTERM).
		argv = execStart(t, units["hermesq-drain@s1.service"])
		p := c.start(nil, argv[1:]...)
		a := c.admitHuman("s1", "while following")
		waitStatus(t, c, a.Admission.ID, backend.StatusDone, time.Minute)
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, time.Minute); code != 143 {
			t.Errorf("drain --follow stopped by SIGTERM: exit %d, want 143 (SuccessExitStatus)\n%s", code, p.stderr())
		}
	})
}

// TestExampleCronMetrics is issue 9, acceptance 7: cron-metrics.sh writes a
// Prometheus textfile that parses and shows the queues, by rename (no temp
// file left), and keeps the previous file when hermesq fails.
func TestExampleCronMetrics(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c.admitHuman("s1", "one")
		c.admitHuman("s1", "two")
		dir := t.TempDir()
		if r := runScript(t, c, "", "cron-metrics.sh", dir); r.code != 0 {
			t.Fatalf("%v", r)
		}
		f, err := os.Open(filepath.Join(dir, "hermesq.prom"))
		if err != nil {
			t.Fatal(err)
		}
		p := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := p.TextToMetricFamilies(f)
		f.Close()
		if err != nil {
			t.Fatalf("hermesq.prom does not parse: %v", err)
		}
		if got := sample(t, fams, "hermesq_queue_depth", "session", "s1"); got != 2 {
			t.Errorf("hermesq_queue_depth{s1} %v, want 2", got)
		}
		entries, _ := os.ReadDir(dir)
		if len(entries) != 1 {
			t.Errorf("textfile dir holds %d files, want hermesq.prom alone", len(entries))
		}
		// The store unreachable: the old file stays, hermesq's code comes out.
		bad := *c
		bad.env = append(append([]string{}, c.env...), "HERMESQ_STORE=nosuch://x")
		before, _ := os.ReadFile(filepath.Join(dir, "hermesq.prom"))
		if r := runScript(t, &bad, "", "cron-metrics.sh", dir); r.code != 2 {
			t.Errorf("cron-metrics.sh with a bad store: %v, want exit 2", r)
		}
		after, _ := os.ReadFile(filepath.Join(dir, "hermesq.prom"))
		if string(after) != string(before) {
			t.Error("a failed run replaced the textfile")
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 1 {
			t.Errorf("a failed run left %d files", len(entries))
		}
	})
}

// TestExampleAgentLoop is issue 9, acceptance 7: agent-loop.sh admits each
// typed line, a follower drains it as a turn, the attached viewer streams
// the transcript, and Ctrl-D (end of input) ends the loop with exit 0 once
// everything ran, leaving no viewer behind.
func TestExampleAgentLoop(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		r := runScript(t, c, "hello\n\nworld\n", "agent-loop.sh", "chat", "--", "handler")
		if r.code != 0 {
			t.Fatalf("%v", r)
		}
		ms := c.messages("chat")
		if len(ms) != 4 || ms[1].Content != "echo: hello (notes seen: 0)" || ms[3].Content != "echo: world (notes seen: 0)" {
			t.Fatalf("transcript after agent-loop.sh: %+v", ms)
		}
		if !strings.Contains(r.stdout, "] assistant: echo: world (notes seen: 0)\n") {
			t.Errorf("the viewer did not stream the transcript: %q", r.stdout)
		}
		if s := c.session("chat"); s.Viewers != 0 || s.Depth != 0 {
			t.Errorf("after the loop: %+v, want no viewer and nothing queued", s)
		}
		if r := runScript(t, c, "", "agent-loop.sh", "chat"); r.code != 2 {
			t.Errorf("agent-loop.sh without a handler: %v, want exit 2", r)
		}
	})
}

// TestExampleConfig is issue 9, acceptance 7: examples/config.yaml is a
// valid configuration (every key accepted), and its settings apply: its
// payload limit refuses a larger input; the command line overrides its
// store and handler.
func TestExampleConfig(t *testing.T) {
	cfg := filepath.Join(examplesDir(t), "config.yaml")
	forEachStore(t, func(t *testing.T, c *cli) {
		withCfg := func(args ...string) []string {
			return append([]string{"--config", cfg, "--store", c.store}, args...)
		}
		c.ok(withCfg("admit", "s1", "--text", "small")...)
		r := c.runStdin(strings.Repeat("x", 300<<10), withCfg("admit", "s1")...)
		if r.code != 2 || !strings.Contains(r.stderr, "262144") {
			t.Errorf("a 300 KiB input under payload_limit 262144: %v", r)
		}
		c.ok(withCfg("drain", "s1", "--", "handler")...)
		if n := len(c.calls()); n != 1 {
			t.Errorf("%d handler calls, want 1", n)
		}
		var out []sessionJSON
		c.jsonOut(&out, withCfg("sessions")...)
		if len(out) != 1 {
			t.Errorf("sessions with the example config: %+v", out)
		}
	})
}

// TestOverlappingCronDrains is issue 9, acceptance 7: cron-drain.sh started
// three times at once over the same sessions (a slow run overlapping the
// next) runs every admission exactly once.
func TestOverlappingCronDrains(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		var b strings.Builder
		for s := 0; s < 4; s++ {
			for i := 0; i < 8; i++ {
				fmt.Fprintf(&b, `{"session":"s%d","text":"s%d-%d"}`+"\n", s, s, i)
			}
		}
		if r := c.runStdin(b.String(), "admit", "--batch", "-"); r.code != 0 {
			t.Fatalf("%v", r)
		}
		var wg sync.WaitGroup
		results := make([]result, 3)
		for i := range results {
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i] = runScript(t, c, "", "cron-drain.sh", "handler")
			}()
		}
		wg.Wait()
		for _, r := range results {
			if r.code != 0 {
				t.Errorf("overlapping cron-drain.sh: %v", r)
			}
		}
		// Whatever an overlapping run skipped (a lease held), a later run takes.
		if r := runScript(t, c, "", "cron-drain.sh", "handler"); r.code != 0 {
			t.Fatalf("%v", r)
		}
		seen := map[string]int{}
		for _, call := range c.calls() {
			seen[call.Admission.ID]++
		}
		if len(seen) != 32 {
			t.Errorf("%d admissions ran, want 32", len(seen))
		}
		for id, n := range seen {
			if n != 1 {
				t.Errorf("admission %s ran %d times", id, n)
			}
		}
		for s := 0; s < 4; s++ {
			checkFIFO(t, c, fmt.Sprintf("s%d", s))
		}
	})
}
