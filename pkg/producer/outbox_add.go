package producer

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
)

// ErrInvalidEvent is returned by Add for an event that could never be
// offered.
var ErrInvalidEvent = errors.New("invalid event")

// Validate reports why an event could never be offered: no session or
// identity, neither or both of text and payload, a payload that is not a
// JSON object with a string "text", text that is not UTF-8.
func (e Event) Validate() error {
	switch {
	case e.Session == "":
		return fmt.Errorf("event has no session: %w", ErrInvalidEvent)
	case e.Identity == "":
		return fmt.Errorf("event has no identity: %w", ErrInvalidEvent)
	case e.Text == "" && len(e.Payload) == 0:
		return fmt.Errorf("event %s has neither text nor payload: %w", e.Identity, ErrInvalidEvent)
	case e.Text != "" && len(e.Payload) > 0:
		return fmt.Errorf("event %s has both text and payload: %w", e.Identity, ErrInvalidEvent)
	case !utf8.ValidString(e.Text) || !utf8.ValidString(e.Identity) || !utf8.ValidString(e.Session):
		return fmt.Errorf("event %s is not valid utf-8: %w", e.Identity, ErrInvalidEvent)
	}
	if len(e.Payload) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.Payload, &obj); err != nil {
			return fmt.Errorf("event %s: payload is not a json object: %w", e.Identity, ErrInvalidEvent)
		}
		var text string
		if err := json.Unmarshal(obj["text"], &text); err != nil || text == "" {
			return fmt.Errorf("event %s: payload has no non-empty string \"text\": %w", e.Identity, ErrInvalidEvent)
		}
	}
	return nil
}

// Add records an event as pending. It returns false, and changes nothing,
// when the outbox already holds an event of that session and identity
// (pending, delivered, rejected or dropped): the first one recorded wins.
func (o *Outbox) Add(ctx context.Context, ev Event) (added bool, err error) {
	n, err := o.AddAll(ctx, []Event{ev})
	return n == 1, err
}

// AddAll records events as pending in one write, in order, and returns how
// many were new (see Add). An invalid event refuses the whole call, nothing
// written.
func (o *Outbox) AddAll(ctx context.Context, evs []Event) (added int, err error) {
	evs = slices.Clone(evs)
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			return 0, err
		}
		if len(evs[i].Payload) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, evs[i].Payload); err != nil {
				return 0, fmt.Errorf("event %s: payload: %v: %w", evs[i].Identity, err, ErrInvalidEvent)
			}
			evs[i].Payload = buf.Bytes()
		}
	}
	now := o.now()
	err = o.update(ctx, func(tx *bolt.Tx) error {
		added = 0
		for _, ev := range evs {
			key := eventKey(ev.Session, ev.Identity)
			if tx.Bucket(bucketEvents).Get(key) != nil {
				continue
			}
			seq, err := tx.Bucket(bucketEvents).NextSequence()
			if err != nil {
				return err
			}
			e := &Entry{Event: ev, Seq: seq, State: StatePending, AddedAt: now}
			if err := putEntry(tx, key, e); err != nil {
				return err
			}
			added++
			if err := tx.Bucket(bucketPending).Put(seqKey(seq), key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: add: %w", err)
	}
	return added, nil
}
