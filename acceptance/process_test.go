package acceptance

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// completionID is the shape of a process completion's identity:
// ["completion",<pid>,<started_at as Python writes a float>].
var completionID = regexp.MustCompile(`^\["completion","[0-9]+","[0-9]+\.[0-9]+"\]$`)

func payloadText(t *testing.T, a backend.Admission) string {
	t.Helper()
	var p struct{ Text string }
	if err := json.Unmarshal(a.Payload, &p); err != nil {
		t.Fatalf("payload %s: %v", a.Payload, err)
	}
	return p.Text
}

// processEntries returns the process outbox's entries, none when it does
// not exist yet.
func processEntries(c *cli) []producer.Entry {
	c.t.Helper()
	r := c.run(nil, "-o", "json", "producers", "outbox", "process")
	if r.code == 3 {
		return nil
	}
	var es []producer.Entry
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &es) != nil {
		c.t.Fatalf("producers outbox process: %v", r)
	}
	return es
}

// TestProcessLostAckExecutedTurn is issue 8, acceptance 3: a completion
// recorded by proc run is admitted and, with a viewer attached, run as a
// turn; the host's acknowledgement was lost (SIGKILL after the admit). The
// viewer leaves, the lease runs out, a new host offers the completion again:
// it resolves to the executed admission, so no second turn and no note.
func TestProcessLostAckExecutedTurn(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "process")
		c.ok("session", "open", "s1")
		viewer := strings.TrimSpace(c.ok("viewer", "add", "s1", "--ttl", "10m").stdout)
		c.ok("proc", "run", "--session", "s1", "--target", "s1", "--", "sh", "-c", "echo RESULT_ran")
		es := processEntries(c)
		if len(es) != 1 || !completionID.MatchString(es[0].Identity) {
			t.Fatalf("process outbox %+v, want one completion", es)
		}
		id := es[0].Identity
		runLostAck(t, c, "process")
		c.ok("drain", "s1", "--", "handler")
		as := c.all("s1")
		if len(as) != 1 || as[0].Mode != backend.ModeTurn || as[0].Outcome != backend.OutcomeCompleted {
			t.Fatalf("with a viewer: %+v, want one completed turn", as)
		}
		if calls := c.calls(); len(calls) != 1 || !strings.Contains(calls[0].Text, "RESULT_ran") || calls[0].NotesSeen != 0 {
			t.Fatalf("handler calls %+v, want one turn with the completion, 0 notes seen", calls)
		}
		c.ok("viewer", "rm", "s1", viewer)
		waitClaimExpired(t, c, "process", id)
		c.ok("producers", "run", "--once")
		c.ok("drain", "s1", "--", "handler")

		if n := len(c.calls()); n != 1 {
			t.Errorf("handler ran %d times, want once", n)
		}
		ms := c.messages("s1")
		if countRole(ms, backend.RoleNote) != 0 || len(ms) != 2 {
			t.Errorf("transcript %+v, want the turn's 2 messages and no note", ms)
		}
		if as := c.all("s1"); len(as) != 1 || as[0].Outcome != backend.OutcomeCompleted {
			t.Errorf("admissions %+v, want the one completed", as)
		}
		if e := c.outbox("process")[id]; e.State != producer.StateDelivered || e.Attempts != 2 {
			t.Errorf("outbox %+v, want delivered after 2 attempts", e)
		}
	})
}

// TestProcessRunDetachWatch is issue 8, acceptance 4: a supervised command's
// completion names the command, its exit code and its output; a --detach'ed
// run outlives the shell that started it (its process group killed) and is
// still reported; a watched PID's end is reported.
func TestProcessRunDetachWatch(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		c = withPlugins(t, c, "process")
		c.ok("session", "open", "s1")

		// Bad input: refused, nothing recorded.
		r := c.exit(2, "proc", "run", "--session", "bad session", "--", "true")
		if !strings.HasPrefix(r.stderr, "hermesq: error: ") || strings.Count(r.stderr, "\n") != 1 {
			t.Errorf("stderr %q, want one error line", r.stderr)
		}
		c.exit(2, "proc", "run", "--session", "s1", "--", "/nonexistent/command")
		// Issue 24, item 16: detached, the same refusal says what is wrong,
		// once, not "invalid: invalid".
		r = c.exit(2, "proc", "run", "--session", "s1", "--detach", "--", "/nonexistent/command")
		if !strings.Contains(r.stderr, "start /nonexistent/command") || !strings.Contains(r.stderr, "no such file or directory") ||
			strings.Contains(r.stderr, "invalid: invalid") || strings.Count(r.stderr, "proc run") != 1 {
			t.Errorf("proc run --detach of a missing command: stderr %q, want what is wrong, said once", r.stderr)
		}
		c.exit(3, "proc", "watch", "--session", "s1", "999999999")
		if es := processEntries(c); len(es) != 0 {
			t.Fatalf("refused runs recorded %+v", es)
		}

		// Supervised.
		r = c.ok("proc", "run", "--session", "s1", "--", "sh", "-c", "echo RESULT; exit 3")
		if !strings.HasPrefix(r.stdout, "RESULT\nadded [\"completion\",") || !strings.HasSuffix(r.stdout, " (exit 3)\n") {
			t.Errorf("proc run stdout %q, want the command's output then the recorded completion", r.stdout)
		}
		c.ok("producers", "run", "--once")
		as := c.all("s1")
		if len(as) != 1 || len(as[0].Identities) != 1 || !completionID.MatchString(as[0].Identities[0]) {
			t.Fatalf("admissions %+v, want one completion", as)
		}
		if got, want := payloadText(t, as[0]), "[finished] sh -c 'echo RESULT; exit 3' (exit 3)\nRESULT"; got != want {
			t.Errorf("text %q, want %q", got, want)
		}

		// Detached: the calling shell and its whole process group are gone
		// before the command ends.
		shell := exec.Command("sh", "-c", `hermesq proc run --session s1 --detach -- sh -c 'while [ ! -e gate ]; do sleep 0.05; done; echo LATE'`)
		shell.Env, shell.Dir = c.env, c.dir
		shell.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := shell.CombinedOutput()
		if err != nil || !strings.HasPrefix(string(out), "started [\"completion\",") {
			t.Fatalf("detached run: %v\n%s", err, out)
		}
		_ = syscall.Kill(-shell.Process.Pid, syscall.SIGKILL)
		if es := processEntries(c); len(es) != 1 {
			t.Fatalf("outbox before the detached command ended: %+v", es)
		}
		if err := os.WriteFile(filepath.Join(c.dir, "gate"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, "the detached run recorded", func() bool { return len(processEntries(c)) == 2 })
		c.ok("producers", "run", "--once")
		as = c.all("s1")
		if len(as) != 2 || payloadText(t, as[1]) != "[finished] sh -c 'while [ ! -e gate ]; do sleep 0.05; done; echo LATE' (exit 0)\nLATE" {
			t.Fatalf("admissions %+v, want the detached run's completion second", as)
		}

		// Watched: a process hermesq did not start; its exit status cannot
		// be read, so it is reported as unknown.
		proc := exec.Command("sh", "-c", "while [ ! -e gate2 ]; do sleep 0.05; done; exit 5")
		proc.Dir = c.dir
		if err := proc.Start(); err != nil {
			t.Fatal(err)
		}
		pid := strconv.Itoa(proc.Process.Pid)
		// --detach returns once the supervisor has read the process.
		if r := c.ok("proc", "watch", "--session", "s1", "--detach", pid); !strings.HasPrefix(r.stdout, "watching 1 processes") {
			t.Fatalf("proc watch --detach: %v", r)
		}
		if err := os.WriteFile(filepath.Join(c.dir, "gate2"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		_ = proc.Wait()
		eventually(t, time.Minute, "the watched process recorded", func() bool { return len(processEntries(c)) == 3 })
		if e := processEntries(c)[2]; !strings.HasPrefix(e.Identity, `["completion","`+pid+`","`) {
			t.Errorf("watched completion identity %s, want pid %s", e.Identity, pid)
		}
		c.ok("producers", "run", "--once")
		as = c.all("s1")
		want := "[finished] sh -c 'while [ ! -e gate2 ]; do sleep 0.05; done; exit 5' (exit unknown)"
		if len(as) != 3 || payloadText(t, as[2]) != want {
			t.Fatalf("admissions %+v, want the watched process's completion %q third", as, want)
		}
		c.ok("drain", "s1")
		if ms := c.messages("s1"); countRole(ms, backend.RoleNote) != 3 {
			t.Errorf("transcript %+v, want 3 notes", ms)
		}
	})
}
