package backend

import (
	"context"
	"time"
)

// Transcripts is the part of a Store that keeps transcripts and their
// viewers: viewer leases, reads of transcripts and messages, close,
// compress and switch.
type Transcripts interface {
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
}
