package bbolt

import (
	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// admissionAt loads the admission at seq of a session bucket.
func (t *txn) admissionAt(sb *bolt.Bucket, seq uint64) (*admRec, error) {
	v := sb.Bucket(subAdmissions).Get(u64(seq))
	if v == nil {
		return nil, backend.Errorf(backend.ErrInternal, "admission at seq %d missing", seq)
	}
	if t.memo != nil && t.write {
		if a, ok := t.memo.take(v); ok {
			return &a, nil
		}
	}
	var a admRec
	if err := decode("admission", v, &a); err != nil {
		return nil, err
	}
	if t.memo != nil && !t.write {
		t.memo.put(v, &a)
	}
	return &a, nil
}

// locate finds where admission id lives.
func (t *txn) locate(id string) (session string, seq uint64, err error) {
	v := t.tx.Bucket(bucketAdmissions).Get([]byte(id))
	if v == nil {
		return "", 0, backend.Errorf(backend.ErrNotFound, "admission %s", id)
	}
	session, seq, ok := parseLocation(v)
	if !ok {
		return "", 0, backend.Errorf(backend.ErrInternal, "admission %s: bad index entry", id)
	}
	return session, seq, nil
}

// admission loads an admission by id with its session.
func (t *txn) admission(id string) (*bolt.Bucket, *sessionRec, *admRec, error) {
	session, seq, err := t.locate(id)
	if err != nil {
		return nil, nil, nil, err
	}
	sb, rec, err := t.session(session)
	if err != nil {
		return nil, nil, nil, backend.Errorf(backend.ErrInternal, "admission %s: session %s missing", id, session)
	}
	a, err := t.admissionAt(sb, seq)
	if err != nil {
		return nil, nil, nil, err
	}
	return sb, rec, a, nil
}

// admissionByID loads an admission through a session bucket's index value.
func (t *txn) admissionByID(sb *bolt.Bucket, id []byte) (*admRec, error) {
	_, seq, err := t.locate(string(id))
	if err != nil {
		return nil, err
	}
	return t.admissionAt(sb, seq)
}

func (t *txn) putAdmission(sb *bolt.Bucket, a *admRec) error {
	v, err := encode(a)
	if err != nil {
		return err
	}
	t.touch(a.Session)
	return sb.Bucket(subAdmissions).Put(u64(a.Seq), v)
}

// setStatus moves an admission between statuses, keeping the status
// indexes and the session's counters in step. The caller saves both.
func (t *txn) setStatus(sb *bolt.Bucket, rec *sessionRec, a *admRec, to backend.Status) error {
	key := u64(a.Seq)
	switch backend.Status(a.Status) {
	case backend.StatusQueued:
		rec.Queued--
		if err := sb.Bucket(subQueued).Delete(key); err != nil {
			return err
		}
	case backend.StatusRunning:
		rec.Running--
	case backend.StatusUnknown:
		rec.Unknown--
	}
	if from := backend.Status(a.Status); (from == backend.StatusRunning || from == backend.StatusUnknown) &&
		to != backend.StatusRunning && to != backend.StatusUnknown {
		if err := sb.Bucket(subActive).Delete(key); err != nil {
			return err
		}
	}
	switch to {
	case backend.StatusQueued:
		rec.Queued++
		if err := sb.Bucket(subQueued).Put(key, emptyValue); err != nil {
			return err
		}
	case backend.StatusRunning, backend.StatusUnknown:
		if to == backend.StatusRunning {
			rec.Running++
		} else {
			rec.Unknown++
		}
		if err := sb.Bucket(subActive).Put(key, emptyValue); err != nil {
			return err
		}
	}
	a.Status = string(to)
	return nil
}

// saveAdmission writes a changed admission and its session, and sets *out
// to the admission as written.
func (t *txn) saveAdmission(sb *bolt.Bucket, rec *sessionRec, a *admRec, out *backend.Admission) error {
	if err := t.putAdmission(sb, a); err != nil {
		return err
	}
	*out = a.admission()
	return t.putSession(sb, rec)
}
