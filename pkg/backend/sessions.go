package backend

import (
	"context"
	"time"
)

// Sessions is the part of a Store that keeps sessions and who may act on
// them: sessions opened, read and listed; grants and revokes; the caller
// and the store's admins.
type Sessions interface {
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
}

// OpenSessionRequest creates a session.
type OpenSessionRequest struct {
	ID    string
	Owner string
	Now   time.Time
}
