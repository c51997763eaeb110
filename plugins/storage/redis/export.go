package redis

import (
	"context"
	"sort"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Export calls fn with every record: for each session by id, the session,
// its transcripts by id each followed by its messages, then its admissions
// by seq (the order of every store).
func (s *Store) Export(ctx context.Context, fn func(backend.Record) error) error {
	sessions, err := s.ListSessions(ctx, time.Time{})
	if err != nil {
		return err
	}
	for _, sess := range sessions {
		rec := &backend.SessionRecord{
			ID: sess.ID, Owner: sess.Owner, Grants: backend.NormalGrants(sess.Grants),
			CurrentTranscript: sess.CurrentTranscript, Epoch: sess.Epoch, Generation: sess.Generation,
			NextSeq: sess.NextSeq, CreatedAt: sess.CreatedAt,
		}
		if err := fn(backend.Record{Session: rec}); err != nil {
			return err
		}
		var trs map[string]string
		err := s.readRetry(ctx, "export transcripts of "+sess.ID, func() error {
			var err error
			trs, err = s.client.HGetAll(ctx, s.k.transcripts(sess.ID)).Result()
			return err
		})
		if err != nil {
			return err
		}
		list := make([]backend.Transcript, 0, len(trs))
		for _, raw := range trs {
			t, _, err := decodeTranscript(raw)
			if err != nil {
				return err
			}
			list = append(list, t)
		}
		sort.Slice(list, func(i, j int) bool { return list[i].ID < list[j].ID })
		for i := range list {
			t := list[i]
			if err := fn(backend.Record{Transcript: &t}); err != nil {
				return err
			}
			for after := uint64(0); ; {
				msgs, err := s.ListMessages(ctx, t.ID, after, pageSize)
				if err != nil {
					return err
				}
				for i := range msgs {
					if err := fn(backend.Record{Message: &msgs[i]}); err != nil {
						return err
					}
				}
				if len(msgs) < pageSize {
					break
				}
				after = msgs[len(msgs)-1].Seq
			}
		}
		as, err := s.listAdmissions(ctx, sess.ID, backend.AdmissionFilter{}, true)
		if err != nil {
			return err
		}
		for i := range as {
			rec := backend.Record{Admission: &as[i]}
			if as[i].Compacted {
				rec = backend.Record{Tombstone: &backend.Tombstone{Admission: as[i], PayloadDigest: as[i].PayloadSHA1}}
			}
			if err := fn(rec); err != nil {
				return err
			}
		}
	}
	return nil
}
