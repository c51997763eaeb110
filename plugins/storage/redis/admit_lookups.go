package redis

import (
	"context"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// writeLookups writes the global lookups of admissions of session sid
// before the script that creates them: admission id → session (SET NX), and
// each identity → the sessions that may hold it. Idempotent; an entry whose
// script then refuses is an orphan that every lookup verifies, and that a
// later claim of the id takes over. It returns the ids another session
// holds (id → that session): those admissions must not be written.
func (s *Store) writeLookups(ctx context.Context, op, sid string, adms []backend.AdmitRequest) (map[string]string, error) {
	pipe := s.client.Pipeline()
	claims := make([]*goredis.BoolCmd, len(adms))
	value := sid + " " + nsOf(time.Now())
	for i, a := range adms {
		claims[i] = pipe.SetNX(ctx, s.k.admissionOwner(a.ID), value, 0)
		for _, id := range a.Identities {
			pipe.SAdd(ctx, s.k.identityOwners(id), sid)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, s.wrap(op, err)
	}
	var taken map[string]string
	for i, a := range adms {
		if claims[i].Val() {
			continue
		}
		holder, err := s.takeAdmissionID(ctx, op, sid, a.ID, value)
		if err != nil {
			return nil, err
		}
		if holder != "" {
			if taken == nil {
				taken = map[string]string{}
			}
			taken[a.ID] = holder
		}
	}
	return taken, nil
}

// takeAdmissionID makes session sid the owner of admission id's lookup
// (value: "<sid> <claimed at, ns>") when its present owner is an orphan: a
// session holding no such admission whose claim is older than orphanAge
// (a younger one may belong to a script still on its way). The take-over
// is a compare-and-set, so two sessions taking one orphan over at once
// cannot both win. It returns the session that holds the id, "" when sid
// may use it.
func (s *Store) takeAdmissionID(ctx context.Context, op, sid, id, value string) (string, error) {
	key := s.k.admissionOwner(id)
	for attempt := 0; attempt < maxSwaps; attempt++ {
		raw, err := s.client.Get(ctx, key).Result()
		if err != nil && err != goredis.Nil {
			return "", s.wrap(op, err)
		}
		holder, mine, err := s.liveHolder(ctx, op, raw, sid, s.k.admissions, id)
		if err != nil || mine || holder != "" {
			return holder, err
		}
		swapped, err := s.swapLookup(ctx, op, key, raw, value)
		if err != nil {
			return "", err
		}
		if swapped {
			return "", nil
		}
	}
	return "", backend.Errorf(backend.ErrConflict, "redis: %s: admission id %s is being taken by other sessions", op, id)
}
