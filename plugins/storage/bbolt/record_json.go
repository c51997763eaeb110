package bbolt

import (
	"math"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Session, admission and transcript records are read on every admit and
// every drain step, and a JSON decoder builds its tables for each type by
// reflection the first time it meets it: in a process that makes one
// admit, reading and writing them without that took 7.2 ms instead of 7.8
// (docs/performance.md, "Start-up, second round"). decodeRecord reads those
// records as this store writes them, without reflection; whatever else it
// meets (whitespace, a \u escape, a key that is not the record's own or
// one seen twice, a number that is not plain digits, a null where the
// store writes none) it leaves to the JSON decoder, which reads every
// record as encoding/json does. FuzzRecordCodec holds both paths to
// encoding/json.

// decodeRecord decodes b into v when v is a record it knows and b is
// written as the store writes it; false leaves v as it was.
func decodeRecord(b []byte, v any) bool {
	r := recReader{b: b}
	switch v := v.(type) {
	case *sessionRec:
		rec := *v
		if r.session(&rec) {
			*v = rec
			return true
		}
	case *admRec:
		rec := *v
		if r.admission(&rec) {
			*v = rec
			return true
		}
	case *backend.Transcript:
		// Transcript.UnmarshalJSON replaces the whole value.
		var t backend.Transcript
		if r.transcript(&t) {
			*v = t
			return true
		}
	}
	return false
}

// recReader reads one compact JSON object. Once it fails (fail), every
// read returns a zero value.
type recReader struct {
	b    []byte
	i    int
	fail bool
}

// members reads an object's members: each key, one of keys read once,
// is handed to value, which reads the member's value.
func (r *recReader) members(keys []string, value func(key string)) {
	var seen uint32
	for {
		k, ok := r.member(&seen, keys)
		if !ok {
			return
		}
		value(keys[k])
	}
}

// member reads the next member's key and its colon, and returns the key's
// index in keys; false at the end of the object or on failure. seen holds
// the bit of each key read so far: a key read twice fails.
func (r *recReader) member(seen *uint32, keys []string) (int, bool) {
	if r.fail {
		return 0, false
	}
	if r.i == 0 {
		if len(r.b) < 2 || r.b[0] != '{' {
			return r.failed()
		}
		r.i = 1
		if r.b[1] == '}' {
			r.i = 2
			return 0, false
		}
	} else {
		if r.i >= len(r.b) {
			return r.failed()
		}
		switch r.b[r.i] {
		case ',':
			r.i++
		case '}':
			r.i++
			return 0, false
		default:
			return r.failed()
		}
	}
	if r.i >= len(r.b) || r.b[r.i] != '"' {
		return r.failed()
	}
	j := r.i + 1
	for j < len(r.b) && r.b[j] != '"' {
		j++
	}
	if j+1 >= len(r.b) || r.b[j+1] != ':' {
		return r.failed()
	}
	k := keyIndex(keys, r.b[r.i+1:j])
	if k < 0 || *seen&(1<<k) != 0 {
		return r.failed()
	}
	*seen |= 1 << k
	r.i = j + 2
	return k, true
}

func (r *recReader) failed() (int, bool) {
	r.fail = true
	return 0, false
}

// done reports whether the object was read whole, with nothing after it.
func (r *recReader) done() bool { return !r.fail && r.i == len(r.b) }

// null reads a null if one is next.
func (r *recReader) null() bool {
	if !r.fail && len(r.b)-r.i >= 4 && string(r.b[r.i:r.i+4]) == "null" {
		r.i += 4
		return true
	}
	return false
}

// str reads a string: bytes below 0x20 and escapes other than \" \\ \/
// \b \f \n \r \t fail, and so does invalid UTF-8 (encoding/json would
// replace it).
func (r *recReader) str() string {
	if r.fail || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.fail = true
		return ""
	}
	start := r.i + 1
	j := start
	for j < len(r.b) && r.b[j] >= 0x20 && r.b[j] != '"' && r.b[j] != '\\' {
		j++
	}
	if j < len(r.b) && r.b[j] == '"' {
		s := r.b[start:j]
		if !utf8.Valid(s) {
			r.fail = true
			return ""
		}
		r.i = j + 1
		return string(s)
	}
	out := append(make([]byte, 0, j-start+16), r.b[start:j]...)
	for j < len(r.b) {
		c := r.b[j]
		switch {
		case c == '"':
			if !utf8.Valid(out) {
				r.fail = true
				return ""
			}
			r.i = j + 1
			return string(out)
		case c < 0x20:
			r.fail = true
			return ""
		case c != '\\':
			out = append(out, c)
			j++
			continue
		}
		if j+1 >= len(r.b) {
			break
		}
		switch e := r.b[j+1]; e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		default:
			r.fail = true
			return ""
		}
		j += 2
	}
	r.fail = true
	return ""
}

// elements reads an array, handing each element to elem, which reads it.
func (r *recReader) elements(elem func()) {
	if r.fail || r.i >= len(r.b) || r.b[r.i] != '[' {
		r.fail = true
		return
	}
	r.i++
	if r.i < len(r.b) && r.b[r.i] == ']' {
		r.i++
		return
	}
	for !r.fail {
		elem()
		if r.fail || r.i >= len(r.b) {
			break
		}
		switch r.b[r.i] {
		case ',':
			r.i++
			continue
		case ']':
			r.i++
			return
		}
		break
	}
	r.fail = true
}

// strs reads an array of strings ([] is an empty slice, not nil).
func (r *recReader) strs() []string {
	out := []string{}
	r.elements(func() { out = append(out, r.str()) })
	if r.fail {
		return nil
	}
	return out
}

// uint reads a number of plain digits, without leading zeros, that fits
// max.
func (r *recReader) uint(max uint64) uint64 {
	if r.fail {
		return 0
	}
	j := r.i
	for j < len(r.b) && r.b[j] >= '0' && r.b[j] <= '9' {
		j++
	}
	if j == r.i || r.b[r.i] == '0' && j > r.i+1 {
		r.fail = true
		return 0
	}
	n, err := strconv.ParseUint(string(r.b[r.i:j]), 10, 64)
	if err != nil || n > max {
		r.fail = true
		return 0
	}
	r.i = j
	return n
}

func (r *recReader) int() int { return int(r.uint(math.MaxInt)) }

// time reads a time as its UnmarshalJSON does, from a string without
// escapes.
func (r *recReader) time() time.Time {
	if r.fail || r.i >= len(r.b) || r.b[r.i] != '"' {
		r.fail = true
		return time.Time{}
	}
	j := r.i + 1
	for j < len(r.b) && r.b[j] != '"' && r.b[j] != '\\' {
		j++
	}
	var t time.Time
	if j >= len(r.b) || r.b[j] != '"' || t.UnmarshalJSON(r.b[r.i:j+1]) != nil {
		r.fail = true
		return time.Time{}
	}
	r.i = j + 1
	return t
}

// sessionKeys are a session record's keys, in the order encoding/json
// writes them.
var sessionKeys = [...]string{"id", "owner", "grants", "current_transcript", "epoch", "generation", "next_seq",
	"created_at", "lease_holder", "lease_expires_at", "lease_principal", "queued", "running", "unknown"}

func (r *recReader) session(s *sessionRec) bool {
	r.members(sessionKeys[:], func(key string) {
		switch key {
		case "id":
			s.ID = r.str()
		case "owner":
			s.Owner = r.str()
		case "grants":
			s.Grants = r.grants()
		case "current_transcript":
			s.CurrentTranscript = r.str()
		case "epoch":
			s.Epoch = r.uint(math.MaxUint64)
		case "generation":
			s.Generation = r.uint(math.MaxUint64)
		case "next_seq":
			s.NextSeq = r.uint(math.MaxUint64)
		case "created_at":
			s.CreatedAt = r.time()
		case "lease_holder":
			s.LeaseHolder = r.str()
		case "lease_expires_at":
			s.LeaseExpiresAt = r.time()
		case "lease_principal":
			s.LeasePrincipal = r.str()
		case "queued":
			s.Queued = r.int()
		case "running":
			s.Running = r.int()
		case "unknown":
			s.Unknown = r.int()
		}
	})
	return r.done()
}

var grantKeys = [...]string{"principal", "role", "producers"}

// grants reads a session's grants: null is none, and each grant an object
// of its own keys (the bare strings of older stores go to the decoder).
func (r *recReader) grants() []backend.Grant {
	if r.null() {
		return nil
	}
	out := []backend.Grant{}
	r.elements(func() {
		sub := recReader{b: r.b[r.i:]}
		var g backend.Grant
		sub.members(grantKeys[:], func(key string) {
			switch key {
			case "principal":
				g.Principal = sub.str()
			case "role":
				g.Role = backend.GrantRole(sub.str())
			case "producers":
				g.Producers = sub.strs()
			}
		})
		if sub.fail {
			r.fail = true
			return
		}
		out = append(out, g)
		r.i += sub.i
	})
	if r.fail {
		return nil
	}
	return out
}

var admissionKeys = [...]string{"id", "session", "seq", "kind", "producer", "principal", "request_id", "identities",
	"payload", "pinned_target", "delivered_to", "status", "outcome", "mode", "epoch", "generation",
	"admitted_at", "started_at", "settled_at", "replay_of", "error", "payload_sha1"}

func (r *recReader) admission(a *admRec) bool {
	r.members(admissionKeys[:], func(key string) {
		switch key {
		case "id":
			a.ID = r.str()
		case "session":
			a.Session = r.str()
		case "seq":
			a.Seq = r.uint(math.MaxUint64)
		case "kind":
			a.Kind = r.str()
		case "producer":
			a.Producer = r.str()
		case "principal":
			a.Principal = r.str()
		case "request_id":
			a.RequestID = r.str()
		case "identities":
			a.Identities = r.strs()
		case "payload":
			a.Payload = r.str()
		case "pinned_target":
			a.PinnedTarget = r.str()
		case "delivered_to":
			a.DeliveredTo = r.str()
		case "status":
			a.Status = r.str()
		case "outcome":
			a.Outcome = r.str()
		case "mode":
			a.Mode = r.str()
		case "epoch":
			a.Epoch = r.uint(math.MaxUint64)
		case "generation":
			a.Generation = r.uint(math.MaxUint64)
		case "admitted_at":
			a.AdmittedAt = r.time()
		case "started_at":
			a.StartedAt = r.time()
		case "settled_at":
			a.SettledAt = r.time()
		case "replay_of":
			a.ReplayOf = r.str()
		case "error":
			a.Error = r.str()
		case "payload_sha1":
			a.PayloadSHA1 = r.str()
		}
	})
	return r.done()
}

var transcriptKeys = [...]string{"id", "session", "parent", "child", "ended_at", "end_reason", "message_count",
	"note_count", "created_at"}

// transcript reads a transcript as its UnmarshalJSON does: a null string
// or time is the zero value, and times are in UTC.
func (r *recReader) transcript(t *backend.Transcript) bool {
	optStr := func() string {
		if r.null() {
			return ""
		}
		return r.str()
	}
	optTime := func() time.Time {
		if r.null() {
			return time.Time{}
		}
		return r.time().UTC()
	}
	r.members(transcriptKeys[:], func(key string) {
		switch key {
		case "id":
			t.ID = r.str()
		case "session":
			t.Session = r.str()
		case "parent":
			t.Parent = optStr()
		case "child":
			t.Child = optStr()
		case "ended_at":
			t.EndedAt = optTime()
		case "end_reason":
			t.EndReason = optStr()
		case "message_count":
			t.MessageCount = r.int()
		case "note_count":
			t.NoteCount = r.int()
		case "created_at":
			t.CreatedAt = optTime()
		}
	})
	return r.done()
}

// keyIndex is the index of key in keys, -1 when it is not one of them.
func keyIndex(keys []string, key []byte) int {
	for i, k := range keys {
		if k == string(key) {
			return i
		}
	}
	return -1
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
