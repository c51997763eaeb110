package bbolt

import (
	"math"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/recjson"
)

// Session, admission and transcript records are read on every admit and
// every drain step, and a JSON decoder builds its tables for each type by
// reflection the first time it meets it: in a process that makes one
// admit, reading and writing them without that took 7.2 ms instead of 7.8
// (docs/performance.md, "Start-up, second round"). decodeRecord reads those
// records as this store writes them, with pkg/recjson; whatever else it
// meets (whitespace, a \u escape, a key that is not the record's own or
// one seen twice, a number that is not plain digits, a null where the
// store writes none) it leaves to the JSON decoder, which reads every
// record as encoding/json does. FuzzRecordCodec holds both paths to
// encoding/json.

// decodeRecord decodes b into v when v is a record it knows and b is
// written as the store writes it; false leaves v as it was.
func decodeRecord(b []byte, v any) bool {
	r := recjson.New(b)
	switch v := v.(type) {
	case *sessionRec:
		rec := *v
		if readSession(&r, &rec) {
			*v = rec
			return true
		}
	case *admRec:
		rec := *v
		if readAdmission(&r, &rec) {
			*v = rec
			return true
		}
	case *backend.Transcript:
		// Transcript.UnmarshalJSON replaces the whole value.
		var t backend.Transcript
		if readTranscript(&r, &t) {
			*v = t
			return true
		}
	}
	return false
}

// sessionKeys are a session record's keys, in the order encoding/json
// writes them.
var sessionKeys = [...]string{"id", "owner", "grants", "current_transcript", "epoch", "generation", "next_seq",
	"created_at", "lease_holder", "lease_expires_at", "lease_principal", "queued", "running", "unknown"}

func readSession(r *recjson.Reader, s *sessionRec) bool {
	r.Object(sessionKeys[:], func(key string) {
		switch key {
		case "id":
			s.ID = r.Str()
		case "owner":
			s.Owner = r.Str()
		case "grants":
			s.Grants = readGrants(r)
		case "current_transcript":
			s.CurrentTranscript = r.Str()
		case "epoch":
			s.Epoch = r.Uint(math.MaxUint64)
		case "generation":
			s.Generation = r.Uint(math.MaxUint64)
		case "next_seq":
			s.NextSeq = r.Uint(math.MaxUint64)
		case "created_at":
			s.CreatedAt = r.Time()
		case "lease_holder":
			s.LeaseHolder = r.Str()
		case "lease_expires_at":
			s.LeaseExpiresAt = r.Time()
		case "lease_principal":
			s.LeasePrincipal = r.Str()
		case "queued":
			s.Queued = r.Int()
		case "running":
			s.Running = r.Int()
		case "unknown":
			s.Unknown = r.Int()
		}
	})
	return r.Done()
}

var grantKeys = [...]string{"principal", "role", "producers"}

// readGrants reads a session's grants: null is none, and each grant an
// object of its own keys (the bare strings of older stores go to the
// decoder).
func readGrants(r *recjson.Reader) []backend.Grant {
	if r.Null() {
		return nil
	}
	out := []backend.Grant{}
	r.Elements(func() {
		var g backend.Grant
		r.Object(grantKeys[:], func(key string) {
			switch key {
			case "principal":
				g.Principal = r.Str()
			case "role":
				g.Role = backend.GrantRole(r.Str())
			case "producers":
				g.Producers = r.Strs()
			}
		})
		out = append(out, g)
	})
	if r.Failed() {
		return nil
	}
	return out
}

var admissionKeys = [...]string{"id", "session", "seq", "kind", "producer", "principal", "request_id", "identities",
	"payload", "pinned_target", "delivered_to", "status", "outcome", "mode", "epoch", "generation",
	"admitted_at", "started_at", "settled_at", "replay_of", "error", "payload_sha1"}

func readAdmission(r *recjson.Reader, a *admRec) bool {
	r.Object(admissionKeys[:], func(key string) {
		switch key {
		case "id":
			a.ID = r.Str()
		case "session":
			a.Session = r.Str()
		case "seq":
			a.Seq = r.Uint(math.MaxUint64)
		case "kind":
			a.Kind = r.Str()
		case "producer":
			a.Producer = r.Str()
		case "principal":
			a.Principal = r.Str()
		case "request_id":
			a.RequestID = r.Str()
		case "identities":
			a.Identities = r.Strs()
		case "payload":
			a.Payload = r.Str()
		case "pinned_target":
			a.PinnedTarget = r.Str()
		case "delivered_to":
			a.DeliveredTo = r.Str()
		case "status":
			a.Status = r.Str()
		case "outcome":
			a.Outcome = r.Str()
		case "mode":
			a.Mode = r.Str()
		case "epoch":
			a.Epoch = r.Uint(math.MaxUint64)
		case "generation":
			a.Generation = r.Uint(math.MaxUint64)
		case "admitted_at":
			a.AdmittedAt = r.Time()
		case "started_at":
			a.StartedAt = r.Time()
		case "settled_at":
			a.SettledAt = r.Time()
		case "replay_of":
			a.ReplayOf = r.Str()
		case "error":
			a.Error = r.Str()
		case "payload_sha1":
			a.PayloadSHA1 = r.Str()
		}
	})
	return r.Done()
}

var transcriptKeys = [...]string{"id", "session", "parent", "child", "ended_at", "end_reason", "message_count",
	"note_count", "created_at"}

// transcript reads a transcript as its UnmarshalJSON does: a null string
// or time is the zero value, and times are in UTC.
func readTranscript(r *recjson.Reader, t *backend.Transcript) bool {
	optStr := func() string {
		if r.Null() {
			return ""
		}
		return r.Str()
	}
	optTime := func() time.Time {
		if r.Null() {
			return time.Time{}
		}
		return r.Time().UTC()
	}
	r.Object(transcriptKeys[:], func(key string) {
		switch key {
		case "id":
			t.ID = r.Str()
		case "session":
			t.Session = r.Str()
		case "parent":
			t.Parent = optStr()
		case "child":
			t.Child = optStr()
		case "ended_at":
			t.EndedAt = optTime()
		case "end_reason":
			t.EndReason = optStr()
		case "message_count":
			t.MessageCount = r.Int()
		case "note_count":
			t.NoteCount = r.Int()
		case "created_at":
			t.CreatedAt = optTime()
		}
	})
	return r.Done()
}

// appendJSON appends s as an encoding/json Encoder without HTML escaping
// writes it, as admRec.appendJSON does for admissions; false for a record
// encoding/json refuses to write (a time outside years 0-9999).
func (s *sessionRec) appendJSON(b []byte) ([]byte, bool) {
	str := backend.AppendEncoderString
	b = str(append(b, `{"id":`...), s.ID)
	b = str(append(b, `,"owner":`...), s.Owner)
	b = append(b, `,"grants":`...)
	if s.Grants == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, g := range s.Grants {
			if i > 0 {
				b = append(b, ',')
			}
			b = str(append(b, `{"principal":`...), g.Principal)
			b = str(append(b, `,"role":`...), string(g.Role))
			if len(g.Producers) > 0 {
				b = appendStrings(append(b, `,"producers":`...), g.Producers)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = str(append(b, `,"current_transcript":`...), s.CurrentTranscript)
	b = strconv.AppendUint(append(b, `,"epoch":`...), s.Epoch, 10)
	b = strconv.AppendUint(append(b, `,"generation":`...), s.Generation, 10)
	b = strconv.AppendUint(append(b, `,"next_seq":`...), s.NextSeq, 10)
	var ok bool
	if b, ok = appendTime(append(b, `,"created_at":`...), s.CreatedAt); !ok {
		return nil, false
	}
	if s.LeaseHolder != "" {
		b = str(append(b, `,"lease_holder":`...), s.LeaseHolder)
	}
	if b, ok = appendTime(append(b, `,"lease_expires_at":`...), s.LeaseExpiresAt); !ok {
		return nil, false
	}
	if s.LeasePrincipal != "" {
		b = str(append(b, `,"lease_principal":`...), s.LeasePrincipal)
	}
	b = strconv.AppendInt(append(b, `,"queued":`...), int64(s.Queued), 10)
	b = strconv.AppendInt(append(b, `,"running":`...), int64(s.Running), 10)
	b = strconv.AppendInt(append(b, `,"unknown":`...), int64(s.Unknown), 10)
	return append(b, '}'), true
}
