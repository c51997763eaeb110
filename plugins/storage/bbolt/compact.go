package bbolt

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Compact turns the session's done admissions settled before req.Before
// into tombstones in one transaction, examining only those after seq
// req.After, at most req.Scan of them, from a cursor placed there (not
// from the first admission): the payload is dropped and its digest
// kept; the identity, request-id and id indexes keep pointing at the
// tombstone, so a re-offer still resolves to it.
func (s *Store) Compact(ctx context.Context, req backend.CompactRequest) (backend.CompactResult, error) {
	var out backend.CompactResult
	if err := backend.ValidateID("session", req.Session); err != nil {
		return out, fmt.Errorf("bbolt: compact: %w", err)
	}
	before := utc(req.Before)
	err := s.updateAtomic(ctx, func(t *txn) error {
		out.Compacted = nil
		sb, _, err := t.session(req.Session)
		if err != nil {
			return err
		}
		if req.After == ^uint64(0) {
			return nil // no seq follows
		}
		c := sb.Bucket(subAdmissions).Cursor()
		var done []*admRec
		scanned, last := 0, uint64(0)
		out.Next = 0
		for k, v := c.Seek(u64(req.After + 1)); k != nil; k, v = c.Next() {
			if (req.Limit > 0 && len(done) >= req.Limit) || (req.Scan > 0 && scanned >= req.Scan) {
				out.Next = last // the cursor: the next call starts after it
				break
			}
			scanned, last = scanned+1, binary.BigEndian.Uint64(k)
			var a admRec
			if err := decode("admission", v, &a); err != nil {
				return err
			}
			if a.Status != string(backend.StatusDone) || a.PayloadSHA1 != "" || !a.SettledAt.Before(before) {
				continue
			}
			done = append(done, &a)
		}
		for _, a := range done {
			a.PayloadSHA1 = backend.PayloadDigest([]byte(a.Payload))
			a.Payload = ""
			if err := t.putAdmission(sb, a); err != nil {
				return err
			}
			out.Compacted = append(out.Compacted, a.ID)
		}
		return nil
	})
	if err != nil {
		return backend.CompactResult{}, err
	}
	return out, nil
}
