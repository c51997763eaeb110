package redis

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// AcquireLease takes the session's drain lease: epoch+1, and admissions
// left running move to unknown.
func (s *Store) AcquireLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	sid := req.Session
	now := nowOr(req.Now)
	exp := now.Add(ttlOr(req.TTL, backend.DefaultLeaseTTL))
	r, err := s.eval(ctx, scriptAcquireLease, []string{
		s.k.session(sid), s.k.admissions(sid), s.k.running(sid), s.k.unknown(sid), s.k.grants(sid),
	}, s.k.changes(), sid, req.Holder, nsOf(exp), nsOf(now), req.Principal)
	if err != nil {
		return backend.Lease{}, s.wrap("acquire lease of "+sid, err)
	}
	if status(r) == "forbidden" {
		return backend.Lease{}, fmt.Errorf("redis: acquire lease: %w", backend.Forbidden(sid, req.Principal, backend.ActDrain, ""))
	}
	if err := s.scriptErr(r, "acquire lease of", "session "+sid); err != nil {
		return backend.Lease{}, err
	}
	l := backend.Lease{Session: sid, Holder: req.Holder, ExpiresAt: exp.UTC()}
	epoch, _ := r[1].(int64)
	l.Epoch = uint64(epoch)
	for _, v := range r[2:] {
		l.Recovered = append(l.Recovered, str(v))
	}
	return l, nil
}

// RenewLease extends the lease of (holder, epoch); never shortens it.
func (s *Store) RenewLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	sid := req.Session
	exp := nowOr(req.Now).Add(ttlOr(req.TTL, backend.DefaultLeaseTTL))
	r, err := s.eval(ctx, scriptRenewLease, []string{s.k.session(sid)},
		s.k.changes(), sid, req.Holder, req.Epoch, nsOf(exp))
	if err != nil {
		return backend.Lease{}, s.wrap("renew lease of "+sid, err)
	}
	if err := s.scriptErr(r, "renew lease of", "session "+sid+" at epoch "+strconv.FormatUint(req.Epoch, 10)); err != nil {
		return backend.Lease{}, err
	}
	if len(r) > 1 {
		exp = timeOf(str(r[1])) // a later expiry kept
	}
	return backend.Lease{Session: sid, Holder: req.Holder, Epoch: req.Epoch, ExpiresAt: exp.UTC()}, nil
}

// ReleaseLease gives the lease up; a no-op when (holder, epoch) no longer
// holds it.
func (s *Store) ReleaseLease(ctx context.Context, req backend.LeaseRequest) error {
	sid := req.Session
	r, err := s.eval(ctx, scriptReleaseLease, []string{s.k.session(sid)},
		s.k.changes(), sid, req.Holder, req.Epoch)
	if err != nil {
		return s.wrap("release lease of "+sid, err)
	}
	return s.scriptErr(r, "release lease of", "session "+sid)
}

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

// Subscribe reports the id of every session a script changes, from the
// changes channel. Repeats of a session not yet read are coalesced.
func (s *Store) Subscribe(ctx context.Context) (<-chan string, error) {
	ps := s.client.Subscribe(ctx, s.k.changes())
	// Wait for the subscription to be confirmed, so a change made after
	// Subscribe returns is never missed.
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	_, err := ps.Receive(rctx)
	cancel()
	if err != nil {
		_ = ps.Close()
		return nil, s.wrap("subscribe", err)
	}
	msgs := ps.Channel(goredis.WithChannelSize(256))
	out := make(chan string, 64)
	go func() {
		defer close(out)
		defer ps.Close()
		var queue []string
		pending := map[string]bool{}
		for {
			var send chan string
			var next string
			if len(queue) > 0 {
				send, next = out, queue[0]
			}
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				if !pending[m.Payload] {
					pending[m.Payload] = true
					queue = append(queue, m.Payload)
				}
			case send <- next:
				queue = queue[1:]
				delete(pending, next)
			}
		}
	}()
	return out, nil
}
