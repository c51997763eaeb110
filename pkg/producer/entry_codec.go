package producer

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/hermesq/hermesq/pkg/recjson"
)

// The outbox's entries are read and written again on every poll and
// settle, so their JSON goes through faster codecs than encoding/json's
// reflection, held to it by FuzzEntryCodec: segmentio's encoder writes the
// bytes json.Marshal writes (HTML escaped); readEntry reads entries as the
// outbox writes them, and the JSON v2 decoder under encoding/json's options
// reads everything else as json.Unmarshal reads it, refusing what it
// refuses. Outboxes written by encoding/json read the same.

// entryDecodeOptions make the JSON v2 decoder read as encoding/json does.
var entryDecodeOptions = jsonv1.DefaultOptionsV1()

func decodeEntry(b []byte) (*Entry, error) {
	var e Entry
	if readEntry(b, &e) {
		return &e, nil
	}
	e = Entry{}
	if err := jsonv2.Unmarshal(b, &e, entryDecodeOptions); err != nil {
		return nil, err
	}
	return &e, nil
}

// entryKeys are an entry's keys, in the order they are written.
var entryKeys = [...]string{"session", "target", "identity", "text", "payload", "seq", "state", "claim",
	"claimed_at", "attempts", "added_at", "settled_at", "reason", "refused_at", "not_before"}

// readEntry reads an entry as the outbox writes it (pkg/recjson), without
// the decoder's reflection: about a fifth of a poll and settle's time went
// to decoding entries (docs/performance.md, "Producers, the outbox's
// entries"). False for anything else (whitespace, a \u escape outside the
// payload, a null, a key not the entry's own or seen twice, a number not
// plain digits), which the decoder reads.
func readEntry(b []byte, e *Entry) bool {
	r := recjson.New(b)
	r.Object(entryKeys[:], func(key string) {
		switch key {
		case "session":
			e.Session = r.Str()
		case "target":
			e.Target = r.Str()
		case "identity":
			e.Identity = r.Str()
		case "text":
			e.Text = r.Str()
		case "payload":
			if r.Null() {
				r.Fail() // encoding/json keeps the literal null
				return
			}
			e.Payload = r.Raw()
		case "seq":
			e.Seq = r.Uint(math.MaxUint64)
		case "state":
			e.State = r.Str()
		case "claim":
			e.Claim = r.Str()
		case "claimed_at":
			e.ClaimedAt = r.Time()
		case "attempts":
			e.Attempts = r.Int()
		case "added_at":
			e.AddedAt = r.Time()
		case "settled_at":
			e.SettledAt = r.Time()
		case "reason":
			e.Reason = r.Str()
		case "refused_at":
			e.RefusedAt = r.Time()
		case "not_before":
			e.NotBefore = r.Time()
		}
	})
	return r.Done()
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
	// Room for the whole entry at once (quoted strings a little longer),
	// not grown from nothing field by field.
	size := 256 + len(e.Payload) + (len(e.Session)+len(e.Target)+len(e.Identity)+len(e.Text)+len(e.Claim)+len(e.Reason))*9/8
	b, err := fastjson.Append(make([]byte, 0, size), &out, fastjson.EscapeHTML)
	if err != nil {
		return nil, fmt.Errorf("encode entry: %w", err)
	}
	return b, nil
}
