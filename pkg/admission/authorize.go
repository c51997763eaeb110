package admission

import (
	"context"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Authorize checks that principal may do act on the session (docs/contract.md §10):
// the one place every command's permission is decided, by backend.Permits,
// the rule the stores apply to admissions inside their own atomic step.
// It returns the session read for the check. An unknown session is
// ErrNotFound; a refusal ErrForbidden (exit 7).
//
// Admission is checked again by the store in the same step as the write.
// The operator actions (close, compress, switch, resolve, cancel, replay,
// grant, revoke) are checked here, just before their write: a grant revoked
// between the two is not seen by that one write.
func Authorize(ctx context.Context, st backend.Store, session, principal string, act backend.Action, producer string) (backend.Session, error) {
	s, err := st.GetSession(ctx, session, time.Time{})
	if err != nil {
		return s, err
	}
	if !backend.Permits(s.Owner, s.Grants, principal, act, producer) {
		return s, backend.Forbidden(session, principal, act, producer)
	}
	return s, nil
}

// AuthorizeAdmission is Authorize for the session of admission id; it
// returns the admission.
func AuthorizeAdmission(ctx context.Context, st backend.Store, id, principal string, act backend.Action) (backend.Admission, error) {
	a, err := st.GetAdmission(ctx, id)
	if err != nil {
		return a, err
	}
	if _, err := Authorize(ctx, st, a.Session, principal, act, ""); err != nil {
		return a, err
	}
	return a, nil
}

// AuthorizeTranscript is Authorize for the session of transcript id; it
// returns the transcript.
func AuthorizeTranscript(ctx context.Context, st backend.Store, id, principal string, act backend.Action) (backend.Transcript, error) {
	t, err := st.GetTranscript(ctx, id)
	if err != nil {
		return t, err
	}
	if _, err := Authorize(ctx, st, t.Session, principal, act, ""); err != nil {
		return t, err
	}
	return t, nil
}
