package bbolt

import (
	"context"

	"github.com/hermesq/hermesq/pkg/backend"
)

// SetLineageForTest rewrites a transcript's parent and child in place,
// bypassing every check: the damage a store written before imports refused
// loops may hold (admissiontest.RunDamagedLineage).
func SetLineageForTest(ctx context.Context, st backend.Store, id, parent, child string) error {
	return st.(*Store).updateAtomic(ctx, func(t *txn) error {
		tr, err := t.transcript(id)
		if err != nil {
			return err
		}
		tr.Parent, tr.Child = parent, child
		return t.putTranscript(tr)
	})
}
