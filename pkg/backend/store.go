package backend

// Store is the durable state of hermesq: sessions, their FIFO of admissions,
// transcripts, viewers and drain leases. Each method is one atomic operation
// of the contract: one bbolt transaction, one Redis Lua script. A Store makes
// no decisions of policy (turn or note, which transcript, retries): those
// belong to pkg/admission, once, above every store.
//
// Every method is safe for concurrent use, from many goroutines and many
// processes. No method retries on its own except where it documents that the
// operation is idempotent. Methods never keep the caller's slices or maps and
// never return memory the store will change later. Times in requests come
// from the caller (Now fields) so tests can steer the clock; a zero Now means
// time.Now().
//
// Errors wrap one sentinel of errors.go. A store turns its own transient
// failures (bbolt lock wait exceeded, Redis connection refused or timed out,
// failover in progress) into ErrUnavailable, and anything it cannot explain
// into ErrInternal.
//
// A Store is its five roles, each documented in the file named for it:
// Sessions (sessions.go), Admissions (admissions.go), Drain (drain.go),
// Transcripts (transcripts.go) and Maintenance (maintenance.go).
type Store interface {
	Sessions
	Admissions
	Drain
	Transcripts
	Maintenance

	// Close releases the store's resources.
	Close() error
}
