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
// An event is pending until it is delivered (Complete) or dropped (Drop, or
// Release once it has used up its attempts). A pending event is ready when
// it is not claimed, or when its claim's lease ran out: the host that
// claimed it died before settling, so it is offered again.
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
	// MaxAttempts is how many claims an event gets before a Release drops
	// it. 0: 8.
	MaxAttempts int
	// Retention is how long delivered and dropped events are kept (to be
	// listed, and so that adding the same event again is recognised).
	// 0: 7 days.
	Retention time.Duration
	// Coalesce makes Poll offer the ready events of one session and target
	// as one offer with a part each (see Coalesce).
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
	StateDropped   = "dropped"
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
	Reason    string    `json:"reason,omitempty"`
}

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
	if opts.Lease < 0 || opts.LockWait < 0 || opts.MaxAttempts < 0 || opts.Retention < 0 {
		return nil, fmt.Errorf("outbox: negative lease, lock wait, attempts or retention")
	}
	if opts.LockWait == 0 {
		opts.LockWait = 10 * time.Second
	}
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = 8
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
// (pending, delivered or dropped): the first one recorded wins.
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

// Poll claims up to max ready events, oldest first, and returns them as
// offers: one per event, or with Coalesce one per session and target with
// a part each. Each claim counts an attempt. It also forgets delivered and
// dropped events older than the retention.
func (o *Outbox) Poll(ctx context.Context, max int) ([]Offer, error) {
	if max <= 0 {
		return nil, fmt.Errorf("outbox: poll: max %d is not positive", max)
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
		for k, v := c.First(); k != nil && len(ready) < max; k, v = c.Next() {
			e, err := getEntry(tx, v)
			if err != nil {
				return err
			}
			if e == nil || e.State != StatePending {
				continue
			}
			if e.Claim != "" && now.Before(e.ClaimedAt.Add(o.opts.Lease)) {
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
			groups = coalesceIndexes(events)
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
			for _, i := range g {
				e := ready[i]
				if e.Claim != "" {
					if err := forgetClaimed(claims, e.Claim, keys[i]); err != nil {
						return err
					}
				}
				e.Claim, e.ClaimedAt = claim, now
				e.Attempts++
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
			offers = append(offers, makeOffer(gevents, claim, o.opts.Coalesce))
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

// Settle ends a claim. complete: the claim's events are delivered.
// release: they are ready again, or dropped when they used up their
// attempts. defer: they are ready again and the attempt is refunded. drop:
// they are dropped with the reason. ErrUnknownClaim when the outbox holds no
// event under that claim.
func (o *Outbox) Settle(ctx context.Context, claim string, action Action, reason string) error {
	if _, ok := actionNames[action]; !ok {
		return fmt.Errorf("outbox: settle: unknown action %d", int(action))
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
			e.Claim, e.ClaimedAt = "", time.Time{}
			state := StatePending
			switch action {
			case Complete:
				state = StateDelivered
			case Drop:
				state, e.Reason = StateDropped, reason
			case Release:
				e.Reason = reason
				if e.Attempts >= o.opts.MaxAttempts {
					state = StateDropped
					e.Reason = fmt.Sprintf("released after %d attempts: %s", e.Attempts, reason)
				}
			case Defer:
				e.Reason = reason
				if e.Attempts > 0 {
					e.Attempts--
				}
			}
			if state != StatePending {
				e.State, e.SettledAt = state, now
				if err := tx.Bucket(bucketPending).Delete(seqKey(e.Seq)); err != nil {
					return err
				}
				sk := append(seqKey(uint64(now.UnixNano())), seqKey(e.Seq)...)
				if err := tx.Bucket(bucketSettled).Put(sk, key); err != nil {
					return err
				}
			}
			if err := putEntry(tx, key, e); err != nil {
				return err
			}
		}
		if held == 0 {
			return ErrUnknownClaim
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("outbox: settle %s %s: %w", action, claim, err)
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
	Pending   int `json:"pending"`
	Claimed   int `json:"claimed"` // pending events under a claim
	Delivered int `json:"delivered"`
	Dropped   int `json:"dropped"`
}

// Count returns how many events the outbox holds in each state.
func (o *Outbox) Count(ctx context.Context) (Counts, error) {
	var c Counts
	es, err := o.Entries(ctx)
	if err != nil {
		return c, err
	}
	for _, e := range es {
		switch e.State {
		case StatePending:
			c.Pending++
			if e.Claim != "" {
				c.Claimed++
			}
		case StateDelivered:
			c.Delivered++
		case StateDropped:
			c.Dropped++
		}
	}
	return c, nil
}
