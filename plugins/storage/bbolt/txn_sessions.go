package bbolt

import (
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// eachSession calls fn with every session, in id order.
func (t *txn) eachSession(fn func(sb *bolt.Bucket, rec *sessionRec) error) error {
	c := t.tx.Bucket(bucketSessions).Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		if v != nil {
			continue
		}
		sb, rec, err := t.session(string(k))
		if err != nil {
			return err
		}
		if err := fn(sb, rec); err != nil {
			return err
		}
	}
	return nil
}

func (t *txn) sessionBucket(id string) *bolt.Bucket {
	return t.tx.Bucket(bucketSessions).Bucket([]byte(id))
}

// session loads a session; ErrNotFound when absent.
func (t *txn) session(id string) (*bolt.Bucket, *sessionRec, error) {
	sb := t.sessionBucket(id)
	if sb == nil {
		return nil, nil, backend.Errorf(backend.ErrNotFound, "session %s", id)
	}
	if h := t.sessions[id]; h != nil {
		return h.sb, h.rec, nil
	}
	var rec sessionRec
	if err := decode("session "+id, sb.Get(keySession), &rec); err != nil {
		return nil, nil, err
	}
	if t.sessions != nil {
		t.sessions[id] = &heldSession{sb: sb, rec: &rec}
	}
	return sb, &rec, nil
}

func (t *txn) putSession(sb *bolt.Bucket, rec *sessionRec) error {
	if h := t.sessions[rec.ID]; h != nil && h.rec == rec {
		h.dirty = true
		t.touch(rec.ID)
		return nil
	}
	v, err := encode(rec)
	if err != nil {
		return err
	}
	t.touch(rec.ID)
	return sb.Put(keySession, v)
}

// createSession writes a new session and its sub-buckets.
func (t *txn) createSession(rec *sessionRec) (*bolt.Bucket, error) {
	sb, err := t.tx.Bucket(bucketSessions).CreateBucket([]byte(rec.ID))
	if err != nil {
		return nil, err
	}
	for _, name := range sessionSubBuckets {
		if _, err := sb.CreateBucket(name); err != nil {
			return nil, err
		}
	}
	return sb, t.putSession(sb, rec)
}

// head returns the seq of the session's FIFO head, 0 when nothing is queued.
func (t *txn) head(sb *bolt.Bucket) uint64 {
	k, _ := sb.Bucket(subQueued).Cursor().First()
	return fromU64(k)
}

// liveViewers counts unexpired viewers at now.
func (t *txn) liveViewers(sb *bolt.Bucket, now time.Time) int {
	n := 0
	_ = sb.Bucket(subViewers).ForEach(func(_, v []byte) error {
		if int64(fromU64(v)) > now.UnixNano() {
			n++
		}
		return nil
	})
	return n
}

// sessionView builds the backend.Session of a record.
func (t *txn) sessionView(sb *bolt.Bucket, rec *sessionRec, now time.Time) (backend.Session, error) {
	s := backend.Session{
		ID: rec.ID, Owner: rec.Owner, CurrentTranscript: rec.CurrentTranscript,
		Epoch: rec.Epoch, Generation: rec.Generation, LeaseHolder: rec.LeaseHolder,
		LeaseExpiresAt: utc(rec.LeaseExpiresAt), NextSeq: rec.NextSeq,
		Queued: rec.Queued, Running: rec.Running, Unknown: rec.Unknown,
		Viewers: t.liveViewers(sb, now), CreatedAt: utc(rec.CreatedAt),
	}
	if len(rec.Grants) > 0 {
		s.Grants = backend.NormalGrants(rec.Grants)
	}
	if rec.LeaseHolder == "" {
		s.LeaseExpiresAt = time.Time{}
	}
	tr, err := t.transcript(rec.CurrentTranscript)
	if err != nil {
		return s, backend.Errorf(backend.ErrInternal, "session %s: current transcript %s missing", rec.ID, rec.CurrentTranscript)
	}
	s.Closed = tr.Ended()
	return s, nil
}

// permits applies backend.Permits to the session's owner and grants.
func (r *sessionRec) permits(principal string, act backend.Action, producer string) bool {
	return backend.Permits(r.Owner, r.Grants, principal, act, producer)
}
