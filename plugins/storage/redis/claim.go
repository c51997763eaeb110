package redis

import (
	"context"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Claim moves the session's FIFO head to running.
func (s *Store) Claim(ctx context.Context, req backend.ClaimRequest) (backend.Admission, error) {
	keys, args := s.claimCall(req)
	r, err := s.eval(ctx, scriptClaim, keys, args...)
	return s.admissionReply(r, err, "claim", req.AdmissionID, req.Session)
}

// claimCall is the keys and arguments of claim.lua for req.
func (s *Store) claimCall(req backend.ClaimRequest) ([]string, []any) {
	sid := req.Session
	return []string{
			s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid), s.k.unknown(sid),
			s.k.payloads(sid), s.k.identityLists(sid), s.k.grants(sid),
		}, []any{s.k.changes(), sid, req.AdmissionID, req.Epoch, string(req.Mode), req.DeliveredTo,
			nsOf(nowOr(req.Now))}
}
