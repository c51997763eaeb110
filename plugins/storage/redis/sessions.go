package redis

import (
	"context"
	"encoding/json"
	"sort"
	"strconv"
	"strings"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// ttlOr is ttl, or def when ttl is not positive (a request without a ttl).
func ttlOr(ttl, def time.Duration) time.Duration {
	if ttl <= 0 {
		return def
	}
	return ttl
}

// orphanAge is how old a global lookup's claim (a transcript id's, an
// admission id's) must be before another session may take it over when
// the claiming session never created what it claimed (its script refused,
// or its process died between the claim and the script). Younger claims
// may belong to a script still on its way.
const orphanAge = time.Minute

// liveHolder judges raw, the value of a global lookup claiming field of
// the hash hashOf(session) for a session ("<session> <claimed at, ns>"),
// for session self: mine when self holds the claim; otherwise the holding
// session when its claim is live (its hash holds field, or the claim is
// younger than orphanAge), "" when the claim is empty or an orphan that
// self may take over (swapLookup).
func (s *Store) liveHolder(ctx context.Context, op, raw, self string, hashOf func(string) string, field string) (holder string, mine bool, err error) {
	owner, claimedAt := parseClaim(raw)
	if owner == self {
		return "", true, nil
	}
	if owner == "" {
		return "", false, nil
	}
	held, err := s.client.HExists(ctx, hashOf(owner), field).Result()
	if err != nil {
		return "", false, s.wrap(op, err)
	}
	if held || time.Since(claimedAt) < orphanAge {
		return owner, false, nil
	}
	return "", false, nil
}

// claimTranscript makes t a transcript id of session, globally: SET NX on
// the transcript's owner key, whose value is "<session> <claimed at, unix
// ns>". A claim of another session that holds no such transcript and is
// older than orphanAge is an orphan and is taken over, by a compare-and-set
// on the key (swapLookup), so of two sessions taking one orphan over at
// once only one wins. It returns the value it wrote ("" when session held
// the claim already), for releaseClaim.
func (s *Store) claimTranscript(ctx context.Context, session, t string) (string, error) {
	key := s.k.transcriptOwner(t)
	value := session + " " + nsOf(time.Now())
	op := "claim transcript " + t
	for attempt := 0; attempt < maxSwaps; attempt++ {
		ok, err := s.client.SetNX(ctx, key, value, 0).Result()
		if err != nil {
			return "", s.wrap(op, err)
		}
		if ok {
			return value, nil
		}
		raw, err := s.client.Get(ctx, key).Result()
		if err == goredis.Nil {
			continue // released meanwhile: claim it afresh
		}
		if err != nil {
			return "", s.wrap(op, err)
		}
		holder, mine, err := s.liveHolder(ctx, op, raw, session, s.k.transcripts, t)
		if err != nil {
			return "", err
		}
		if mine {
			return "", nil
		}
		if holder != "" {
			return "", backend.Errorf(backend.ErrConflict, "redis: transcript %s belongs to session %s", t, holder)
		}
		swapped, err := s.swapLookup(ctx, op, key, raw, value)
		if err != nil {
			return "", err
		}
		if swapped {
			return value, nil
		}
		// Another session took the orphan over first: look again.
	}
	return "", backend.Errorf(backend.ErrConflict, "redis: transcript %s: its id is being claimed by other sessions", t)
}

// maxSwaps bounds the attempts to take a global lookup over while other
// clients keep changing it.
const maxSwaps = 5

// swapLookup sets a global lookup key to value only if it still holds old
// (swap_lookup.lua); false when another client changed it first.
func (s *Store) swapLookup(ctx context.Context, op, key, old, value string) (bool, error) {
	r, err := s.eval(ctx, scriptSwapLookup, []string{key}, old, value)
	if err != nil {
		return false, s.wrap(op, err)
	}
	return status(r) == "ok", nil
}

// releaseClaim drops the claim claimTranscript wrote (value) after the
// script that was to create the transcript refused, so the id stays free
// for other sessions at once, as on every store. Best effort: a claim left
// behind is an orphan, free again after orphanAge.
func (s *Store) releaseClaim(ctx context.Context, t, value string) {
	if value == "" {
		return
	}
	_, _ = s.eval(ctx, scriptReleaseClaim, []string{s.k.transcriptOwner(t)}, value)
}

// parseClaim splits a transcript claim into its session and time.
func parseClaim(v string) (string, time.Time) {
	session, at, _ := strings.Cut(v, " ")
	return session, timeOf(at)
}

// indexSession adds the session to the global session index (idempotent).
func (s *Store) indexSession(ctx context.Context, session string) error {
	err := s.client.ZAdd(ctx, s.k.sessionIndex(), goredis.Z{Member: session}).Err()
	return s.wrap("index session "+session, err)
}

// OpenSession creates a session whose first transcript has its id.
func (s *Store) OpenSession(ctx context.Context, req backend.OpenSessionRequest) (backend.Session, bool, error) {
	if err := backend.ValidateID("session", req.ID); err != nil {
		return backend.Session{}, false, err
	}
	if err := backend.ValidateName("owner", req.Owner); err != nil {
		return backend.Session{}, false, err
	}
	exists, err := s.client.Exists(ctx, s.k.session(req.ID)).Result()
	if err != nil {
		return backend.Session{}, false, s.wrap("open session "+req.ID, err)
	}
	if exists == 0 {
		if _, err := s.claimTranscript(ctx, req.ID, req.ID); err != nil {
			return backend.Session{}, false, err
		}
		if err := s.indexSession(ctx, req.ID); err != nil {
			return backend.Session{}, false, err
		}
	}
	r, err := s.eval(ctx, scriptOpenSession,
		[]string{s.k.session(req.ID), s.k.transcripts(req.ID)},
		s.k.changes(), req.ID, req.Owner, nsOf(nowOr(req.Now)))
	if err != nil {
		return backend.Session{}, false, s.wrap("open session "+req.ID, err)
	}
	// Viewers counted at the request's time, as GetSession counts them.
	sess, err := s.GetSession(ctx, req.ID, req.Now)
	return sess, status(r) == "created", err
}

// GetSession reads a session with its counters and live viewers.
func (s *Store) GetSession(ctx context.Context, id string, now time.Time) (backend.Session, error) {
	now = nowOr(now)
	var sess backend.Session
	err := s.readRetry(ctx, "get session "+id, func() error {
		r, err := s.eval(ctx, scriptGetSession, []string{
			s.k.session(id), s.k.grants(id), s.k.transcripts(id), s.k.queued(id),
			s.k.running(id), s.k.unknown(id), s.k.viewers(id),
		}, strconv.FormatInt(now.UnixMilli(), 10))
		if err != nil {
			return err
		}
		if status(r) != "ok" {
			return backend.Errorf(backend.ErrNotFound, "redis: session %s", id)
		}
		sess, err = decodeSession(r)
		return err
	})
	return sess, err
}

func decodeSession(r []any) (backend.Session, error) {
	if len(r) < 8 {
		return backend.Session{}, errInternalf("get session: short reply")
	}
	flat, _ := r[1].([]any)
	f := map[string]string{}
	for i := 0; i+1 < len(flat); i += 2 {
		f[str(flat[i])] = str(flat[i+1])
	}
	sess := backend.Session{
		ID: f["id"], Owner: f["owner"], CurrentTranscript: f["current"],
		Epoch: u64(f["epoch"]), Generation: u64(f["generation"]), NextSeq: u64(f["next_seq"]),
		LeaseHolder: f["lease_holder"], LeaseExpiresAt: timeOf(f["lease_expires_at"]),
		CreatedAt: timeOf(f["created_at"]),
	}
	if g, _ := r[2].([]any); len(g) > 0 {
		for i := 0; i+1 < len(g); i += 2 {
			gr := backend.Grant{Principal: str(g[i])}
			if err := json.Unmarshal([]byte(str(g[i+1])), &gr); err != nil {
				return sess, errInternalf("get session %s: grant of %q: %v", sess.ID, gr.Principal, err)
			}
			gr.Principal = str(g[i])
			sess.Grants = append(sess.Grants, gr)
		}
		sess.Grants = backend.NormalGrants(sess.Grants)
	}
	n := func(v any) int { x, _ := v.(int64); return int(x) }
	sess.Queued, sess.Running, sess.Unknown, sess.Viewers = n(r[3]), n(r[4]), n(r[5]), n(r[6])
	if cur := str(r[7]); cur != "" {
		t, _, err := decodeTranscript(cur)
		if err != nil {
			return sess, err
		}
		sess.Closed = t.Ended()
	}
	return sess, nil
}

// ListSessions returns every session ordered by id.
func (s *Store) ListSessions(ctx context.Context, now time.Time) ([]backend.Session, error) {
	now = nowOr(now)
	var ids []string
	err := s.readRetry(ctx, "list sessions", func() error {
		var err error
		ids, err = s.client.ZRange(ctx, s.k.sessionIndex(), 0, -1).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	sort.Strings(ids)
	out := make([]backend.Session, 0, len(ids))
	for _, id := range ids {
		sess, err := s.GetSession(ctx, id, now)
		if backend.CodeOf(err) == backend.CodeNotFound {
			continue // an index entry whose session was never created
		}
		if err != nil {
			return nil, err
		}
		out = append(out, sess)
	}
	return out, nil
}
