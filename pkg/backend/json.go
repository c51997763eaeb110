package backend

import (
	"encoding/json"
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

// MarshalJSON writes the contract's admission shape.
func (a Admission) MarshalJSON() ([]byte, error) {
	ids := a.Identities
	if ids == nil {
		ids = []string{}
	}
	payload := a.Payload
	switch {
	case a.Compacted:
		payload = json.RawMessage("null") // a tombstone: the payload was compacted away
	case len(payload) == 0:
		payload = json.RawMessage("{}")
	}
	return json.Marshal(admissionJSON{
		ID: a.ID, Session: a.Session, Seq: a.Seq, Kind: a.Kind,
		Producer: str(a.Producer), Principal: str(a.Principal), RequestID: str(a.RequestID),
		Identities: ids, Payload: payload,
		PinnedTarget: str(a.PinnedTarget), DeliveredTo: str(a.DeliveredTo),
		Status: a.Status, Outcome: str(string(a.Outcome)), Mode: str(string(a.Mode)),
		Epoch: a.Epoch, Generation: a.Generation,
		AdmittedAt: tm(a.AdmittedAt), StartedAt: tm(a.StartedAt), SettledAt: tm(a.SettledAt),
		ReplayOf: str(a.ReplayOf), Error: str(a.Error),
	})
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
