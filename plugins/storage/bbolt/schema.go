package bbolt

import (
	"bytes"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Schema of a hermesq bbolt file. Every bucket and fixed key is named here,
// once. Integer keys are big-endian so cursor order is numeric order.
//
//	meta/                      magic, schema version, admins (JSON list of
//	                           the principals with the store-wide admin right)
//	sessions/<session id>/     one nested bucket per session:
//	    session                JSON sessionRec (durable fields and counters)
//	    adm/<seq>              JSON admRec, by FIFO position
//	    ident/<identity>       admission id holding the identity
//	    req/<principal\0rid>   admission id of a human request id
//	    queued/<seq>           status index: queued admissions (the FIFO)
//	    active/<seq>           status index: running or unknown admissions
//	    viewers/<viewer id>    expiry, unix nanoseconds
//	    transcripts/<id>       the session's transcripts (an index)
//	transcripts/<id>           JSON backend.Transcript
//	messages/<transcript>/<seq> JSON backend.Message
//	admissions/<id>            session id \0 seq: where an admission lives
//	changes/<n>                session id written by change n (a bounded log
//	                           that Subscribe reads to name changed sessions)
const (
	// schemaVersion is written on creation and checked on every open; a
	// file with a newer version is refused.
	schemaVersion uint64 = 1
	// storeMagic marks a bbolt file as a hermesq store.
	storeMagic = "hermesq"
	// changeLogSize is how many of the newest changes the change log
	// keeps at least; a subscriber further behind treats every session as
	// changed.
	changeLogSize = 4096
	// changeLogSlack is how far the log may grow past changeLogSize
	// before the oldest entries are dropped, all of the excess in one
	// commit: dropping one entry a commit wrote the log's first leaf in
	// every commit beside its last (one of the 16 to 20 pages an admit or
	// a turn writes; BenchmarkCommitPages).
	changeLogSlack = 512
)

var (
	bucketMeta        = []byte("meta")
	bucketSessions    = []byte("sessions")
	bucketTranscripts = []byte("transcripts")
	bucketMessages    = []byte("messages")
	bucketAdmissions  = []byte("admissions")
	bucketChanges     = []byte("changes")

	topBuckets = [][]byte{bucketMeta, bucketSessions, bucketTranscripts, bucketMessages, bucketAdmissions, bucketChanges}

	keyMagic  = []byte("magic")
	keySchema = []byte("schema")
	keyAdmins = []byte("admins")

	keySession           = []byte("session")
	subAdmissions        = []byte("adm")
	subIdentities        = []byte("ident")
	subRequests          = []byte("req")
	subQueued            = []byte("queued")
	subActive            = []byte("active")
	subViewers           = []byte("viewers")
	subTranscripts       = []byte("transcripts")
	sessionSubBuckets    = [][]byte{subAdmissions, subIdentities, subRequests, subQueued, subActive, subViewers, subTranscripts}
	emptyValue           = []byte{}
	requestKeySeparator  = []byte{0}
	locationKeySeparator = byte(0)
)

// appendFill is how full bbolt fills a leaf it splits in the buckets whose
// keys grow at one end: adm/ and queued/ (seq numbers, as admitted),
// admissions/ (admission ids begin with their time), changes/ and
// messages/<transcript>/. bbolt's default, 0.5, suits keys that land
// anywhere, but an index appended to keeps every leaf but the last half
// empty forever: full leaves halve the pages such an index takes, the
// file, and the pages a transaction appending many keys writes. A leaf
// whose records grow later (an admission claimed, then settled) is split
// at the default fill by that later transaction.
const appendFill = 1.0

// appending sets b to split its leaves full (appendFill) for the rest of
// this transaction, and returns it. Call it in write transactions that
// append keys in order.
func appending(b *bolt.Bucket) *bolt.Bucket {
	b.FillPercent = appendFill
	return b
}

// u64 encodes n as an 8-byte big-endian key.
func u64(n uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, n)
	return b
}

// fromU64 decodes an 8-byte big-endian key; 0 for anything else.
func fromU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// requestKey is the req/ key of a human (principal, request id).
func requestKey(principal, requestID string) []byte {
	return bytes.Join([][]byte{[]byte(principal), []byte(requestID)}, requestKeySeparator)
}

// locationValue is the admissions/ value: session id \0 seq.
func locationValue(session string, seq uint64) []byte {
	b := make([]byte, 0, len(session)+9)
	b = append(b, session...)
	b = append(b, locationKeySeparator)
	return append(b, u64(seq)...)
}

// parseLocation splits an admissions/ value.
func parseLocation(v []byte) (session string, seq uint64, ok bool) {
	if len(v) < 9 || v[len(v)-9] != locationKeySeparator {
		return "", 0, false
	}
	return string(v[:len(v)-9]), fromU64(v[len(v)-8:]), true
}

// checkSchema verifies the magic and schema version, and creates the
// buckets of an empty file.
func checkSchema(db *bolt.DB, path string) error {
	var state int // 0 ok, 1 empty file, 2 needs buckets
	err := db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil {
			empty := true
			_ = tx.ForEach(func([]byte, *bolt.Bucket) error { empty = false; return nil })
			if !empty {
				return fmt.Errorf("bbolt: open %s: a bbolt file but not a hermesq store: %w", path, backend.ErrInternal)
			}
			state = 1
			return nil
		}
		if string(meta.Get(keyMagic)) != storeMagic {
			return fmt.Errorf("bbolt: open %s: not a hermesq store: %w", path, backend.ErrInternal)
		}
		if v := fromU64(meta.Get(keySchema)); v == 0 || v > schemaVersion {
			return fmt.Errorf("bbolt: open %s: schema version %d, this hermesq knows up to %d (upgrade hermesq): %w", path, v, schemaVersion, backend.ErrInternal)
		}
		for _, name := range topBuckets {
			if tx.Bucket(name) == nil {
				state = 2
			}
		}
		return nil
	})
	if err != nil || state == 0 {
		return err
	}
	return db.Update(func(tx *bolt.Tx) error {
		for _, name := range topBuckets {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return fmt.Errorf("bbolt: create bucket %s in %s: %v: %w", name, path, err, backend.ErrInternal)
			}
		}
		meta := tx.Bucket(bucketMeta)
		if meta.Get(keyMagic) == nil {
			if err := meta.Put(keyMagic, []byte(storeMagic)); err != nil {
				return err
			}
			return meta.Put(keySchema, u64(schemaVersion))
		}
		return nil
	})
}
