package bbolt

import (
	"context"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// checkHead verifies that id may start now under epoch: the epoch is
// current, the lease's principal may still drain the session, nothing
// runs, and id is the FIFO head.
func (t *txn) checkHead(op string, sb *bolt.Bucket, rec *sessionRec, id string, epoch uint64) (*admRec, error) {
	if epoch != rec.Epoch {
		return nil, fmt.Errorf("bbolt: %s %s: epoch %d, session %s is at epoch %d: %w", op, id, epoch, rec.ID, rec.Epoch, backend.ErrFenced)
	}
	if !rec.permits(rec.LeasePrincipal, backend.ActDrain, "") {
		return nil, fmt.Errorf("bbolt: %s %s: %w", op, id, backend.Forbidden(rec.ID, rec.LeasePrincipal, backend.ActDrain, ""))
	}
	if rec.Running+rec.Unknown > 0 {
		return nil, fmt.Errorf("bbolt: %s %s: session %s has %d running, %d unknown: %w", op, id, rec.ID, rec.Running, rec.Unknown, backend.ErrBusy)
	}
	session, _, err := t.locate(id)
	if err != nil && backend.CodeOf(err) != backend.CodeNotFound {
		return nil, err
	}
	if err != nil || session != rec.ID {
		return nil, backend.Errorf(backend.ErrNotFound, "bbolt: %s %s: no such admission in session %s", op, id, rec.ID)
	}
	seq := t.head(sb)
	if seq == 0 {
		return nil, fmt.Errorf("bbolt: %s %s: session %s has nothing queued: %w", op, id, rec.ID, backend.ErrNotHead)
	}
	a, err := t.admissionAt(sb, seq)
	if err != nil {
		return nil, err
	}
	if a.ID != id {
		return nil, fmt.Errorf("bbolt: %s %s: the head of session %s is %s: %w", op, id, rec.ID, a.ID, backend.ErrNotHead)
	}
	return a, nil
}

// Claim moves the FIFO head to running under (epoch, generation+1).
func (s *Store) Claim(ctx context.Context, req backend.ClaimRequest) (backend.Admission, error) {
	var out backend.Admission
	err := s.update(ctx, func(t *txn) (err error) {
		out, err = t.claim(req)
		return err
	})
	return out, err
}

func (t *txn) claim(req backend.ClaimRequest) (out backend.Admission, err error) {
	sb, rec, err := t.session(req.Session)
	if err != nil {
		return out, err
	}
	a, err := t.checkHead("claim", sb, rec, req.AdmissionID, req.Epoch)
	if err != nil {
		return out, err
	}
	rec.Generation++
	if err := t.setStatus(sb, rec, a, backend.StatusRunning); err != nil {
		return out, err
	}
	a.Epoch, a.Generation, a.StartedAt = rec.Epoch, rec.Generation, nowOr(req.Now)
	a.Mode, a.DeliveredTo = string(req.Mode), req.DeliveredTo
	err = t.saveAdmission(sb, rec, a, &out)
	return out, err
}
