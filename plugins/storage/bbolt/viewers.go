package bbolt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

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
