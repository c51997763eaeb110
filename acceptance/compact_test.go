package acceptance

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// compactReport is compact -o json.
type compactReport struct {
	DryRun    bool `json:"dry_run"`
	Compacted int  `json:"compacted"`
	Sessions  []struct {
		Session   string   `json:"session"`
		Compacted []string `json:"compacted"`
	} `json:"sessions"`
	SizeBefore int64 `json:"size_before"`
	SizeAfter  int64 `json:"size_after"`
}

// fillForCompaction admits n human inputs of size bytes each with request
// ids r0…, drains them with a failing handler (no transcript message), and
// admits and drains three automation completions as notes.
func fillForCompaction(t *testing.T, c *cli, n, size int) {
	t.Helper()
	var b strings.Builder
	big := strings.Repeat("x", size)
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, `{"session":"s1","request_id":"r%d","text":"%d %s"}`+"\n", i, i, big)
	}
	if r := c.runStdin(b.String(), "admit", "--batch", "-"); r.code != 0 {
		t.Fatalf("%v", r)
	}
	if r := c.run([]string{"HERMESQ_EXAMPLE_FAIL=1"}, "drain", "s1", "--", "handler"); r.code != 6 {
		t.Fatalf("failing drain: %v", r)
	}
	for i := 0; i < 3; i++ {
		c.admitAuto("s1", "process", fmt.Sprintf("[finished] job %d", i), "", fmt.Sprintf("job:%d", i))
	}
	c.ok("drain", "s1", "--", "handler")
}

// TestCompact is issue 9, acceptance 2, on both stores: after compact, the
// identities and request ids of removed admissions still resolve (re-offer →
// duplicate, no new admission, no new note, no new turn); --dry-run changes
// nothing; the bbolt file shrinks (sizes in the log); tombstones survive an
// export and import.
func TestCompact(t *testing.T) {
	forEachStore(t, func(t *testing.T, c *cli) {
		fillForCompaction(t, c, 60, 32<<10)
		before := c.export()
		notes := c.messages("s1")
		var dry compactReport
		c.jsonOut(&dry, "compact", "--older-than", "1ns", "--dry-run")
		if !dry.DryRun || dry.Compacted != 63 {
			t.Fatalf("dry run: %+v", dry)
		}
		if c.export() != before {
			t.Fatal("compact --dry-run changed the store")
		}
		c.exit(2, "compact")
		c.exit(2, "compact", "--older-than", "-1h")
		c.exit(3, "compact", "--older-than", "1h", "--session", "nosuch")
		if c.export() != before {
			t.Fatal("a refused compact changed the store")
		}

		var rep compactReport
		c.jsonOut(&rep, "compact", "--older-than", "1ns")
		t.Logf("%s: compacted %d admissions; size %d bytes before, %d bytes after", c.store[:5], rep.Compacted, rep.SizeBefore, rep.SizeAfter)
		if rep.Compacted != 63 || len(rep.Sessions) != 1 || rep.SizeBefore <= 0 || rep.SizeAfter <= 0 {
			t.Fatalf("compact: %+v", rep)
		}
		if strings.HasPrefix(c.store, "bbolt://") && rep.SizeAfter >= rep.SizeBefore/2 {
			t.Errorf("bbolt file %d bytes after compaction, %d before: want it at least halved", rep.SizeAfter, rep.SizeBefore)
		}
		if n := len(c.all("s1")); n != 0 {
			t.Fatalf("%d admissions listed after compaction, want 0", n)
		}
		calls := len(c.calls())

		// Re-offers resolve to the tombstones.
		var dup admitResult
		c.jsonOut(&dup, "admit", "s1", "--producer", "process", "--identity", "job:1", "--text", "[finished] job 1")
		if dup.Result != "duplicate" || dup.PayloadDiffers || !isNull(dup.Admission.Payload) || dup.Admission.Outcome != backend.OutcomeCompleted {
			t.Errorf("re-offer after compaction: %+v", dup)
		}
		r := c.ok("-o", "json", "admit", "s1", "--producer", "process", "--identity", "job:2", "--text", "other")
		if !strings.Contains(r.stdout, `"result":"duplicate"`) || !strings.Contains(r.stdout, `"payload_differs":true`) || !strings.Contains(r.stdout, `"payload":null`) {
			t.Errorf("re-offer with another payload: %s", r.stdout)
		}
		c.jsonOut(&dup, "admit", "s1", "--request-id", "r7", "--text", "7 "+strings.Repeat("x", 32<<10))
		if dup.Result != "duplicate" || dup.Admission.RequestID != "r7" {
			t.Errorf("request id re-sent after compaction: %+v", dup)
		}
		c.exit(4, "admit", "s1", "--request-id", "r7", "--text", "changed")
		if a := c.show(dup.Admission.ID); !isNull(a.Payload) || a.Status != backend.StatusDone || a.Outcome != backend.OutcomeFailed {
			t.Errorf("show of a tombstone: %+v", a)
		}
		if n := len(c.all("s1")); n != 0 {
			t.Fatalf("%d admissions after the re-offers, want 0", n)
		}
		c.ok("drain", "s1", "--", "handler")
		if got := c.messages("s1"); len(got) != len(notes) {
			t.Errorf("%d messages after re-offers and a drain, want %d (no new note)", len(got), len(notes))
		}
		if n := len(c.calls()); n != calls {
			t.Errorf("%d handler calls, want %d (no new turn)", n, calls)
		}
		var rp []replayOut
		if r := c.run(nil, "replay", dup.Admission.ID); r.code != 4 {
			t.Errorf("replay of a tombstone: %v, want exit 4", r)
		}
		c.jsonOut(&rp, "replay", "--session", "s1")
		if len(rp) != 0 {
			t.Errorf("replay --session after compaction: %+v", rp)
		}

		// The export carries the tombstones; a fresh store imported from it
		// resolves them too.
		dump := c.export()
		if strings.Count(dump, `{"tombstone":`) != 63 {
			t.Errorf("export has %d tombstone records, want 63", strings.Count(dump, `{"tombstone":`))
		}
		moved := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "moved.db"))
		if r := moved.runStdin(dump, "import"); r.code != 0 {
			t.Fatalf("import: %v", r)
		}
		moved.jsonOut(&dup, "admit", "s1", "--producer", "process", "--identity", "job:0", "--text", "[finished] job 0")
		if dup.Result != "duplicate" {
			t.Errorf("re-offer in the imported store: %+v", dup)
		}
	})
}

// TestCompactKilled is issue 9, acceptance 2: `hermesq compact` killed with
// SIGKILL while it writes the compacted copy of the bbolt file leaves a
// usable store with nothing lost (its export is the one before or after the
// compaction, never anything else); compacting again finishes the job.
func TestCompactKilled(t *testing.T) {
	c := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "hermesq.db"))
	fillForCompaction(t, c, 150, 64<<10)
	db := strings.TrimPrefix(c.store, "bbolt://")
	pristine := db + ".pristine"
	copyFile(t, db, pristine)
	exportBefore := c.export()

	// The export a complete compaction leaves, from a copy.
	ref := newCLI(t, "bbolt://"+filepath.Join(t.TempDir(), "ref.db"))
	copyFile(t, pristine, strings.TrimPrefix(ref.store, "bbolt://"))
	ref.ok("compact", "--older-than", "1ns")
	exportAfter := ref.export()

	hits := 0
	for trial := 0; trial < 20 && hits < 3; trial++ {
		copyFile(t, pristine, db)
		_ = os.Remove(db + ".compact")
		p := c.start(nil, "compact", "--older-than", "1ns")
		midCopy := false
		for !p.exited() {
			if _, err := os.Stat(db + ".compact"); err == nil {
				_ = syscall.Kill(p.pid(), syscall.SIGKILL)
				midCopy = true
				break
			}
			time.Sleep(time.Millisecond)
		}
		p.wait(t, time.Minute)
		if midCopy {
			hits++
		}
		got := c.export()
		if got != exportBefore && got != exportAfter {
			t.Fatalf("trial %d (killed mid-copy: %v): the export is neither the one before nor the one after compaction", trial, midCopy)
		}
		var rep compactReport
		c.jsonOut(&rep, "compact", "--older-than", "1ns")
		if got := c.export(); got != exportAfter {
			t.Fatalf("trial %d: after compacting again the export differs from a complete compaction", trial)
		}
		if _, err := os.Stat(db + ".compact"); err == nil {
			t.Fatalf("trial %d: the compacted copy was left behind", trial)
		}
	}
	t.Logf("compact killed mid-copy in %d trials", hits)
	if hits == 0 {
		t.Fatal("never caught compact while it wrote the copy")
	}
	// Usable: admit and drain.
	c.admitHuman("s1", "after the crash")
	c.ok("drain", "s1", "--", "handler")
	if n := len(c.all("s1")); n != 1 {
		t.Fatalf("%d admissions, want 1", n)
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	src, err := os.Open(from)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
}

// isNull reports whether a decoded payload was JSON null.
func isNull(p []byte) bool { return len(p) == 0 || string(p) == "null" }
