package producer

import (
	"context"
	"fmt"
	"sort"
	"time"

	bolt "go.etcd.io/bbolt"
)

// Entries returns every event the outbox holds, in the order they were
// added.
func (o *Outbox) Entries(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := o.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			e, err := decodeEntry(v)
			if err != nil {
				return err
			}
			if err := withLease(tx, e); err != nil {
				return err
			}
			out = append(out, *e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// Counts is how many events an outbox holds in each state.
type Counts struct {
	Pending int `json:"pending"`
	Claimed int `json:"claimed"` // pending events under a claim
	// Waiting counts the pending events the store refused (they wait for
	// their not-before time); OldestWaiting is when the oldest of them was
	// added, LastReason the reason of the latest refusal.
	Waiting       int       `json:"waiting"`
	OldestWaiting time.Time `json:"oldest_waiting,omitzero"`
	LastReason    string    `json:"last_reason,omitempty"`
	Rejected      int       `json:"rejected"`
	Delivered     int       `json:"delivered"`
	Dropped       int       `json:"dropped"`
}

// Count returns how many events the outbox holds in each state.
func (o *Outbox) Count(ctx context.Context) (Counts, error) {
	es, err := o.Entries(ctx)
	if err != nil {
		return Counts{}, err
	}
	return CountEntries(es), nil
}

// CountPending counts the pending events only (Pending, Claimed, Waiting,
// OldestWaiting, LastReason; the settled states are left 0) as Count
// does, reading the pending index and those events' entries instead of
// every entry the outbox holds (a run that delivered everything reads
// nothing).
func (o *Outbox) CountPending(ctx context.Context) (Counts, error) {
	var es []Entry
	err := o.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketPending).ForEach(func(_, key []byte) error {
			e, err := loadEntry(tx, key)
			if err != nil || e == nil || e.State != StatePending {
				return err
			}
			es = append(es, *e)
			return nil
		})
	})
	if err != nil {
		return Counts{}, fmt.Errorf("outbox: count: %w", err)
	}
	return CountEntries(es), nil
}

// CountEntries counts entries by state.
func CountEntries(es []Entry) Counts {
	var c Counts
	var lastRefused time.Time
	for _, e := range es {
		switch e.State {
		case StatePending:
			c.Pending++
			if e.Claim != "" {
				c.Claimed++
			}
			if e.Waiting() {
				c.Waiting++
				if c.OldestWaiting.IsZero() || e.AddedAt.Before(c.OldestWaiting) {
					c.OldestWaiting = e.AddedAt
				}
				if !e.RefusedAt.Before(lastRefused) {
					lastRefused, c.LastReason = e.RefusedAt, e.Reason
				}
			}
		case StateDelivered:
			c.Delivered++
		case StateRejected:
			c.Rejected++
		case StateDropped:
			c.Dropped++
		}
	}
	return c
}
