package main

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The test binary doubles as hermesq when HERMESQ_TEST_MAIN=1, so these
// tests run main itself in a real process: exit codes through os.Exit, and
// real signals.
func TestMain(m *testing.M) {
	if os.Getenv("HERMESQ_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

type proc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
}

func hermesq(t *testing.T, dir string, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(os.Args[0], args...)}
	env := []string{"HERMESQ_TEST_MAIN=1", "HERMESQ_STORE=bbolt://" + filepath.Join(dir, "q.db"),
		"XDG_CONFIG_HOME=" + filepath.Join(dir, "config"), "XDG_STATE_HOME=" + filepath.Join(dir, "state")}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "HERMESQ_") && !strings.HasPrefix(kv, "XDG_") {
			env = append(env, kv)
		}
	}
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	return p
}

func (p *proc) wait(t *testing.T) int {
	t.Helper()
	err := p.cmd.Wait()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.ExitCode()
	}
	t.Fatal(err)
	return -1
}

func run(t *testing.T, dir string, args ...string) (int, string) {
	t.Helper()
	p := hermesq(t, dir, args...)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p.wait(t), p.stderr.String()
}

func TestExitCodes(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"--help"}, 0},
		{[]string{"help", "exit-codes"}, 0},
		{[]string{"admit", "s1", "--text", "hello"}, 0},
		{[]string{"admit", "s1", "--nope"}, 2},
		{[]string{"admit", "bad id", "--text", "x"}, 2},
		{[]string{"--store", "nosuch:///x", "sessions"}, 2},
		{[]string{"show", "0123456789abcdef"}, 3},
		{[]string{"session", "close", "s1", "--reason", "cli_close"}, 4},
		{[]string{"--principal", "mallory", "admit", "s1", "--text", "x"}, 7},
		{[]string{"--store", "bbolt://" + dir, "sessions"}, 1},
	} {
		code, stderr := run(t, dir, c.args...)
		if code != c.code {
			t.Errorf("hermesq %s: exit %d, want %d (%s)", strings.Join(c.args, " "), code, c.code, stderr)
		}
		if c.code != 0 && (!strings.HasPrefix(stderr, "hermesq: error: ") || strings.Count(stderr, "\n") != 1) {
			t.Errorf("hermesq %s: stderr %q, want one error line", strings.Join(c.args, " "), stderr)
		}
	}
}

// A real SIGINT or SIGTERM to a draining process: 130 or 143.
func TestDrainSignals(t *testing.T) {
	for _, c := range []struct {
		sig  syscall.Signal
		code int
	}{{syscall.SIGINT, 130}, {syscall.SIGTERM, 143}} {
		t.Run(c.sig.String(), func(t *testing.T) {
			dir := t.TempDir()
			if code, stderr := run(t, dir, "admit", "s1", "--text", "slow"); code != 0 {
				t.Fatal(stderr)
			}
			marker := filepath.Join(dir, "started")
			p := hermesq(t, dir, "drain", "s1", "--grace", "100ms", "--", "sh", "-c", "cat >/dev/null; touch "+marker+"; exec sleep 60")
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			for i := 0; ; i++ {
				if _, err := os.Stat(marker); err == nil {
					break
				}
				if i == 6000 {
					_ = p.cmd.Process.Kill()
					t.Fatalf("handler never started: %s", p.stderr.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			if err := p.cmd.Process.Signal(c.sig); err != nil {
				t.Fatal(err)
			}
			if code := p.wait(t); code != c.code {
				t.Fatalf("drain after %v: exit %d, want %d\n%s", c.sig, code, c.code, p.stderr.String())
			}
			if !strings.Contains(p.stderr.String(), "interrupted by "+map[syscall.Signal]string{syscall.SIGINT: "SIGINT", syscall.SIGTERM: "SIGTERM"}[c.sig]) {
				t.Fatalf("stderr: %q", p.stderr.String())
			}
		})
	}
}
