package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// newID returns 128 random bits in hex: a viewer id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// AddViewer adds a viewer lease of ttl on the session.
func (s *Store) AddViewer(ctx context.Context, session string, ttl time.Duration, now time.Time) (backend.Viewer, error) {
	return s.viewer(ctx, session, newID(), ttl, now, false)
}

// RenewViewer extends a live viewer lease.
func (s *Store) RenewViewer(ctx context.Context, session, viewerID string, ttl time.Duration, now time.Time) (backend.Viewer, error) {
	return s.viewer(ctx, session, viewerID, ttl, now, true)
}

func (s *Store) viewer(ctx context.Context, session, id string, ttl time.Duration, now time.Time, renew bool) (backend.Viewer, error) {
	now = nowOr(now)
	exp := now.Add(ttlOr(ttl, backend.DefaultViewerTTL))
	renewFlag := "0"
	op := "add viewer to"
	if renew {
		renewFlag, op = "1", "renew viewer "+id+" of"
	}
	r, err := s.eval(ctx, scriptAddViewer, []string{s.k.session(session), s.k.viewers(session), s.k.viewerExpiry(session)},
		s.k.changes(), session, id, nsOf(exp), exp.UnixMilli(), nsOf(now), now.UnixMilli(), renewFlag)
	if err != nil {
		return backend.Viewer{}, s.wrap(op+" "+session, err)
	}
	if err := s.scriptErr(r, op, "session "+session); err != nil {
		return backend.Viewer{}, err
	}
	return backend.Viewer{ID: id, Session: session, ExpiresAt: exp.UTC()}, nil
}

// RemoveViewer ends a viewer lease; ErrNotFound when it is gone or expired.
func (s *Store) RemoveViewer(ctx context.Context, session, viewerID string) error {
	r, err := s.eval(ctx, scriptRemoveViewer, []string{s.k.session(session), s.k.viewers(session), s.k.viewerExpiry(session)},
		s.k.changes(), session, viewerID, nsOf(time.Now()))
	if err != nil {
		return s.wrap("remove viewer of "+session, err)
	}
	if status(r) == "no_viewer" {
		return backend.Errorf(backend.ErrNotFound, "redis: remove viewer %s of session %s", viewerID, session)
	}
	return s.scriptErr(r, "remove viewer of", "session "+session)
}
