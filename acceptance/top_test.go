package acceptance

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// tmux drives one tmux server on its own socket.
type tmux struct {
	t    *testing.T
	bin  string
	sock string
}

func (x *tmux) run(args ...string) string {
	x.t.Helper()
	out, err := exec.Command(x.bin, append([]string{"-S", x.sock, "-f", "/dev/null"}, args...)...).CombinedOutput()
	if err != nil {
		x.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (x *tmux) screen() string { return x.run("capture-pane", "-p", "-t", "top") }

// waitScreen polls the pane until cond holds on its text.
func (x *tmux) waitScreen(what string, cond func(screen string) bool) string {
	x.t.Helper()
	var s string
	deadline := time.Now().Add(30 * time.Second)
	for {
		s = x.screen()
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			x.t.Fatalf("after 30s the screen does not show %s:\n%s", what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// topDepth reads the DEPTH column of session's row on a top screen; -1
// when the row is not shown.
func topDepth(screen, session string) int {
	for _, line := range strings.Split(screen, "\n") {
		f := strings.Fields(strings.TrimPrefix(line, ">"))
		if len(f) >= 3 && f[0] == session {
			var d int
			if _, err := fmt.Sscan(f[2], &d); err == nil {
				return d
			}
		}
	}
	return -1
}

// TestTop is issue 9, acceptance 4, on both stores: `hermesq top` under a
// real terminal (tmux) shows a session's depth change after an admit and
// after a drain, refreshed from change notifications; enter opens the
// session's queue; q exits 0 and leaves a usable terminal (the alternate
// screen gone, a shell answering).
func TestTop(t *testing.T) {
	bin := tmuxBin(t)
	forEachStore(t, func(t *testing.T, c *cli) {
		c.admitHuman("s1", "one")
		c.admitHuman("s1", "two")
		c.admitHuman("s2", "other")
		x := startTop(t, bin, c, "")

		x.waitScreen("s1 at depth 2", func(s string) bool { return topDepth(s, "s1") == 2 && topDepth(s, "s2") == 1 })
		c.admitHuman("s1", "three")
		x.waitScreen("s1 at depth 3 after an admit", func(s string) bool { return topDepth(s, "s1") == 3 })
		c.ok("drain", "s1", "--", "handler")
		screen := x.waitScreen("s1 at depth 0 after a drain", func(s string) bool { return topDepth(s, "s1") == 0 && topDepth(s, "s2") == 1 })
		t.Logf("top after the drain:\n%s", strings.TrimRight(screen, "\n"))

		// Sort by depth: s2 first.
		x.run("send-keys", "-t", "top", "d")
		x.waitScreen("s2 first when sorted by depth", func(s string) bool {
			return strings.Contains(s, " s2 ") && strings.Index(s, " s2 ") < strings.Index(s, " s1 ") && strings.Contains(s, "sort: depth")
		})
		// Enter opens the selected session's queue.
		x.run("send-keys", "-t", "top", "Enter")
		x.waitScreen("the queue of s2", func(s string) bool {
			return strings.Contains(s, "queue of s2") && strings.Contains(s, "other") && strings.Contains(s, "queued")
		})
		x.run("send-keys", "-t", "top", "q")
		screen = x.waitScreen("top's exit status", func(s string) bool { return strings.Contains(s, "top exited ") })
		if !strings.Contains(screen, "top exited 0") {
			t.Fatalf("top did not exit 0:\n%s", screen)
		}
		if strings.Contains(screen, "hermesq top —") {
			t.Errorf("top's screen is still shown after q (alternate screen not left):\n%s", screen)
		}
		// The terminal is usable: a shell reads a line and answers.
		x.run("send-keys", "-t", "top", "echo usable-$((20+22))", "Enter")
		x.waitScreen("the shell's answer", func(s string) bool { return strings.Contains(s, "\nusable-42") })
	})
}

// tmuxBin is the path of tmux; without it the test fails in CI and is
// skipped elsewhere.
func tmuxBin(t *testing.T) string {
	t.Helper()
	bin, err := exec.LookPath("tmux")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("tmux is not installed (scripts/test.sh installs it)")
		}
		t.Skip("tmux is not installed")
	}
	return bin
}

// startTop runs `hermesq top` (c.bin, c.env and then the shell lines of
// more) in a 120×30 tmux session named top, which prints "top exited N"
// when it ends and leaves a shell.
func startTop(t *testing.T, bin string, c *cli, more string) *tmux {
	t.Helper()
	dir, err := os.MkdirTemp("", "hq-top-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	x := &tmux{t: t, bin: bin, sock: filepath.Join(dir, "sock")}
	var sh strings.Builder
	sh.WriteString("#!/bin/sh\n")
	for _, kv := range c.env {
		k, v, _ := strings.Cut(kv, "=")
		if k == "TERM" || k == "TMUX" || strings.ContainsAny(k, " '\"") || k == "" {
			continue
		}
		fmt.Fprintf(&sh, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&sh, "%scd '%s'\n'%s' top\necho \"top exited $?\"\nexec /bin/sh\n", more, c.dir, c.bin)
	script := filepath.Join(dir, "run.sh")
	if err := os.WriteFile(script, []byte(sh.String()), 0o755); err != nil {
		t.Fatal(err)
	}
	x.run("new-session", "-d", "-s", "top", "-x", "120", "-y", "30", script)
	t.Cleanup(func() { _ = exec.Command(bin, "-S", x.sock, "kill-server").Run() })
	return x
}

// TestTopWithoutView: hermesq hands `top` to hermesq-top, found beside it
// (TestTop) or on PATH. With neither, under a terminal, top exits 1 with
// one line saying what to install and draws nothing; without a terminal
// it is the usage error (exit 2) it always was. doctor warns of the
// missing view and still exits 0; beside hermesq-top it finds it.
func TestTopWithoutView(t *testing.T) {
	bin := tmuxBin(t)
	c := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))
	c.ok("session", "open", "s1")
	c.bin = aloneCopy(t, c.bin)
	noPath := []string{"PATH=/usr/bin:/bin"}
	if r := c.run(noPath, "top"); r.code != 2 || !strings.Contains(r.stderr, "needs a terminal") {
		t.Errorf("top without a terminal or hermesq-top: want exit 2, a terminal needed: %v", r)
	}
	errFile := filepath.Join(c.dir, "top.err")
	x := startTop(t, bin, c, "export PATH=/usr/bin:/bin\nexec 2>'"+errFile+"'\n")
	screen := x.waitScreen("top's exit status", func(s string) bool { return strings.Contains(s, "top exited ") })
	if !strings.Contains(screen, "top exited 1") {
		t.Errorf("top without hermesq-top: want exit 1:\n%s", screen)
	}
	if strings.Contains(screen, "hermesq top —") {
		t.Errorf("top without hermesq-top drew its view:\n%s", screen)
	}
	msg, err := os.ReadFile(errFile)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(string(msg), "\n") != 1 || !strings.Contains(string(msg), "hermesq-top") || !strings.Contains(string(msg), "go install") {
		t.Errorf("top without hermesq-top: want one line naming it and how to install it: %q", msg)
	}
	r := c.run(noPath, "doctor")
	if r.code != 0 || !regexp.MustCompile(`(?m)^warn +top view +hermesq-top, which draws 'hermesq top', is neither beside`).MatchString(r.stdout) {
		t.Errorf("doctor without hermesq-top: want exit 0 and a warning of the top view: %v", r)
	}
	c.bin = hermesqBin(t)
	if r := c.ok("doctor"); !regexp.MustCompile(`(?m)^ok +top view +/.*/hermesq-top$`).MatchString(r.stdout) {
		t.Errorf("doctor beside hermesq-top: want the top view found: %v", r)
	}
}
