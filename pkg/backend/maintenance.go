package backend

import (
	"context"
	"time"
)

// Maintenance is the part of a Store that moves and trims what it holds:
// export, import, compaction, its size and the space given back.
type Maintenance interface {
	// Export calls fn with every record of the store: for each session (by
	// id) the session, then its transcripts by id, each followed by its
	// messages in seq order, then its admissions in seq order.
	Export(ctx context.Context, fn func(Record) error) error

	// Import writes records as Export produced them, keeping ids, seqs,
	// epochs and statuses. Importing a record already present with the same
	// content is a no-op (a transcript's counters are not content: they
	// count its imported messages); with other content, or an identity,
	// request id or seq another admission holds, ErrConflict. A message
	// that would leave a gap in its transcript is ErrInvalid. A record whose
	// session or transcript is neither in the store nor before it in recs
	// is ErrInvalid, and its batch is refused before anything is written;
	// so is a batch with a record conflicting with the store (bbolt writes
	// a batch in one transaction; Redis, spanning many slots, checks every
	// record against the store before it writes the first). The result
	// counts the records written and those already there.
	Import(ctx context.Context, recs []Record) (ImportResult, error)

	// Compact turns the session's done admissions settled before
	// req.Before into tombstones, at most req.Limit of them (0: all), in
	// seq order, in one atomic step. It examines only the admissions after
	// seq req.After, at most req.Scan of them (0: all), and says in
	// CompactResult.Next where the next call starts, so a compaction in
	// batches passes over the session once. A tombstone keeps every field of the
	// admission except its payload, whose SHA-1 digest (PayloadDigest) it
	// keeps instead, and it keeps holding the admission's identities,
	// request id and id: a later Admit that names any of them resolves to
	// the tombstone as a duplicate (payload comparisons use the digest),
	// exactly as it would have resolved to the admission. GetAdmission and
	// FindIdentity return a tombstone with Compacted set and no Payload;
	// ListAdmissions leaves tombstones out; Export writes them as
	// Record.Tombstone and Import takes them back. Queued, running and
	// unknown admissions, transcripts and messages are never compacted.
	// Compacting a tombstone again is a no-op. ErrNotFound for an unknown
	// session.
	Compact(ctx context.Context, req CompactRequest) (CompactResult, error)

	// Size reports the store's size in bytes: the bbolt file, or Redis's
	// used_memory summed over its masters (everything the servers hold).
	Size(ctx context.Context) (int64, error)

	// Reclaim gives the space that Compact freed back to the system and
	// reports the store's size in bytes before and after: bbolt writes a
	// compacted copy of the file beside it, syncs it and renames it over
	// the original while holding the store's lock (a crash at any point
	// leaves either the old file or the new one, both complete); Redis
	// asks the allocator to release freed memory and reports used_memory.
	// It changes no record.
	Reclaim(ctx context.Context) (ReclaimResult, error)
}

// ImportResult counts the records of an Import: written, and present
// already with the same content (skipped).
type ImportResult struct {
	Written, Present int
}

// CompactRequest selects the admissions Store.Compact turns into tombstones.
type CompactRequest struct {
	Session string
	Before  time.Time // settled strictly before this time
	Limit   int       // at most this many (0: no limit)
	After   uint64    // examine only admissions with a higher seq (0: from the first)
	Scan    int       // examine at most this many admissions (0: no limit)
}

// CompactResult lists the admissions that became tombstones, in seq order.
type CompactResult struct {
	Compacted []string
	// Next is the seq of the last admission the call examined, to pass as
	// CompactRequest.After to go on, when Limit or Scan stopped the call
	// before the session's last admission; 0 when it reached the end.
	Next uint64
}

// ReclaimResult is the store's size before and after Store.Reclaim, in
// bytes (bbolt: the file; Redis: used_memory).
type ReclaimResult struct {
	Before, After int64
}
