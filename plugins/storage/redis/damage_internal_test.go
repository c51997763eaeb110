package redis

import (
	"context"
	"encoding/json"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SetLineageForTest rewrites a transcript's parent and child in place,
// bypassing every check: the damage a store written before imports refused
// loops may hold (admissiontest.RunDamagedLineage).
func SetLineageForTest(ctx context.Context, st backend.Store, id, parent, child string) error {
	s := st.(*Store)
	session, _, err := s.transcriptSession(ctx, id)
	if err != nil {
		return err
	}
	raw, err := s.client.HGet(ctx, s.k.transcripts(session), id).Result()
	if err != nil {
		return err
	}
	var r trRec
	if err := readRecord(raw, &r); err != nil {
		return err
	}
	r.Parent, r.Child = parent, child
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return s.client.HSet(ctx, s.k.transcripts(session), id, string(b)).Err()
}

// CompactOnceForTest runs one compact script call as Compact's steps do,
// with the scan given (0: the rest of the session), whatever step size
// the store has learnt.
func CompactOnceForTest(ctx context.Context, st backend.Store, sid string, before time.Time, after uint64, scan int) (uint64, []string, error) {
	return st.(*Store).compactOnce(ctx, sid, cutoffNs(before), 0, after, scan)
}
