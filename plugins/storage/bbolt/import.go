package bbolt

import (
	"bytes"
	"context"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Import writes exported records in one transaction: all of them, or none
// when one is invalid (backend.CheckRecords) or conflicts with what the
// store holds.
func (s *Store) Import(ctx context.Context, recs []backend.Record) (backend.ImportResult, error) {
	var res backend.ImportResult
	// The records are checked whole, against the live rules and the store,
	// before the write transaction begins.
	if err := backend.CheckRecords(ctx, s, recs); err != nil {
		return res, fmt.Errorf("bbolt: import: %w", err)
	}
	err := s.updateAtomic(ctx, func(t *txn) error {
		res = backend.ImportResult{}
		for i, r := range recs {
			var (
				there bool
				err   error
			)
			switch {
			case r.Session != nil:
				there, err = t.importSession(r.Session)
			case r.Transcript != nil:
				there, err = t.importTranscript(r.Transcript)
			case r.Message != nil:
				there, err = t.importMessage(r.Message)
			case r.Admission != nil:
				there, err = t.importAdmission(r.Admission)
			case r.Tombstone != nil:
				var adm backend.Admission
				if adm, err = backend.TombstoneAdmission(r.Tombstone); err == nil {
					there, err = t.importAdmission(&adm)
				}
			default:
				err = backend.Errorf(backend.ErrInvalid, "empty record")
			}
			if err != nil {
				return fmt.Errorf("bbolt: import: %w", &backend.RecordError{Index: i, Err: err})
			}
			if there {
				res.Present++
			} else {
				res.Written++
			}
		}
		return nil
	})
	if err != nil {
		return backend.ImportResult{}, err
	}
	return res, nil
}

func (t *txn) importSession(r *backend.SessionRecord) (bool, error) {
	if err := backend.ValidateID("session", r.ID); err != nil {
		return false, err
	}
	if sb := t.sessionBucket(r.ID); sb != nil {
		_, old, err := t.session(r.ID)
		if err != nil {
			return false, err
		}
		if old.Owner != r.Owner || !sameJSON(backend.NormalGrants(old.Grants), backend.NormalGrants(r.Grants)) || old.CurrentTranscript != r.CurrentTranscript ||
			old.Epoch != r.Epoch || old.Generation != r.Generation || old.NextSeq != r.NextSeq || !old.CreatedAt.Equal(r.CreatedAt) {
			return false, backend.Errorf(backend.ErrConflict, "session %s exists with other content", r.ID)
		}
		return true, nil
	}
	sr := *r
	sr.Grants, sr.CreatedAt = backend.NormalGrants(r.Grants), utc(r.CreatedAt)
	_, err := t.createSession(&sessionRec{SessionRecord: sr})
	return false, err
}

func sameJSON(a, b any) bool {
	x, err1 := encode(a)
	y, err2 := encode(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}

func (t *txn) importTranscript(r *backend.Transcript) (bool, error) {
	if err := backend.ValidateID("transcript", r.ID); err != nil {
		return false, err
	}
	tr := *r
	tr.EndedAt, tr.CreatedAt = utc(tr.EndedAt), utc(tr.CreatedAt)
	if old, err := t.transcript(r.ID); err == nil {
		// Counters are derived from the messages, not content.
		tr.MessageCount, tr.NoteCount = old.MessageCount, old.NoteCount
		if !sameJSON(old, &tr) {
			return false, backend.Errorf(backend.ErrConflict, "transcript %s exists with other content", r.ID)
		}
		return true, nil
	}
	sb := t.sessionBucket(tr.Session)
	if sb == nil {
		return false, backend.Errorf(backend.ErrInvalid, "transcript %s: session %s not imported before it", tr.ID, tr.Session)
	}
	// The counters grow as its messages are imported, so they always
	// count the messages the store holds.
	tr.MessageCount, tr.NoteCount = 0, 0
	return false, t.createTranscript(sb, &tr)
}

func (t *txn) importMessage(r *backend.Message) (bool, error) {
	tr, err := t.transcript(r.Transcript)
	if err != nil {
		return false, backend.Errorf(backend.ErrInvalid, "message %d: transcript %s not imported before it", r.Seq, r.Transcript)
	}
	if r.Seq == 0 {
		return false, backend.Errorf(backend.ErrInvalid, "message of transcript %s: seq 0", r.Transcript)
	}
	m := *r
	m.CreatedAt = utc(m.CreatedAt)
	mb, err := t.tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(r.Transcript))
	if err != nil {
		return false, err
	}
	v, err := encodeMessage(&m)
	if err != nil {
		return false, err
	}
	if old := mb.Get(u64(m.Seq)); old != nil {
		if !bytes.Equal(old, v) {
			return false, backend.Errorf(backend.ErrConflict, "message %d of transcript %s exists with other content", m.Seq, m.Transcript)
		}
		return true, nil
	}
	last, _ := mb.Cursor().Last()
	if next := fromU64(last) + 1; m.Seq != next {
		return false, backend.Errorf(backend.ErrInvalid, "message %d of transcript %s: the next message seq is %d", m.Seq, m.Transcript, next)
	}
	if err := appending(mb).Put(u64(m.Seq), v); err != nil {
		return false, err
	}
	tr.MessageCount++
	if m.Role == backend.RoleNote {
		tr.NoteCount++
	}
	return false, t.putTranscript(tr)
}

func (t *txn) importAdmission(r *backend.Admission) (bool, error) {
	a := toAdmRec(*r)
	if old, err := t.tx.Bucket(bucketAdmissions).Get([]byte(a.ID)), error(nil); old != nil && err == nil {
		_, _, cur, err := t.admission(a.ID)
		if err != nil {
			return false, err
		}
		if !sameJSON(cur, &a) {
			return false, backend.Errorf(backend.ErrConflict, "admission %s exists with other content", a.ID)
		}
		return true, nil
	}
	sb, rec, err := t.session(a.Session)
	if err != nil {
		return false, backend.Errorf(backend.ErrInvalid, "admission %s: session %s not imported before it", a.ID, a.Session)
	}
	if a.ID == "" || a.Seq == 0 {
		return false, backend.Errorf(backend.ErrInvalid, "admission without id or seq")
	}
	if sb.Bucket(subAdmissions).Get(u64(a.Seq)) != nil {
		return false, backend.Errorf(backend.ErrConflict, "admission %s: seq %d of session %s is another admission", a.ID, a.Seq, a.Session)
	}
	if a.Kind == string(backend.KindAutomation) {
		for _, ident := range a.Identities {
			if holder := sb.Bucket(subIdentities).Get([]byte(ident)); holder != nil {
				return false, backend.Errorf(backend.ErrConflict, "admission %s: identity %q is held by admission %s", a.ID, ident, holder)
			}
		}
	}
	if a.Kind == string(backend.KindHuman) && a.RequestID != "" {
		if holder := sb.Bucket(subRequests).Get(requestKey(a.Principal, a.RequestID)); holder != nil {
			return false, backend.Errorf(backend.ErrConflict, "admission %s: request id %q is held by admission %s", a.ID, a.RequestID, holder)
		}
	}
	// An export lists a session's admissions in seq order.
	appending(sb.Bucket(subAdmissions))
	appending(sb.Bucket(subQueued))
	if a.Seq >= rec.NextSeq {
		rec.NextSeq = a.Seq + 1
	}
	status := backend.Status(a.Status)
	a.Status = "" // setStatus counts it in from nothing
	if err := t.setStatus(sb, rec, &a, status); err != nil {
		return false, err
	}
	if err := t.putAdmission(sb, &a); err != nil {
		return false, err
	}
	if err := appending(t.tx.Bucket(bucketAdmissions)).Put([]byte(a.ID), locationValue(a.Session, a.Seq)); err != nil {
		return false, err
	}
	if a.Kind == string(backend.KindAutomation) {
		for _, ident := range a.Identities {
			if err := sb.Bucket(subIdentities).Put([]byte(ident), []byte(a.ID)); err != nil {
				return false, err
			}
		}
	}
	if a.Kind == string(backend.KindHuman) && a.RequestID != "" {
		if err := sb.Bucket(subRequests).Put(requestKey(a.Principal, a.RequestID), []byte(a.ID)); err != nil {
			return false, err
		}
	}
	return false, t.putSession(sb, rec)
}
