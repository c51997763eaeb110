package producer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"
	"unicode/utf8"

	bolt "go.etcd.io/bbolt"
	bolterrors "go.etcd.io/bbolt/errors"
)

// An Outbox is a producer's durable list of events, in its own bbolt file
// (outbox.db in the plugin's state folder; file 0600, folder 0700). It
// implements Producer: Poll claims ready events under a lease, Settle ends
// the claim.
//
// An event is pending until it is delivered (Complete) or rejected (Reject:
// the store called it invalid; kept with the reason, never offered again).
// Retry keeps it pending with the reason and a not-before time: however
// often it is refused, an event is never dropped by the outbox on its own.
// It leaves the outbox only as delivered (forgotten after the retention),
// or by an operator's decision: Drop (producers outbox drop), or the age
// limit OutboxOptions.MaxAge (producer_max_age; none by default). A
// pending event is ready when its not-before time has passed and it is not
// claimed, or its claim's lease ran out: the host that claimed it died
// before settling, so it is offered again.
//
// Outboxes written before the rejected state hold events in state
// dropped (refused, by the old policy): they are read as they are, listed
// and counted as dropped, and never offered again.
//
// Several processes use one outbox: the plugin serving it, and the commands
// that add events to it (hermesq delegate done, hermesq proc run) while the
// plugin runs. bbolt lets one process at a time open a file, so the outbox
// never holds the file open between operations: every operation opens it,
// waiting for the file lock at most OutboxOptions.LockWait (then ErrLocked),
// and closes it when done. Within one process, operations take turns.
type Outbox struct {
	path string
	opts OutboxOptions

	mu sync.Mutex // one operation at a time in this process
}

// OutboxOptions configure an Outbox. The zero value is usable.
type OutboxOptions struct {
	// Lease is how long a claim stays taken when nobody settles it.
	// 0: $HERMESQ_PRODUCER_LEASE, else DefaultLease (5 minutes).
	Lease time.Duration
	// LockWait bounds the wait for another process's operation on the
	// outbox file. 0: 10 seconds.
	LockWait time.Duration
	// MaxAge is the operator's age limit of pending events: Poll drops a
	// pending event added longer ago, with the reason. 0:
	// $HERMESQ_PRODUCER_MAX_AGE, else none (events wait however long).
	MaxAge time.Duration
	// Retention is how long delivered and dropped events are kept (to be
	// listed, and so that adding the same event again is recognised).
	// Rejected events are kept until dropped. 0: 7 days.
	Retention time.Duration
	// Coalesce makes Poll offer the ready events of one session and target
	// as one offer with a part each (see Coalesce), cut into groups that
	// fit the host's payload limit.
	Coalesce bool
	// Now is the clock; nil: time.Now.
	Now func() time.Time
}

// OutboxFile is the outbox's file name in the plugin's state folder.
const OutboxFile = "outbox.db"

// Event states.
const (
	StatePending   = "pending"
	StateDelivered = "delivered"
	StateRejected  = "rejected" // invalid, kept with the reason until an operator drops it
	StateDropped   = "dropped"  // by an operator (or, in old outboxes, by the old retry policy)
)

// ErrLocked is returned when the outbox file stayed locked by another
// process longer than OutboxOptions.LockWait.
var ErrLocked = errors.New("outbox is locked by another process")

// ErrInvalidEvent is returned by Add for an event that could never be
// offered.
var ErrInvalidEvent = errors.New("invalid event")

// Event is one producer event: the session it is for, the transcript the
// work started from, its identity (unique within the session), and its text
// or payload (a JSON object with a "text" member).
type Event struct {
	Session  string          `json:"session"`
	Target   string          `json:"target"`
	Identity string          `json:"identity"`
	Text     string          `json:"text,omitempty"`
	Payload  json.RawMessage `json:"payload,omitempty"`
}

// Entry is an event in the outbox with its delivery state.
type Entry struct {
	Event
	Seq       uint64    `json:"seq"`
	State     string    `json:"state"`
	Claim     string    `json:"claim,omitempty"`
	ClaimedAt time.Time `json:"claimed_at,omitzero"`
	Attempts  int       `json:"attempts"`
	AddedAt   time.Time `json:"added_at"`
	SettledAt time.Time `json:"settled_at,omitzero"`
	// Reason is why the event was last refused (pending: it waits after a
	// refusal), rejected or dropped.
	Reason string `json:"reason,omitempty"`
	// RefusedAt is when the store last refused it; NotBefore when it may be
	// offered again.
	RefusedAt time.Time `json:"refused_at,omitzero"`
	NotBefore time.Time `json:"not_before,omitzero"`
}

// Waiting reports whether e is pending after a refusal.
func (e Entry) Waiting() bool { return e.State == StatePending && !e.RefusedAt.IsZero() }

// Buckets of the outbox file.
var (
	bucketEvents  = []byte("events")  // session \x00 identity → Entry JSON
	bucketPending = []byte("pending") // seq (8 bytes, big-endian) → events key
	bucketClaims  = []byte("claims")  // claim token → JSON list of events keys
	bucketSettled = []byte("settled") // settled_at (8) + seq (8) → events key, for retention
)

// OpenOutbox returns the outbox in dir (created 0700 with its file 0600 on
// first use). dir must be an absolute path.
func OpenOutbox(dir string, opts OutboxOptions) (*Outbox, error) {
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, fmt.Errorf("outbox: state folder %q is not an absolute path (is %s set?)", dir, EnvStateDir)
	}
	if opts.Lease == 0 {
		d, err := LeaseFromEnv()
		if err != nil {
			return nil, err
		}
		opts.Lease = d
	}
	if opts.MaxAge == 0 {
		d, err := MaxAgeFromEnv()
		if err != nil {
			return nil, err
		}
		opts.MaxAge = d
	}
	if opts.Lease < 0 || opts.LockWait < 0 || opts.MaxAge < 0 || opts.Retention < 0 {
		return nil, fmt.Errorf("outbox: negative lease, lock wait, age limit or retention")
	}
	if opts.LockWait == 0 {
		opts.LockWait = 10 * time.Second
	}
	if opts.Retention == 0 {
		opts.Retention = 7 * 24 * time.Hour
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("outbox: create state folder: %w", err)
	}
	o := &Outbox{path: filepath.Join(dir, OutboxFile), opts: opts}
	if err := o.update(context.Background(), func(*bolt.Tx) error { return nil }); err != nil {
		return nil, err
	}
	return o, nil
}

// Path is the outbox's file.
func (o *Outbox) Path() string { return o.path }

func (o *Outbox) now() time.Time {
	if o.opts.Now != nil {
		return o.opts.Now().UTC()
	}
	return time.Now().UTC()
}

// open opens the file for one operation, waiting for another process's
// operation at most LockWait.
func (o *Outbox) open(ctx context.Context) (*bolt.DB, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	wait := o.opts.LockWait
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
		wait = max(time.Until(dl), time.Millisecond)
	}
	db, err := bolt.Open(o.path, 0o600, &bolt.Options{Timeout: wait})
	if errors.Is(err, bolterrors.ErrTimeout) {
		return nil, fmt.Errorf("outbox %s: waited %s: %w", o.path, wait, ErrLocked)
	}
	if err != nil {
		return nil, fmt.Errorf("outbox %s: open: %w", o.path, err)
	}
	return db, nil
}

func (o *Outbox) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	db, err := o.open(ctx)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{bucketEvents, bucketPending, bucketClaims, bucketSettled} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return fn(tx)
	})
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("outbox %s: close: %w", o.path, cerr)
	}
	return err
}

func (o *Outbox) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	db, err := o.open(ctx)
	if err != nil {
		return err
	}
	err = db.View(func(tx *bolt.Tx) error {
		if tx.Bucket(bucketEvents) == nil {
			return nil
		}
		return fn(tx)
	})
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("outbox %s: close: %w", o.path, cerr)
	}
	return err
}

func eventKey(session, identity string) []byte {
	return []byte(session + "\x00" + identity)
}

func seqKey(seq uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], seq)
	return b[:]
}

func getEntry(tx *bolt.Tx, key []byte) (*Entry, error) {
	v := tx.Bucket(bucketEvents).Get(key)
	if v == nil {
		return nil, nil
	}
	var e Entry
	if err := json.Unmarshal(v, &e); err != nil {
		return nil, fmt.Errorf("outbox: entry %q: %w", key, err)
	}
	return &e, nil
}

func putEntry(tx *bolt.Tx, key []byte, e *Entry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketEvents).Put(key, b)
}

// Validate reports why an event could never be offered: no session or
// identity, neither or both of text and payload, a payload that is not a
// JSON object with a string "text", text that is not UTF-8.
func (e Event) Validate() error {
	switch {
	case e.Session == "":
		return fmt.Errorf("event has no session: %w", ErrInvalidEvent)
	case e.Identity == "":
		return fmt.Errorf("event has no identity: %w", ErrInvalidEvent)
	case e.Text == "" && len(e.Payload) == 0:
		return fmt.Errorf("event %s has neither text nor payload: %w", e.Identity, ErrInvalidEvent)
	case e.Text != "" && len(e.Payload) > 0:
		return fmt.Errorf("event %s has both text and payload: %w", e.Identity, ErrInvalidEvent)
	case !utf8.ValidString(e.Text) || !utf8.ValidString(e.Identity) || !utf8.ValidString(e.Session):
		return fmt.Errorf("event %s is not valid utf-8: %w", e.Identity, ErrInvalidEvent)
	}
	if len(e.Payload) > 0 {
		var obj map[string]json.RawMessage
		if err := json.Unmarshal(e.Payload, &obj); err != nil {
			return fmt.Errorf("event %s: payload is not a json object: %w", e.Identity, ErrInvalidEvent)
		}
		var text string
		if err := json.Unmarshal(obj["text"], &text); err != nil || text == "" {
			return fmt.Errorf("event %s: payload has no non-empty string \"text\": %w", e.Identity, ErrInvalidEvent)
		}
	}
	return nil
}

// Add records an event as pending. It returns false, and changes nothing,
// when the outbox already holds an event of that session and identity
// (pending, delivered, rejected or dropped): the first one recorded wins.
func (o *Outbox) Add(ctx context.Context, ev Event) (added bool, err error) {
	n, err := o.AddAll(ctx, []Event{ev})
	return n == 1, err
}

// AddAll records events as pending in one write, in order, and returns how
// many were new (see Add). An invalid event refuses the whole call, nothing
// written.
func (o *Outbox) AddAll(ctx context.Context, evs []Event) (added int, err error) {
	evs = slices.Clone(evs)
	for i := range evs {
		if err := evs[i].Validate(); err != nil {
			return 0, err
		}
		if len(evs[i].Payload) > 0 {
			var buf bytes.Buffer
			if err := json.Compact(&buf, evs[i].Payload); err != nil {
				return 0, fmt.Errorf("event %s: payload: %v: %w", evs[i].Identity, err, ErrInvalidEvent)
			}
			evs[i].Payload = buf.Bytes()
		}
	}
	now := o.now()
	err = o.update(ctx, func(tx *bolt.Tx) error {
		added = 0
		for _, ev := range evs {
			key := eventKey(ev.Session, ev.Identity)
			if tx.Bucket(bucketEvents).Get(key) != nil {
				continue
			}
			seq, err := tx.Bucket(bucketEvents).NextSequence()
			if err != nil {
				return err
			}
			e := &Entry{Event: ev, Seq: seq, State: StatePending, AddedAt: now}
			if err := putEntry(tx, key, e); err != nil {
				return err
			}
			added++
			if err := tx.Bucket(bucketPending).Put(seqKey(seq), key); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("outbox: add: %w", err)
	}
	return added, nil
}

func newClaim() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic("producer: crypto/rand: " + err.Error())
	}
	return hex.EncodeToString(b[:])
}

// Poll claims up to req.Max ready events, oldest first, and returns them
// as offers: one per event, or with Coalesce one per session and target
// with a part each, cut to fit req.PayloadLimit. Each claim counts an
// attempt. It also forgets delivered and dropped events older than the
// retention, and drops pending events older than the age limit (MaxAge).
func (o *Outbox) Poll(ctx context.Context, req PollRequest) ([]Offer, error) {
	limit := req.Max
	if limit <= 0 {
		return nil, fmt.Errorf("outbox: poll: max %d is not positive", limit)
	}
	now := o.now()
	var offers []Offer
	err := o.update(ctx, func(tx *bolt.Tx) error {
		offers = nil
		if err := o.prune(tx, now); err != nil {
			return err
		}
		var ready []*Entry
		var keys [][]byte
		c := tx.Bucket(bucketPending).Cursor()
		for k, v := c.First(); k != nil && len(ready) < limit; k, v = c.Next() {
			e, err := getEntry(tx, v)
			if err != nil {
				return err
			}
			if e == nil || e.State != StatePending {
				continue
			}
			if o.opts.MaxAge > 0 && now.Sub(e.AddedAt) > o.opts.MaxAge && (e.Claim == "" || !now.Before(e.ClaimedAt.Add(o.opts.Lease))) {
				if err := o.expire(tx, v, e, now); err != nil {
					return err
				}
				continue
			}
			if e.Claim != "" && now.Before(e.ClaimedAt.Add(o.opts.Lease)) || now.Before(e.NotBefore) {
				continue
			}
			ready = append(ready, e)
			keys = append(keys, bytes.Clone(v))
		}
		if len(ready) == 0 {
			return nil
		}
		events := make([]Event, len(ready))
		for i, e := range ready {
			events[i] = e.Event
		}
		var groups [][]int
		if o.opts.Coalesce {
			groups = coalesceIndexes(events, req.PayloadLimit)
		} else {
			for i := range events {
				groups = append(groups, []int{i})
			}
		}
		claims := tx.Bucket(bucketClaims)
		for _, g := range groups {
			claim := newClaim()
			var gkeys [][]byte
			var gevents []Event
			attempts := 0
			for _, i := range g {
				e := ready[i]
				if e.Claim != "" {
					if err := forgetClaimed(claims, e.Claim, keys[i]); err != nil {
						return err
					}
				}
				e.Claim, e.ClaimedAt = claim, now
				e.Attempts++
				attempts = max(attempts, e.Attempts)
				if err := putEntry(tx, keys[i], e); err != nil {
					return err
				}
				gkeys = append(gkeys, keys[i])
				gevents = append(gevents, e.Event)
			}
			b, err := json.Marshal(gkeys)
			if err != nil {
				return err
			}
			if err := claims.Put([]byte(claim), b); err != nil {
				return err
			}
			offer := makeOffer(gevents, claim, o.opts.Coalesce)
			offer.Attempts = attempts
			offers = append(offers, offer)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: poll: %w", err)
	}
	return offers, nil
}

// forgetClaimed removes key from an expired claim's list, and the claim
// when nothing is left in it.
func forgetClaimed(claims *bolt.Bucket, claim string, key []byte) error {
	v := claims.Get([]byte(claim))
	if v == nil {
		return nil
	}
	var keys [][]byte
	if err := json.Unmarshal(v, &keys); err != nil {
		return err
	}
	kept := keys[:0]
	for _, k := range keys {
		if !bytes.Equal(k, key) {
			kept = append(kept, k)
		}
	}
	if len(kept) == 0 {
		return claims.Delete([]byte(claim))
	}
	b, err := json.Marshal(kept)
	if err != nil {
		return err
	}
	return claims.Put([]byte(claim), b)
}

// expire drops pending event e (at key) for being older than the age
// limit.
func (o *Outbox) expire(tx *bolt.Tx, key []byte, e *Entry, now time.Time) error {
	if e.Claim != "" {
		if err := forgetClaimed(tx.Bucket(bucketClaims), e.Claim, key); err != nil {
			return err
		}
	}
	reason := fmt.Sprintf("older than the age limit producer_max_age (%s)", o.opts.MaxAge)
	if e.Reason != "" {
		reason += "; last refused: " + e.Reason
	}
	return o.finish(tx, key, e, StateDropped, reason, now)
}

// finish ends pending (or rejected) event e, at key, in state (delivered,
// rejected or dropped) with the reason.
func (o *Outbox) finish(tx *bolt.Tx, key []byte, e *Entry, state, reason string, now time.Time) error {
	e.Claim, e.ClaimedAt, e.NotBefore = "", time.Time{}, time.Time{}
	if reason != "" {
		e.Reason = reason
	}
	e.State, e.SettledAt = state, now
	if err := tx.Bucket(bucketPending).Delete(seqKey(e.Seq)); err != nil {
		return err
	}
	if state != StateRejected { // rejected events stay until an operator drops them
		sk := append(seqKey(uint64(now.UnixNano())), seqKey(e.Seq)...)
		if err := tx.Bucket(bucketSettled).Put(sk, key); err != nil {
			return err
		}
	}
	return putEntry(tx, key, e)
}

// prune forgets delivered and dropped events settled before the retention.
func (o *Outbox) prune(tx *bolt.Tx, now time.Time) error {
	cutoff := uint64(now.Add(-o.opts.Retention).UnixNano())
	settled := tx.Bucket(bucketSettled)
	c := settled.Cursor()
	for k, v := c.First(); k != nil && binary.BigEndian.Uint64(k[:8]) < cutoff; k, v = c.First() {
		if err := tx.Bucket(bucketEvents).Delete(v); err != nil {
			return err
		}
		if err := settled.Delete(k); err != nil {
			return err
		}
	}
	return nil
}

// Settle ends a claim. complete: the claim's events are delivered. retry:
// they stay pending with the reason, ready again at s.NotBefore. reject:
// they are rejected with the reason. Identities named in s.Delivered are
// delivered whatever the action. ErrUnknownClaim when the outbox holds no
// event under that claim.
func (o *Outbox) Settle(ctx context.Context, claim string, s Settlement) error {
	if _, ok := actionNames[s.Action]; !ok {
		return fmt.Errorf("outbox: settle: unknown action %d", int(s.Action))
	}
	now := o.now()
	err := o.update(ctx, func(tx *bolt.Tx) error {
		claims := tx.Bucket(bucketClaims)
		v := claims.Get([]byte(claim))
		if v == nil {
			return ErrUnknownClaim
		}
		var keys [][]byte
		if err := json.Unmarshal(v, &keys); err != nil {
			return err
		}
		if err := claims.Delete([]byte(claim)); err != nil {
			return err
		}
		held := 0
		for _, key := range keys {
			e, err := getEntry(tx, key)
			if err != nil {
				return err
			}
			if e == nil || e.State != StatePending || e.Claim != claim {
				continue
			}
			held++
			action := s.Action
			if slices.Contains(s.Delivered, e.Identity) {
				action = Complete
			}
			switch action {
			case Complete:
				err = o.finish(tx, key, e, StateDelivered, "", now)
			case Reject:
				err = o.finish(tx, key, e, StateRejected, s.Reason, now)
			case Retry:
				e.Claim, e.ClaimedAt = "", time.Time{}
				e.Reason, e.RefusedAt, e.NotBefore = s.Reason, now, s.NotBefore.UTC()
				err = putEntry(tx, key, e)
			}
			if err != nil {
				return err
			}
		}
		if held == 0 {
			return ErrUnknownClaim
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: settle %s %s: %w", s.Action, claim, err)
	}
	return nil
}

// ErrNoEvent is returned by Drop for a sequence number the outbox does not
// hold, or holds delivered.
var ErrNoEvent = errors.New("no such pending or rejected event")

// Drop is the operator's decision to give up events: the pending or
// rejected events with the given sequence numbers (Entry.Seq) are dropped
// with the reason, in one write. A sequence number of no such event
// refuses the whole call (ErrNoEvent), nothing written. A claimed event is
// dropped too: the host's later settle of it changes nothing.
func (o *Outbox) Drop(ctx context.Context, seqs []uint64, reason string) error {
	now := o.now()
	err := o.update(ctx, func(tx *bolt.Tx) error {
		byseq := map[uint64][]byte{}
		err := tx.Bucket(bucketEvents).ForEach(func(k, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			if e.State == StatePending || e.State == StateRejected {
				byseq[e.Seq] = bytes.Clone(k)
			}
			return nil
		})
		if err != nil {
			return err
		}
		for _, seq := range seqs {
			if byseq[seq] == nil {
				return fmt.Errorf("event %d: %w", seq, ErrNoEvent)
			}
		}
		for _, seq := range seqs {
			key := byseq[seq]
			e, err := getEntry(tx, key)
			if err != nil {
				return err
			}
			if e.State == StateDropped { // named twice
				continue
			}
			if e.Claim != "" {
				if err := forgetClaimed(tx.Bucket(bucketClaims), e.Claim, key); err != nil {
					return err
				}
			}
			r := reason
			if e.Reason != "" {
				r += "; last refused: " + e.Reason
			}
			if err := o.finish(tx, key, e, StateDropped, r, now); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: drop: %w", err)
	}
	return nil
}

// Entries returns every event the outbox holds, in the order they were
// added.
func (o *Outbox) Entries(ctx context.Context) ([]Entry, error) {
	var out []Entry
	err := o.view(ctx, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketEvents).ForEach(func(_, v []byte) error {
			var e Entry
			if err := json.Unmarshal(v, &e); err != nil {
				return err
			}
			out = append(out, e)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("outbox: list: %w", err)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Seq < out[j].Seq })
	return out, nil
}

// Counts is how many events an outbox holds in each state.
type Counts struct {
	Pending int `json:"pending"`
	Claimed int `json:"claimed"` // pending events under a claim
	// Waiting counts the pending events the store refused (they wait for
	// their not-before time); OldestWaiting is when the oldest of them was
	// added, LastReason the reason of the latest refusal.
	Waiting       int       `json:"waiting"`
	OldestWaiting time.Time `json:"oldest_waiting,omitzero"`
	LastReason    string    `json:"last_reason,omitempty"`
	Rejected      int       `json:"rejected"`
	Delivered     int       `json:"delivered"`
	Dropped       int       `json:"dropped"`
}

// Count returns how many events the outbox holds in each state.
func (o *Outbox) Count(ctx context.Context) (Counts, error) {
	es, err := o.Entries(ctx)
	if err != nil {
		return Counts{}, err
	}
	return CountEntries(es), nil
}

// CountEntries counts entries by state.
func CountEntries(es []Entry) Counts {
	var c Counts
	var lastRefused time.Time
	for _, e := range es {
		switch e.State {
		case StatePending:
			c.Pending++
			if e.Claim != "" {
				c.Claimed++
			}
			if e.Waiting() {
				c.Waiting++
				if c.OldestWaiting.IsZero() || e.AddedAt.Before(c.OldestWaiting) {
					c.OldestWaiting = e.AddedAt
				}
				if !e.RefusedAt.Before(lastRefused) {
					lastRefused, c.LastReason = e.RefusedAt, e.Reason
				}
			}
		case StateDelivered:
			c.Delivered++
		case StateRejected:
			c.Rejected++
		case StateDropped:
			c.Dropped++
		}
	}
	return c
}
