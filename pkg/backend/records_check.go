package backend

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// RecordError is a record refused by CheckRecords: Index is its position
// (0-based) in the records checked.
type RecordError struct {
	Index int
	Err   error
}

func (e *RecordError) Error() string { return fmt.Sprintf("record %d: %v", e.Index+1, e.Err) }
func (e *RecordError) Unwrap() error { return e.Err }

// RecordLookup is what CheckRecords reads of the store being imported
// into: every Store has it.
type RecordLookup interface {
	GetSession(ctx context.Context, id string, now time.Time) (Session, error)
	GetTranscript(ctx context.Context, id string) (Transcript, error)
	GetAdmission(ctx context.Context, id string) (Admission, error)
}

// CheckRecords checks an import whole, before anything is written, against
// the rules live writes obey: ids, request ids, identities and principals
// by the live rules; counters (seq, epoch, generation, next_seq) in
// 0..MaxCounter, so the store keeps room to grow; statuses, outcomes,
// modes, roles and end reasons of the contract; payloads that are JSON
// objects with a non-empty "text"; every reference present (a session
// before its transcripts, messages and admissions; a session's current
// transcript, a transcript's parent and child, a message's admission and
// an admission's delivery transcript in the records or the store);
// tombstones as admissions without a payload (TombstoneAdmission);
// messages of a transcript consecutive from 1; nothing twice in the
// records. st is the store imported into (nil: the records alone). The
// error is a *RecordError wrapping ErrInvalid, or the store's own error.
func CheckRecords(ctx context.Context, st RecordLookup, recs []Record) error {
	c := &recordCheck{
		ctx: ctx, st: st,
		sessions: map[string]*SessionRecord{}, transcripts: map[string]*Transcript{},
		admissions: map[string]bool{}, seqs: map[string]bool{}, idents: map[string]bool{},
		requests: map[string]bool{}, lastMsg: map[string]uint64{}, transBefore: map[string]bool{},
		storeSessions: map[string]bool{}, storeTranscripts: map[string]string{}, storeAdmissions: map[string]bool{},
		storeLinks: map[string]*Transcript{}, endsUp: map[string]bool{}, endsDown: map[string]bool{},
	}
	// First the records that may be referred to before they appear.
	for i, r := range recs {
		var err error
		switch {
		case r.Transcript != nil:
			if _, dup := c.transcripts[r.Transcript.ID]; dup {
				err = fmt.Errorf("transcript %s appears twice", r.Transcript.ID)
			}
			c.transcripts[r.Transcript.ID] = r.Transcript
		case r.Admission != nil, r.Tombstone != nil:
			id := ""
			if r.Admission != nil {
				id = r.Admission.ID
			} else {
				id = r.Tombstone.Admission.ID
			}
			if c.admissions[id] {
				err = fmt.Errorf("admission %s appears twice", id)
			}
			c.admissions[id] = true
		}
		if err != nil {
			return &RecordError{i, fmt.Errorf("%w: %w", err, ErrInvalid)}
		}
	}
	seen := map[string]bool{}
	for i, r := range recs {
		var err error
		switch {
		case r.Session != nil:
			if seen[r.Session.ID] {
				err = fmt.Errorf("session %s appears twice: %w", r.Session.ID, ErrInvalid)
				break
			}
			seen[r.Session.ID] = true
			err = c.session(r.Session)
		case r.Transcript != nil:
			err = c.transcript(r.Transcript)
		case r.Message != nil:
			err = c.message(r.Message)
		case r.Admission != nil:
			err = c.admission(r.Admission)
		case r.Tombstone != nil:
			var a Admission
			if a, err = TombstoneAdmission(r.Tombstone); err == nil {
				err = c.admission(&a)
			}
		default:
			err = fmt.Errorf("empty record: %w", ErrInvalid)
		}
		if err != nil {
			return &RecordError{i, err}
		}
	}
	return nil
}

type recordCheck struct {
	ctx context.Context
	st  RecordLookup

	sessions    map[string]*SessionRecord // sessions of the records so far
	transcripts map[string]*Transcript    // every transcript of the records
	admissions  map[string]bool           // every admission of the records
	seqs        map[string]bool           // session \x00 seq
	idents      map[string]bool           // session \x00 identity
	requests    map[string]bool           // session \x00 principal \x00 request id
	lastMsg     map[string]uint64         // transcript → last message seq so far
	transBefore map[string]bool           // transcripts of the records so far

	storeSessions    map[string]bool
	storeTranscripts map[string]string // id → session, "" when absent
	storeLinks       map[string]*Transcript
	storeAdmissions  map[string]bool
	endsUp, endsDown map[string]bool // transcripts whose parent (child) chain ends
}

// recordTime is one time field of a record.
type recordTime struct {
	name string
	t    time.Time
}

// writableTimes refuses a record time that cannot be stored: times are
// kept in UTC, and JSON times have four-digit years (0 to 9999).
func writableTimes(what string, ts ...recordTime) error {
	for _, x := range ts {
		if !x.t.IsZero() && !JSONTime(x.t.UTC()) {
			return invalid("%s: %s %s is outside the years 0 to 9999 in UTC", what, x.name, x.t.Format(time.RFC3339))
		}
	}
	return nil
}

func invalid(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, ErrInvalid)...)
}

func counter(what string, n uint64) error {
	if n > MaxCounter {
		return invalid("%s %d is above the largest accepted (2^53 = %d, which leaves room to grow)", what, n, uint64(MaxCounter))
	}
	return nil
}

func (c *recordCheck) inStoreSession(id string) (bool, error) {
	if c.st == nil {
		return false, nil
	}
	if ok, done := c.storeSessions[id]; done {
		return ok, nil
	}
	_, err := c.st.GetSession(c.ctx, id, time.Time{})
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	c.storeSessions[id] = err == nil
	return err == nil, nil
}

// inStoreTranscript returns the session of transcript id in the store, ""
// when the store has no such transcript.
func (c *recordCheck) inStoreTranscript(id string) (string, error) {
	if c.st == nil {
		return "", nil
	}
	if s, done := c.storeTranscripts[id]; done {
		return s, nil
	}
	t, err := c.st.GetTranscript(c.ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return "", err
	}
	c.storeTranscripts[id] = t.Session
	if err != nil {
		c.storeTranscripts[id] = ""
	} else {
		c.storeLinks[id] = &t
	}
	return c.storeTranscripts[id], nil
}

// MaxLineage bounds a lineage: a chain of parents or children longer than
// this is taken for a loop (an import refuses it; a walk reports it).
const MaxLineage = 100000

// lineageLoop follows t's parents (up) or children, through the records
// and then the store, and returns the chain that comes back to a
// transcript already met, nil when the chain ends.
func (c *recordCheck) lineageLoop(t *Transcript, up bool) ([]string, error) {
	ends, link := c.endsDown, func(t *Transcript) string { return t.Child }
	if up {
		ends, link = c.endsUp, func(t *Transcript) string { return t.Parent }
	}
	chain, seen := []string{t.ID}, map[string]bool{t.ID: true}
	for cur := t; ; {
		next := link(cur)
		if next == "" || ends[next] {
			for _, id := range chain {
				ends[id] = true
			}
			return nil, nil
		}
		chain = append(chain, next)
		if seen[next] || len(chain) > MaxLineage {
			return chain, nil
		}
		seen[next] = true
		if n, ok := c.transcripts[next]; ok {
			cur = n
			continue
		}
		if _, err := c.inStoreTranscript(next); err != nil {
			return nil, err
		}
		n, ok := c.storeLinks[next]
		if !ok {
			return nil, nil // not there: refused as a reference, not as a loop
		}
		cur = n
	}
}

func (c *recordCheck) inStoreAdmission(id string) (bool, error) {
	if c.st == nil {
		return false, nil
	}
	if ok, done := c.storeAdmissions[id]; done {
		return ok, nil
	}
	_, err := c.st.GetAdmission(c.ctx, id)
	if err != nil && !errors.Is(err, ErrNotFound) {
		return false, err
	}
	c.storeAdmissions[id] = err == nil
	return err == nil, nil
}

// sessionBefore requires session id earlier in the records or in the store.
func (c *recordCheck) sessionBefore(what, id string) error {
	if err := ValidateID("session", id); err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if _, ok := c.sessions[id]; ok {
		return nil
	}
	ok, err := c.inStoreSession(id)
	if err != nil {
		return err
	}
	if !ok {
		return invalid("%s: session %s is neither in the store nor before it in the import", what, id)
	}
	return nil
}

// transcriptOf returns the session of transcript id, from the records or
// the store, "" when it is in neither.
func (c *recordCheck) transcriptOf(id string) (string, error) {
	if t, ok := c.transcripts[id]; ok {
		return t.Session, nil
	}
	return c.inStoreTranscript(id)
}
