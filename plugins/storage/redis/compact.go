package redis

import (
	"context"
	"math"
	"strconv"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// tombstoneMarker starts the payloads-hash value of a tombstone, followed by
// the SHA-1 of the dropped payload (compact.lua, common.lua). A canonical
// payload is a JSON object and never starts with a NUL byte.
const tombstoneMarker = "\x00sha1:"

// storedPayload is the payloads-hash value of an admission: its canonical
// payload, or for a tombstone the marker and digest.
func storedPayload(a *backend.Admission) string {
	if a.Compacted {
		return tombstoneMarker + a.PayloadSHA1
	}
	return string(a.Payload)
}

// Compact turns the session's done admissions settled before req.Before
// into tombstones in one script (compact.lua), which examines only the
// admissions after seq req.After, at most req.Scan of them.
func (s *Store) Compact(ctx context.Context, req backend.CompactRequest) (backend.CompactResult, error) {
	var out backend.CompactResult
	if err := backend.ValidateID("session", req.Session); err != nil {
		return out, backend.Errorf(err, "redis: compact")
	}
	sid := req.Session
	before := cutoffNs(req.Before)
	if before == "" {
		// Nothing was settled before that time; an unknown session is
		// still ErrNotFound, as for any other cutoff.
		n, err := s.client.Exists(ctx, s.k.session(sid)).Result()
		if err != nil {
			return out, s.wrap("compact session "+sid, err)
		}
		if n == 0 {
			return out, backend.Errorf(backend.ErrNotFound, "redis: compact: session %s", sid)
		}
		return out, nil
	}
	r, err := s.eval(ctx, scriptCompact, []string{s.k.session(sid), s.k.admissions(sid), s.k.payloads(sid), s.k.seqs(sid)},
		s.k.changes(), sid, before, req.Limit, strconv.FormatUint(req.After, 10), req.Scan)
	if err != nil {
		return out, s.wrap("compact session "+sid, err)
	}
	if err := s.scriptErr(r, "compact", "session "+sid); err != nil {
		return out, err
	}
	if len(r) < 2 {
		return out, errInternalf("compact session %s: reply %v", sid, r)
	}
	if out.Next, err = strconv.ParseUint(str(r[1]), 10, 64); err != nil {
		return out, errInternalf("compact session %s: next seq %q", sid, str(r[1]))
	}
	for _, v := range r[2:] {
		out.Compacted = append(out.Compacted, str(v))
	}
	return out, nil
}

// cutoffNs is a compaction cutoff in unix nanoseconds for ns_lt: "" when
// nothing can have been settled before it (the zero time, or before the
// first time in nanoseconds an int64 holds); past the last one, a number
// longer than any int64, after every time.
func cutoffNs(t time.Time) string {
	switch {
	case t.IsZero() || t.Before(time.Unix(0, math.MinInt64)):
		return ""
	case t.After(time.Unix(0, math.MaxInt64)):
		return "99999999999999999999"
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}
