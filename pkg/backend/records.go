package backend

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxPayloadBytes is the largest canonical payload any configuration
// accepts (4 MiB).
const MaxPayloadBytes = 4 << 20

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

// RecordError is a record refused by CheckRecords: Index is its position
// (0-based) in the records checked.
type RecordError struct {
	Index int
	Err   error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index+1, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

// RecordLookup is what CheckRecords reads of the store being imported
// into: every Store has it.
type RecordLookup interface {
	GetSession(ctx context.Context, id string, now time.Time) (Session, error)
	GetTranscript(ctx context.Context, id string) (Transcript, error)
	GetAdmission(ctx context.Context, id string) (Admission, error)
}

// CheckRecords checks an import whole, before anything is written, against
// the rules live writes obey: ids, request ids, identities and principals
// by the live rules; counters (seq, epoch, generation, next_seq) in
// 0..MaxCounter, so the store keeps room to grow; statuses, outcomes,
// modes, roles and end reasons of the contract; payloads that are JSON
// objects with a non-empty "text"; every reference present (a session
// before its transcripts, messages and admissions; a session's current
// transcript, a transcript's parent and child, a message's admission and
// an admission's delivery transcript in the records or the store);
// tombstones as admissions without a payload (TombstoneAdmission);
// messages of a transcript consecutive from 1; nothing twice in the
// records. st is the store imported into (nil: the records alone). The
// error is a *RecordError wrapping ErrInvalid, or the store's own error.
func CheckRecords(ctx context.Context, st RecordLookup, recs []Record) error {
	c := &recordCheck{
		ctx: ctx, st: st,
		sessions: map[string]*SessionRecord{}, transcripts: map[string]*Transcript{},
		admissions: map[string]bool{}, seqs: map[string]bool{}, idents: map[string]bool{},
		requests: map[string]bool{}, lastMsg: map[string]uint64{}, transBefore: map[string]bool{},
		storeSessions: map[string]bool{}, storeTranscripts: map[string]string{}, storeAdmissions: map[string]bool{},
		storeLinks: map[string]*Transcript{}, endsUp: map[string]bool{}, endsDown: map[string]bool{},
	}
	// First the records that may be referred to before they appear.
	for i, r := range recs {
		var err error
		switch {
		case r.Transcript != nil:
			if _, dup := c.transcripts[r.Transcript.ID]; dup {
				err = fmt.Errorf("transcript %s appears twice", r.Transcript.ID)
			}
			c.transcripts[r.Transcript.ID] = r.Transcript
		case r.Admission != nil, r.Tombstone != nil:
			id := ""
			if r.Admission != nil {
				id = r.Admission.ID
			} else {
				id = r.Tombstone.Admission.ID
			}
			if c.admissions[id] {
				err = fmt.Errorf("admission %s appears twice", id)
			}
			c.admissions[id] = true
		}
		if err != nil {
			return &RecordError{i, fmt.Errorf("%w: %w", err, ErrInvalid)}
		}
	}
	seen := map[string]bool{}
	for i, r := range recs {
		var err error
		switch {
		case r.Session != nil:
			if seen[r.Session.ID] {
				err = fmt.Errorf("session %s appears twice: %w", r.Session.ID, ErrInvalid)
				break
			}
			seen[r.Session.ID] = true
			err = c.session(r.Session)
		case r.Transcript != nil:
			err = c.transcript(r.Transcript)
		case r.Message != nil:
			err = c.message(r.Message)
		case r.Admission != nil:
			err = c.admission(r.Admission)
		case r.Tombstone != nil:
			var a Admission
			if a, err = TombstoneAdmission(r.Tombstone); err == nil {
				err = c.admission(&a)
			}
		default:
			err = fmt.Errorf("empty record: %w", ErrInvalid)
		}
		if err != nil {
			return &RecordError{i, err}
		}
	}
	return nil
}

type recordCheck struct {
	ctx context.Context
	st  RecordLookup

	sessions    map[string]*SessionRecord // sessions of the records so far
	transcripts map[string]*Transcript    // every transcript of the records
	admissions  map[string]bool           // every admission of the records
	seqs        map[string]bool           // session \x00 seq
	idents      map[string]bool           // session \x00 identity
	requests    map[string]bool           // session \x00 principal \x00 request id
	lastMsg     map[string]uint64         // transcript → last message seq so far
	transBefore map[string]bool           // transcripts of the records so far

	storeSessions    map[string]bool
	storeTranscripts map[string]string // id → session, "" when absent
	storeLinks       map[string]*Transcript
	storeAdmissions  map[string]bool
	endsUp, endsDown map[string]bool // transcripts whose parent (child) chain ends
}

// recordTime is one time field of a record.
type recordTime struct {
	name string
	t    time.Time
}

// writableTimes refuses a record time that cannot be stored: times are
// kept in UTC, and JSON times have four-digit years (0 to 9999).
func writableTimes(what string, ts ...recordTime) error {
	for _, x := range ts {
		if !x.t.IsZero() && !JSONTime(x.t.UTC()) {
			return invalid("%s: %s %s is outside the years 0 to 9999 in UTC", what, x.name, x.t.Format(time.RFC3339))
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalid)...)
}

func counter(what string, n uint64) error {
	if n > MaxCounter {
		return invalid("%s %d is above the largest accepted (2^53 = %d, which leaves room to grow)", what, n, uint64(MaxCounter))
	}
	return nil
}

func (c *recordCheck) inStoreSession(id string) (bool, error) {
	if c.st == nil {
		return false, nil
	}
	if ok, done := c.storeSessions[id]; done {
		return ok, nil
	}
	_, err := c.st.GetSession(c.ctx, id, time.Time{})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	c.storeSessions[id] = err == nil
	return err == nil, nil
}

// inStoreTranscript returns the session of transcript id in the store, ""
// when the store has no such transcript.
func (c *recordCheck) inStoreTranscript(id string) (string, error) {
	if c.st == nil {
		return "", nil
	}
	if s, done := c.storeTranscripts[id]; done {
		return s, nil
	}
	t, err := c.st.GetTranscript(c.ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	c.storeTranscripts[id] = t.Session
	if err != nil {
		c.storeTranscripts[id] = ""
	} else {
		c.storeLinks[id] = &t
	}
	return c.storeTranscripts[id], nil
}

// MaxLineage bounds a lineage: a chain of parents or children longer than
// this is taken for a loop (an import refuses it; a walk reports it).
const MaxLineage = 100000

// lineageLoop follows t's parents (up) or children, through the records
// and then the store, and returns the chain that comes back to a
// transcript already met, nil when the chain ends.
func (c *recordCheck) lineageLoop(t *Transcript, up bool) ([]string, error) {
	ends, link := c.endsDown, func(t *Transcript) string { return t.Child }
	if up {
		ends, link = c.endsUp, func(t *Transcript) string { return t.Parent }
	}
	chain, seen := []string{t.ID}, map[string]bool{t.ID: true}
	for cur := t; ; {
		next := link(cur)
		if next == "" || ends[next] {
			for _, id := range chain {
				ends[id] = true
			}
			return nil, nil
		}
		chain = append(chain, next)
		if seen[next] || len(chain) > MaxLineage {
			return chain, nil
		}
		seen[next] = true
		if n, ok := c.transcripts[next]; ok {
			cur = n
			continue
		}
		if _, err := c.inStoreTranscript(next); err != nil {
			return nil, err
		}
		n, ok := c.storeLinks[next]
		if !ok {
			return nil, nil // not there: refused as a reference, not as a loop
		}
		cur = n
	}
}

func (c *recordCheck) inStoreAdmission(id string) (bool, error) {
	if c.st == nil {
		return false, nil
	}
	if ok, done := c.storeAdmissions[id]; done {
		return ok, nil
	}
	_, err := c.st.GetAdmission(c.ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	c.storeAdmissions[id] = err == nil
	return err == nil, nil
}

// sessionBefore requires session id earlier in the records or in the store.
func (c *recordCheck) sessionBefore(what, id string) error {
	if err := ValidateID("session", id); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := c.sessions[id]; ok {
		return nil
	}
	ok, err := c.inStoreSession(id)
	if err != nil {
		return err
	}
	if !ok {
		return invalid("%s: session %s is neither in the store nor before it in the import", what, id)
	}
	return nil
}

// transcriptOf returns the session of transcript id, from the records or
// the store, "" when it is in neither.
func (c *recordCheck) transcriptOf(id string) (string, error) {
	if t, ok := c.transcripts[id]; ok {
		return t.Session, nil
	}
	return c.inStoreTranscript(id)
}

func (c *recordCheck) session(r *SessionRecord) error {
	if err := ValidateID("session", r.ID); err != nil {
		return err
	}
	what := "session " + r.ID
	if err := writableTimes(what, recordTime{"created_at", r.CreatedAt}); err != nil {
		return err
	}
	if err := ValidateName("owner", r.Owner); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	for i, g := range r.Grants {
		if err := CheckGrant(g); err != nil {
			return fmt.Errorf("%s: grant: %w", what, err)
		}
		if g.Principal == r.Owner {
			return invalid("%s: grant to %q, its owner", what, g.Principal)
		}
		if slices.ContainsFunc(r.Grants[:i], func(o Grant) bool { return o.Principal == g.Principal }) {
			return invalid("%s: grant to %q appears twice", what, g.Principal)
		}
	}
	if len(r.Grants) > MaxGrants {
		return invalid("%s: %d grants, more than %d", what, len(r.Grants), MaxGrants)
	}
	if err := ValidateID("current transcript", r.CurrentTranscript); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	owner, err := c.transcriptOf(r.CurrentTranscript)
	if err != nil {
		return err
	}
	if owner == "" {
		return invalid("%s: current transcript %s is neither in the import nor in the store", what, r.CurrentTranscript)
	}
	if owner != r.ID {
		return invalid("%s: current transcript %s belongs to session %s", what, r.CurrentTranscript, owner)
	}
	for _, f := range []struct {
		name string
		n    uint64
	}{{"epoch", r.Epoch}, {"generation", r.Generation}, {"next_seq", r.NextSeq}} {
		if err := counter(what+": "+f.name, f.n); err != nil {
			return err
		}
	}
	c.sessions[r.ID] = r
	return nil
}

func validReason(r string) bool {
	return r == ReasonCompression || slices.Contains(CloseReasons, r)
}

func (c *recordCheck) transcript(t *Transcript) error {
	if err := ValidateID("transcript", t.ID); err != nil {
		return err
	}
	what := "transcript " + t.ID
	if err := writableTimes(what, recordTime{"created_at", t.CreatedAt}, recordTime{"ended_at", t.EndedAt}); err != nil {
		return err
	}
	if err := c.sessionBefore(what, t.Session); err != nil {
		return err
	}
	c.transBefore[t.ID] = true
	for _, ref := range []struct{ name, id string }{{"parent", t.Parent}, {"child", t.Child}} {
		if ref.id == "" {
			continue
		}
		if err := ValidateID(ref.name, ref.id); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		owner, err := c.transcriptOf(ref.id)
		if err != nil {
			return err
		}
		if owner == "" {
			return invalid("%s: %s %s is neither in the import nor in the store", what, ref.name, ref.id)
		}
		if ref.id == t.ID {
			return invalid("%s: its own %s", what, ref.name)
		}
	}
	for _, up := range []bool{true, false} {
		chain, err := c.lineageLoop(t, up)
		if err != nil {
			return err
		}
		if chain != nil {
			name := "child"
			if up {
				name = "parent"
			}
			return invalid("%s: the lineage loops: %s (each the %s of the one before, in the import or the store)",
				what, strings.Join(chain, " → "), name)
		}
	}
	switch {
	case t.EndedAt.IsZero() && t.EndReason != "":
		return invalid("%s: end_reason %q without ended_at", what, t.EndReason)
	case !t.EndedAt.IsZero() && !validReason(t.EndReason):
		return invalid("%s: end_reason %q is not compression or one of %v", what, t.EndReason, CloseReasons)
	case t.MessageCount < 0 || t.NoteCount < 0 || t.NoteCount > t.MessageCount:
		return invalid("%s: message_count %d and note_count %d are not counts", what, t.MessageCount, t.NoteCount)
	case uint64(t.MessageCount) > MaxCounter:
		return counter(what+": message_count", uint64(t.MessageCount))
	}
	return nil
}

func (c *recordCheck) message(m *Message) error {
	if err := ValidateID("message transcript", m.Transcript); err != nil {
		return err
	}
	what := fmt.Sprintf("message %d of transcript %s", m.Seq, m.Transcript)
	if err := writableTimes(what, recordTime{"created_at", m.CreatedAt}); err != nil {
		return err
	}
	// Its transcript must come before it (or be in the store).
	if _, started := c.lastMsg[m.Transcript]; !started {
		inStore, err := c.inStoreTranscript(m.Transcript)
		if err != nil {
			return err
		}
		if !c.transBefore[m.Transcript] && inStore == "" {
			return invalid("%s: transcript %s is neither in the store nor before it in the import", what, m.Transcript)
		}
		// A transcript new to the store starts at message 1; for one the
		// store holds, the store checks the first seq against its messages.
		c.lastMsg[m.Transcript] = 0
		if inStore != "" && m.Seq > 0 {
			c.lastMsg[m.Transcript] = m.Seq - 1
		}
	}
	if m.Seq == 0 {
		return invalid("%s: seq 0 (messages count from 1)", what)
	}
	if err := counter(what+": seq", m.Seq); err != nil {
		return err
	}
	if want := c.lastMsg[m.Transcript] + 1; m.Seq != want {
		return invalid("%s: the next message of the transcript is %d", what, want)
	}
	c.lastMsg[m.Transcript] = m.Seq
	switch m.Role {
	case RoleUser, RoleAssistant, RoleNote:
	default:
		return invalid("%s: role %q is not user, assistant or note", what, m.Role)
	}
	if m.AdmissionID != "" {
		if err := ValidateAdmissionID(m.AdmissionID); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if !c.admissions[m.AdmissionID] {
			ok, err := c.inStoreAdmission(m.AdmissionID)
			if err != nil {
				return err
			}
			if !ok {
				return invalid("%s: admission %s is neither in the import nor in the store", what, m.AdmissionID)
			}
		}
	}
	return nil
}

func (c *recordCheck) admission(a *Admission) error {
	if err := ValidateAdmissionID(a.ID); err != nil {
		return err
	}
	what := "admission " + a.ID
	if err := writableTimes(what, recordTime{"admitted_at", a.AdmittedAt}, recordTime{"started_at", a.StartedAt}, recordTime{"settled_at", a.SettledAt}); err != nil {
		return err
	}
	if err := c.sessionBefore(what, a.Session); err != nil {
		return err
	}
	if a.Seq == 0 {
		return invalid("%s: seq 0 (seqs count from 1)", what)
	}
	for _, f := range []struct {
		name string
		n    uint64
	}{{"seq", a.Seq}, {"epoch", a.Epoch}, {"generation", a.Generation}} {
		if err := counter(what+": "+f.name, f.n); err != nil {
			return err
		}
	}
	if s, ok := c.sessions[a.Session]; ok {
		switch {
		case a.Seq >= s.NextSeq:
			return invalid("%s: seq %d is not below its session's next_seq %d", what, a.Seq, s.NextSeq)
		case a.Epoch > s.Epoch:
			return invalid("%s: epoch %d is above its session's epoch %d", what, a.Epoch, s.Epoch)
		case a.Generation > s.Generation:
			return invalid("%s: generation %d is above its session's generation %d", what, a.Generation, s.Generation)
		}
	}
	key := fmt.Sprintf("%s\x00%d", a.Session, a.Seq)
	if c.seqs[key] {
		return invalid("%s: seq %d of session %s appears twice", what, a.Seq, a.Session)
	}
	c.seqs[key] = true
	if err := ValidatePrincipal(a.Principal); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	switch a.Kind {
	case KindHuman:
		if a.Producer != "" || len(a.Identities) > 0 {
			return invalid("%s: human input with a producer or identities", what)
		}
		if a.RequestID != "" {
			if err := ValidateRequestID(a.RequestID); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			k := a.Session + "\x00" + a.Principal + "\x00" + a.RequestID
			if c.requests[k] {
				return invalid("%s: request id %q of principal %q appears twice in session %s", what, a.RequestID, a.Principal, a.Session)
			}
			c.requests[k] = true
		}
	case KindAutomation:
		if err := ValidateProducer(a.Producer); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		if a.RequestID != "" {
			return invalid("%s: automation input with a request id", what)
		}
		if len(a.Identities) == 0 {
			return invalid("%s: automation input without identities", what)
		}
		for _, id := range a.Identities {
			if err := ValidateToken("identity", id); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			k := a.Session + "\x00" + id
			if c.idents[k] {
				return invalid("%s: identity %q appears twice in session %s", what, id, a.Session)
			}
			c.idents[k] = true
		}
	default:
		return invalid("%s: kind %q is not human or automation", what, a.Kind)
	}
	if !a.Compacted { // a tombstone keeps its payload's digest alone
		if err := checkPayload(a.Payload); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if a.PinnedTarget != "" {
		if err := ValidateID("pinned target", a.PinnedTarget); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
	}
	if a.DeliveredTo != "" {
		if err := ValidateID("delivered_to", a.DeliveredTo); err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		owner, err := c.transcriptOf(a.DeliveredTo)
		if err != nil {
			return err
		}
		if owner == "" {
			return invalid("%s: delivered_to %s is neither in the import nor in the store", what, a.DeliveredTo)
		}
	}
	if a.ReplayOf != "" {
		if err := ValidateAdmissionID(a.ReplayOf); err != nil {
			return fmt.Errorf("%s: replay_of: %w", what, err)
		}
	}
	switch a.Status {
	case StatusQueued, StatusRunning, StatusUnknown:
		if a.Outcome != "" {
			return invalid("%s: status %s with outcome %q (an outcome is set when done)", what, a.Status, a.Outcome)
		}
	case StatusDone:
		switch a.Outcome {
		case OutcomeCompleted, OutcomeFailed, OutcomeInterrupted, OutcomeCancelled:
		default:
			return invalid("%s: status done with outcome %q, not completed, failed, interrupted or cancelled", what, a.Outcome)
		}
	default:
		return invalid("%s: status %q is not queued, running, unknown or done", what, a.Status)
	}
	switch a.Mode {
	case "", ModeTurn, ModeNote:
	default:
		return invalid("%s: mode %q is not turn or note", what, a.Mode)
	}
	if a.AdmittedAt.IsZero() {
		return invalid("%s: admitted_at is missing", what)
	}
	return nil
}

// checkPayload requires a strict JSON object with a non-empty string
// "text", at most MaxPayloadBytes.
func checkPayload(p json.RawMessage) error {
	if len(p) > MaxPayloadBytes {
		return invalid("payload is %d bytes, more than %d", len(p), MaxPayloadBytes)
	}
	if err := CheckJSON(p); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(p, &m); err != nil || m == nil {
		return invalid("payload is not a JSON object")
	}
	var text string
	if err := json.Unmarshal(m["text"], &text); err != nil || text == "" {
		return invalid("payload has no non-empty string \"text\"")
	}
	return nil
}
