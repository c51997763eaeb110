package backend

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Record is one line of an export: exactly one of its fields is set.
type Record struct {
	Session    *SessionRecord `json:"session,omitempty"`
	Transcript *Transcript    `json:"transcript,omitempty"`
	Message    *Message       `json:"message,omitempty"`
	Admission  *Admission     `json:"admission,omitempty"`
	Tombstone  *Tombstone     `json:"tombstone,omitempty"`
}

// SessionRecord is a session as exported: every durable field, no derived
// counters (an import recomputes them from the admissions).
type SessionRecord struct {
	ID                string    `json:"id"`
	Owner             string    `json:"owner"`
	Grants            []Grant   `json:"grants"` // never nil in an export: [] for none
	CurrentTranscript string    `json:"current_transcript"`
	Epoch             uint64    `json:"epoch"`
	Generation        uint64    `json:"generation"`
	NextSeq           uint64    `json:"next_seq"`
	CreatedAt         time.Time `json:"created_at"`
}

// Tombstone is a compacted admission as exported: the admission without
// its payload (Compacted set), and the digest of that payload.
type Tombstone struct {
	Admission     Admission `json:"admission"`
	PayloadDigest string    `json:"payload_sha1"`
}

// TombstoneAdmission checks an exported tombstone and returns the
// admission a store imports for it: done, Compacted, no payload, the
// digest in PayloadSHA1. ErrInvalid for a tombstone that is not done or
// whose digest is not 40 lower-case hex digits.
func TombstoneAdmission(t *Tombstone) (Admission, error) {
	a := t.Admission
	if a.Status != StatusDone {
		return a, Errorf(ErrInvalid, "tombstone %s: status %q, want done", a.ID, a.Status)
	}
	if len(t.PayloadDigest) != 40 || strings.Trim(t.PayloadDigest, "0123456789abcdef") != "" {
		return a, Errorf(ErrInvalid, "tombstone %s: payload_sha1 %q is not 40 hex digits", a.ID, t.PayloadDigest)
	}
	a.Payload, a.Compacted, a.PayloadSHA1 = nil, true, t.PayloadDigest
	return a, nil
}

// PayloadDigest is the digest a tombstone keeps of a payload: SHA-1 in
// lower-case hex (what Redis scripts compute with redis.sha1hex). It only
// tells a re-offered payload from the committed one; it protects nothing.
func PayloadDigest(payload []byte) string {
	h := sha1.Sum(payload)
	return hex.EncodeToString(h[:])
}

// Field names of each record kind, exactly as export writes them.
var recordFields = map[string][]string{
	"session":    {"id", "owner", "grants", "current_transcript", "epoch", "generation", "next_seq", "created_at"},
	"transcript": {"id", "session", "parent", "child", "ended_at", "end_reason", "message_count", "note_count", "created_at"},
	"message":    {"transcript", "seq", "role", "content", "admission_id", "created_at", "metadata"},
	"admission": {"id", "session", "seq", "kind", "producer", "principal", "request_id", "identities", "payload",
		"pinned_target", "delivered_to", "status", "outcome", "mode", "epoch", "generation", "admitted_at",
		"started_at", "settled_at", "replay_of", "error"},
	"tombstone": {"admission", "payload_sha1"},
}

// DecodeRecord parses one export line strictly (CheckJSON, exact field
// names, exactly one of session, transcript, message, admission, values of
// the right JSON type). It checks the shape only; CheckRecords checks the
// values and references. Every error wraps ErrInvalid.
func DecodeRecord(line []byte) (Record, error) {
	var rec Record
	top, err := StrictObject(line, "record", "session", "transcript", "message", "admission", "tombstone")
	if err != nil {
		return rec, err
	}
	if len(top) != 1 {
		return rec, fmt.Errorf("want exactly one of session, transcript, message, admission, tombstone; got %d: %w", len(top), ErrInvalid)
	}
	for kind, inner := range top {
		m, err := StrictObject(inner, kind, recordFields[kind]...)
		if err != nil {
			return rec, err
		}
		if kind == "tombstone" {
			if _, err := StrictObject(m["admission"], "tombstone admission", recordFields["admission"]...); err != nil {
				return rec, err
			}
		}
	}
	if err := json.Unmarshal(line, &rec); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return Record{}, fmt.Errorf("field %s: JSON %s where %s is wanted: %w", te.Field, te.Value, typeWord(te.Type.Kind().String()), ErrInvalid)
		}
		return Record{}, fmt.Errorf("%v: %w", err, ErrInvalid)
	}
	return rec, nil
}

func typeWord(kind string) string {
	switch kind {
	case "uint64", "int", "int64":
		return "a whole number"
	case "struct":
		return "a time (RFC 3339)"
	case "slice":
		return "a list"
	case "ptr":
		return "a string or null"
	}
	return "a " + kind
}
