package admission

import (
	"context"
	"fmt"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// CompactRequest says what Compact removes: done admissions settled more
// than OlderThan ago, of Session or of every session.
type CompactRequest struct {
	OlderThan time.Duration
	Session   string // "": every session
	DryRun    bool   // list what would be compacted; change nothing
	Batch     int    // admissions one Store.Compact call examines; 0: compactBatch
}

// SessionCompaction is what compaction did (or would do) in one session.
type SessionCompaction struct {
	Session   string   `json:"session"`
	Compacted []string `json:"compacted"`
}

// CompactReport is the outcome of Compact.
type CompactReport struct {
	DryRun    bool                `json:"dry_run"`
	Before    time.Time           `json:"settled_before"`
	Sessions  []SessionCompaction `json:"sessions"`
	Compacted int                 `json:"compacted"`
	// SizeBefore and SizeAfter are the store's size in bytes before the
	// compaction and after the reclaim (bbolt: the file; Redis:
	// used_memory of the servers); 0 with DryRun.
	SizeBefore int64 `json:"size_before"`
	SizeAfter  int64 `json:"size_after"`
}

// compactBatch bounds the admissions one Store.Compact call examines (and
// so the tombstones it writes), so a large compaction holds the store
// briefly at a time.
const compactBatch = 1000

// Compact turns the done admissions settled before now-OlderThan into
// tombstones (Store.Compact, session by session, in batches, one pass over
// each session with a cursor), then gives
// the freed space back (Store.Reclaim). Their identities, request ids and
// ids keep resolving as duplicates. With DryRun it only lists them.
func (s *Service) Compact(ctx context.Context, req CompactRequest) (CompactReport, error) {
	rep := CompactReport{DryRun: req.DryRun, Sessions: []SessionCompaction{}}
	batch := req.Batch
	if batch <= 0 {
		batch = compactBatch
	}
	if req.OlderThan <= 0 {
		return rep, invalidf("compact: --older-than must be a positive duration")
	}
	rep.Before = s.now().Add(-req.OlderThan).UTC()
	if rep.Before.Before(time.Unix(0, 0)) {
		return rep, invalidf("compact: --older-than %s reaches before 1970-01-01 (the cutoff would be %s)",
			req.OlderThan, rep.Before.Format(time.RFC3339))
	}
	var sessions []string
	if req.Session != "" {
		if err := backend.ValidateID("session", req.Session); err != nil {
			return rep, err
		}
		if _, err := s.Store.GetSession(ctx, req.Session, s.now()); err != nil {
			return rep, fmt.Errorf("compact: %w", err)
		}
		sessions = []string{req.Session}
	} else {
		ss, err := s.Store.ListSessions(ctx, s.now())
		if err != nil {
			return rep, fmt.Errorf("compact: %w", err)
		}
		for _, x := range ss {
			sessions = append(sessions, x.ID)
		}
	}
	if !req.DryRun {
		size, err := s.Store.Size(ctx)
		if err != nil {
			return rep, fmt.Errorf("compact: %w", err)
		}
		rep.SizeBefore = size
	}
	for _, sid := range sessions {
		sc := SessionCompaction{Session: sid, Compacted: []string{}}
		if req.DryRun {
			as, err := s.Store.ListAdmissions(ctx, sid, backend.AdmissionFilter{Statuses: []backend.Status{backend.StatusDone}})
			if err != nil {
				return rep, fmt.Errorf("compact: %w", err)
			}
			for _, a := range as {
				if a.SettledAt.Before(rep.Before) {
					sc.Compacted = append(sc.Compacted, a.ID)
				}
			}
		} else {
			// One pass: each call starts where the last one stopped.
			for after := uint64(0); ; {
				res, err := s.Store.Compact(ctx, backend.CompactRequest{Session: sid, Before: rep.Before, After: after, Scan: batch})
				if err != nil {
					return rep, fmt.Errorf("compact: %w", err)
				}
				sc.Compacted = append(sc.Compacted, res.Compacted...)
				if res.Next == 0 {
					break
				}
				after = res.Next
			}
		}
		if len(sc.Compacted) > 0 {
			rep.Sessions = append(rep.Sessions, sc)
			rep.Compacted += len(sc.Compacted)
		}
	}
	if req.DryRun {
		return rep, nil
	}
	r, err := s.Store.Reclaim(ctx)
	if err != nil {
		return rep, fmt.Errorf("compact: %w", err)
	}
	rep.SizeAfter = r.After
	return rep, nil
}
