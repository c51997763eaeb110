package bbolt

import (
	"context"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SettleRun settles a run of queued heads, in order, in one transaction; it
// stops at the first request that fails with a result of the contract and
// commits the ones before it. The session record and the transcripts are
// read once and written once for the whole run.
func (s *Store) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	for _, req := range reqs {
		if err := checkRunRequest(req, reqs[0].Session); err != nil {
			return nil, fmt.Errorf("bbolt: settle run: %w", err)
		}
	}
	if len(reqs) == 0 {
		return []backend.Admission{}, nil
	}
	var (
		out     []backend.Admission
		stopped error
	)
	err := s.update(ctx, func(t *txn) error {
		out, stopped = make([]backend.Admission, 0, len(reqs)), nil
		st, err := t.settleState(reqs[0].Session)
		if err != nil {
			if isDomain(err) {
				stopped = err
				return nil
			}
			return err
		}
		for _, req := range reqs {
			a, err := t.settleWith(st, nil, req, nowOr(req.Now))
			if err != nil && !isDomain(err) {
				out = nil
				return err // rolls the run back
			}
			if err != nil {
				stopped = err
				break
			}
			out = append(out, a)
		}
		if len(out) == 0 {
			return nil
		}
		return st.save(t)
	})
	if err != nil {
		return nil, err
	}
	return out, stopped
}

// checkRunRequest checks one request of a SettleRun: well formed, direct,
// of the run's session.
func checkRunRequest(req backend.SettleRequest, session string) error {
	if err := backend.CheckSettleRequest(req); err != nil {
		return fmt.Errorf("admission %s: %w", req.AdmissionID, err)
	}
	if !req.Direct {
		return backend.Errorf(backend.ErrInvalid, "admission %s: a run settles queued heads only (direct)", req.AdmissionID)
	}
	if req.Session != session {
		return backend.Errorf(backend.ErrInvalid, "admission %s: session %s in a run of session %s", req.AdmissionID, req.Session, session)
	}
	return nil
}
