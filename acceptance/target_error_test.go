package acceptance

import (
	"path/filepath"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// TestTargetLookupUnexpectedError: an error while resolving a delivery
// target that is not transient (here: the pinned ancestor transcript's
// record in a real store is unreadable) is a bug to surface, never to
// swallow (docs/contract.md §5): the drain exits 1 with one line on stderr and the
// admission stays queued, nothing written; once the record is readable
// again the next drain delivers it.
func TestTargetLookupUnexpectedError(t *testing.T) {
	path := filepath.Join(t.TempDir(), "h.db")
	c := newCLI(t, "bbolt://"+path)
	c.ok("session", "open", "s1")
	c.ok("session", "compress", "s1", "--child", "s1-tip")
	adm := c.admitAuto("s1", "process", "[finished] RESULT_x", "s1", `["completion","proc_x","1700000000.0"]`).Admission

	// Replace the ancestor's record with bytes that are not a transcript,
	// keeping the original to put back.
	var orig []byte
	edit := func(fn func(b *bolt.Bucket) error) {
		t.Helper()
		db, err := bolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		if err := db.Update(func(tx *bolt.Tx) error { return fn(tx.Bucket([]byte("transcripts"))) }); err != nil {
			t.Fatal(err)
		}
	}
	edit(func(b *bolt.Bucket) error {
		orig = append([]byte(nil), b.Get([]byte("s1"))...)
		if len(orig) == 0 {
			t.Fatal("no record for transcript s1 in the transcripts bucket")
		}
		return b.Put([]byte("s1"), []byte("{not a transcript"))
	})

	r := c.exit(1, "drain", "s1", "--", "handler")
	if lines := strings.Split(strings.TrimRight(r.stderr, "\n"), "\n"); len(lines) != 1 || !strings.HasPrefix(lines[0], "hermesq: error: ") {
		t.Errorf("stderr is not one error line: %q", r.stderr)
	}
	if a := c.show(adm.ID); a.Status != backend.StatusQueued || a.Mode != "" || a.DeliveredTo != "" {
		t.Errorf("after the failed drain the admission is %s (mode %q, delivered to %q), want queued and untouched", a.Status, a.Mode, a.DeliveredTo)
	}

	edit(func(b *bolt.Bucket) error { return b.Put([]byte("s1"), orig) })
	c.ok("drain", "s1", "--", "handler")
	a := c.show(adm.ID)
	if a.Status != backend.StatusDone || a.Outcome != backend.OutcomeCompleted || a.Mode != backend.ModeNote || a.DeliveredTo != "s1-tip" {
		t.Errorf("after the record is readable: %s/%s/%s to %q, want done/completed/note to s1-tip", a.Status, a.Outcome, a.Mode, a.DeliveredTo)
	}
}
