package backend

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"strings"
	"time"
)

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
type Store interface {
	// OpenSession creates a session owned by req.Owner whose first transcript
	// has the session's id. It returns the existing session unchanged, with
	// created false, when the session exists. ErrConflict when a transcript
	// of another session already has that id; ErrInvalid for a bad id or
	// owner (ValidateID, ValidateToken).
	OpenSession(ctx context.Context, req OpenSessionRequest) (s Session, created bool, err error)

	// GetSession returns a session with its counters and the count of its
	// viewers live at now (zero: time.Now()).
	GetSession(ctx context.Context, id string, now time.Time) (Session, error)

	// ListSessions returns every session ordered by id.
	ListSessions(ctx context.Context, now time.Time) ([]Session, error)

	// Grant gives g.Principal g.Role on the session, replacing any grant
	// it had. ErrInvalid for a malformed grant (CheckGrant) or one to the
	// session's owner; ErrConflict when the session already has MaxGrants
	// grants; ErrNotFound for an unknown session. Who may grant is decided
	// above the store (only an owner may).
	Grant(ctx context.Context, session string, g Grant) error

	// Revoke removes principal's grant on the session. ErrNotFound when
	// the session is unknown or principal has no grant on it.
	Revoke(ctx context.Context, session, principal string) error

	// Caller says who opened the store, as the store itself knows it
	// (the Redis ACL user; the OS user for a file store).
	Caller(ctx context.Context) (Caller, error)

	// SetAdmin grants (admin true) or revokes the store-wide admin right of
	// principal: an admin may act as any principal. Admins lists them,
	// sorted. Who may call SetAdmin is decided above the store
	// (Caller.StoreAdmin).
	SetAdmin(ctx context.Context, principal string, admin bool) error
	Admins(ctx context.Context) ([]string, error)

	// Admit commits each request durably and atomically (docs/contract.md §2). The
	// requests are independent: one result per request, in order, each with
	// either an admission or an error (ErrConflict, ErrClosed, ErrForbidden,
	// ErrNotFound); the returned error is for the call as a whole (store
	// unavailable), in which case nothing was admitted. Stores may commit
	// the whole slice in one transaction.
	//
	// Within one atomic step per request:
	//   - the principal must be allowed to admit by Permits with
	//     AdmitAction(req.Kind) and req.Producer (ErrForbidden);
	//   - a human request to an unknown session creates it (owner =
	//     principal) when CreateSession is set, else ErrNotFound;
	//   - human with RequestID: an admission with the same (principal,
	//     request id) is returned as a duplicate when its payload is
	//     byte-equal, else ErrConflict;
	//   - human to a session whose current transcript is closed: ErrClosed,
	//     unless Reopen, which reopens it (clears ended_at and end_reason) in
	//     the same step;
	//   - automation: every identity already held by an admission of the
	//     session resolves to it, whatever its status; the identities not yet
	//     held form one new admission; PinnedTarget defaults to the session's
	//     current transcript;
	//   - a request whose ID names an existing admission: the same request
	//     re-sent (same session, kind, principal, payload) finds it as a
	//     duplicate; any other is ErrConflict;
	//   - a malformed request (CheckAdmitRequest) is ErrInvalid.
	Admit(ctx context.Context, reqs []AdmitRequest) ([]AdmitResult, error)

	// GetAdmission returns one admission by id.
	GetAdmission(ctx context.Context, id string) (Admission, error)

	// ListAdmissions returns a session's admissions in seq order, filtered.
	ListAdmissions(ctx context.Context, session string, f AdmissionFilter) ([]Admission, error)

	// FindIdentity returns the admission of the session holding identity, or
	// of any session when session is empty. ErrNotFound when none does.
	FindIdentity(ctx context.Context, session, identity string) (Admission, error)

	// AcquireLease takes the session's drain lease for holder: epoch+1,
	// expiry now+TTL (a TTL of 0 or less: DefaultLeaseTTL), and every
	// admission left running moves to unknown (Lease.Recovered).
	// ErrLeaseHeld while another holder's lease is live. req.Principal
	// is who drains: it must be allowed to by Permits with ActDrain, in
	// the same step (ErrForbidden, nothing written); the store keeps it
	// with the lease as the session's drain principal.
	AcquireLease(ctx context.Context, req LeaseRequest) (Lease, error)

	// RenewLease extends the lease of (holder, epoch) to now+TTL (TTL as
	// for AcquireLease), never shortening it: a renewal that reaches the
	// store after a later one keeps the later expiry (Lease.ExpiresAt is
	// the expiry kept). ErrFenced
	// when the session's epoch is no longer req.Epoch or the holder changed.
	RenewLease(ctx context.Context, req LeaseRequest) (Lease, error)

	// ReleaseLease gives the lease up; a no-op when (holder, epoch) no longer
	// holds it. The epoch is kept.
	ReleaseLease(ctx context.Context, req LeaseRequest) error

	// Claim moves the session's FIFO head, which must be req.AdmissionID,
	// from queued to running under (req.Epoch, session generation+1), and
	// records Mode and DeliveredTo. ErrFenced when req.Epoch is not the
	// session's current epoch; ErrBusy when an admission of the session is
	// running or unknown; ErrNotHead when the head is another admission (or
	// none); ErrNotFound when the session has no such admission.
	// ErrForbidden when the drain principal of the lease (AcquireLease)
	// is no longer allowed to drain the session (Permits with ActDrain,
	// read in the same step: a grant revoked since the lease was taken is
	// seen by the next claim). The same check is made, in the same step,
	// by every write that claims: Settle with Direct, SettleRun and the
	// claim of SettleClaim.
	Claim(ctx context.Context, req ClaimRequest) (Admission, error)

	// Settle ends an admission: status done with req.Outcome, appending
	// req.Messages to their transcripts in the same atomic step (a turn's
	// input and reply, or a note). The admission must be running under
	// (req.Epoch, req.Generation) and the session's epoch and generation
	// must still be those, else ErrFenced. With req.Direct the admission
	// must instead be the queued FIFO head (ErrNotHead, ErrBusy) and is
	// claimed and settled in one step: how notes and misroutes are written,
	// so a note can never be left running. Messages never change a
	// transcript's ended_at or end_reason, and go only to the session's own
	// transcripts (ErrNotFound otherwise). ErrNotFound, before any fence,
	// when the session has no such admission. With both Unwatched and
	// ExpectCurrent failing, ErrMoved. ErrInvalid for a malformed request
	// (CheckSettleRequest).
	Settle(ctx context.Context, req SettleRequest) (Admission, error)

	// SettleRun settles a run of admissions at the session's FIFO head in
	// one atomic step (one bbolt transaction, one Redis script): each
	// request, in order, exactly as Settle with Direct would settle it at
	// that point (the first must be the queued head, the next the head once
	// the first is settled, and so on; fenced by the epoch; Unwatched
	// honoured per request). Every request must have Direct set and name the
	// same session (ErrInvalid otherwise, nothing written). It stops at the
	// first request that fails: settled holds the admissions settled before
	// it, in order, and err is its error (later requests are not tried; the
	// failed one and those after it stay queued, untouched). How a drainer
	// writes a run of notes with one commit instead of one per note.
	SettleRun(ctx context.Context, reqs []SettleRequest) (settled []Admission, err error)

	// SettleClaim ends a turn and starts the next in one atomic step (one
	// bbolt transaction, one Redis script): it settles req exactly as
	// Settle would, and once that has succeeded it claims next exactly as
	// Claim would, against the state the settle left. req must not be
	// Direct and next must name the same session (CheckSettleClaimRequest;
	// ErrInvalid, nothing written). err is the settle's error: then nothing
	// was written and the claim was not tried. Otherwise the settle holds
	// whatever becomes of the claim, and the result's ClaimErr is the
	// claim's error (ErrNotHead, ErrBusy, ErrFenced, ErrNotFound: nothing
	// claimed; never transient, the step being one). How a drainer running
	// turns back to back pays one commit per turn instead of two.
	SettleClaim(ctx context.Context, req SettleRequest, next ClaimRequest) (SettleClaimResult, error)

	// Requeue puts a running admission back to queued without spending
	// anything (a deferral: its target could not be read, no handler is
	// configured). Fenced like Settle.
	Requeue(ctx context.Context, req SettleRequest) (Admission, error)

	// Resolve settles an unknown admission by an operator or by the
	// drainer's --on-unknown policy: as completed or interrupted (done), or
	// requeue (back to queued at its seq). ErrConflict when not unknown.
	Resolve(ctx context.Context, id string, as Resolution, now time.Time) (Admission, error)

	// Cancel settles a queued admission as cancelled. ErrConflict when not
	// queued.
	Cancel(ctx context.Context, id string, now time.Time) (Admission, error)

	// AddViewer adds a viewer lease of ttl (0 or less: DefaultViewerTTL) on
	// the session; RenewViewer extends one (ErrNotFound when gone or
	// expired); RemoveViewer ends one (ErrNotFound when gone or expired,
	// as for RenewViewer: nothing live was removed).
	AddViewer(ctx context.Context, session string, ttl time.Duration, now time.Time) (Viewer, error)
	RenewViewer(ctx context.Context, session, viewerID string, ttl time.Duration, now time.Time) (Viewer, error)
	RemoveViewer(ctx context.Context, session, viewerID string) error

	// GetTranscript returns one transcript by id.
	GetTranscript(ctx context.Context, id string) (Transcript, error)

	// ListMessages returns a transcript's messages with seq > afterSeq, in
	// order, at most limit (0: all).
	ListMessages(ctx context.Context, transcript string, afterSeq uint64, limit int) ([]Message, error)

	// CloseSession ends the session's current transcript with reason (one
	// of CloseReasons, else ErrInvalid), only when the session is idle (no
	// queued, running or unknown admission), atomically; ErrBusy otherwise,
	// ErrClosed when already closed.
	CloseSession(ctx context.Context, session, reason string, now time.Time) (Transcript, error)

	// Compress ends the session's current transcript with reason
	// "compression" and makes child (a new transcript whose parent it is)
	// current. ErrConflict when child exists; ErrClosed when the current
	// transcript has already ended (its end is never overwritten).
	Compress(ctx context.Context, session, child string, now time.Time) (Transcript, error)

	// Switch points the session at transcript t: one of its own, or a new
	// empty one named t. ErrConflict when t belongs to another session.
	Switch(ctx context.Context, session, t string, now time.Time) (Transcript, error)

	// Subscribe reports changes: after any write to a session, its id is
	// sent on the channel (coalesced; a slow reader may miss repeats, never
	// the latest change). The channel closes when ctx ends.
	Subscribe(ctx context.Context) (<-chan string, error)

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

	// Close releases the store's resources.
	Close() error
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

// Tombstone is a compacted admission as exported: the admission without
// its payload (Compacted set), and the digest of that payload.
type Tombstone struct {
	Admission     Admission `json:"admission"`
	PayloadDigest string    `json:"payload_sha1"`
}

// TombstoneAdmission checks an exported tombstone and returns the
// admission a store imports for it: done, Compacted, no payload, the
// digest in PayloadSHA1. ErrInvalid for a tombstone that is not done or
// whose digest is not 40 lower-case hex digits.
func TombstoneAdmission(t *Tombstone) (Admission, error) {
	a := t.Admission
	if a.Status != StatusDone {
		return a, Errorf(ErrInvalid, "tombstone %s: status %q, want done", a.ID, a.Status)
	}
	if len(t.PayloadDigest) != 40 || strings.Trim(t.PayloadDigest, "0123456789abcdef") != "" {
		return a, Errorf(ErrInvalid, "tombstone %s: payload_sha1 %q is not 40 hex digits", a.ID, t.PayloadDigest)
	}
	a.Payload, a.Compacted, a.PayloadSHA1 = nil, true, t.PayloadDigest
	return a, nil
}

// PayloadDigest is the digest a tombstone keeps of a payload: SHA-1 in
// lower-case hex (what Redis scripts compute with redis.sha1hex). It only
// tells a re-offered payload from the committed one; it protects nothing.
func PayloadDigest(payload []byte) string {
	h := sha1.Sum(payload)
	return hex.EncodeToString(h[:])
}

// Default lease lengths, for a LeaseRequest.TTL or a viewer ttl of 0.
const (
	DefaultLeaseTTL  = 30 * time.Second
	DefaultViewerTTL = 60 * time.Second
)

// Resolution is how an unknown admission is resolved.
type Resolution string

const (
	ResolveCompleted   Resolution = "completed"
	ResolveInterrupted Resolution = "interrupted"
	ResolveRequeue     Resolution = "requeue"
)

// OpenSessionRequest creates a session.
type OpenSessionRequest struct {
	ID    string
	Owner string
	Now   time.Time
}

// AdmitRequest is one input offered to a session. The admission layer has
// validated it and canonicalised the payload.
type AdmitRequest struct {
	ID            string // id for the new admission, if one is created
	Session       string
	Kind          Kind
	Producer      string
	Principal     string
	RequestID     string
	Identities    []string
	Payload       json.RawMessage
	PinnedTarget  string
	ReplayOf      string
	CreateSession bool // human: create the session (owner = Principal) if absent
	Reopen        bool // human: reopen a closed current transcript
	Now           time.Time

	// Parts, when set, gives each identity its own part (Parts[i] is for
	// Identities[i]): the new admission's payload is ComposeParts of the
	// parts of the identities not yet held, in offer order; Payload, the
	// composition of every part, bounds the size. A duplicate's
	// PayloadDiffers is judged per member (PartDiffers).
	Parts []Part
}

// Admit results (AdmitResult.Result) and identity results.
const (
	ResultAdmitted  = "admitted"
	ResultDuplicate = "duplicate"
	ResultCoalesced = "coalesced"
)

// AdmitResult is the outcome of one AdmitRequest.
type AdmitResult struct {
	Result string // admitted, duplicate or coalesced
	// Admission is the new admission, or when none was created the one the
	// first identity (or the request id) resolved to.
	Admission Admission
	// Identities maps each offered identity to "admitted" or "duplicate".
	Identities map[string]string
	// Duplicates are the existing admissions the request resolved to.
	Duplicates []string
	// PayloadDiffers is set when a duplicate's committed payload differs
	// from the offered one (the first committed payload wins).
	PayloadDiffers bool
	// Err is this request's own failure; the other fields are then empty.
	Err error
}

// AdmissionFilter selects admissions of a session. Empty slices match all.
type AdmissionFilter struct {
	Statuses []Status
	Outcomes []Outcome
	AfterSeq uint64 // only seq > AfterSeq
	Limit    int    // 0: no limit
}

// LeaseRequest acquires, renews or releases a drain lease.
type LeaseRequest struct {
	Session string
	Holder  string
	// Principal is who drains (AcquireLease only): the owner, or a
	// principal granted drainer or owner (Permits with ActDrain).
	Principal string
	Epoch     uint64 // renew and release: the epoch held
	TTL       time.Duration
	Now       time.Time
}

// ClaimRequest claims the FIFO head.
type ClaimRequest struct {
	Session     string
	AdmissionID string
	Epoch       uint64
	Mode        Mode
	DeliveredTo string
	Now         time.Time
}

// NewMessage is a message to append; the store assigns its seq.
type NewMessage struct {
	Transcript string
	Role       Role
	Content    string
	Metadata   map[string]any
}

// SettleClaimResult is what Store.SettleClaim did: Settled is the settled
// admission; Claimed the next one, running, when ClaimErr is nil.
type SettleClaimResult struct {
	Settled  Admission
	Claimed  Admission
	ClaimErr error
}

// SettleRequest ends (or, for Requeue, gives back) an admission.
type SettleRequest struct {
	Session     string
	AdmissionID string
	Epoch       uint64
	Generation  uint64 // ignored with Direct
	Direct      bool   // settle the queued head without a prior Claim
	// Unwatched, with Direct: when the session has a live viewer (by the
	// store's clock, as Session.Viewers counts them) and the transcript
	// named by DeliveredTo is open, ErrWatched and nothing is written. A
	// note to an open transcript is decided with nobody watching; this
	// fences that decision, so a viewer who attached before the admission
	// ran gets a turn.
	Unwatched   bool
	Outcome     Outcome
	Mode        Mode   // with Direct, or to override the claim's mode
	DeliveredTo string // with Direct, or to override the claim's target
	Error       string
	Messages    []NewMessage
	Now         time.Time

	// ExpectCurrent, when set, is the session's current transcript as the
	// drainer saw it when it decided where the messages go (a note, a
	// turn's reply) or that the admission is misrouted: when the session
	// now names another (a compression or switch came between), ErrMoved
	// and nothing is written, so the drainer decides again.
	ExpectCurrent string
}

// Record is one line of an export: exactly one of its fields is set.
type Record struct {
	Session    *SessionRecord `json:"session,omitempty"`
	Transcript *Transcript    `json:"transcript,omitempty"`
	Message    *Message       `json:"message,omitempty"`
	Admission  *Admission     `json:"admission,omitempty"`
	Tombstone  *Tombstone     `json:"tombstone,omitempty"`
}

// SessionRecord is a session as exported: every durable field, no derived
// counters (an import recomputes them from the admissions).
type SessionRecord struct {
	ID                string    `json:"id"`
	Owner             string    `json:"owner"`
	Grants            []Grant   `json:"grants"` // never nil in an export: [] for none
	CurrentTranscript string    `json:"current_transcript"`
	Epoch             uint64    `json:"epoch"`
	Generation        uint64    `json:"generation"`
	NextSeq           uint64    `json:"next_seq"`
	CreatedAt         time.Time `json:"created_at"`
}
