package redis

import (
	"context"
	"slices"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/hermesq/hermesq/pkg/backend"
)

// transcriptSession looks a transcript's session up and verifies the
// session holds it, returning its record.
func (s *Store) transcriptSession(ctx context.Context, id string) (string, backend.Transcript, error) {
	var session, rec string
	err := s.readRetry(ctx, "get transcript "+id, func() error {
		var err error
		raw, err := s.client.Get(ctx, s.k.transcriptOwner(id)).Result()
		if err == goredis.Nil {
			return backend.Errorf(backend.ErrNotFound, "redis: transcript %s", id)
		}
		if err != nil {
			return err
		}
		session, _ = parseClaim(raw)
		rec, err = s.client.HGet(ctx, s.k.transcripts(session), id).Result()
		if err == goredis.Nil {
			return backend.Errorf(backend.ErrNotFound, "redis: transcript %s", id)
		}
		return err
	})
	if err != nil {
		return "", backend.Transcript{}, err
	}
	t, _, err := decodeTranscript(rec)
	return session, t, err
}

// GetTranscript returns one transcript by id.
func (s *Store) GetTranscript(ctx context.Context, id string) (backend.Transcript, error) {
	_, t, err := s.transcriptSession(ctx, id)
	return t, err
}

// ListMessages returns a transcript's messages with seq > afterSeq.
func (s *Store) ListMessages(ctx context.Context, transcript string, afterSeq uint64, limit int) ([]backend.Message, error) {
	session, _, err := s.transcriptSession(ctx, transcript)
	if err != nil {
		return nil, err
	}
	stop := int64(-1)
	if limit > 0 {
		stop = int64(afterSeq) + int64(limit) - 1
	}
	var raws []string
	err = s.readRetry(ctx, "list messages of "+transcript, func() error {
		var err error
		raws, err = s.client.LRange(ctx, s.k.messages(session, transcript), int64(afterSeq), stop).Result()
		return err
	})
	if err != nil {
		return nil, err
	}
	out := make([]backend.Message, 0, len(raws))
	for i, raw := range raws {
		m, err := decodeMessage(transcript, afterSeq+uint64(i)+1, raw)
		if err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// transcriptReply decodes the {'ok', transcript record} reply of a script
// that was to create transcript t under the claim value claimTranscript
// wrote ("" for none); a refusal releases that claim.
func (s *Store) transcriptReply(ctx context.Context, r []any, err error, op, session, t, claim string) (backend.Transcript, error) {
	if err != nil {
		return backend.Transcript{}, s.wrap(op+" "+session, err)
	}
	if err := s.scriptErr(r, op, "session "+session); err != nil {
		s.releaseClaim(ctx, t, claim)
		return backend.Transcript{}, err
	}
	tr, _, err := decodeTranscript(str(r[1]))
	return tr, err
}

// CloseSession ends the session's current transcript when it is idle.
func (s *Store) CloseSession(ctx context.Context, session, reason string, now time.Time) (backend.Transcript, error) {
	if !slices.Contains(backend.CloseReasons, reason) {
		return backend.Transcript{}, backend.Errorf(backend.ErrInvalid, "redis: close session %s: reason %q is not one of %v", session, reason, backend.CloseReasons)
	}
	r, err := s.eval(ctx, scriptCloseSession, []string{s.k.session(session), s.k.queued(session),
		s.k.running(session), s.k.unknown(session), s.k.transcripts(session)},
		s.k.changes(), session, reason, nsOf(nowOr(now)))
	return s.transcriptReply(ctx, r, err, "close", session, "", "")
}

// Compress ends the current transcript (reason compression) and makes child,
// a new transcript continuing it, current. It returns the child.
func (s *Store) Compress(ctx context.Context, session, child string, now time.Time) (backend.Transcript, error) {
	if err := backend.ValidateID("transcript", child); err != nil {
		return backend.Transcript{}, err
	}
	if err := s.requireSession(ctx, session); err != nil {
		return backend.Transcript{}, err
	}
	claim, err := s.claimTranscript(ctx, session, child)
	if err != nil {
		return backend.Transcript{}, err
	}
	r, err := s.eval(ctx, scriptCompress, []string{s.k.session(session), s.k.transcripts(session)},
		s.k.changes(), session, child, nsOf(nowOr(now)))
	return s.transcriptReply(ctx, r, err, "compress", session, child, claim)
}

// Switch points the session at transcript t, its own or a new empty one.
func (s *Store) Switch(ctx context.Context, session, t string, now time.Time) (backend.Transcript, error) {
	if err := backend.ValidateID("transcript", t); err != nil {
		return backend.Transcript{}, err
	}
	if err := s.requireSession(ctx, session); err != nil {
		return backend.Transcript{}, err
	}
	claim, err := s.claimTranscript(ctx, session, t)
	if err != nil {
		return backend.Transcript{}, err
	}
	r, err := s.eval(ctx, scriptSwitch, []string{s.k.session(session), s.k.transcripts(session)},
		s.k.changes(), session, t, nsOf(nowOr(now)))
	return s.transcriptReply(ctx, r, err, "switch", session, t, claim)
}

// requireSession returns ErrNotFound when the session does not exist, so no
// transcript id is claimed for a session that is not there.
func (s *Store) requireSession(ctx context.Context, session string) error {
	var n int64
	err := s.readRetry(ctx, "get session "+session, func() error {
		var err error
		n, err = s.client.Exists(ctx, s.k.session(session)).Result()
		return err
	})
	if err != nil {
		return err
	}
	if n == 0 {
		return backend.Errorf(backend.ErrNotFound, "redis: session %s", session)
	}
	return nil
}
