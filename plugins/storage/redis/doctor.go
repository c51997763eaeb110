package redis

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

var _ backend.Doctor = (*Store)(nil)

// maxOrphansListed bounds the orphaned keys a doctor report names.
const maxOrphansListed = 5

// Doctor checks the server (reachable, version) and the store's global
// lookups: session index entries without their session, admission,
// transcript and identity lookups whose session does not hold what they
// point at (left by a write interrupted between the lookup and its
// script). Such orphans are harmless, since every lookup is verified when
// read, but they take memory; the report names them.
func (s *Store) Doctor(ctx context.Context) ([]backend.Finding, error) {
	var out []backend.Finding
	add := func(check, status, detail, repair string) {
		out = append(out, backend.Finding{Check: check, Status: status, Detail: detail, Repair: repair})
	}
	info, err := s.client.Info(ctx, "server").Result()
	if err != nil {
		return nil, s.wrap("doctor: info", err)
	}
	version := "unknown"
	for _, l := range strings.Split(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "redis_version:"); ok {
			version = v
		}
	}
	add("server", backend.FindingOK, "redis "+version+" at "+s.desc, "")
	add("schema version", backend.FindingOK, "keys under the prefix "+s.k.prefix+" (the Redis layout has no stored version)", "")

	keys, err := s.scan(ctx, s.k.all())
	if err != nil {
		return out, s.wrap("doctor: scan", err)
	}
	var orphans []string
	now := time.Now()
	for _, key := range keys {
		orphan, err := s.orphan(ctx, key, now)
		if err != nil {
			return out, s.wrap("doctor: check "+key, err)
		}
		if orphan {
			orphans = append(orphans, key)
		}
	}
	sessions, err := s.client.ZRange(ctx, s.k.sessionIndex(), 0, -1).Result()
	if err != nil {
		return out, s.wrap("doctor: session index", err)
	}
	var stale []string
	for _, id := range sessions {
		n, err := s.client.Exists(ctx, s.k.session(id)).Result()
		if err != nil {
			return out, s.wrap("doctor: session "+id, err)
		}
		if n == 0 {
			stale = append(stale, id)
		}
	}
	if len(orphans) == 0 {
		add("orphaned lookups", backend.FindingOK, fmt.Sprintf("%d keys checked, none orphaned", len(keys)), "")
	} else {
		listed := orphans
		if len(listed) > maxOrphansListed {
			listed = listed[:maxOrphansListed]
		}
		add("orphaned lookups", backend.FindingWarn,
			fmt.Sprintf("%d of %d keys point at nothing (e.g. %s)", len(orphans), len(keys), strings.Join(listed, ", ")),
			"harmless (lookups are verified when read); delete them with redis-cli DEL KEY to free memory")
	}
	if len(stale) == 0 {
		add("session index", backend.FindingOK, fmt.Sprintf("%d sessions, each present", len(sessions)), "")
	} else {
		add("session index", backend.FindingWarn,
			fmt.Sprintf("%d of %d indexed sessions were never created (e.g. %s)", len(stale), len(sessions), stale[0]),
			fmt.Sprintf("harmless; remove them with redis-cli ZREM %s ID", s.k.sessionIndex()))
	}
	return out, nil
}

// orphan reports whether a global lookup key points at nothing.
func (s *Store) orphan(ctx context.Context, key string, now time.Time) (bool, error) {
	inner := func(kind string) (string, bool) {
		rest, ok := strings.CutPrefix(key, s.k.prefix+":"+kind+":{")
		if !ok || !strings.HasSuffix(rest, "}") {
			return "", false
		}
		return strings.TrimSuffix(rest, "}"), true
	}
	if id, ok := inner("admission"); ok {
		v, err := s.client.Get(ctx, key).Result()
		if err == goredis.Nil {
			return false, nil
		} else if err != nil {
			return false, err
		}
		owner, at := parseClaim(v)
		if !at.IsZero() && now.Sub(at) < orphanAge {
			return false, nil // a claim whose script may be on its way
		}
		held, err := s.client.HExists(ctx, s.k.admissions(owner), id).Result()
		return !held, err
	}
	if t, ok := inner("transcript"); ok {
		v, err := s.client.Get(ctx, key).Result()
		if err == goredis.Nil {
			return false, nil
		} else if err != nil {
			return false, err
		}
		owner, at := parseClaim(v)
		if !at.IsZero() && now.Sub(at) < orphanAge {
			return false, nil // a claim whose script may be on its way
		}
		held, err := s.client.HExists(ctx, s.k.transcripts(owner), t).Result()
		return !held, err
	}
	if identity, ok := inner("identity"); ok {
		owners, err := s.client.SMembers(ctx, key).Result()
		if err != nil {
			return false, err
		}
		for _, owner := range owners {
			held, err := s.client.HExists(ctx, s.k.identities(owner), identity).Result()
			if err != nil || held {
				return false, err
			}
		}
		return true, nil
	}
	return false, nil
}

// scan lists the keys matching pattern on every master.
func (s *Store) scan(ctx context.Context, pattern string) ([]string, error) {
	var mu sync.Mutex
	var out []string
	one := func(ctx context.Context, c *goredis.Client) error {
		it := c.Scan(ctx, 0, pattern, 1000).Iterator()
		var keys []string
		for it.Next(ctx) {
			keys = append(keys, it.Val())
		}
		mu.Lock()
		out = append(out, keys...)
		mu.Unlock()
		return it.Err()
	}
	switch c := s.client.(type) {
	case *goredis.ClusterClient:
		err := c.ForEachMaster(ctx, one)
		return out, err
	case *goredis.Client:
		return out, one(ctx, c)
	}
	it := s.client.Scan(ctx, 0, pattern, 1000).Iterator()
	for it.Next(ctx) {
		out = append(out, it.Val())
	}
	return out, it.Err()
}
