package bbolt

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"
	fastjson "github.com/segmentio/encoding/json"
	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// txn wraps one bbolt transaction with the schema's accessors. Every value
// it returns is decoded (copied) out of bbolt's memory, so nothing refers to
// the mmap after the transaction ends.
type txn struct {
	tx      *bolt.Tx
	write   bool
	touched map[string]struct{}
	// sessions, while set (by batched: every write transaction), holds
	// each session record read once: session returns the same record to
	// every caller and putSession only marks it, until the batch writes it
	// once.
	sessions map[string]*heldSession
	// memo, when set, holds admission records already decoded (see
	// recMemo): a read transaction listing the queue fills it, a write
	// transaction checking the head takes from it.
	memo *recMemo
}

type heldSession struct {
	sb    *bolt.Bucket
	rec   *sessionRec
	dirty bool
}

// batched runs fn with session records read and written once for all of
// fn (see txn.sessions), then writes the changed ones. fn must check before
// it changes a record, as every operation does, so a refusal leaves the
// held record as it was.
func (t *txn) batched(fn func() error) error {
	t.sessions = map[string]*heldSession{}
	defer func() { t.sessions = nil }()
	if err := fn(); err != nil {
		return err
	}
	ids := make([]string, 0, len(t.sessions))
	for id, h := range t.sessions {
		if h.dirty {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	for _, id := range ids {
		h := t.sessions[id]
		v, err := encode(h.rec)
		if err != nil {
			return err
		}
		if err := h.sb.Put(keySession, v); err != nil {
			return err
		}
	}
	return nil
}

// sessionRec is the stored form of a session: its durable fields (the
// export's SessionRecord, whose JSON fields are inlined), the lease, and
// counters kept in step with the status indexes.
type sessionRec struct {
	backend.SessionRecord
	LeaseHolder    string    `json:"lease_holder,omitempty"`
	LeaseExpiresAt time.Time `json:"lease_expires_at"`
	// LeasePrincipal is who took the lease (AcquireLease): every claim
	// checks that it may still drain the session.
	LeasePrincipal string `json:"lease_principal,omitempty"`
	Queued         int    `json:"queued"`
	Running        int    `json:"running"`
	Unknown        int    `json:"unknown"`
}

// admRec is the stored form of an admission. The payload is kept as a
// string so its bytes are stored exactly (json.RawMessage would be
// re-escaped).
type admRec struct {
	ID           string    `json:"id"`
	Session      string    `json:"session"`
	Seq          uint64    `json:"seq"`
	Kind         string    `json:"kind"`
	Producer     string    `json:"producer,omitempty"`
	Principal    string    `json:"principal,omitempty"`
	RequestID    string    `json:"request_id,omitempty"`
	Identities   []string  `json:"identities,omitempty"`
	Payload      string    `json:"payload"`
	PinnedTarget string    `json:"pinned_target,omitempty"`
	DeliveredTo  string    `json:"delivered_to,omitempty"`
	Status       string    `json:"status"`
	Outcome      string    `json:"outcome,omitempty"`
	Mode         string    `json:"mode,omitempty"`
	Epoch        uint64    `json:"epoch,omitempty"`
	Generation   uint64    `json:"generation,omitempty"`
	AdmittedAt   time.Time `json:"admitted_at"`
	StartedAt    time.Time `json:"started_at"`
	SettledAt    time.Time `json:"settled_at"`
	ReplayOf     string    `json:"replay_of,omitempty"`
	Error        string    `json:"error,omitempty"`
	// PayloadSHA1 is set on a tombstone (Compact): the digest of the
	// payload it no longer holds.
	PayloadSHA1 string `json:"payload_sha1,omitempty"`
}

// samePayload reports whether p is the payload committed with the
// admission: byte-equal, or for a tombstone of equal digest.
func (r *admRec) samePayload(p []byte) bool {
	if r.PayloadSHA1 != "" {
		return backend.PayloadDigest(p) == r.PayloadSHA1
	}
	return r.Payload == string(p)
}

func toAdmRec(a backend.Admission) admRec {
	return admRec{
		ID: a.ID, Session: a.Session, Seq: a.Seq, Kind: string(a.Kind), Producer: a.Producer,
		Principal: a.Principal, RequestID: a.RequestID, Identities: a.Identities, Payload: string(a.Payload),
		PinnedTarget: a.PinnedTarget, DeliveredTo: a.DeliveredTo, Status: string(a.Status),
		Outcome: string(a.Outcome), Mode: string(a.Mode), Epoch: a.Epoch, Generation: a.Generation,
		AdmittedAt: utc(a.AdmittedAt), StartedAt: utc(a.StartedAt), SettledAt: utc(a.SettledAt),
		ReplayOf: a.ReplayOf, Error: a.Error, PayloadSHA1: a.PayloadSHA1,
	}
}

func (r admRec) admission() backend.Admission {
	a := backend.Admission{
		ID: r.ID, Session: r.Session, Seq: r.Seq, Kind: backend.Kind(r.Kind), Producer: r.Producer,
		Principal: r.Principal, RequestID: r.RequestID, Payload: json.RawMessage(r.Payload),
		PinnedTarget: r.PinnedTarget, DeliveredTo: r.DeliveredTo, Status: backend.Status(r.Status),
		Outcome: backend.Outcome(r.Outcome), Mode: backend.Mode(r.Mode), Epoch: r.Epoch, Generation: r.Generation,
		AdmittedAt: utc(r.AdmittedAt), StartedAt: utc(r.StartedAt), SettledAt: utc(r.SettledAt),
		ReplayOf: r.ReplayOf, Error: r.Error,
	}
	if len(r.Identities) > 0 {
		a.Identities = append([]string(nil), r.Identities...)
	}
	if r.PayloadSHA1 != "" {
		a.Payload, a.Compacted, a.PayloadSHA1 = nil, true, r.PayloadSHA1
	}
	return a
}

// utc normalises a time for storage and comparison: UTC, no monotonic
// reading; the zero time stays zero.
func utc(t time.Time) time.Time {
	if t.IsZero() {
		return time.Time{}
	}
	return t.UTC().Round(0)
}

// ttlOr is ttl, or def when ttl is not positive (a request without a ttl).
func ttlOr(ttl, def time.Duration) time.Duration {
	if ttl <= 0 {
		return def
	}
	return ttl
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now().UTC().Round(0)
	}
	return utc(t)
}

// timesWritable reports whether encoding/json can write every time of a
// record (backend.JSONTime): segmentio's encoder would write a year outside
// [0, 9999], which no decoder reads back, so such a record is refused as
// encoding/json refuses it instead of being written unreadable.
func timesWritable(v any) bool {
	ok := backend.JSONTime
	switch r := v.(type) {
	case *admRec:
		return ok(r.AdmittedAt) && ok(r.StartedAt) && ok(r.SettledAt)
	case *sessionRec:
		return ok(r.CreatedAt) && ok(r.LeaseExpiresAt)
	case *backend.Transcript:
		return ok(r.CreatedAt) && ok(r.EndedAt)
	case *msgRec:
		return r.CreatedAt == nil || ok(*r.CreatedAt)
	}
	return true
}

func encode(v any) ([]byte, error) { return encodeWith(v, 0) }

// encodeWith writes a record with segmentio's encoder and flags (0: what
// an encoding/json Encoder without HTML escaping writes).
func encodeWith(v any, flags fastjson.AppendFlags) ([]byte, error) {
	if !timesWritable(v) {
		_, err := json.Marshal(v)
		return nil, fmt.Errorf("bbolt: encode: %v: %w", err, backend.ErrInternal)
	}
	// segmentio's encoder writes what encoding/json's writes (the codec
	// fuzz target checks) at several times the speed: records are written
	// again on every drain step. Its decoder is not used: it takes numbers
	// that overflow a uint64 field, which encoding/json refuses (a corrupt
	// record must be refused, not read as another number); see decode.
	b, err := fastjson.Append(nil, v, flags)
	if err != nil {
		return nil, fmt.Errorf("bbolt: encode: %v: %w", err, backend.ErrInternal)
	}
	return b, nil
}

// msgRec is the stored form of a message: backend.Message's JSON shape
// (its MarshalJSON), written here without going through encoding/json.
type msgRec struct {
	Transcript  string         `json:"transcript"`
	Seq         uint64         `json:"seq"`
	Role        backend.Role   `json:"role"`
	Content     string         `json:"content"`
	AdmissionID *string        `json:"admission_id"`
	CreatedAt   *time.Time     `json:"created_at"`
	Metadata    map[string]any `json:"metadata"`
}

// encodeMessage writes m as json.Marshal(m) does (HTML-escaped, map keys
// sorted), which is how messages have always been stored; it is read back
// with backend.Message's UnmarshalJSON.
func encodeMessage(m *backend.Message) ([]byte, error) {
	r := msgRec{Transcript: m.Transcript, Seq: m.Seq, Role: m.Role, Content: m.Content, Metadata: m.Metadata}
	if m.AdmissionID != "" {
		r.AdmissionID = &m.AdmissionID
	}
	if !m.CreatedAt.IsZero() {
		t := m.CreatedAt.UTC()
		r.CreatedAt = &t
	}
	if r.Metadata == nil {
		r.Metadata = map[string]any{}
	}
	return encodeWith(&r, fastjson.EscapeHTML|fastjson.SortMapKeys)
}

// v1Options make the JSON v2 decoder read exactly as encoding/json does
// (the same names matched, the same values refused, invalid UTF-8 replaced
// the same way) in about half the time: records are read on every drain
// step. FuzzRecordCodec compares the two.
var v1Options = jsonv1.DefaultOptionsV1()

func decode(what string, b []byte, v any) error {
	if err := jsonv2.Unmarshal(b, v, v1Options); err != nil {
		return fmt.Errorf("bbolt: decode %s: %v: %w", what, err, backend.ErrInternal)
	}
	return nil
}

func (t *txn) touch(session string) {
	if t.touched == nil {
		t.touched = map[string]struct{}{}
	}
	t.touched[session] = struct{}{}
}

// logChanges appends the sessions this transaction wrote to the change log.
func (t *txn) logChanges() error {
	if len(t.touched) == 0 {
		return nil
	}
	b := t.tx.Bucket(bucketChanges)
	ids := make([]string, 0, len(t.touched))
	for id := range t.touched {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	var n uint64
	for _, id := range ids {
		var err error
		if n, err = b.NextSequence(); err != nil {
			return err
		}
		if err := b.Put(u64(n), []byte(id)); err != nil {
			return err
		}
	}
	if n > changeLogSize {
		c := b.Cursor()
		limit := n - changeLogSize
		for k, _ := c.First(); k != nil && fromU64(k) <= limit; k, _ = c.First() {
			if err := c.Delete(); err != nil {
				return err
			}
		}
	}
	return nil
}

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

func (t *txn) transcript(id string) (*backend.Transcript, error) {
	v := t.tx.Bucket(bucketTranscripts).Get([]byte(id))
	if v == nil {
		return nil, backend.Errorf(backend.ErrNotFound, "transcript %s", id)
	}
	var tr backend.Transcript
	if err := decode("transcript "+id, v, &tr); err != nil {
		return nil, err
	}
	return &tr, nil
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
	return t.tx.Bucket(bucketTranscripts).Put([]byte(tr.ID), v)
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
	return m, mb.Put(u64(m.Seq), v)
}

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
