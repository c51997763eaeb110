package acceptance

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/internal/redistest"
	"github.com/hermesq/hermesq/pkg/backend"
)

// writeScript writes an executable shell script into dir.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o700); err != nil {
		t.Fatal(err)
	}
	return p
}

// alive reports whether pid names a process that can still act: not gone,
// not a zombie waiting to be reaped.
func alive(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	// pid (comm) STATE …: the state follows the last ')'.
	s := string(stat)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
		switch s[i+2] {
		case 'Z', 'X':
			return false
		}
	}
	return true
}

// Issue 13 (7), the orphan test: a drainer killed with SIGKILL in the
// middle of a turn takes its handler with it (Linux: the parent-death
// signal); the handler is polled for, and gone within a second.
func TestOrphanHandlerDiesWithDrainer(t *testing.T) {
	if _, err := os.Stat("/proc/self/stat"); err != nil {
		t.Skip("needs Linux /proc (the parent-death signal is Linux-only)")
	}
	c := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))
	pidFile := filepath.Join(c.dir, "handler.pid")
	childFile := filepath.Join(c.dir, "child.pid")
	// A background job of the handler, in its process group: killed too
	// (issue 24, 11: the handler supervisor sees its drainer gone).
	h := writeScript(t, c.dir, "sleeper", "sleep 3600 &\necho $! > "+childFile+"\n"+
		"echo $$ > "+pidFile+".tmp && mv "+pidFile+".tmp "+pidFile+"\nexec sleep 3600\n")
	c.admitHuman("s1", "hello")
	d := c.start(nil, "drain", "s1", "--", h)
	var pid int
	eventually(t, time.Minute, "the handler started", func() bool {
		b, err := os.ReadFile(pidFile)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	})
	if !alive(pid) {
		t.Fatalf("handler %d is not running mid-turn", pid)
	}
	b, err := os.ReadFile(childFile)
	if err != nil {
		t.Fatal(err)
	}
	child, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(pid, syscall.SIGKILL); _ = syscall.Kill(child, syscall.SIGKILL) })
	d.signal(syscall.SIGKILL)
	<-d.done
	killed := time.Now()
	for alive(pid) || alive(child) {
		if time.Since(killed) > time.Second {
			t.Fatalf("handler %d (alive %v) or its child %d (alive %v) still running %v after its drainer was killed with SIGKILL",
				pid, alive(pid), child, alive(child), time.Since(killed))
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Logf("handler and its child gone %v after its drainer was killed", time.Since(killed).Round(time.Millisecond))
}

// Issue 13 (8): a handler gets the documented HERMESQ_* variables and the
// caller's environment, but no store credential: not HERMESQ_STORE with
// its password, nor any other variable carrying the password.
func TestHandlerGetsNoStoreCredentials(t *testing.T) {
	const pw = "Pw-of-the-store-9f3e"
	srv := redistest.Start(t, redistest.WithACL("hq", pw))
	url := withPrefix(t, srv.URL())
	if !strings.Contains(url, pw) {
		t.Fatalf("store url %s carries no password", url)
	}
	c := newCLI(t, url)
	envFile := filepath.Join(c.dir, "env.txt")
	h := writeScript(t, c.dir, "dumpenv", "cat >/dev/null\nenv > "+envFile+"\nprintf ok\n")
	c.admitHuman("s1", "hello")
	r := c.run([]string{"MY_CALLER_VAR=kept", "REDISCLI_AUTH=" + pw, "APP_REDIS=" + url}, "drain", "s1", "--", h)
	if r.code != 0 {
		t.Fatalf("drain: %v", r)
	}
	b, err := os.ReadFile(envFile)
	if err != nil {
		t.Fatal(err)
	}
	env := string(b)
	if strings.Contains(env, pw) {
		t.Errorf("the handler's environment holds the store password:\n%s", env)
	}
	for _, want := range []string{"MY_CALLER_VAR=kept", "HERMESQ_SESSION=s1", "HERMESQ_TARGET=s1", "HERMESQ_KIND=human", "HERMESQ_EPOCH=1", "HERMESQ_ADMISSION="} {
		if !strings.Contains(env, "\n"+want) && !strings.HasPrefix(env, want) {
			t.Errorf("the handler's environment lacks %s", want)
		}
	}
	if strings.Contains(env, "HERMESQ_STORE=") {
		t.Errorf("HERMESQ_STORE with credentials reached the handler")
	}
}

// Issue 24 (9): a handler that exits 0 while a process it started in the
// background still holds its stdout is judged by its exit status and what
// it wrote until it exited: the turn completes with its reply (the
// background process is killed with the handler's process group), and
// `replay --session` finds nothing to run again.
func TestHandlerExitsWithChildHoldingStdout(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		first := c.admitHuman("s1", "hello")
		r := c.run(nil, "drain", "s1", "--", "sh", "-c", "sleep 30 & echo daemon-ok")
		if r.code != 0 {
			t.Fatalf("drain: %v", r)
		}
		if a := c.show(first.Admission.ID); a.Status != backend.StatusDone || a.Outcome != backend.OutcomeCompleted {
			t.Errorf("turn: %s %q (error %q), want done completed", a.Status, a.Outcome, a.Error)
		}
		ms := c.messages("s1")
		if len(ms) != 2 || ms[1].Role != backend.RoleAssistant || ms[1].Content != "daemon-ok" {
			t.Errorf("transcript %+v, want hello and the reply daemon-ok", ms)
		}
		var rp []replayOut
		c.jsonOut(&rp, "replay", "--session", "s1", "--dry-run")
		if len(rp) != 0 {
			t.Errorf("replay --session picks %+v, want nothing", rp)
		}

		// A process that left the handler's process group (setsid) is not
		// killed with it and may hold stdout on: the reply is what came
		// until the handler exited (plus a bounded wait); its later output
		// is discarded.
		second := c.admitHuman("s1", "again")
		r = c.run(nil, "drain", "s1", "--", "sh", "-c", `setsid sh -c "sleep 3; echo late" & echo early`)
		if r.code != 0 {
			t.Fatalf("drain: %v", r)
		}
		if a := c.show(second.Admission.ID); a.Outcome != backend.OutcomeCompleted {
			t.Errorf("turn: %s %q (error %q), want done completed", a.Status, a.Outcome, a.Error)
		}
		if ms := c.messages("s1"); len(ms) != 4 || ms[3].Content != "early" {
			t.Errorf("transcript %+v, want the reply early, without what came after the handler exited", ms)
		}
	})
}
