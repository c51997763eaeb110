package bbolt

import (
	"context"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// GetTranscript returns one transcript.
func (s *Store) GetTranscript(ctx context.Context, id string) (backend.Transcript, error) {
	var out backend.Transcript
	err := s.view(ctx, func(t *txn) error {
		tr, err := t.transcript(id)
		if err != nil {
			return err
		}
		out = *tr
		return nil
	})
	return out, err
}

// ListMessages returns a transcript's messages after afterSeq, at most limit.
func (s *Store) ListMessages(ctx context.Context, transcript string, afterSeq uint64, limit int) ([]backend.Message, error) {
	var out []backend.Message
	err := s.view(ctx, func(t *txn) error {
		out = nil
		if !t.transcriptExists(transcript) {
			return backend.Errorf(backend.ErrNotFound, "transcript %s", transcript)
		}
		mb := t.tx.Bucket(bucketMessages).Bucket([]byte(transcript))
		if mb == nil {
			return nil
		}
		c := mb.Cursor()
		for k, v := c.Seek(u64(afterSeq + 1)); k != nil; k, v = c.Next() {
			if limit > 0 && len(out) >= limit {
				break
			}
			var m backend.Message
			if err := decode("message", v, &m); err != nil {
				return err
			}
			out = append(out, m)
		}
		return nil
	})
	return out, err
}

// CloseSession ends the current transcript of an idle session.
func (s *Store) CloseSession(ctx context.Context, session, reason string, now time.Time) (backend.Transcript, error) {
	if !slices.Contains(backend.CloseReasons, reason) {
		return backend.Transcript{}, backend.Errorf(backend.ErrInvalid, "bbolt: close session %s: reason %q is not one of %v", session, reason, backend.CloseReasons)
	}
	now = nowOr(now)
	var out backend.Transcript
	err := s.updateSession(ctx, session, func(t *txn, _ *bolt.Bucket, rec *sessionRec) error {
		tr, err := t.transcript(rec.CurrentTranscript)
		if err != nil {
			return err
		}
		if tr.Ended() {
			return backend.Errorf(backend.ErrClosed, "bbolt: close session %s", session)
		}
		if rec.Queued+rec.Running+rec.Unknown > 0 {
			return backend.Errorf(backend.ErrBusy, "bbolt: close session %s: %d queued, %d running, %d unknown", session, rec.Queued, rec.Running, rec.Unknown)
		}
		tr.EndedAt, tr.EndReason = now, reason
		if err := t.putTranscript(tr); err != nil {
			return err
		}
		out = *tr
		return nil
	})
	return out, err
}

// Compress ends the current transcript with reason compression and makes
// child, a new transcript continuing it, current. It returns the child.
func (s *Store) Compress(ctx context.Context, session, child string, now time.Time) (backend.Transcript, error) {
	if err := backend.ValidateID("transcript", child); err != nil {
		return backend.Transcript{}, err
	}
	now = nowOr(now)
	var out backend.Transcript
	err := s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if t.transcriptExists(child) {
			return backend.Errorf(backend.ErrConflict, "bbolt: compress session %s: transcript %s exists", session, child)
		}
		cur, err := t.transcript(rec.CurrentTranscript)
		if err != nil {
			return err
		}
		if cur.Ended() {
			return backend.Errorf(backend.ErrClosed, "bbolt: compress session %s: transcript %s ended", session, cur.ID)
		}
		cur.EndedAt, cur.EndReason, cur.Child = now, backend.ReasonCompression, child
		if err := t.putTranscript(cur); err != nil {
			return err
		}
		nt := backend.Transcript{ID: child, Session: session, Parent: cur.ID, CreatedAt: now}
		if err := t.createTranscript(sb, &nt); err != nil {
			return err
		}
		rec.CurrentTranscript = child
		out = nt
		return t.putSession(sb, rec)
	})
	return out, err
}

// Switch makes transcript tid current: one of the session's own, or a new
// empty one.
func (s *Store) Switch(ctx context.Context, session, tid string, now time.Time) (backend.Transcript, error) {
	if err := backend.ValidateID("transcript", tid); err != nil {
		return backend.Transcript{}, err
	}
	now = nowOr(now)
	var out backend.Transcript
	err := s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		tr, err := t.transcript(tid)
		switch {
		case err == nil && tr.Session != session:
			return backend.Errorf(backend.ErrConflict, "bbolt: switch session %s: transcript %s belongs to session %s", session, tid, tr.Session)
		case err == nil:
		case backend.CodeOf(err) == backend.CodeNotFound:
			tr = &backend.Transcript{ID: tid, Session: session, CreatedAt: now}
			if err := t.createTranscript(sb, tr); err != nil {
				return err
			}
		default:
			return err
		}
		rec.CurrentTranscript = tid
		out = *tr
		return t.putSession(sb, rec)
	})
	return out, err
}
