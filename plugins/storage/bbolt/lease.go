package bbolt

import (
	"context"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// DefaultLeaseTTL is the drain lease TTL when a request gives none.
const DefaultLeaseTTL = backend.DefaultLeaseTTL

// AcquireLease takes the drain lease at epoch+1; admissions left running by
// an older epoch become unknown in the same transaction.
func (s *Store) AcquireLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	now := nowOr(req.Now)
	var out backend.Lease
	err := s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if !rec.permits(req.Principal, backend.ActDrain, "") {
			return fmt.Errorf("bbolt: acquire lease: %w", backend.Forbidden(req.Session, req.Principal, backend.ActDrain, ""))
		}
		if rec.LeaseHolder != "" && rec.LeaseHolder != req.Holder && now.Before(rec.LeaseExpiresAt) {
			return fmt.Errorf("bbolt: acquire lease of session %s: held by %s until %s: %w",
				req.Session, rec.LeaseHolder, rec.LeaseExpiresAt.Format(time.RFC3339), backend.ErrLeaseHeld)
		}
		rec.Epoch++
		rec.LeaseHolder, rec.LeaseExpiresAt = req.Holder, now.Add(ttlOr(req.TTL, backend.DefaultLeaseTTL))
		rec.LeasePrincipal = req.Principal
		out = backend.Lease{Session: req.Session, Holder: req.Holder, Epoch: rec.Epoch, ExpiresAt: rec.LeaseExpiresAt}
		var running []uint64
		_ = sb.Bucket(subActive).ForEach(func(k, _ []byte) error {
			running = append(running, fromU64(k))
			return nil
		})
		for _, seq := range running {
			a, err := t.admissionAt(sb, seq)
			if err != nil {
				return err
			}
			if a.Status != string(backend.StatusRunning) {
				continue
			}
			if err := t.setStatus(sb, rec, a, backend.StatusUnknown); err != nil {
				return err
			}
			if err := t.putAdmission(sb, a); err != nil {
				return err
			}
			out.Recovered = append(out.Recovered, a.ID)
		}
		return t.putSession(sb, rec)
	})
	return out, err
}

// RenewLease extends the lease held by (holder, epoch).
func (s *Store) RenewLease(ctx context.Context, req backend.LeaseRequest) (backend.Lease, error) {
	now := nowOr(req.Now)
	var out backend.Lease
	err := s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if rec.Epoch != req.Epoch || rec.LeaseHolder != req.Holder {
			return fmt.Errorf("bbolt: renew lease of session %s: epoch %d of %q, current %d of %q: %w",
				req.Session, req.Epoch, req.Holder, rec.Epoch, rec.LeaseHolder, backend.ErrFenced)
		}
		if exp := now.Add(ttlOr(req.TTL, backend.DefaultLeaseTTL)); exp.After(rec.LeaseExpiresAt) {
			rec.LeaseExpiresAt = exp
		}
		out = backend.Lease{Session: req.Session, Holder: req.Holder, Epoch: rec.Epoch, ExpiresAt: rec.LeaseExpiresAt}
		return t.putSession(sb, rec)
	})
	return out, err
}

// ReleaseLease gives up the lease of (holder, epoch), if still held.
func (s *Store) ReleaseLease(ctx context.Context, req backend.LeaseRequest) error {
	return s.updateSession(ctx, req.Session, func(t *txn, sb *bolt.Bucket, rec *sessionRec) error {
		if rec.Epoch != req.Epoch || rec.LeaseHolder != req.Holder {
			return nil
		}
		rec.LeaseHolder, rec.LeaseExpiresAt = "", time.Time{}
		return t.putSession(sb, rec)
	})
}
