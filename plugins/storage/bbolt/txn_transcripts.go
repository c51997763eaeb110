package bbolt

import (
	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// transcript returns transcript id, decoded once per transaction (an
// admit batch checks the session's current transcript for every input):
// each caller gets its own copy, and putTranscript keeps the held one to
// what it wrote.
func (t *txn) transcript(id string) (*backend.Transcript, error) {
	if tr, ok := t.transcripts[id]; ok {
		return &tr, nil
	}
	v := t.tx.Bucket(bucketTranscripts).Get([]byte(id))
	if v == nil {
		return nil, backend.Errorf(backend.ErrNotFound, "transcript %s", id)
	}
	var tr backend.Transcript
	if err := decode("transcript "+id, v, &tr); err != nil {
		return nil, err
	}
	t.holdTranscript(id, tr)
	return &tr, nil
}

// holdTranscript keeps tr as the record stored under id.
func (t *txn) holdTranscript(id string, tr backend.Transcript) {
	if t.transcripts == nil {
		t.transcripts = map[string]backend.Transcript{}
	}
	t.transcripts[id] = tr
}

func (t *txn) transcriptExists(id string) bool {
	return t.tx.Bucket(bucketTranscripts).Get([]byte(id)) != nil
}

func (t *txn) putTranscript(tr *backend.Transcript) error {
	tr.EndedAt, tr.CreatedAt = utc(tr.EndedAt), utc(tr.CreatedAt)
	v, err := encode(tr)
	if err != nil {
		return err
	}
	t.touch(tr.Session)
	if err := t.tx.Bucket(bucketTranscripts).Put([]byte(tr.ID), v); err != nil {
		return err
	}
	t.holdTranscript(tr.ID, *tr)
	return nil
}

// createTranscript writes a new transcript of a session, indexed under it.
func (t *txn) createTranscript(sb *bolt.Bucket, tr *backend.Transcript) error {
	if err := t.putTranscript(tr); err != nil {
		return err
	}
	if _, err := t.tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(tr.ID)); err != nil {
		return err
	}
	return sb.Bucket(subTranscripts).Put([]byte(tr.ID), emptyValue)
}

// appendMessage appends m to its transcript (loaded in tr, saved by the
// caller) with the next seq.
func (t *txn) appendMessage(tr *backend.Transcript, m backend.Message) (backend.Message, error) {
	tr.MessageCount++
	if m.Role == backend.RoleNote {
		tr.NoteCount++
	}
	m.Transcript = tr.ID
	m.Seq = uint64(tr.MessageCount)
	m.CreatedAt = utc(m.CreatedAt)
	v, err := encodeMessage(&m)
	if err != nil {
		return m, err
	}
	mb, err := t.tx.Bucket(bucketMessages).CreateBucketIfNotExists([]byte(tr.ID))
	if err != nil {
		return m, err
	}
	return m, appending(mb).Put(u64(m.Seq), v)
}
