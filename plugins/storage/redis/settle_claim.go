package redis

import (
	"context"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SettleClaim settles req and claims next in one script (settle_claim.lua:
// the settle step of steps.lua, then its claim step).
func (s *Store) SettleClaim(ctx context.Context, req backend.SettleRequest, next backend.ClaimRequest) (backend.SettleClaimResult, error) {
	var out backend.SettleClaimResult
	if err := backend.CheckSettleClaimRequest(req, next); err != nil {
		return out, fmt.Errorf("redis: %w", err)
	}
	skeys, sargs, err := s.settleCall(req)
	if err != nil {
		return out, err
	}
	ckeys, cargs := s.claimCall(next)
	keys := append(skeys, ckeys...)
	args := append([]any{len(skeys), len(sargs)}, sargs...)
	args = append(args, cargs...)
	r, err := s.eval(ctx, scriptSettleClaim, keys, args...)
	if out.Settled, err = s.admissionReply(r, err, "settle", req.AdmissionID, req.Session); err != nil {
		return backend.SettleClaimResult{}, err
	}
	if len(r) < 5 {
		return backend.SettleClaimResult{}, errInternalf("settle %s and claim %s: short reply", req.AdmissionID, next.AdmissionID)
	}
	out.Claimed, out.ClaimErr = s.admissionReply(r[4:], nil, "claim", next.AdmissionID, next.Session)
	return out, nil
}
