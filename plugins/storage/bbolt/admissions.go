package bbolt

import (
	"context"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// GetAdmission returns one admission.
func (s *Store) GetAdmission(ctx context.Context, id string) (backend.Admission, error) {
	var out backend.Admission
	err := s.view(ctx, func(t *txn) error {
		_, _, a, err := t.admission(id)
		if err != nil {
			return err
		}
		out = a.admission()
		return nil
	})
	return out, err
}

// ListAdmissions returns a session's admissions in seq order, filtered.
func (s *Store) ListAdmissions(ctx context.Context, session string, f backend.AdmissionFilter) ([]backend.Admission, error) {
	var out []backend.Admission
	err := s.view(ctx, func(t *txn) error {
		out = nil
		sb, _, err := t.session(session)
		if err != nil {
			return err
		}
		match := func(a *admRec) bool {
			if len(f.Statuses) > 0 && !slices.Contains(f.Statuses, backend.Status(a.Status)) {
				return false
			}
			return len(f.Outcomes) == 0 || slices.Contains(f.Outcomes, backend.Outcome(a.Outcome))
		}
		// Walk the queued index when only queued admissions are asked for
		// (the drainer's head lookup); else every admission.
		index := sb.Bucket(subAdmissions)
		if len(f.Statuses) == 1 && f.Statuses[0] == backend.StatusQueued {
			index = sb.Bucket(subQueued)
			t.memo = &s.memo // the drainer settles what it lists next
		}
		c := index.Cursor()
		for k, _ := c.Seek(u64(f.AfterSeq + 1)); k != nil; k, _ = c.Next() {
			if f.Limit > 0 && len(out) >= f.Limit {
				break
			}
			a, err := t.admissionAt(sb, fromU64(k))
			if err != nil {
				return err
			}
			if a.PayloadSHA1 == "" && match(a) { // tombstones are not listed
				out = append(out, a.admission())
			}
		}
		return nil
	})
	return out, err
}

// FindIdentity returns the admission holding identity in one session, or in
// any session (the first by session id) when session is empty.
func (s *Store) FindIdentity(ctx context.Context, session, identity string) (backend.Admission, error) {
	var out backend.Admission
	err := s.view(ctx, func(t *txn) error {
		look := func(name []byte) (bool, error) {
			sb := t.sessionBucket(string(name))
			id := sb.Bucket(subIdentities).Get([]byte(identity))
			if id == nil {
				return false, nil
			}
			a, err := t.admissionByID(sb, id)
			if err != nil {
				return false, err
			}
			out = a.admission()
			return true, nil
		}
		if session != "" {
			if t.sessionBucket(session) == nil {
				return backend.Errorf(backend.ErrNotFound, "session %s", session)
			}
			if ok, err := look([]byte(session)); ok || err != nil {
				return err
			}
		} else {
			c := t.tx.Bucket(bucketSessions).Cursor()
			for k, v := c.First(); k != nil; k, v = c.Next() {
				if v != nil {
					continue
				}
				if ok, err := look(k); ok || err != nil {
					return err
				}
			}
		}
		return backend.Errorf(backend.ErrNotFound, "identity %q", identity)
	})
	return out, err
}

// updateAdmission runs fn on an admission (by id) and its session in a write
// transaction (grouped as update); ErrNotFound when it is absent.
func (s *Store) updateAdmission(ctx context.Context, id string, fn func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error) error {
	return s.update(ctx, func(t *txn) error {
		sb, rec, a, err := t.admission(id)
		if err != nil {
			return err
		}
		return fn(t, sb, rec, a)
	})
}

// Resolve settles an unknown admission, or puts it back in the queue.
func (s *Store) Resolve(ctx context.Context, id string, as backend.Resolution, now time.Time) (backend.Admission, error) {
	switch as {
	case backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue:
	default:
		return backend.Admission{}, backend.Errorf(backend.ErrInvalid, "bbolt: resolve %s: resolution %q", id, as)
	}
	now = nowOr(now)
	var out backend.Admission
	err := s.updateAdmission(ctx, id, func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error {
		if a.Status != string(backend.StatusUnknown) {
			return backend.Errorf(backend.ErrConflict, "bbolt: resolve %s: it is %s, not unknown", id, a.Status)
		}
		if as == backend.ResolveRequeue {
			if err := t.setStatus(sb, rec, a, backend.StatusQueued); err != nil {
				return err
			}
			a.StartedAt, a.Mode, a.DeliveredTo = time.Time{}, "", ""
		} else {
			if err := t.setStatus(sb, rec, a, backend.StatusDone); err != nil {
				return err
			}
			a.Outcome, a.SettledAt = string(as), now
		}
		return t.saveAdmission(sb, rec, a, &out)
	})
	return out, err
}

// Cancel settles a queued admission as cancelled.
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (backend.Admission, error) {
	now = nowOr(now)
	var out backend.Admission
	err := s.updateAdmission(ctx, id, func(t *txn, sb *bolt.Bucket, rec *sessionRec, a *admRec) error {
		if a.Status != string(backend.StatusQueued) {
			return backend.Errorf(backend.ErrConflict, "bbolt: cancel %s: it is %s, not queued", id, a.Status)
		}
		if err := t.setStatus(sb, rec, a, backend.StatusDone); err != nil {
			return err
		}
		a.Outcome, a.SettledAt = string(backend.OutcomeCancelled), now
		return t.saveAdmission(sb, rec, a, &out)
	})
	return out, err
}
