package redis

import (
	"context"
	"encoding/json"

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
