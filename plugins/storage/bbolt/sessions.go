package bbolt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"slices"
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

// Grant gives g.Principal g.Role on the session, replacing its grant.
func (s *Store) Grant(ctx context.Context, session string, g backend.Grant) error {
	if err := backend.CheckGrant(g); err != nil {
		return fmt.Errorf("bbolt: grant on session %s: %w", session, err)
	}
	return s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if g.Principal == rec.Owner {
			return backend.Errorf(backend.ErrInvalid, "bbolt: grant on session %s: %q is its owner", session, g.Principal)
		}
		grants := slices.DeleteFunc(slices.Clone(rec.Grants), func(o backend.Grant) bool { return o.Principal == g.Principal })
		if len(grants) >= backend.MaxGrants {
			return backend.Errorf(backend.ErrConflict, "bbolt: grant on session %s: it has %d grants, the limit", session, backend.MaxGrants)
		}
		rec.Grants = backend.NormalGrants(append(grants, g))
		return t.putSession(sb, rec)
	})
}

// Revoke removes principal's grant on the session.
func (s *Store) Revoke(ctx context.Context, session, principal string) error {
	return s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		n := len(rec.Grants)
		rec.Grants = slices.DeleteFunc(rec.Grants, func(o backend.Grant) bool { return o.Principal == principal })
		if len(rec.Grants) == n {
			return backend.Errorf(backend.ErrNotFound, "bbolt: revoke on session %s: %q has no grant", session, principal)
		}
		return t.putSession(sb, rec)
	})
}

func newViewerID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AddViewer adds a viewer lease; a ttl of 0 means backend.DefaultViewerTTL.
func (s *Store) AddViewer(ctx context.Context, session string, ttl time.Duration, now time.Time) (backend.Viewer, error) {
	now = nowOr(now)
	id := newViewerID()
	v := backend.Viewer{ID: id, Session: session, ExpiresAt: now.Add(ttlOr(ttl, backend.DefaultViewerTTL))}
	err := s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, _ *sessionRec) error {
		t.pruneViewers(sb, now)
		t.touch(session)
		return sb.Bucket(subViewers).Put([]byte(id), u64(uint64(v.ExpiresAt.UnixNano())))
	})
	if err != nil {
		return backend.Viewer{}, err
	}
	return v, nil
}

// pruneViewers drops viewers expired at now.
func (t *txn) pruneViewers(sb *bolt.Bucket, now time.Time) {
	vb := sb.Bucket(subViewers)
	var dead [][]byte
	_ = vb.ForEach(func(k, v []byte) error {
		if int64(fromU64(v)) <= now.UnixNano() {
			dead = append(dead, slices.Clone(k))
		}
		return nil
	})
	for _, k := range dead {
		_ = vb.Delete(k)
	}
}

// RenewViewer extends a live viewer.
func (s *Store) RenewViewer(ctx context.Context, session, viewerID string, ttl time.Duration, now time.Time) (backend.Viewer, error) {
	now = nowOr(now)
	v := backend.Viewer{ID: viewerID, Session: session, ExpiresAt: now.Add(ttlOr(ttl, backend.DefaultViewerTTL))}
	err := s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, _ *sessionRec) error {
		if !liveViewer(sb, viewerID, now) {
			return backend.Errorf(backend.ErrNotFound, "bbolt: renew viewer %s of session %s", viewerID, session)
		}
		t.touch(session)
		return sb.Bucket(subViewers).Put([]byte(viewerID), u64(uint64(v.ExpiresAt.UnixNano())))
	})
	if err != nil {
		return backend.Viewer{}, err
	}
	return v, nil
}

// liveViewer reports whether the viewer is there and unexpired at now.
func liveViewer(sb *bolt.Bucket, viewerID string, now time.Time) bool {
	exp := sb.Bucket(subViewers).Get([]byte(viewerID))
	return exp != nil && int64(fromU64(exp)) > now.UnixNano()
}

// RemoveViewer ends a viewer; ErrNotFound when it is not there or has
// expired (an expired one is left for the next AddViewer to prune, so a
// refusal writes nothing).
func (s *Store) RemoveViewer(ctx context.Context, session, viewerID string) error {
	now := time.Now()
	return s.updateSession(ctx, session, func(t *txn, sb *bolt.Bucket, _ *sessionRec) error {
		if !liveViewer(sb, viewerID, now) {
			return backend.Errorf(backend.ErrNotFound, "bbolt: remove viewer %s of session %s", viewerID, session)
		}
		t.touch(session)
		return sb.Bucket(subViewers).Delete([]byte(viewerID))
	})
}

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
