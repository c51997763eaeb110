package producer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

// A claimed event's claim lives apart from its entry, in the leases
// bucket (seq → lease), from the poll that claims it until its claim
// ends: a poll writes a few bytes an event instead of rewriting the
// entry, and passes over an event under a live claim without decoding its
// entry. The lease holds the event's claim, when it was claimed and its
// attempts; while it exists it overrides those fields of the entry.
// Settling, expiring or dropping the event writes them back into the
// entry and deletes the lease.
//
// Outboxes written before the leases bucket keep a claim in the entry
// itself (Entry.Claim, ClaimedAt, Attempts); an event without a lease is
// read from its entry as it is, so such an outbox needs no conversion.

var bucketLeases = []byte("leases") // seq (8 bytes, big-endian) → lease

// A lease is an event's claim while it is claimed.
type lease struct {
	claim     string
	claimedAt time.Time
	attempts  int
}

// encode is the lease as stored: claimed_at (Unix nanoseconds, 8 bytes
// big-endian), attempts (uvarint), then the claim token.
func (l lease) encode() []byte {
	b := make([]byte, 8, 8+binary.MaxVarintLen64+len(l.claim))
	binary.BigEndian.PutUint64(b, uint64(l.claimedAt.UnixNano()))
	b = binary.AppendUvarint(b, uint64(l.attempts))
	return append(b, l.claim...)
}

var errBadLease = errors.New("malformed lease")

func decodeLease(v []byte) (lease, error) {
	if len(v) < 9 {
		return lease{}, errBadLease
	}
	at := int64(binary.BigEndian.Uint64(v[:8]))
	n, w := binary.Uvarint(v[8:])
	if w <= 0 || len(v) == 8+w {
		return lease{}, errBadLease
	}
	return lease{claim: string(v[8+w:]), claimedAt: time.Unix(0, at).UTC(), attempts: int(n)}, nil
}

// getLease returns the lease of the event whose sequence key is seq, ok
// false when it has none.
func getLease(tx *bolt.Tx, seq []byte) (l lease, ok bool, err error) {
	b := tx.Bucket(bucketLeases)
	if b == nil {
		return lease{}, false, nil
	}
	v := b.Get(seq)
	if v == nil {
		return lease{}, false, nil
	}
	if l, err = decodeLease(v); err != nil {
		return lease{}, false, fmt.Errorf("lease of event %d: %w", binary.BigEndian.Uint64(seq), err)
	}
	return l, true, nil
}

// apply sets e's claim fields from l.
func (l lease) apply(e *Entry) {
	e.Claim, e.ClaimedAt, e.Attempts = l.claim, l.claimedAt, l.attempts
}

// withLease sets e's claim fields from its lease, when it has one.
func withLease(tx *bolt.Tx, e *Entry) error {
	if e.State != StatePending {
		return nil
	}
	l, ok, err := getLease(tx, seqKey(e.Seq))
	if ok {
		l.apply(e)
	}
	return err
}

// loadEntry is getEntry with the entry's lease applied.
func loadEntry(tx *bolt.Tx, key []byte) (*Entry, error) {
	e, err := getEntry(tx, key)
	if err != nil || e == nil {
		return e, err
	}
	if err := withLease(tx, e); err != nil {
		return nil, err
	}
	return e, nil
}

// claimEntry records e's claim (its fields already set) in its lease.
func claimEntry(tx *bolt.Tx, e *Entry) error {
	l := lease{claim: e.Claim, claimedAt: e.ClaimedAt, attempts: e.Attempts}
	return tx.Bucket(bucketLeases).Put(seqKey(e.Seq), l.encode())
}

// endClaim writes e (its claim fields cleared or changed) at key and
// deletes its lease.
func endClaim(tx *bolt.Tx, key []byte, e *Entry) error {
	if err := tx.Bucket(bucketLeases).Delete(seqKey(e.Seq)); err != nil {
		return err
	}
	return putEntry(tx, key, e)
}
