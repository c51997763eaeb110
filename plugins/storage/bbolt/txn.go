package bbolt

import (
	"bytes"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// txn wraps one bbolt transaction with the schema's accessors. Every value
// it returns is decoded (copied) out of bbolt's memory, so nothing refers to
// the mmap after the transaction ends.
type txn struct {
	tx      *bolt.Tx
	write   bool
	touched map[string]struct{}
	// sessions, while set (by batched: every write transaction), holds
	// each session record read once: session returns the same record to
	// every caller and putSession only marks it, until the batch writes it
	// once.
	sessions map[string]*heldSession
	// memo, when set, holds admission records already decoded (see
	// recMemo): a read transaction listing the queue fills it, a write
	// transaction checking the head takes from it.
	memo *recMemo
	// transcripts holds the transcript records this transaction read or
	// wrote, by id (see transcript).
	transcripts map[string]backend.Transcript
	// cursors holds one cursor a bucket for get, in a write transaction.
	cursors map[*bolt.Bucket]*bolt.Cursor
}

// get is b.Get(key). In a write transaction it seeks one cursor kept for
// b, whose stack is reused from call to call, where Bucket.Get makes a new
// cursor and grows its stack every time: an admission looks keys up in two
// buckets. (A read transaction's buckets are new values at each lookup, so
// it takes Get.) Seek returns the first key at or after key, and no value
// for a nested bucket's key, as Get does.
func (t *txn) get(b *bolt.Bucket, key []byte) []byte {
	if !t.write {
		return b.Get(key)
	}
	c := t.cursors[b]
	if c == nil {
		if t.cursors == nil {
			t.cursors = map[*bolt.Bucket]*bolt.Cursor{}
		}
		c = b.Cursor()
		t.cursors[b] = c
	}
	if k, v := c.Seek(key); bytes.Equal(k, key) {
		return v
	}
	return nil
}

type heldSession struct {
	sb    *bolt.Bucket
	rec   *sessionRec
	dirty bool
}

// batched runs fn with session records read and written once for all of
// fn (see txn.sessions), then writes the changed ones. fn must check before
// it changes a record, as every operation does, so a refusal leaves the
// held record as it was.
func (t *txn) batched(fn func() error) error {
	t.sessions = map[string]*heldSession{}
	defer func() { t.sessions = nil }()
	if err := fn(); err != nil {
		return err
	}
	ids := make([]string, 0, len(t.sessions))
	for id, h := range t.sessions {
		if h.dirty {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		h := t.sessions[id]
		v, err := encode(h.rec)
		if err != nil {
			return err
		}
		if err := h.sb.Put(keySession, v); err != nil {
			return err
		}
	}
	return nil
}

// utc normalises a time for storage and comparison: UTC, no monotonic
// reading; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// ttlOr is ttl, or def when ttl is not positive (a request without a ttl).
func ttlOr(ttl, def time.Duration) time.Duration {
	if ttl <= 0 {
		return def
	}
	return ttl
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC().Round(0)
	}
	return utc(t)
}

func (t *txn) touch(session string) {
	if t.touched == nil {
		t.touched = map[string]struct{}{}
	}
	t.touched[session] = struct{}{}
}

// logChanges appends the sessions this transaction wrote to the change log.
func (t *txn) logChanges() error {
	if len(t.touched) == 0 {
		return nil
	}
	b := appending(t.tx.Bucket(bucketChanges))
	ids := make([]string, 0, len(t.touched))
	for id := range t.touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var n uint64
	for _, id := range ids {
		var err error
		if n, err = b.NextSequence(); err != nil {
			return err
		}
		if err := b.Put(u64(n), []byte(id)); err != nil {
			return err
		}
	}
	// The log holds first..n; past changeLogSize+changeLogSlack entries it
	// drops down to the newest changeLogSize.
	c := b.Cursor()
	if first, _ := c.First(); first != nil && n-fromU64(first)+1 > changeLogSize+changeLogSlack {
		limit := n - changeLogSize
		for k, _ := c.First(); k != nil && fromU64(k) <= limit; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}
