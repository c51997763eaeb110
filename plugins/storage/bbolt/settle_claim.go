package bbolt

import (
	"context"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SettleClaim settles req and claims next in one transaction: one commit
// for the end of a turn and the start of the next.
func (s *Store) SettleClaim(ctx context.Context, req backend.SettleRequest, next backend.ClaimRequest) (backend.SettleClaimResult, error) {
	if err := backend.CheckSettleClaimRequest(req, next); err != nil {
		return backend.SettleClaimResult{}, fmt.Errorf("bbolt: %w", err)
	}
	now := nowOr(req.Now)
	var out backend.SettleClaimResult
	err := s.update(ctx, func(t *txn) (err error) {
		out = backend.SettleClaimResult{}
		if out.Settled, err = t.settle(req, now); err != nil {
			return err
		}
		// A refused claim (a domain error, checked before it writes)
		// leaves the settle to commit alone.
		out.Claimed, out.ClaimErr = t.claim(next)
		if out.ClaimErr != nil && !isDomain(out.ClaimErr) {
			return out.ClaimErr
		}
		return nil
	})
	if err != nil {
		return backend.SettleClaimResult{}, err
	}
	return out, nil
}
