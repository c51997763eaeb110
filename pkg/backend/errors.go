package backend

import (
	"errors"
	"fmt"
)

// Code is one of the closed set of error codes of the contract (docs/contract.md §11).
// Every error a store or the admission layer returns wraps exactly one of the
// sentinel errors below, so callers test it with errors.Is and the CLI maps it
// to an exit code in one place.
type Code string

const (
	CodeInvalid     Code = "invalid"
	CodeNotFound    Code = "not_found"
	CodeConflict    Code = "conflict"
	CodeFenced      Code = "fenced"
	CodeAttention   Code = "attention"
	CodeForbidden   Code = "forbidden"
	CodeUnavailable Code = "unavailable"
	CodeInternal    Code = "internal"
)

// Sentinel errors, one per code. Wrap them with fmt.Errorf("…: %w", ErrX)
// once per layer; messages are lower case and name the operation.
var (
	// ErrInvalid: the request is malformed (bad id, payload, size…). Exit 2.
	ErrInvalid = &codeError{CodeInvalid, "invalid"}
	// ErrNotFound: the session, admission, transcript or viewer does not exist. Exit 3.
	ErrNotFound = &codeError{CodeNotFound, "not found"}
	// ErrConflict: the request contradicts durable state (request id reused with
	// another payload, session closed, close while busy, wrong status). Exit 4.
	ErrConflict = &codeError{CodeConflict, "conflict"}
	// ErrFenced: the caller's epoch or generation is not current, or the drain
	// lease is held by another live drainer. Exit 5.
	ErrFenced = &codeError{CodeFenced, "fenced"}
	// ErrAttention: the queue needs an operator (paused on an unknown
	// admission, a turn failed). Exit 6.
	ErrAttention = &codeError{CodeAttention, "needs attention"}
	// ErrForbidden: the principal may not do this. Exit 7.
	ErrForbidden = &codeError{CodeForbidden, "permission denied"}
	// ErrUnavailable: the store is temporarily unavailable or locked; the
	// same call may succeed later. Exit 75.
	ErrUnavailable = &codeError{CodeUnavailable, "unavailable"}
	// ErrInternal: anything else: a bug, a corrupt store. Exit 1.
	ErrInternal = &codeError{CodeInternal, "internal error"}
)

// More specific conditions. Each wraps one of the sentinels above, so
// errors.Is(err, ErrConflict) holds for ErrClosed, and so on.
var (
	// ErrBusy: the session has a running or unknown admission; nothing else
	// of it may start. Busy is a pause, never a refusal of admission.
	ErrBusy = fmt.Errorf("session busy: %w", ErrConflict)
	// ErrClosed: the session's current transcript is closed.
	ErrClosed = fmt.Errorf("session closed: %w", ErrConflict)
	// ErrLeaseHeld: another live drainer holds the session's drain lease.
	ErrLeaseHeld = fmt.Errorf("drain lease held by another drainer: %w", ErrFenced)
	// ErrNotHead: a claim named an admission that is not (or no longer) the
	// head of its session's FIFO.
	ErrNotHead = fmt.Errorf("admission is not the queue head: %w", ErrConflict)
	// ErrWatched: a settle made with nobody watching (SettleRequest.Unwatched)
	// found a live viewer on the session: the admission is due as a turn.
	ErrWatched = fmt.Errorf("a viewer is watching the session: %w", ErrConflict)
	// ErrMoved: a settle expected the session's current transcript to be
	// another (SettleRequest.ExpectCurrent): it was compressed or switched
	// since the drainer decided where the messages go, so it decides again.
	ErrMoved = fmt.Errorf("the session's current transcript moved: %w", ErrConflict)
)

type codeError struct {
	code Code
	msg  string
}

func (e *codeError) Error() string { return e.msg }

// CodeOf returns the code of the first sentinel err wraps, or CodeInternal.
func CodeOf(err error) Code {
	var ce *codeError
	if errors.As(err, &ce) {
		return ce.code
	}
	return CodeInternal
}

// Errorf builds an error of the given sentinel with a message naming the
// operation: Errorf(ErrNotFound, "admission %s", id) reads
// "admission 3f2…: not found".
func Errorf(sentinel error, format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, sentinel)...)
}
