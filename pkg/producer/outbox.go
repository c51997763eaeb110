package producer

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
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

	mu   sync.Mutex  // one operation at a time in this process; guards held and idle
	held *heldFile   // the file, open between operations (outbox_hold.go)
	idle *time.Timer // looks at the held file while no operation uses it
	hold time.Duration

	gmu   sync.Mutex   // guards group
	group []*groupCall // writes waiting to share one transaction (outbox_group.go)
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
	// bucketLeases: seq → a claimed event's claim (outbox_lease.go)
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
	o := &Outbox{path: filepath.Join(dir, OutboxFile), opts: opts, hold: outboxHold}
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

func (o *Outbox) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	db, err := o.open(ctx)
	if err != nil {
		return err
	}
	err = db.Update(func(tx *bolt.Tx) error {
		if err := createBuckets(tx); err != nil {
			return err
		}
		return fn(tx)
	})
	if derr := o.done(err); err == nil {
		err = derr
	}
	return err
}

func createBuckets(tx *bolt.Tx) error {
	for _, b := range [][]byte{bucketEvents, bucketPending, bucketClaims, bucketSettled, bucketLeases} {
		if _, err := tx.CreateBucketIfNotExists(b); err != nil {
			return err
		}
	}
	return nil
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
	if derr := o.done(err); err == nil {
		err = derr
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
	e, err := decodeEntry(v)
	if err != nil {
		return nil, fmt.Errorf("outbox: entry %q: %w", key, err)
	}
	return e, nil
}

func putEntry(tx *bolt.Tx, key []byte, e *Entry) error {
	b, err := encodeEntry(e)
	if err != nil {
		return err
	}
	return tx.Bucket(bucketEvents).Put(key, b)
}
