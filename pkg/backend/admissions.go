package backend

import (
	"context"
	"encoding/json"
	"time"
)

// Admissions is the part of a Store that admits input and reads it back:
// the admit step, reads of admissions and identities, and an operator's
// resolve and cancel.
type Admissions interface {
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

	// Resolve settles an unknown admission by an operator or by the
	// drainer's --on-unknown policy: as completed or interrupted (done), or
	// requeue (back to queued at its seq). ErrConflict when not unknown.
	Resolve(ctx context.Context, id string, as Resolution, now time.Time) (Admission, error)

	// Cancel settles a queued admission as cancelled. ErrConflict when not
	// queued.
	Cancel(ctx context.Context, id string, now time.Time) (Admission, error)
}

// Resolution is how an unknown admission is resolved.
type Resolution string

const (
	ResolveCompleted   Resolution = "completed"
	ResolveInterrupted Resolution = "interrupted"
	ResolveRequeue     Resolution = "requeue"
)

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
