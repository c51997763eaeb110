package redis

import (
	"context"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Settle ends an admission and appends its messages in one script.
func (s *Store) Settle(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	if err := backend.CheckSettleRequest(req); err != nil {
		return backend.Admission{}, fmt.Errorf("redis: settle %s: %w", req.AdmissionID, err)
	}
	if req.Unwatched {
		// The viewer check lives in the run script: a run of one.
		out, err := s.SettleRun(ctx, []backend.SettleRequest{req})
		if err != nil {
			return backend.Admission{}, err
		}
		return out[0], nil
	}
	keys, args, err := s.settleCall(req)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptSettle, keys, args...)
	return s.admissionReply(r, err, "settle", req.AdmissionID, req.Session)
}

// settleCall is the keys and arguments of settle.lua for req.
func (s *Store) settleCall(req backend.SettleRequest) (keys []string, args []any, err error) {
	sid := req.Session
	now := nowOr(req.Now)
	keys = []string{s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.unknown(sid), s.k.transcripts(sid), s.k.payloads(sid), s.k.identityLists(sid), s.k.grants(sid)}
	args = []any{s.k.changes(), sid, req.AdmissionID, req.Epoch, req.Generation,
		map[bool]string{true: "1", false: "0"}[req.Direct], string(req.Outcome), string(req.Mode),
		req.DeliveredTo, req.Error, nsOf(now), req.ExpectCurrent}
	for _, m := range req.Messages {
		raw, err := encodeMessage(m.Role, m.Content, req.AdmissionID, now, m.Metadata)
		if err != nil {
			return nil, nil, err
		}
		keys = append(keys, s.k.messages(sid, m.Transcript))
		args = append(args, m.Transcript, string(m.Role), raw)
	}
	return keys, args, nil
}

// Requeue puts a running admission back to queued.
func (s *Store) Requeue(ctx context.Context, req backend.SettleRequest) (backend.Admission, error) {
	sid := req.Session
	r, err := s.eval(ctx, scriptRequeue, []string{
		s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.payloads(sid), s.k.identityLists(sid),
	}, s.k.changes(), sid, req.AdmissionID, req.Epoch, req.Generation)
	return s.admissionReply(r, err, "requeue", req.AdmissionID, sid)
}
