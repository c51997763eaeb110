package bbolt

import (
	"encoding/json"
	"fmt"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/hermesq/hermesq/pkg/backend"
)

// sessionRec is the stored form of a session: its durable fields (the
// export's SessionRecord, whose JSON fields are inlined), the lease, and
// counters kept in step with the status indexes.
type sessionRec struct {
	backend.SessionRecord
	LeaseHolder    string    `json:"lease_holder,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// LeasePrincipal is who took the lease (AcquireLease): every claim
	// checks that it may still drain the session.
	LeasePrincipal string `json:"lease_principal,omitempty"`
	Queued         int    `json:"queued"`
	Running        int    `json:"running"`
	Unknown        int    `json:"unknown"`
}

// admRec is the stored form of an admission. The payload is kept as a
// string so its bytes are stored exactly (json.RawMessage would be
// re-escaped).
type admRec struct {
	ID           string    `json:"id"`
	Session      string    `json:"session"`
	Seq          uint64    `json:"seq"`
	Kind         string    `json:"kind"`
	Producer     string    `json:"producer,omitempty"`
	Principal    string    `json:"principal,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	Identities   []string  `json:"identities,omitempty"`
	Payload      string    `json:"payload"`
	PinnedTarget string    `json:"pinned_target,omitempty"`
	DeliveredTo  string    `json:"delivered_to,omitempty"`
	Status       string    `json:"status"`
	Outcome      string    `json:"outcome,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	Epoch        uint64    `json:"epoch,omitempty"`
	Generation   uint64    `json:"generation,omitempty"`
	AdmittedAt   time.Time `json:"admitted_at"`
	StartedAt    time.Time `json:"started_at"`
	SettledAt    time.Time `json:"settled_at"`
	ReplayOf     string    `json:"replay_of,omitempty"`
	Error        string    `json:"error,omitempty"`
	// PayloadSHA1 is set on a tombstone (Compact): the digest of the
	// payload it no longer holds.
	PayloadSHA1 string `json:"payload_sha1,omitempty"`
}

// samePayload reports whether p is the payload committed with the
// admission: byte-equal, or for a tombstone of equal digest.
func (r *admRec) samePayload(p []byte) bool {
	if r.PayloadSHA1 != "" {
		return backend.PayloadDigest(p) == r.PayloadSHA1
	}
	return r.Payload == string(p)
}

func toAdmRec(a backend.Admission) admRec {
	return admRec{
		ID: a.ID, Session: a.Session, Seq: a.Seq, Kind: string(a.Kind), Producer: a.Producer,
		Principal: a.Principal, RequestID: a.RequestID, Identities: a.Identities, Payload: string(a.Payload),
		PinnedTarget: a.PinnedTarget, DeliveredTo: a.DeliveredTo, Status: string(a.Status),
		Outcome: string(a.Outcome), Mode: string(a.Mode), Epoch: a.Epoch, Generation: a.Generation,
		AdmittedAt: utc(a.AdmittedAt), StartedAt: utc(a.StartedAt), SettledAt: utc(a.SettledAt),
		ReplayOf: a.ReplayOf, Error: a.Error, PayloadSHA1: a.PayloadSHA1,
	}
}

func (r admRec) admission() backend.Admission {
	a := backend.Admission{
		ID: r.ID, Session: r.Session, Seq: r.Seq, Kind: backend.Kind(r.Kind), Producer: r.Producer,
		Principal: r.Principal, RequestID: r.RequestID, Payload: json.RawMessage(r.Payload),
		PinnedTarget: r.PinnedTarget, DeliveredTo: r.DeliveredTo, Status: backend.Status(r.Status),
		Outcome: backend.Outcome(r.Outcome), Mode: backend.Mode(r.Mode), Epoch: r.Epoch, Generation: r.Generation,
		AdmittedAt: utc(r.AdmittedAt), StartedAt: utc(r.StartedAt), SettledAt: utc(r.SettledAt),
		ReplayOf: r.ReplayOf, Error: r.Error,
	}
	if len(r.Identities) > 0 {
		a.Identities = append([]string(nil), r.Identities...)
	}
	if r.PayloadSHA1 != "" {
		a.Payload, a.Compacted, a.PayloadSHA1 = nil, true, r.PayloadSHA1
	}
	return a
}

// timesWritable reports whether encoding/json can write every time of a
// record (backend.JSONTime): segmentio's encoder would write a year outside
// [0, 9999], which no decoder reads back, so such a record is refused as
// encoding/json refuses it instead of being written unreadable.
func timesWritable(v any) bool {
	ok := backend.JSONTime
	switch r := v.(type) {
	case *admRec:
		return ok(r.AdmittedAt) && ok(r.StartedAt) && ok(r.SettledAt)
	case *sessionRec:
		return ok(r.CreatedAt) && ok(r.LeaseExpiresAt)
	case *backend.Transcript:
		return ok(r.CreatedAt) && ok(r.EndedAt)
	case *msgRec:
		return r.CreatedAt == nil || ok(*r.CreatedAt)
	}
	return true
}

func encode(v any) ([]byte, error) { return encodeWith(v, 0) }

// encodeWith writes a record with segmentio's encoder and flags (0: what
// an encoding/json Encoder without HTML escaping writes); an admission or
// session record with flags 0 by hand (admRec.appendJSON,
// sessionRec.appendJSON), to the same bytes.
func encodeWith(v any, flags fastjson.AppendFlags) ([]byte, error) {
	if flags == 0 {
		// appendJSON refuses what encoding/json refuses, times included.
		if b, ok, byHand := appendByHand(v); byHand {
			if !ok {
				return nil, refused(v)
			}
			return b, nil
		}
	}
	if !timesWritable(v) {
		return nil, refused(v)
	}
	// segmentio's encoder writes what encoding/json's writes (the codec
	// fuzz target checks) at several times the speed: records are written
	// again on every drain step. Its decoder is not used: it takes numbers
	// that overflow a uint64 field, which encoding/json refuses (a corrupt
	// record must be refused, not read as another number); see decode.
	b, err := fastjson.Append(nil, v, flags)
	if err != nil {
		return nil, fmt.Errorf("bbolt: encode: %v: %w", err, backend.ErrInternal)
	}
	return b, nil
}

// appendByHand writes an admission or session record with its appendJSON;
// byHand false for the other records.
func appendByHand(v any) (b []byte, ok, byHand bool) {
	switch r := v.(type) {
	case *admRec:
		b, ok = r.appendJSON(make([]byte, 0, 512+len(r.Payload)))
	case *sessionRec:
		b, ok = r.appendJSON(make([]byte, 0, 256))
	default:
		return nil, false, false
	}
	return b, ok, true
}

// refused is the error for a record encoding/json refuses to write: its
// own, as ErrInternal.
func refused(v any) error {
	_, err := json.Marshal(v)
	return fmt.Errorf("bbolt: encode: %v: %w", err, backend.ErrInternal)
}

// msgRec is the stored form of a message: backend.Message's JSON shape
// (its MarshalJSON), written here without going through encoding/json.
type msgRec struct {
	Transcript  string         `json:"transcript"`
	Seq         uint64         `json:"seq"`
	Role        backend.Role   `json:"role"`
	Content     string         `json:"content"`
	AdmissionID *string        `json:"admission_id"`
	CreatedAt   *time.Time     `json:"created_at"`
	Metadata    map[string]any `json:"metadata"`
}

// encodeMessage writes m as json.Marshal(m) does (HTML-escaped, map keys
// sorted), which is how messages have always been stored; it is read back
// with backend.Message's UnmarshalJSON.
func encodeMessage(m *backend.Message) ([]byte, error) {
	r := msgRec{Transcript: m.Transcript, Seq: m.Seq, Role: m.Role, Content: m.Content, Metadata: m.Metadata}
	if m.AdmissionID != "" {
		r.AdmissionID = &m.AdmissionID
	}
	if !m.CreatedAt.IsZero() {
		t := m.CreatedAt.UTC()
		r.CreatedAt = &t
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	return encodeWith(&r, fastjson.EscapeHTML|fastjson.SortMapKeys)
}

// v1Options make the JSON v2 decoder read exactly as encoding/json does
// (the same names matched, the same values refused, invalid UTF-8 replaced
// the same way) in about half the time: records are read on every drain
// step. FuzzRecordCodec compares the two.
var v1Options = jsonv1.DefaultOptionsV1()

func decode(what string, b []byte, v any) error {
	if decodeRecord(b, v) {
		return nil
	}
	if err := jsonv2.Unmarshal(b, v, v1Options); err != nil {
		return fmt.Errorf("bbolt: decode %s: %v: %w", what, err, backend.ErrInternal)
	}
	return nil
}
