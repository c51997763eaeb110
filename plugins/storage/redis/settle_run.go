package redis

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SettleRun settles a run of queued heads with one script on the session's
// slot, stopping at the first that fails.
func (s *Store) SettleRun(ctx context.Context, reqs []backend.SettleRequest) ([]backend.Admission, error) {
	if len(reqs) == 0 {
		return []backend.Admission{}, nil
	}
	sid := reqs[0].Session
	keys := []string{s.k.session(sid), s.k.admissions(sid), s.k.queued(sid), s.k.running(sid),
		s.k.unknown(sid), s.k.transcripts(sid), s.k.payloads(sid), s.k.identityLists(sid), s.k.viewers(sid),
		s.k.grants(sid)}
	listAt := map[string]int{} // transcript → its messages list's index in KEYS (1-based)
	args := make([]any, 0, 4+len(reqs)*14)
	args = append(args, s.k.changes(), sid, strconv.FormatInt(time.Now().UnixMilli(), 10), len(reqs))
	for _, req := range reqs {
		if err := backend.CheckSettleRequest(req); err != nil {
			return nil, fmt.Errorf("redis: settle run: admission %s: %w", req.AdmissionID, err)
		}
		if !req.Direct {
			return nil, backend.Errorf(backend.ErrInvalid, "redis: settle run: admission %s: a run settles queued heads only (direct)", req.AdmissionID)
		}
		if req.Session != sid {
			return nil, backend.Errorf(backend.ErrInvalid, "redis: settle run: admission %s: session %s in a run of session %s", req.AdmissionID, req.Session, sid)
		}
		now := nowOr(req.Now)
		args = append(args, req.AdmissionID, req.Epoch, string(req.Outcome), string(req.Mode), req.DeliveredTo,
			req.Error, nsOf(now), map[bool]string{true: "1", false: "0"}[req.Unwatched], req.ExpectCurrent, len(req.Messages))
		for _, m := range req.Messages {
			raw, err := encodeMessage(m.Role, m.Content, req.AdmissionID, now, m.Metadata)
			if err != nil {
				return nil, err
			}
			at, ok := listAt[m.Transcript]
			if !ok {
				keys = append(keys, s.k.messages(sid, m.Transcript))
				at = len(keys)
				listAt[m.Transcript] = at
			}
			args = append(args, at, m.Transcript, string(m.Role), raw)
		}
	}
	r, err := s.eval(ctx, scriptSettleRun, keys, args...)
	if err != nil {
		return nil, s.wrap("settle run of session "+sid, err)
	}
	if len(r) < 2 || (len(r)-2)%3 != 0 {
		return nil, errInternalf("settle run of session %s: reply of %d elements", sid, len(r))
	}
	out := make([]backend.Admission, 0, (len(r)-2)/3)
	for j := 2; j < len(r); j += 3 {
		a, err := decodeAdmission(str(r[j]), str(r[j+1]), str(r[j+2]))
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	if err := s.scriptErr(r, "settle", "admission "+str(r[1])+" of session "+sid); err != nil {
		if status(r) == "no_transcript" && len(out) < len(reqs) {
			err = backend.Errorf(backend.ErrNotFound, "redis: settle admission %s of session %s: transcript %s",
				reqs[len(out)].AdmissionID, sid, str(r[1]))
		}
		return out, err
	}
	return out, nil
}
