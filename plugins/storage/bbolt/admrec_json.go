package bbolt

import (
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// appendJSON appends r as an encoding/json Encoder without HTML escaping
// writes it (its struct tags: the omitempty fields left out when empty,
// times as their MarshalJSON writes them). It reports false for a record
// encoding/json refuses to write (a time MarshalJSON refuses). Admission
// records are the records written most (every admit and every step of a
// drain), and writing them through a reflecting encoder cost about a
// sixth of the goroutine that commits an admit --batch. FuzzRecordCodec
// and FuzzAdmRecJSON hold it to encoding/json.
func (r *admRec) appendJSON(b []byte) ([]byte, bool) {
	str := backend.AppendEncoderString
	opt := func(b []byte, name, s string) []byte {
		if s == "" {
			return b
		}
		return str(append(b, name...), s)
	}
	b = str(append(b, `{"id":`...), r.ID)
	b = str(append(b, `,"session":`...), r.Session)
	b = strconv.AppendUint(append(b, `,"seq":`...), r.Seq, 10)
	b = str(append(b, `,"kind":`...), r.Kind)
	b = opt(b, `,"producer":`, r.Producer)
	b = opt(b, `,"principal":`, r.Principal)
	b = opt(b, `,"request_id":`, r.RequestID)
	if len(r.Identities) > 0 {
		b = appendStrings(append(b, `,"identities":`...), r.Identities)
	}
	b = str(append(b, `,"payload":`...), r.Payload)
	b = opt(b, `,"pinned_target":`, r.PinnedTarget)
	b = opt(b, `,"delivered_to":`, r.DeliveredTo)
	b = str(append(b, `,"status":`...), r.Status)
	b = opt(b, `,"outcome":`, r.Outcome)
	b = opt(b, `,"mode":`, r.Mode)
	if r.Epoch != 0 {
		b = strconv.AppendUint(append(b, `,"epoch":`...), r.Epoch, 10)
	}
	if r.Generation != 0 {
		b = strconv.AppendUint(append(b, `,"generation":`...), r.Generation, 10)
	}
	var ok bool
	for _, f := range [...]struct {
		name string
		t    time.Time
	}{{`,"admitted_at":`, r.AdmittedAt}, {`,"started_at":`, r.StartedAt}, {`,"settled_at":`, r.SettledAt}} {
		if b, ok = appendTime(append(b, f.name...), f.t); !ok {
			return nil, false
		}
	}
	b = opt(b, `,"replay_of":`, r.ReplayOf)
	b = opt(b, `,"error":`, r.Error)
	b = opt(b, `,"payload_sha1":`, r.PayloadSHA1)
	return append(b, '}'), true
}

// appendStrings appends list as a JSON array of strings, as an Encoder
// without HTML escaping writes it.
func appendStrings(b []byte, list []string) []byte {
	b = append(b, '[')
	for i, s := range list {
		if i > 0 {
			b = append(b, ',')
		}
		b = backend.AppendEncoderString(b, s)
	}
	return append(b, ']')
}

// appendTime appends t as its MarshalJSON writes it: between quotes, what
// AppendText writes (both are time's strict RFC 3339, with nanoseconds,
// in its own location). Like MarshalJSON, it refuses (false) a year
// outside 0-9999 and a zone offset of 24 hours or more.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if t == (time.Time{}) {
		// A time not set yet (a queued admission's start and end).
		return append(b, `"0001-01-01T00:00:00Z"`...), true
	}
	b, err := t.AppendText(append(b, '"'))
	if err != nil {
		return nil, false
	}
	return append(b, '"'), true
}
