package acceptance

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestExampleScripts runs the shell examples against the real binary on
// every store: notify-done.sh admits a command's completion (idempotently
// identified, exit code passed through, an admit failure reported with
// hermesq's code), and cron-drain.sh drains it as a
// note (no viewer) and a human message as a turn.
func TestExampleScripts(t *testing.T) {
	examples, err := filepath.Abs(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, c *cli) {
		script := func(name string, args ...string) result {
			t.Helper()
			cmd := exec.Command("bash", append([]string{filepath.Join(examples, name)}, args...)...)
			cmd.Env, cmd.Dir = c.env, c.dir
			var out, errb strings.Builder
			cmd.Stdout, cmd.Stderr = &out, &errb
			err := cmd.Run()
			return result{args: append([]string{name}, args...), stdout: out.String(), stderr: errb.String(), code: exitCode(err)}
		}
		c.ok("session", "open", "s1")
		if r := script("notify-done.sh", "s1", "--", "sh", "-c", "echo built; exit 3"); r.code != 3 {
			t.Fatalf("notify-done.sh passes the command's exit code through: %v", r)
		}
		if r := script("notify-done.sh", "s1", "s1", "--", "true"); r.code != 0 {
			t.Fatalf("%v", r)
		}
		if r := script("notify-done.sh", "bad id!", "--", "true"); r.code != 2 || !strings.Contains(r.stderr, "hermesq: error: ") {
			t.Errorf("notify-done.sh with an invalid session: %v\nwant hermesq's exit 2 and its error", r)
		}
		as := c.all("s1")
		if len(as) != 2 {
			t.Fatalf("%d admissions, want 2", len(as))
		}
		if a := as[0]; a.Kind != backend.KindAutomation || a.Producer != "process" ||
			!strings.HasPrefix(a.Text(), "[finished] sh -c echo built; exit 3 (exit 3)\nbuilt") || len(a.Identities) != 1 {
			t.Errorf("first completion: %+v (text %q)", a, a.Text())
		}
		if as[1].PinnedTarget != "s1" {
			t.Errorf("second completion pinned to %q, want s1", as[1].PinnedTarget)
		}
		c.admitHuman("s1", "what happened?")
		if r := script("cron-drain.sh", "handler"); r.code != 0 {
			t.Fatalf("%v", r)
		}
		ms := c.messages("s1")
		if countRole(ms, backend.RoleNote) != 2 || len(ms) != 4 || ms[3].Content != "echo: what happened? (notes seen: 2)" {
			t.Errorf("transcript after cron-drain.sh: %+v", ms)
		}
	})
}

// TestProducersExample runs examples/producers.sh on every store with the
// real process and delegation plugins: the command's completion and the
// delegated result each end as one note; run again, nothing is added.
func TestProducersExample(t *testing.T) {
	script, err := filepath.Abs(filepath.Join("..", "examples", "producers.sh"))
	if err != nil {
		t.Fatal(err)
	}
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "process", "delegation")
		c.ok("session", "open", "s1")
		run := func() string {
			t.Helper()
			cmd := exec.Command("bash", script, "s1")
			cmd.Env, cmd.Dir = c.env, c.dir
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("producers.sh: %v\n%s", err, out)
			}
			return string(out)
		}
		out := run()
		for _, want := range []string{
			// The two plugins run side by side: either may come first.
			"] note: [finished] sh -c 'echo \"tests: 42 passed\"; exit 0' (exit 0)\ntests: 42 passed",
			"] note: [delegation review-1] LGTM, two nits in parse.go",
		} {
			if !strings.Contains(out, want) {
				t.Errorf("producers.sh output lacks %q:\n%s", want, out)
			}
		}
		run()
		// The second run's command is a new completion (a new process);
		// the delegation result is the same and is not added again.
		ms := c.messages("s1")
		if countRole(ms, backend.RoleNote) != 3 || notesWith(ms, "review-1") != 1 {
			t.Errorf("after two runs: %+v, want 3 notes, one with the delegated result", ms)
		}
	})
}
