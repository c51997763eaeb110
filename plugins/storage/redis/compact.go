package redis

import (
	"context"
	"math"
	"strconv"
	"sync/atomic"
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
// into tombstones (compact.lua), examining only the admissions after seq
// req.After, at most req.Scan of them. It runs the script in steps of a
// size it adapts to the time of the step before (compactStep), so no
// single script call holds the server for long, whatever req.Scan: a
// compaction of a million admissions keeps each call near
// compactStepTarget. Each step is atomic; tombstones are written only for
// admissions already done, so admits and settles between the steps are
// unaffected.
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
	after, scanned := req.After, 0
	for {
		step := s.compactStep.size()
		if req.Scan > 0 {
			step = min(step, req.Scan-scanned)
		}
		limit := 0
		if req.Limit > 0 {
			limit = req.Limit - len(out.Compacted)
		}
		start := time.Now()
		next, ids, err := s.compactOnce(ctx, sid, before, limit, after, step)
		if err != nil {
			return out, err
		}
		s.compactStep.record(step, len(ids), time.Since(start))
		out.Compacted = append(out.Compacted, ids...)
		if next == 0 {
			return out, nil // the session's last admission examined
		}
		// next is the last seq examined: the step stopped at its scan or
		// at the limit. Each admission it examined has a higher seq than
		// after, so seqs count the admissions examined only as an upper
		// bound; count the step's scan instead, which it used in full
		// unless the limit stopped it.
		scanned += step
		after = next
		if (req.Limit > 0 && len(out.Compacted) >= req.Limit) || (req.Scan > 0 && scanned >= req.Scan) {
			out.Next = next
			return out, nil
		}
	}
}

// compactOnce runs compact.lua once: it examines at most scan admissions
// after seq after, and returns the last seq it examined (0: the end
// reached) and the ids it made tombstones.
func (s *Store) compactOnce(ctx context.Context, sid, before string, limit int, after uint64, scan int) (uint64, []string, error) {
	r, err := s.eval(ctx, scriptCompact, []string{s.k.session(sid), s.k.admissions(sid), s.k.payloads(sid), s.k.seqs(sid)},
		s.k.changes(), sid, before, limit, strconv.FormatUint(after, 10), scan)
	if err != nil {
		return 0, nil, s.wrap("compact session "+sid, err)
	}
	if err := s.scriptErr(r, "compact", "session "+sid); err != nil {
		return 0, nil, err
	}
	if len(r) < 2 {
		return 0, nil, errInternalf("compact session %s: reply %v", sid, r)
	}
	next, err := strconv.ParseUint(str(r[1]), 10, 64)
	if err != nil {
		return 0, nil, errInternalf("compact session %s: next seq %q", sid, str(r[1]))
	}
	ids := make([]string, 0, len(r)-2)
	for _, v := range r[2:] {
		ids = append(ids, str(v))
	}
	return next, ids, nil
}

// compactStepTarget is the time one compact script call aims at, round
// trip included: well under the 10 ms a single command may hold the
// server, with room for a call that runs slow on a busy machine. 1,000
// admissions a call took 15-50 ms; steps aimed at 2 ms still had calls of
// 37 ms when the server was descheduled (figure 9).
const compactStepTarget = time.Millisecond

// Bounds of a step's scan: at least compactStepMin admissions, so a slow
// round trip does not shrink the steps to nothing; at most compactStepMax,
// and at most twice the step before.
const (
	compactStepMin   = 16
	compactStepMax   = 1000
	compactStepFirst = 64
)

// stepSizer sizes the scan of the next compact script call from the time
// per admission of the calls before, shared by the store's compactions.
type stepSizer struct{ n atomic.Int64 }

func (z *stepSizer) size() int {
	if n := z.n.Load(); n > 0 {
		return int(n)
	}
	return compactStepFirst
}

// record learns from a call that examined up to scan admissions, of which
// it made made tombstones, in d: the next scan is the one that would have
// taken compactStepTarget at that rate, between compactStepMin and twice
// scan (up to compactStepMax).
func (z *stepSizer) record(scan, made int, d time.Duration) {
	if scan <= 0 || made == 0 && d < compactStepTarget {
		// A call that wrote nothing says little of what writing costs:
		// keep the size unless it was slow.
		return
	}
	n := int64(float64(scan) * float64(compactStepTarget) / float64(max(d, time.Microsecond)))
	n = min(n, 2*int64(scan), compactStepMax)
	n = max(n, compactStepMin)
	z.n.Store(n)
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
