package redis

import (
	"context"
	"fmt"
	"strconv"

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
