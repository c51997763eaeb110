package bbolt

import (
	"context"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Export reads a consistent snapshot of the store in one read transaction,
// then calls fn with each record outside it, so a slow writer of the
// records never keeps the file locked.
func (s *Store) Export(ctx context.Context, fn func(backend.Record) error) error {
	var recs []backend.Record
	err := s.view(ctx, func(t *txn) error {
		recs = nil
		return t.eachSession(func(sb *bolt.Bucket, rec *sessionRec) error {
			sr := rec.SessionRecord
			sr.Grants, sr.CreatedAt = backend.NormalGrants(sr.Grants), utc(sr.CreatedAt)
			recs = append(recs, backend.Record{Session: &sr})
			var tids []string
			_ = sb.Bucket(subTranscripts).ForEach(func(k, _ []byte) error {
				tids = append(tids, string(k))
				return nil
			})
			for _, tid := range tids {
				tr, err := t.transcript(tid)
				if err != nil {
					return err
				}
				recs = append(recs, backend.Record{Transcript: tr})
				if mb := t.tx.Bucket(bucketMessages).Bucket([]byte(tid)); mb != nil {
					if err := mb.ForEach(func(_, v []byte) error {
						var m backend.Message
						if err := decode("message", v, &m); err != nil {
							return err
						}
						recs = append(recs, backend.Record{Message: &m})
						return nil
					}); err != nil {
						return err
					}
				}
			}
			if err := sb.Bucket(subAdmissions).ForEach(func(_, v []byte) error {
				var a admRec
				if err := decode("admission", v, &a); err != nil {
					return err
				}
				adm := a.admission()
				if adm.Compacted {
					recs = append(recs, backend.Record{Tombstone: &backend.Tombstone{Admission: adm, PayloadDigest: adm.PayloadSHA1}})
					return nil
				}
				recs = append(recs, backend.Record{Admission: &adm})
				return nil
			}); err != nil {
				return err
			}
			return nil
		})
	})
	if err != nil {
		return err
	}
	for _, r := range recs {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	return nil
}
