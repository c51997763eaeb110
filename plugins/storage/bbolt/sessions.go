package bbolt

import (
	"context"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// OpenSession creates a session and its first transcript (named after it).
func (s *Store) OpenSession(ctx context.Context, req backend.OpenSessionRequest) (backend.Session, bool, error) {
	var (
		out     backend.Session
		created bool
	)
	if err := backend.ValidateID("session", req.ID); err != nil {
		return out, false, err
	}
	if err := backend.ValidateName("owner", req.Owner); err != nil {
		return out, false, err
	}
	err := s.update(ctx, func(t *txn) error {
		created = false
		if sb, rec, err := t.session(req.ID); err == nil {
			out, err = t.sessionView(sb, rec, nowOr(req.Now))
			return err
		}
		if t.transcriptExists(req.ID) {
			return backend.Errorf(backend.ErrConflict, "bbolt: open session %s: a transcript of another session has that id", req.ID)
		}
		if _, err := t.newSession(req.ID, req.Owner, nowOr(req.Now)); err != nil {
			return err
		}
		sb, rec, err := t.session(req.ID)
		if err != nil {
			return err
		}
		created = true
		out, err = t.sessionView(sb, rec, nowOr(req.Now))
		return err
	})
	return out, created, err
}

// newSession writes a session owned by owner with its first transcript.
// The caller has checked that neither exists.
func (t *txn) newSession(id, owner string, now time.Time) (*sessionRec, error) {
	rec := &sessionRec{SessionRecord: backend.SessionRecord{ID: id, Owner: owner, CurrentTranscript: id, NextSeq: 1, CreatedAt: now}}
	sb, err := t.createSession(rec)
	if err != nil {
		return nil, err
	}
	return rec, t.createTranscript(sb, &backend.Transcript{ID: id, Session: id, CreatedAt: now})
}

// GetSession returns a session with its counters and live viewers.
func (s *Store) GetSession(ctx context.Context, id string, now time.Time) (backend.Session, error) {
	now = nowOr(now)
	var out backend.Session
	err := s.view(ctx, func(t *txn) error {
		sb, rec, err := t.session(id)
		if err != nil {
			return err
		}
		out, err = t.sessionView(sb, rec, now)
		return err
	})
	return out, err
}

// ListSessions returns every session in id order.
func (s *Store) ListSessions(ctx context.Context, now time.Time) ([]backend.Session, error) {
	now = nowOr(now)
	var out []backend.Session
	err := s.view(ctx, func(t *txn) error {
		out = nil
		return t.eachSession(func(sb *bolt.Bucket, rec *sessionRec) error {
			sv, err := t.sessionView(sb, rec, now)
			out = append(out, sv)
			return err
		})
	})
	return out, err
}
