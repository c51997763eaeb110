package producer

import (
	"encoding/json"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	fastjson "github.com/segmentio/encoding/json"
)

// The outbox's entries are read and written again on every poll and
// settle, so their JSON goes through faster codecs than encoding/json's
// reflection, held to it by FuzzEntryCodec: segmentio's encoder writes the
// bytes json.Marshal writes (HTML escaped), and the JSON v2 decoder under
// encoding/json's options reads what json.Unmarshal reads, refusing what it
// refuses. Outboxes written by encoding/json read the same.

// entryDecodeOptions make the JSON v2 decoder read as encoding/json does.
var entryDecodeOptions = jsonv1.DefaultOptionsV1()

func decodeEntry(b []byte) (*Entry, error) {
	var e Entry
	if err := jsonv2.Unmarshal(b, &e, entryDecodeOptions); err != nil {
		return nil, err
	}
	return &e, nil
}

// entryOut is an Entry as json.Marshal writes it: segmentio's encoder
// knows no omitzero, so the times left out when zero are pointers here.
type entryOut struct {
	Event
	Seq       uint64     `json:"seq"`
	State     string     `json:"state"`
	Claim     string     `json:"claim,omitempty"`
	ClaimedAt *time.Time `json:"claimed_at,omitempty"`
	Attempts  int        `json:"attempts"`
	AddedAt   time.Time  `json:"added_at"`
	SettledAt *time.Time `json:"settled_at,omitempty"`
	Reason    string     `json:"reason,omitempty"`
	RefusedAt *time.Time `json:"refused_at,omitempty"`
	NotBefore *time.Time `json:"not_before,omitempty"`
}

func unlessZero(t *time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return t
}

func encodeEntry(e *Entry) ([]byte, error) {
	// segmentio's encoder would write a year outside [0, 9999], which no
	// decoder reads back: json.Marshal refuses it, and says why.
	for _, t := range []time.Time{e.ClaimedAt, e.AddedAt, e.SettledAt, e.RefusedAt, e.NotBefore} {
		if y := t.Year(); y < 0 || y > 9999 {
			_, err := json.Marshal(e)
			return nil, err
		}
	}
	out := entryOut{
		Event: e.Event, Seq: e.Seq, State: e.State, Claim: e.Claim, ClaimedAt: unlessZero(&e.ClaimedAt),
		Attempts: e.Attempts, AddedAt: e.AddedAt, SettledAt: unlessZero(&e.SettledAt), Reason: e.Reason,
		RefusedAt: unlessZero(&e.RefusedAt), NotBefore: unlessZero(&e.NotBefore),
	}
	b, err := fastjson.Append(nil, &out, fastjson.EscapeHTML)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	return b, nil
}
