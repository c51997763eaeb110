package acceptance

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
)

// Issue 14 (1), the measured case: a handler finishes while Redis pauses
// writes for 6 s (CLIENT PAUSE 6000 WRITE from a second client); the drain
// runs with --timeout 2s, so every write of its settle times out at least
// twice. The settle is retried within the settle deadline, the first one's
// lost reply recognised: one handler run, one reply in the transcript, the
// admission done, exit 0.
func TestSettleSurvivesPausedRedis(t *testing.T) {
	srv := redistest.Start(t)
	c := newCLI(t, withPrefix(t, srv.URL()))
	started, release, runs := filepath.Join(c.dir, "started"), filepath.Join(c.dir, "go"), filepath.Join(c.dir, "runs")
	h := writeScript(t, c.dir, "slow", strings.Join([]string{
		"cat >/dev/null",
		"echo run >> " + runs,
		"touch " + started,
		"while [ ! -e " + release + " ]; do sleep 0.02; done",
		"printf 'the reply'",
	}, "\n")+"\n")
	a := c.admitHuman("s1", "hello")
	d := c.start(nil, "--timeout", "2s", "drain", "s1", "--", h)
	eventually(t, time.Minute, "the handler started", func() bool { _, err := os.Stat(started); return err == nil })
	if _, err := srv.Do("CLIENT", "PAUSE", "6000", "WRITE"); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(release, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if code := d.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("drain: exit %d, want 0\nstderr: %s", code, d.stderr())
	}
	if b, _ := os.ReadFile(runs); strings.Count(string(b), "run") != 1 {
		t.Errorf("the handler ran %d times, want once", strings.Count(string(b), "run"))
	}
	if got := c.show(a.Admission.ID); got.Status != "done" || got.Outcome != "completed" {
		t.Errorf("admission %s/%s, want done/completed", got.Status, got.Outcome)
	}
	replies := 0
	for _, m := range c.messages("s1") {
		if m.Role == "assistant" {
			replies++
			if m.Content != "the reply" {
				t.Errorf("reply %q", m.Content)
			}
		}
	}
	if replies != 1 {
		t.Errorf("%d replies in the transcript, want 1", replies)
	}
	t.Logf("drain stderr:\n%s", d.stderr())
}
