package redis

import (
	"context"
	"sort"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// readAdmissions reads admissions of one session by id, in the given order;
// ids without a record are skipped.
func (s *Store) readAdmissions(ctx context.Context, session string, ids []string) ([]backend.Admission, error) {
	if len(ids) == 0 {
		return nil, nil
	}
	var recs, payloads, idents []any
	err := s.readRetry(ctx, "read admissions of "+session, func() error {
		pipe := s.client.Pipeline()
		c1 := pipe.HMGet(ctx, s.k.admissions(session), ids...)
		c2 := pipe.HMGet(ctx, s.k.payloads(session), ids...)
		c3 := pipe.HMGet(ctx, s.k.identityLists(session), ids...)
		if _, err := pipe.Exec(ctx); err != nil {
			return err
		}
		recs, payloads, idents = c1.Val(), c2.Val(), c3.Val()
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]backend.Admission, 0, len(ids))
	for i := range ids {
		rec, _ := recs[i].(string)
		if rec == "" {
			continue
		}
		p, _ := payloads[i].(string)
		id, _ := idents[i].(string)
		a, err := decodeAdmission(rec, p, id)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// GetAdmission returns one admission by id.
func (s *Store) GetAdmission(ctx context.Context, id string) (backend.Admission, error) {
	session, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	as, err := s.readAdmissions(ctx, session, []string{id})
	if err != nil {
		return backend.Admission{}, err
	}
	if len(as) == 0 {
		return backend.Admission{}, backend.Errorf(backend.ErrNotFound, "redis: admission %s", id)
	}
	return as[0], nil
}

// admissionSession looks the admission's session up (not verified: the
// caller reads the admission in that session).
func (s *Store) admissionSession(ctx context.Context, id string) (string, error) {
	var session string
	err := s.readRetry(ctx, "get admission "+id, func() error {
		var err error
		raw, err := s.client.Get(ctx, s.k.admissionOwner(id)).Result()
		if err == goredis.Nil {
			return backend.Errorf(backend.ErrNotFound, "redis: admission %s", id)
		}
		session, _ = parseClaim(raw) // "<session> <claimed at>", or a bare session
		return err
	})
	return session, err
}

const pageSize = 512

// ListAdmissions returns a session's admissions in seq order, filtered;
// tombstones are left out.
func (s *Store) ListAdmissions(ctx context.Context, session string, f backend.AdmissionFilter) ([]backend.Admission, error) {
	return s.listAdmissions(ctx, session, f, false)
}

// listAdmissions is ListAdmissions, with tombstones when tombstones is set
// (Export).
func (s *Store) listAdmissions(ctx context.Context, session string, f backend.AdmissionFilter, tombstones bool) ([]backend.Admission, error) {
	var exists int64
	err := s.readRetry(ctx, "list admissions of "+session, func() error {
		var err error
		exists, err = s.client.Exists(ctx, s.k.session(session)).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	if exists == 0 {
		return nil, backend.Errorf(backend.ErrNotFound, "redis: session %s", session)
	}
	index := s.k.seqs(session)
	if len(f.Statuses) == 1 && f.Statuses[0] == backend.StatusQueued {
		index = s.k.queued(session) // the FIFO itself: the head is one read away
	}
	statuses := map[backend.Status]bool{}
	for _, st := range f.Statuses {
		statuses[st] = true
	}
	outcomes := map[backend.Outcome]bool{}
	for _, o := range f.Outcomes {
		outcomes[o] = true
	}
	var out []backend.Admission
	min := "(" + itoa(int64(f.AfterSeq))
	count := int64(pageSize)
	if f.Limit > 0 && f.Limit < pageSize && len(outcomes) == 0 &&
		(len(statuses) == 0 || index == s.k.queued(session)) {
		count = int64(f.Limit) // every id read is a match
	}
	for {
		var zs []goredis.Z
		err := s.readRetry(ctx, "list admissions of "+session, func() error {
			var err error
			zs, err = s.client.ZRangeByScoreWithScores(ctx, index, &goredis.ZRangeBy{
				Min: min, Max: "+inf", Count: count}).Result()
			return err
		})
		if err != nil {
			return nil, err
		}
		ids := make([]string, len(zs))
		for i, z := range zs {
			ids[i], _ = z.Member.(string)
		}
		as, err := s.readAdmissions(ctx, session, ids)
		if err != nil {
			return nil, err
		}
		for _, a := range as {
			if a.Compacted && !tombstones {
				continue
			}
			if len(statuses) > 0 && !statuses[a.Status] {
				continue
			}
			if len(outcomes) > 0 && !outcomes[a.Outcome] {
				continue
			}
			out = append(out, a)
			if f.Limit > 0 && len(out) >= f.Limit {
				return out, nil
			}
		}
		if int64(len(zs)) < count {
			return out, nil
		}
		min = "(" + itoa(int64(zs[len(zs)-1].Score))
	}
}

// FindIdentity returns the admission of the session (or of any session)
// holding identity.
func (s *Store) FindIdentity(ctx context.Context, session, identity string) (backend.Admission, error) {
	sessions := []string{session}
	if session == "" {
		err := s.readRetry(ctx, "find identity", func() error {
			var err error
			sessions, err = s.client.SMembers(ctx, s.k.identityOwners(identity)).Result()
			return err
		})
		if err != nil {
			return backend.Admission{}, err
		}
		sort.Strings(sessions)
	}
	for _, sess := range sessions {
		var id string
		err := s.readRetry(ctx, "find identity", func() error {
			var err error
			id, err = s.client.HGet(ctx, s.k.identities(sess), identity).Result()
			if err == goredis.Nil {
				id, err = "", nil
			}
			return err
		})
		if err != nil {
			return backend.Admission{}, err
		}
		if id == "" {
			continue
		}
		as, err := s.readAdmissions(ctx, sess, []string{id})
		if err != nil {
			return backend.Admission{}, err
		}
		if len(as) == 1 {
			return as[0], nil
		}
	}
	return backend.Admission{}, backend.Errorf(backend.ErrNotFound, "redis: identity %q", identity)
}

// admissionReply decodes {'ok', record, payload, identity list} replies.
func (s *Store) admissionReply(r []any, err error, op, id, session string) (backend.Admission, error) {
	if err != nil {
		return backend.Admission{}, s.wrap(op+" "+id, err)
	}
	if err := s.scriptErr(r, op, "admission "+id+" of session "+session); err != nil {
		return backend.Admission{}, err
	}
	if len(r) < 4 {
		return backend.Admission{}, errInternalf("%s %s: short reply", op, id)
	}
	return decodeAdmission(str(r[1]), str(r[2]), str(r[3]))
}

// Resolve settles an unknown admission or requeues it.
func (s *Store) Resolve(ctx context.Context, id string, as backend.Resolution, now time.Time) (backend.Admission, error) {
	switch as {
	case backend.ResolveCompleted, backend.ResolveInterrupted, backend.ResolveRequeue:
	default:
		return backend.Admission{}, backend.Errorf(backend.ErrInvalid, "redis: resolve %s as %q", id, as)
	}
	sid, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptResolve, []string{s.k.admissions(sid), s.k.queued(sid), s.k.unknown(sid),
		s.k.payloads(sid), s.k.identityLists(sid)},
		s.k.changes(), sid, id, string(as), nsOf(nowOr(now)))
	return s.admissionReply(r, err, "resolve", id, sid)
}

// Cancel settles a queued admission as cancelled.
func (s *Store) Cancel(ctx context.Context, id string, now time.Time) (backend.Admission, error) {
	sid, err := s.admissionSession(ctx, id)
	if err != nil {
		return backend.Admission{}, err
	}
	r, err := s.eval(ctx, scriptCancel, []string{s.k.admissions(sid), s.k.queued(sid),
		s.k.payloads(sid), s.k.identityLists(sid)},
		s.k.changes(), sid, id, nsOf(nowOr(now)))
	return s.admissionReply(r, err, "cancel", id, sid)
}
