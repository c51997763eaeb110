package redis

import (
	"encoding/json"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	fastjson "github.com/segmentio/encoding/json"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Times are stored as unix nanoseconds in decimal ("" for none): exact, and
// comparable as strings inside the scripts.
func nsOf(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}

func timeOf(ns string) time.Time {
	if ns == "" {
		return time.Time{}
	}
	n, err := strconv.ParseInt(ns, 10, 64)
	if err != nil {
		return time.Time{}
	}
	return time.Unix(0, n).UTC()
}

// admRec is an admission's mutable record as the scripts store it (JSON
// field names shared with the Lua code). The payload and the identities live
// in their own hashes, byte-exact.
type admRec struct {
	ID           string `json:"id"`
	Session      string `json:"session"`
	Seq          uint64 `json:"seq"`
	Kind         string `json:"kind"`
	Producer     string `json:"producer"`
	Principal    string `json:"principal"`
	RequestID    string `json:"request_id"`
	PinnedTarget string `json:"pinned_target"`
	DeliveredTo  string `json:"delivered_to"`
	Status       string `json:"status"`
	Outcome      string `json:"outcome"`
	Mode         string `json:"mode"`
	Epoch        uint64 `json:"epoch"`
	Generation   uint64 `json:"generation"`
	AdmittedAt   string `json:"admitted_at"`
	StartedAt    string `json:"started_at"`
	SettledAt    string `json:"settled_at"`
	ReplayOf     string `json:"replay_of"`
	Error        string `json:"error"`
}

func recOf(a backend.Admission) admRec {
	return admRec{
		ID: a.ID, Session: a.Session, Seq: a.Seq, Kind: string(a.Kind), Producer: a.Producer,
		Principal: a.Principal, RequestID: a.RequestID, PinnedTarget: a.PinnedTarget,
		DeliveredTo: a.DeliveredTo, Status: string(a.Status), Outcome: string(a.Outcome),
		Mode: string(a.Mode), Epoch: a.Epoch, Generation: a.Generation,
		AdmittedAt: nsOf(a.AdmittedAt), StartedAt: nsOf(a.StartedAt), SettledAt: nsOf(a.SettledAt),
		ReplayOf: a.ReplayOf, Error: a.Error,
	}
}

// v1Options make the JSON v2 decoder read exactly as encoding/json does
// (the same names matched, the same values refused, invalid UTF-8 replaced
// the same way) in about half the time: a drain reads every admission it
// lists and settles. FuzzReplyDecoder compares the two.
var v1Options = jsonv1.DefaultOptionsV1()

// readRecord decodes a record the scripts stored.
func readRecord(rec string, v any) error { return jsonv2.Unmarshal([]byte(rec), v, v1Options) }

// decodeAdmission builds an Admission from its record, payload and
// NUL-joined identity list.
func decodeAdmission(rec, payload, idents string) (backend.Admission, error) {
	var r admRec
	if err := readRecord(rec, &r); err != nil {
		return backend.Admission{}, errInternalf("decode admission record: %v", err)
	}
	a := backend.Admission{
		ID: r.ID, Session: r.Session, Seq: r.Seq, Kind: backend.Kind(r.Kind), Producer: r.Producer,
		Principal: r.Principal, RequestID: r.RequestID, PinnedTarget: r.PinnedTarget,
		DeliveredTo: r.DeliveredTo, Status: backend.Status(r.Status), Outcome: backend.Outcome(r.Outcome),
		Mode: backend.Mode(r.Mode), Epoch: r.Epoch, Generation: r.Generation,
		AdmittedAt: timeOf(r.AdmittedAt), StartedAt: timeOf(r.StartedAt), SettledAt: timeOf(r.SettledAt),
		ReplayOf: r.ReplayOf, Error: r.Error,
	}
	switch {
	case strings.HasPrefix(payload, tombstoneMarker):
		a.Compacted, a.PayloadSHA1 = true, payload[len(tombstoneMarker):]
	case payload != "":
		a.Payload = json.RawMessage(payload)
	}
	if idents != "" {
		a.Identities = strings.Split(idents, "\x00")
	}
	return a, nil
}

// newAdmission is the admission admit.lua writes for req as seq with its
// pinned target, time (ns), payload and identity list: what
// decodeAdmission reads back from its record (the conformance test
// Admit/ResultIsStored holds the two to each other).
func newAdmission(req backend.AdmitRequest, seq uint64, pinned, now string, payload json.RawMessage, idents string) backend.Admission {
	a := backend.Admission{
		ID: req.ID, Session: req.Session, Seq: seq, Kind: req.Kind, Producer: req.Producer,
		Principal: req.Principal, RequestID: req.RequestID, PinnedTarget: pinned,
		Status: backend.StatusQueued, AdmittedAt: timeOf(now), ReplayOf: req.ReplayOf,
		Payload: payload,
	}
	if idents != "" {
		a.Identities = strings.Split(idents, "\x00")
	}
	return a
}

// trRec is a transcript record as the scripts store it.
type trRec struct {
	ID           string `json:"id"`
	Session      string `json:"session"`
	Parent       string `json:"parent"`
	Child        string `json:"child"`
	EndedAt      string `json:"ended_at"`
	EndReason    string `json:"end_reason"`
	MessageCount int    `json:"message_count"`
	NoteCount    int    `json:"note_count"`
	CreatedAt    string `json:"created_at"`
	N            int64  `json:"n"` // creation order within the session
}

func decodeTranscript(rec string) (backend.Transcript, int64, error) {
	var r trRec
	if err := readRecord(rec, &r); err != nil {
		return backend.Transcript{}, 0, errInternalf("decode transcript record: %v", err)
	}
	return backend.Transcript{
		ID: r.ID, Session: r.Session, Parent: r.Parent, Child: r.Child,
		EndedAt: timeOf(r.EndedAt), EndReason: r.EndReason,
		MessageCount: r.MessageCount, NoteCount: r.NoteCount, CreatedAt: timeOf(r.CreatedAt),
	}, r.N, nil
}

// msgRec is a message as stored in its transcript's list; its seq is its
// position in the list.
type msgRec struct {
	Role        backend.Role   `json:"role"`
	Content     string         `json:"content"`
	AdmissionID string         `json:"admission_id,omitempty"`
	CreatedAt   string         `json:"created_at,omitempty"`
	Metadata    map[string]any `json:"metadata,omitempty"`
}

// encodeMessage writes a message record as json.Marshal does (HTML
// escaped, map keys sorted; FuzzMessageEncode compares them) with
// segmentio's encoder, several times faster: a drain writes one per note.
func encodeMessage(role backend.Role, content, admission string, at time.Time, md map[string]any) (string, error) {
	b, err := fastjson.Append(nil, &msgRec{Role: role, Content: content, AdmissionID: admission, CreatedAt: nsOf(at), Metadata: md},
		fastjson.EscapeHTML|fastjson.SortMapKeys)
	if err != nil {
		return "", backend.Errorf(backend.ErrInvalid, "redis: message metadata: %v", err)
	}
	return string(b), nil
}

func decodeMessage(transcript string, seq uint64, raw string) (backend.Message, error) {
	var r msgRec
	if err := readRecord(raw, &r); err != nil {
		return backend.Message{}, errInternalf("decode message: %v", err)
	}
	return backend.Message{
		Transcript: transcript, Seq: seq, Role: r.Role, Content: r.Content,
		AdmissionID: r.AdmissionID, CreatedAt: timeOf(r.CreatedAt), Metadata: r.Metadata,
	}, nil
}

func u64(s string) uint64 {
	n, _ := strconv.ParseUint(s, 10, 64)
	return n
}
