package producer

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"
)

// finish ends pending (or rejected) event e, at key, in state (delivered,
// rejected or dropped) with the reason.
func (o *Outbox) finish(tx *bolt.Tx, key []byte, e *Entry, state, reason string, now time.Time) error {
	e.Claim, e.ClaimedAt, e.NotBefore = "", time.Time{}, time.Time{}
	if reason != "" {
		e.Reason = reason
	}
	e.State, e.SettledAt = state, now
	if err := tx.Bucket(bucketPending).Delete(seqKey(e.Seq)); err != nil {
		return err
	}
	if state != StateRejected { // rejected events stay until an operator drops them
		sk := append(seqKey(uint64(now.UnixNano())), seqKey(e.Seq)...)
		if err := tx.Bucket(bucketSettled).Put(sk, key); err != nil {
			return err
		}
	}
	return endClaim(tx, key, e)
}

// prune forgets delivered and dropped events settled before the retention.
func (o *Outbox) prune(tx *bolt.Tx, now time.Time) error {
	cutoff := uint64(now.Add(-o.opts.Retention).UnixNano())
	settled := tx.Bucket(bucketSettled)
	c := settled.Cursor()
	for k, v := c.First(); k != nil && binary.BigEndian.Uint64(k[:8]) < cutoff; k, v = c.First() {
		if err := tx.Bucket(bucketEvents).Delete(v); err != nil {
			return err
		}
		if err := settled.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Settle ends a claim. complete: the claim's events are delivered. retry:
// they stay pending with the reason, ready again at s.NotBefore. reject:
// they are rejected with the reason. Identities named in s.Delivered are
// delivered whatever the action. ErrUnknownClaim when the outbox holds no
// event under that claim.
func (o *Outbox) Settle(ctx context.Context, claim string, s Settlement) error {
	if _, ok := actionNames[s.Action]; !ok {
		return fmt.Errorf("outbox: settle: unknown action %d", int(s.Action))
	}
	now := o.now()
	// Concurrent settles share one transaction (grouped).
	err := o.grouped(ctx, []func(*bolt.Tx) error{func(tx *bolt.Tx) error { return o.settle(tx, claim, s, now) }})[0]
	if err != nil {
		return fmt.Errorf("outbox: settle %s %s: %w", s.Action, claim, err)
	}
	return nil
}

// settle ends claim in tx (see Settle).
func (o *Outbox) settle(tx *bolt.Tx, claim string, s Settlement, now time.Time) error {
	claims := tx.Bucket(bucketClaims)
	keys, err := claimKeys(claims, claim)
	if err != nil {
		return err
	}
	if keys == nil {
		return ErrUnknownClaim
	}
	if err := claims.Delete([]byte(claim)); err != nil {
		return err
	}
	held := 0
	for _, key := range keys {
		e, err := loadEntry(tx, key)
		if err != nil {
			return err
		}
		if e == nil || e.State != StatePending || e.Claim != claim {
			continue
		}
		held++
		action := s.Action
		if slices.Contains(s.Delivered, e.Identity) {
			action = Complete
		}
		switch action {
		case Complete:
			err = o.finish(tx, key, e, StateDelivered, "", now)
		case Reject:
			err = o.finish(tx, key, e, StateRejected, s.Reason, now)
		case Retry:
			e.Claim, e.ClaimedAt = "", time.Time{}
			e.Reason, e.RefusedAt, e.NotBefore = s.Reason, now, s.NotBefore.UTC()
			err = endClaim(tx, key, e)
		}
		if err != nil {
			return err
		}
	}
	if held == 0 {
		return ErrUnknownClaim
	}
	return nil
}

// ErrNoEvent is returned by Drop for a sequence number the outbox does not
// hold, or holds delivered.
var ErrNoEvent = errors.New("no such pending or rejected event")

// Drop is the operator's decision to give up events: the pending or
// rejected events with the given sequence numbers (Entry.Seq) are dropped
// with the reason, in one write. A sequence number of no such event
// refuses the whole call (ErrNoEvent), nothing written. A claimed event is
// dropped too: the host's later settle of it changes nothing.
func (o *Outbox) Drop(ctx context.Context, seqs []uint64, reason string) error {
	now := o.now()
	err := o.update(ctx, func(tx *bolt.Tx) error {
		byseq := map[uint64][]byte{}
		err := tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			e, err := decodeEntry(v)
			if err != nil {
				return err
			}
			if e.State == StatePending || e.State == StateRejected {
				byseq[e.Seq] = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, seq := range seqs {
			if byseq[seq] == nil {
				return fmt.Errorf("event %d: %w", seq, ErrNoEvent)
			}
		}
		for _, seq := range seqs {
			key := byseq[seq]
			e, err := loadEntry(tx, key)
			if err != nil {
				return err
			}
			if e.State == StateDropped { // named twice
				continue
			}
			if e.Claim != "" {
				if err := forgetClaimed(tx.Bucket(bucketClaims), e.Claim, key); err != nil {
					return err
				}
			}
			r := reason
			if e.Reason != "" {
				r += "; last refused: " + e.Reason
			}
			if err := o.finish(tx, key, e, StateDropped, r, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: drop: %w", err)
	}
	return nil
}
