package backend

import (
	"bytes"
	"encoding/json"
	"strconv"
	"time"
)

// JSON shapes of docs/contract.md §11. Absent values (empty strings, zero times) are
// null; times are RFC 3339 UTC.

func str(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func unstr(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

func tm(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}

func untm(p *time.Time) time.Time {
	if p == nil {
		return time.Time{}
	}
	return p.UTC()
}

type admissionJSON struct {
	ID           string          `json:"id"`
	Session      string          `json:"session"`
	Seq          uint64          `json:"seq"`
	Kind         Kind            `json:"kind"`
	Producer     *string         `json:"producer"`
	Principal    *string         `json:"principal"`
	RequestID    *string         `json:"request_id"`
	Identities   []string        `json:"identities"`
	Payload      json.RawMessage `json:"payload"`
	PinnedTarget *string         `json:"pinned_target"`
	DeliveredTo  *string         `json:"delivered_to"`
	Status       Status          `json:"status"`
	Outcome      *string         `json:"outcome"`
	Mode         *string         `json:"mode"`
	Epoch        uint64          `json:"epoch"`
	Generation   uint64          `json:"generation"`
	AdmittedAt   *time.Time      `json:"admitted_at"`
	StartedAt    *time.Time      `json:"started_at"`
	SettledAt    *time.Time      `json:"settled_at"`
	ReplayOf     *string         `json:"replay_of"`
	Error        *string         `json:"error"`
}

// JSONTime reports whether encoding/json can write t: its year (in its
// own location) must be within [0, 9999]. (A faster encoder may write
// other years too, which no JSON decoder of a time reads back.)
func JSONTime(t time.Time) bool {
	y := t.Year()
	return y >= 0 && y <= 9999
}

// MarshalJSON writes the contract's admission shape: exactly the bytes
// json.Marshal writes for it (FuzzAdmissionJSON compares the two),
// appended by hand, since every admit result, batch line and listing
// prints admissions. What it cannot write as json.Marshal would (a time
// outside years 0-9999, a payload that is not valid JSON) goes through
// json.Marshal, for its error.
func (a Admission) MarshalJSON() ([]byte, error) {
	if b, ok := a.appendJSON(make([]byte, 0, 512+len(a.Payload))); ok {
		return b, nil
	}
	return a.marshalSlow()
}

// marshalSlow is json.Marshal of the admission's shape.
func (a Admission) marshalSlow() ([]byte, error) {
	ids := a.Identities
	if ids == nil {
		ids = []string{}
	}
	return json.Marshal(admissionJSON{
		ID: a.ID, Session: a.Session, Seq: a.Seq, Kind: a.Kind,
		Producer: str(a.Producer), Principal: str(a.Principal), RequestID: str(a.RequestID),
		Identities: ids, Payload: a.payloadJSON(),
		PinnedTarget: str(a.PinnedTarget), DeliveredTo: str(a.DeliveredTo),
		Status: a.Status, Outcome: str(string(a.Outcome)), Mode: str(string(a.Mode)),
		Epoch: a.Epoch, Generation: a.Generation,
		AdmittedAt: tm(a.AdmittedAt), StartedAt: tm(a.StartedAt), SettledAt: tm(a.SettledAt),
		ReplayOf: str(a.ReplayOf), Error: str(a.Error),
	})
}

// payloadJSON is the payload as the admission shape shows it.
func (a Admission) payloadJSON() json.RawMessage {
	switch {
	case a.Compacted:
		return json.RawMessage("null") // a tombstone: the payload was compacted away
	case len(a.Payload) == 0:
		return json.RawMessage("{}")
	}
	return a.Payload
}

// appendJSON appends the admission's shape as json.Marshal writes it, and
// reports false where it cannot.
func (a Admission) appendJSON(b []byte) ([]byte, bool) {
	b = append(b, `{"id":`...)
	b = appendQuoted(b, a.ID, quoteMarshal)
	b = append(b, `,"session":`...)
	b = appendQuoted(b, a.Session, quoteMarshal)
	b = append(b, `,"seq":`...)
	b = strconv.AppendUint(b, a.Seq, 10)
	b = append(b, `,"kind":`...)
	b = appendQuoted(b, string(a.Kind), quoteMarshal)
	b = append(b, `,"producer":`...)
	b = appendOptString(b, a.Producer)
	b = append(b, `,"principal":`...)
	b = appendOptString(b, a.Principal)
	b = append(b, `,"request_id":`...)
	b = appendOptString(b, a.RequestID)
	b = append(b, `,"identities":[`...)
	for i, id := range a.Identities {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendQuoted(b, id, quoteMarshal)
	}
	b = append(b, `],"payload":`...)
	// json.Marshal validates a json.RawMessage, compacts it and escapes
	// <, >, &, U+2028 and U+2029 in its strings.
	payload := a.payloadJSON()
	start := len(b)
	buf := bytes.NewBuffer(b)
	if json.Compact(buf, payload) != nil {
		return nil, false
	}
	b = buf.Bytes()
	if bytes.ContainsAny(b[start:], "<>&\u2028\u2029") {
		var esc bytes.Buffer
		json.HTMLEscape(&esc, b[start:])
		b = append(b[:start], esc.Bytes()...)
	}
	b = append(b, `,"pinned_target":`...)
	b = appendOptString(b, a.PinnedTarget)
	b = append(b, `,"delivered_to":`...)
	b = appendOptString(b, a.DeliveredTo)
	b = append(b, `,"status":`...)
	b = appendQuoted(b, string(a.Status), quoteMarshal)
	b = append(b, `,"outcome":`...)
	b = appendOptString(b, string(a.Outcome))
	b = append(b, `,"mode":`...)
	b = appendOptString(b, string(a.Mode))
	b = append(b, `,"epoch":`...)
	b = strconv.AppendUint(b, a.Epoch, 10)
	b = append(b, `,"generation":`...)
	b = strconv.AppendUint(b, a.Generation, 10)
	var ok bool
	for _, f := range [...]struct {
		name string
		t    time.Time
	}{{`,"admitted_at":`, a.AdmittedAt}, {`,"started_at":`, a.StartedAt}, {`,"settled_at":`, a.SettledAt}} {
		b = append(b, f.name...)
		if b, ok = appendOptTime(b, f.t); !ok {
			return nil, false
		}
	}
	b = append(b, `,"replay_of":`...)
	b = appendOptString(b, a.ReplayOf)
	b = append(b, `,"error":`...)
	b = appendOptString(b, a.Error)
	return append(b, '}'), true
}

// appendOptString appends s as json.Marshal writes a *string: null for "".
func appendOptString(b []byte, s string) []byte {
	if s == "" {
		return append(b, "null"...)
	}
	return appendQuoted(b, s, quoteMarshal)
}

// appendOptTime appends t in UTC as json.Marshal writes a *time.Time (null
// for the zero time), and reports false for a year it refuses.
func appendOptTime(b []byte, t time.Time) ([]byte, bool) {
	if t.IsZero() {
		return append(b, "null"...), true
	}
	u := t.UTC()
	if !JSONTime(u) {
		return nil, false
	}
	b = append(b, '"')
	b = u.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

// UnmarshalJSON reads the contract's admission shape.
func (a *Admission) UnmarshalJSON(b []byte) error {
	var j admissionJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*a = Admission{
		ID: j.ID, Session: j.Session, Seq: j.Seq, Kind: j.Kind,
		Producer: unstr(j.Producer), Principal: unstr(j.Principal), RequestID: unstr(j.RequestID),
		Identities: j.Identities, Payload: j.Payload,
		PinnedTarget: unstr(j.PinnedTarget), DeliveredTo: unstr(j.DeliveredTo),
		Status: j.Status, Outcome: Outcome(unstr(j.Outcome)), Mode: Mode(unstr(j.Mode)),
		Epoch: j.Epoch, Generation: j.Generation,
		AdmittedAt: untm(j.AdmittedAt), StartedAt: untm(j.StartedAt), SettledAt: untm(j.SettledAt),
		ReplayOf: unstr(j.ReplayOf), Error: unstr(j.Error),
	}
	if len(a.Identities) == 0 {
		a.Identities = nil
	}
	return nil
}

type sessionJSON struct {
	ID                string     `json:"id"`
	Owner             string     `json:"owner"`
	CurrentTranscript string     `json:"current_transcript"`
	State             string     `json:"state"`
	Depth             int        `json:"depth"`
	Viewers           int        `json:"viewers"`
	Epoch             uint64     `json:"epoch"`
	LeaseHolder       *string    `json:"lease_holder"`
	LeaseExpiresAt    *time.Time `json:"lease_expires_at"`
	Grants            []Grant    `json:"grants"`
}

// MarshalJSON writes the contract's session shape. A lease that has expired
// is still shown with its holder and expiry: the reader compares the time.
func (s Session) MarshalJSON() ([]byte, error) {
	return json.Marshal(sessionJSON{
		ID: s.ID, Owner: s.Owner, CurrentTranscript: s.CurrentTranscript,
		State: s.State(), Depth: s.Queued, Viewers: s.Viewers, Epoch: s.Epoch,
		LeaseHolder: str(s.LeaseHolder), LeaseExpiresAt: tm(s.LeaseExpiresAt),
		Grants: NormalGrants(s.Grants),
	})
}

type transcriptJSON struct {
	ID           string     `json:"id"`
	Session      string     `json:"session"`
	Parent       *string    `json:"parent"`
	Child        *string    `json:"child"`
	EndedAt      *time.Time `json:"ended_at"`
	EndReason    *string    `json:"end_reason"`
	MessageCount int        `json:"message_count"`
	NoteCount    int        `json:"note_count"`
	CreatedAt    *time.Time `json:"created_at"`
}

// MarshalJSON writes the contract's transcript shape, plus note_count and
// created_at.
func (t Transcript) MarshalJSON() ([]byte, error) {
	return json.Marshal(transcriptJSON{
		ID: t.ID, Session: t.Session, Parent: str(t.Parent), Child: str(t.Child),
		EndedAt: tm(t.EndedAt), EndReason: str(t.EndReason),
		MessageCount: t.MessageCount, NoteCount: t.NoteCount, CreatedAt: tm(t.CreatedAt),
	})
}

// UnmarshalJSON reads the transcript shape.
func (t *Transcript) UnmarshalJSON(b []byte) error {
	var j transcriptJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*t = Transcript{
		ID: j.ID, Session: j.Session, Parent: unstr(j.Parent), Child: unstr(j.Child),
		EndedAt: untm(j.EndedAt), EndReason: unstr(j.EndReason),
		MessageCount: j.MessageCount, NoteCount: j.NoteCount, CreatedAt: untm(j.CreatedAt),
	}
	return nil
}

type messageJSON struct {
	Transcript  string         `json:"transcript"`
	Seq         uint64         `json:"seq"`
	Role        Role           `json:"role"`
	Content     string         `json:"content"`
	AdmissionID *string        `json:"admission_id"`
	CreatedAt   *time.Time     `json:"created_at"`
	Metadata    map[string]any `json:"metadata"`
}

// MarshalJSON writes the contract's message shape.
func (m Message) MarshalJSON() ([]byte, error) {
	md := m.Metadata
	if md == nil {
		md = map[string]any{}
	}
	return json.Marshal(messageJSON{
		Transcript: m.Transcript, Seq: m.Seq, Role: m.Role, Content: m.Content,
		AdmissionID: str(m.AdmissionID), CreatedAt: tm(m.CreatedAt), Metadata: md,
	})
}

// UnmarshalJSON reads the message shape.
func (m *Message) UnmarshalJSON(b []byte) error {
	var j messageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	*m = Message{
		Transcript: j.Transcript, Seq: j.Seq, Role: j.Role, Content: j.Content,
		AdmissionID: unstr(j.AdmissionID), CreatedAt: untm(j.CreatedAt), Metadata: j.Metadata,
	}
	if len(m.Metadata) == 0 {
		m.Metadata = nil
	}
	return nil
}

type viewerJSON struct {
	ID        string    `json:"id"`
	Session   string    `json:"session"`
	ExpiresAt time.Time `json:"expires_at"`
}

// MarshalJSON writes a viewer.
func (v Viewer) MarshalJSON() ([]byte, error) {
	return json.Marshal(viewerJSON{ID: v.ID, Session: v.Session, ExpiresAt: v.ExpiresAt.UTC()})
}
