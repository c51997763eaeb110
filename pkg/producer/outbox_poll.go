package producer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"
)

func newClaim() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("producer: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// Poll claims up to req.Max ready events, oldest first, and returns them
// as offers: one per event, or with Coalesce one per session and target
// with a part each, cut to fit req.PayloadLimit. Each claim counts an
// attempt. It also forgets delivered and dropped events older than the
// retention, and drops pending events older than the age limit (MaxAge).
func (o *Outbox) Poll(ctx context.Context, req PollRequest) ([]Offer, error) {
	limit := req.Max
	if limit <= 0 {
		return nil, fmt.Errorf("outbox: poll: max %d is not positive", limit)
	}
	now := o.now()
	var offers []Offer
	// A poll shares its transaction with settles arriving meanwhile (the
	// host settles one poll's offers while it polls for the next).
	err := o.grouped(ctx, []func(*bolt.Tx) error{func(tx *bolt.Tx) error {
		offers = nil
		if err := o.prune(tx, now); err != nil {
			return err
		}
		var ready []*Entry
		var keys [][]byte
		c := tx.Bucket(bucketPending).Cursor()
		for k, v := c.First(); k != nil && len(ready) < limit; k, v = c.Next() {
			l, leased, err := getLease(tx, k)
			if err != nil {
				return err
			}
			if leased && o.claimHeld(l.claim, l.claimedAt, now) {
				continue // claimed; its entry is not read
			}
			e, err := getEntry(tx, v)
			if err != nil {
				return err
			}
			if e == nil || e.State != StatePending {
				continue
			}
			if leased {
				l.apply(e)
			}
			if o.opts.MaxAge > 0 && now.Sub(e.AddedAt) > o.opts.MaxAge && !o.claimHeld(e.Claim, e.ClaimedAt, now) {
				if err := o.expire(tx, v, e, now); err != nil {
					return err
				}
				continue
			}
			if o.claimHeld(e.Claim, e.ClaimedAt, now) || now.Before(e.NotBefore) {
				continue
			}
			ready = append(ready, e)
			keys = append(keys, bytes.Clone(v))
		}
		if len(ready) == 0 {
			return nil
		}
		events := make([]Event, len(ready))
		for i, e := range ready {
			events[i] = e.Event
		}
		var groups [][]int
		if o.opts.Coalesce {
			groups = coalesceIndexes(events, req.PayloadLimit)
		} else {
			for i := range events {
				groups = append(groups, []int{i})
			}
		}
		claims := tx.Bucket(bucketClaims)
		for _, g := range groups {
			claim := newClaim()
			var gkeys [][]byte
			var gevents []Event
			attempts := 0
			for _, i := range g {
				e := ready[i]
				if e.Claim != "" {
					if err := forgetClaimed(claims, e.Claim, keys[i]); err != nil {
						return err
					}
				}
				e.Claim, e.ClaimedAt = claim, now
				e.Attempts++
				attempts = max(attempts, e.Attempts)
				if err := claimEntry(tx, e); err != nil {
					return err
				}
				gkeys = append(gkeys, keys[i])
				gevents = append(gevents, e.Event)
			}
			b, err := json.Marshal(gkeys)
			if err != nil {
				return err
			}
			if err := claims.Put([]byte(claim), b); err != nil {
				return err
			}
			offer := makeOffer(gevents, claim, o.opts.Coalesce)
			offer.Attempts = attempts
			offers = append(offers, offer)
		}
		return nil
	}})[0]
	if err != nil {
		return nil, fmt.Errorf("outbox: poll: %w", err)
	}
	return offers, nil
}

// claimHeld reports whether a claim taken at is still held at now: its
// lease has not run out.
func (o *Outbox) claimHeld(claim string, at, now time.Time) bool {
	return claim != "" && now.Before(at.Add(o.opts.Lease))
}

// forgetClaimed removes key from an expired claim's list, and the claim
// when nothing is left in it.
func forgetClaimed(claims *bolt.Bucket, claim string, key []byte) error {
	keys, err := claimKeys(claims, claim)
	if err != nil || keys == nil {
		return err
	}
	kept := keys[:0]
	for _, k := range keys {
		if !bytes.Equal(k, key) {
			kept = append(kept, k)
		}
	}
	if len(kept) == 0 {
		return claims.Delete([]byte(claim))
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	return claims.Put([]byte(claim), b)
}

// claimKeys returns the keys of the events under claim, nil when there is
// no such claim.
func claimKeys(claims *bolt.Bucket, claim string) ([][]byte, error) {
	v := claims.Get([]byte(claim))
	if v == nil {
		return nil, nil
	}
	keys := [][]byte{}
	if err := json.Unmarshal(v, &keys); err != nil {
		return nil, err
	}
	return keys, nil
}

// expire drops pending event e (at key) for being older than the age
// limit.
func (o *Outbox) expire(tx *bolt.Tx, key []byte, e *Entry, now time.Time) error {
	if e.Claim != "" {
		if err := forgetClaimed(tx.Bucket(bucketClaims), e.Claim, key); err != nil {
			return err
		}
	}
	reason := fmt.Sprintf("older than the age limit producer_max_age (%s)", o.opts.MaxAge)
	if e.Reason != "" {
		reason += "; last refused: " + e.Reason
	}
	return o.finish(tx, key, e, StateDropped, reason, now)
}
