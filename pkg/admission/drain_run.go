package admission

import (
	"context"
	"errors"
	"fmt"

	"github.com/hermesq/hermesq/pkg/backend"
)

// maxRun bounds the notes one drain step settles together (one
// Store.SettleRun: one commit on bbolt, one script on Redis).
const maxRun = 512

// noteRun writes the head as a note together with the notes queued right
// behind it, in one store operation. Each admission of the run is decided
// on its own, exactly as a step would decide it (decide, against the
// session as just read), and the run ends before the first that is not a
// note. The store settles each one only if it is still the FIFO head under
// our epoch and, the decision having been made with nobody watching, only
// while no viewer is live (Unwatched): a viewer who attaches before an
// admission runs still gets a turn, at the next step.
func (d *drainer) noteRun(ctx context.Context, sess backend.Session, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	limit := maxRun
	if d.opt.Max > 0 {
		limit = min(limit, d.opt.Max-d.rep.count())
	}
	get := d.s.cachedTranscripts()
	reqs := []backend.SettleRequest{d.noteRequest(sess, a, target)}
	if limit > 1 {
		// A failed read of the rest only shortens the run to the head.
		more, err := d.s.Store.ListAdmissions(ctx, d.session, backend.AdmissionFilter{
			Statuses: []backend.Status{backend.StatusQueued}, AfterSeq: a.Seq, Limit: limit - 1,
		})
		if err == nil {
			for _, b := range more {
				t, misrouted, err := d.s.resolveVia(ctx, get, sess, b)
				if err != nil || decide(sess, b, t, misrouted) != execNote {
					break // the next step decides (or reports) it alone
				}
				reqs = append(reqs, d.noteRequest(sess, b, t))
			}
		}
	}
	sctx, cancel := d.settleContext(ctx)
	defer cancel()
	settled, err := d.s.Store.SettleRun(sctx, reqs)
	if err != nil && transient(err) && len(settled) == 0 {
		// The run may have committed with its reply lost: settle its
		// notes one by one, each retried, those already written
		// recognised as such (transientBefore: a refusal may mean done).
		settled, err = nil, nil
		for _, req := range reqs {
			x, serr := d.fencedWrite(sctx, sending(d.s.Store.Settle, req), directSettled(req),
				fenceOpts{what: "settle admission", id: req.AdmissionID, transientBefore: true})
			if serr != nil {
				err = serr
				break
			}
			settled = append(settled, x)
		}
	}
	d.settled(settled...)
	switch {
	case err == nil:
		return stepDone, false, nil
	case len(settled) > 0:
		// Progress; the admission that stopped the run is the next step's
		// head, decided and reported alone.
		return stepDone, false, nil
	case errors.Is(err, backend.ErrNotHead), errors.Is(err, backend.ErrWatched), errors.Is(err, backend.ErrMoved):
		// Decided on a state that changed: the next step decides again.
		return stepNotHead, false, nil
	default:
		return stepDone, false, fmt.Errorf("drain %s: settle admission %s: %w", d.session, a.ID, err)
	}
}

// noteRequest is the direct settle of a as a note on target: the payload
// text appended to the target as one note message, the admission settled
// completed, in the same store operation (a crash can leave neither a note
// without its settlement nor the reverse). A note never reopens a closed
// transcript. The note's target was decided from the session's current
// transcript as sess has it: the store refuses the note (ErrMoved) if the
// session was compressed or switched since.
func (d *drainer) noteRequest(sess backend.Session, a backend.Admission, target backend.Transcript) backend.SettleRequest {
	ids := append([]string{}, a.Identities...)
	return backend.SettleRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: d.lease.Epoch, Direct: true, Unwatched: true, Now: d.s.now(),
		ExpectCurrent: sess.CurrentTranscript,
		Outcome:       backend.OutcomeCompleted,
		Mode:          backend.ModeNote,
		DeliveredTo:   target.ID,
		Messages: []backend.NewMessage{{
			Transcript: target.ID,
			Role:       backend.RoleNote,
			Content:    a.Text(),
			Metadata:   map[string]any{"admission_id": a.ID, "producer": a.Producer, "identities": ids},
		}},
	}
}

// count is how many admissions the drain executed (len(Executed), also
// when NoExecuted leaves Executed empty).
func (r DrainReport) count() int { return r.Turns + r.Notes + r.Failed }
