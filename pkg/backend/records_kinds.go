package backend

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
)

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
