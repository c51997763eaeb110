package backend

import (
	"context"
	"time"
)

// Drain is the part of a Store that runs a session's queue: the drain
// lease, claims, settles (alone, in runs, or joined to the next claim),
// requeues, and the changes a drainer waits on.
type Drain interface {
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

	// Subscribe reports changes: after any write to a session, its id is
	// sent on the channel (coalesced; a slow reader may miss repeats, never
	// the latest change). The channel closes when ctx ends.
	Subscribe(ctx context.Context) (<-chan string, error)
}

// Default lease lengths, for a LeaseRequest.TTL or a viewer ttl of 0.
const (
	DefaultLeaseTTL  = 30 * time.Second
	DefaultViewerTTL = 60 * time.Second
)

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
