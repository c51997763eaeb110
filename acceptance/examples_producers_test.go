package acceptance

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestExampleSystemdProducers is issue 23: examples/systemd's unit for
// producers run passes `systemd-analyze verify` (when it is installed), and
// its ExecStart and Environment work on every store: events recorded with
// the unit's producer_state_dir are admitted by the running service, and
// `systemctl stop` (SIGTERM) ends it with 143, which the unit counts as
// success (SuccessExitStatus), not as a failure.
func TestExampleSystemdProducers(t *testing.T) {
	unit := unitFile(t, "hermesq-producers.service", "")
	if sa, err := exec.LookPath("systemd-analyze"); err == nil {
		p := filepath.Join(t.TempDir(), "hermesq-producers.service")
		if err := os.WriteFile(p, []byte(unit), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(sa, "verify", p).CombinedOutput(); err != nil {
			t.Fatalf("systemd-analyze verify: %v\n%s", err, out)
		}
	} else {
		t.Log("systemd-analyze not installed: the unit is not verified")
	}
	var success []string
	for _, line := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(line, "SuccessExitStatus="); ok {
			success = append(success, strings.Fields(v)...)
		}
	}
	if !slices.Contains(success, "143") {
		t.Fatalf("the unit does not count 143 (its stop by SIGTERM) as success: SuccessExitStatus %q", success)
	}
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "delegation")
		// The unit's producer folders, moved into the test's folder; the
		// store and config stay the test's.
		plugins := filepath.Join(c.dir, "plugins")
		for _, line := range strings.Split(unit, "\n") {
			kv, ok := strings.CutPrefix(line, "Environment=")
			if !ok || !strings.HasPrefix(kv, "HERMESQ_PLUGIN_DIR=") && !strings.HasPrefix(kv, "HERMESQ_PRODUCER_STATE_DIR=") {
				continue
			}
			kv = strings.ReplaceAll(kv, "/usr/local/lib/hermesq/plugins", plugins)
			kv = strings.ReplaceAll(kv, "/var/lib/hermesq", filepath.Join(c.dir, "var"))
			c.env = append(c.env, kv)
		}
		c.ok("session", "open", "s1")
		c.ok("delegate", "done", "--session", "s1", "--target", "s1", "--id", "A", "--result", "RESULT_alpha")
		if _, err := os.Stat(filepath.Join(c.dir, "var", "producers", "delegation")); err != nil {
			t.Fatalf("the result is not in the unit's producer_state_dir: %v", err)
		}
		argv := execStart(t, unit)
		p := c.start(nil, argv[1:]...)
		eventually(t, time.Minute, "A admitted by the service", func() bool { return len(c.all("s1")) == 1 })
		p.signal(syscall.SIGTERM)
		if code := p.wait(t, time.Minute); !slices.Contains(success, itoa(code)) {
			t.Errorf("producers run stopped by SIGTERM: exit %d, not in SuccessExitStatus %q\n%s", code, success, p.stderr())
		}
	})
}
