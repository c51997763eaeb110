package bbolt

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// A transaction decodes a transcript once and hands each caller its own
// copy: a copy changed and not written leaves what the next caller reads
// as stored, and what putTranscript writes is what the next caller reads,
// in the transaction and after it.
func TestTranscriptHeldPerTransaction(t *testing.T) {
	db, err := bolt.Open(filepath.Join(t.TempDir(), "t.db"), 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	ended := time.Date(2031, 1, 2, 3, 4, 5, 0, time.UTC)
	err = db.Update(func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(bucketTranscripts); err != nil {
			return err
		}
		tt := &txn{tx: tx, write: true}
		if err := tt.putTranscript(&backend.Transcript{ID: "t1", Session: "s1", MessageCount: 1}); err != nil {
			return err
		}
		a, err := tt.transcript("t1")
		if err != nil {
			return err
		}
		a.MessageCount, a.EndedAt = 99, ended // changed, not written
		b, err := tt.transcript("t1")
		if err != nil {
			return err
		}
		if b.MessageCount != 1 || b.Ended() {
			t.Errorf("a copy changed without a write showed through: %+v", *b)
		}
		b.MessageCount, b.EndedAt, b.EndReason = 2, ended, "closed"
		if err := tt.putTranscript(b); err != nil {
			return err
		}
		c, err := tt.transcript("t1")
		if err != nil {
			return err
		}
		if c.MessageCount != 2 || !c.EndedAt.Equal(ended) || c.EndReason != "closed" {
			t.Errorf("after a write the transaction reads %+v", *c)
		}
		if _, err := tt.transcript("t2"); !errors.Is(err, backend.ErrNotFound) {
			t.Errorf("an absent transcript: %v, want not found", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	err = db.View(func(tx *bolt.Tx) error {
		got, err := (&txn{tx: tx}).transcript("t1")
		if err != nil {
			return err
		}
		if got.MessageCount != 2 || !got.EndedAt.Equal(ended) || got.EndReason != "closed" {
			t.Errorf("stored: %+v", *got)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
