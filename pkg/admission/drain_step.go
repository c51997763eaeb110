package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/hermesq/hermesq/pkg/backend"
)

func transient(err error) bool { return errors.Is(err, backend.ErrUnavailable) }

// bug marks an error that is not transient where only a transient one is
// expected (a target lookup, docs/contract.md §5): it is a bug, code internal (exit
// 1), whatever code the error itself wraps (a current transcript "not
// found" is a store contradicting itself, not an unknown session).
// errors.Is still sees the error.
type bug struct{ err error }

func (b bug) Error() string   { return b.err.Error() }
func (b bug) Unwrap() []error { return []error{backend.ErrInternal, b.err} }

// busy reports whether an admission of the session is running or unknown:
// then nothing else of it may start.
func busy(sess backend.Session) bool { return sess.Unknown > 0 || sess.Running > 0 }

// head reads the session and, when it is not busy, its FIFO head; ok is
// false when there is no head to take.
func (d *drainer) head(ctx context.Context) (sess backend.Session, a backend.Admission, ok bool, err error) {
	sess, err = d.s.Store.GetSession(ctx, d.session, d.s.now())
	if err != nil {
		return sess, a, false, fmt.Errorf("drain %s: read session: %w", d.session, err)
	}
	if busy(sess) {
		return sess, a, false, nil
	}
	heads, err := d.s.Store.ListAdmissions(ctx, d.session, backend.AdmissionFilter{
		Statuses: []backend.Status{backend.StatusQueued}, Limit: 1,
	})
	if err != nil {
		return sess, a, false, fmt.Errorf("drain %s: read queue head: %w", d.session, err)
	}
	if len(heads) == 0 {
		return sess, a, false, nil
	}
	return sess, heads[0], true, nil
}

// step reads the session and its head and executes the head (docs/contract.md §3, API
// "Drain step"). idle reports an empty queue.
func (d *drainer) step(ctx context.Context) (res stepResult, idle bool, err error) {
	if p := d.next; p != nil {
		// Claimed together with the last turn's settle: run it.
		d.next = nil
		return d.runTurn(ctx, p.sess, p.claimed, p.target)
	}
	sess, a, ok, err := d.head(ctx)
	switch {
	case err != nil && transient(err):
		return stepDeferred, false, err
	case err != nil:
		return stepDone, false, err
	case busy(sess):
		return d.unknown(ctx)
	case !ok:
		return stepDone, true, nil
	}
	target, misrouted, err := d.s.resolve(ctx, sess, a)
	if errors.Is(err, ErrLineageLoop) {
		return d.lineageLoop(ctx, sess, a, err)
	}
	if err != nil {
		if transient(err) {
			return stepDeferred, false, fmt.Errorf("admission %s: %w", a.ID, err)
		}
		if ctx.Err() == nil {
			err = bug{err}
		}
		return stepDone, false, fmt.Errorf("drain %s: admission %s: resolve target: %w", d.session, a.ID, err)
	}
	switch decide(sess, a, target, misrouted) {
	case execTurn:
		return d.turn(ctx, sess, a, target)
	case execMisrouted:
		return d.misrouted(ctx, sess, a)
	case execClosed:
		return d.closedTarget(ctx, sess, a, target)
	default:
		return d.noteRun(ctx, sess, a, target)
	}
}

// execution is how the head is executed.
type execution int

const (
	execTurn execution = iota
	execNote
	execMisrouted
	execClosed
)

// decide is the turn-or-note rule of docs/contract.md §3, applied when the admission
// runs, never when it is admitted: human input is always a turn; automation
// input is a turn only when its target is open and someone is watching the
// session (a viewer who attached after the input was admitted gets the
// turn), a note otherwise, and misrouted when it has no target.
func decide(sess backend.Session, a backend.Admission, target backend.Transcript, misrouted bool) execution {
	switch {
	case a.Kind == backend.KindHuman && target.Ended():
		return execClosed
	case a.Kind == backend.KindHuman:
		return execTurn
	case misrouted:
		return execMisrouted
	case !target.Ended() && sess.Viewers > 0:
		return execTurn
	default:
		return execNote
	}
}

// turnDueWithoutHandler looks, without the lease and without writing, at
// whether the head is a turn, so a drain with no handler configured fails
// with ErrNoHandler before it takes an epoch: the store is left exactly as
// it was. A failed read says nothing: the drain proper reports it.
func (d *drainer) turnDueWithoutHandler(ctx context.Context) error {
	sess, a, ok, err := d.head(ctx)
	if err != nil || !ok {
		return nil
	}
	target, misrouted, err := d.s.resolve(ctx, sess, a)
	if err != nil || decide(sess, a, target, misrouted) != execTurn {
		return nil
	}
	return fmt.Errorf("session %s: admission %s seq %d: %w", d.session, a.ID, a.Seq, ErrNoHandler)
}

// unknown applies the OnUnknown policy to the session's unknown
// admissions. An admission running under this drainer's own epoch between
// two steps was claimed by it and never started (a turn is settled before
// the next step; a claim whose reply was lost and whose retries failed
// leaves one): it is given back to the queue. One running under another
// epoch with the lease ours cannot be, and is reported as busy.
func (d *drainer) unknown(ctx context.Context) (stepResult, bool, error) {
	unk, err := d.s.Store.ListAdmissions(ctx, d.session, backend.AdmissionFilter{
		Statuses: []backend.Status{backend.StatusUnknown},
	})
	if err != nil {
		if transient(err) {
			return stepDeferred, false, err
		}
		return stepDone, false, fmt.Errorf("drain %s: read unknown admissions: %w", d.session, err)
	}
	if len(unk) == 0 {
		return d.runningUnstarted(ctx)
	}
	if d.opt.OnUnknown == OnUnknownPause {
		ids := make([]string, len(unk))
		for i, a := range unk {
			ids[i] = fmt.Sprintf("%s (seq %d)", a.ID, a.Seq)
		}
		return stepDone, false, fmt.Errorf("session %s: admission %s is unknown: its drainer lost the lease while running it; "+
			"resolve it (hermesq resolve ADM --as interrupted|completed|requeue) or drain with --on-unknown requeue|interrupt: %w",
			d.session, strings.Join(ids, ", "), ErrPaused)
	}
	as := backend.ResolveRequeue
	if d.opt.OnUnknown == OnUnknownInterrupt {
		as = backend.ResolveInterrupted
	}
	for _, a := range unk {
		_, err := d.s.Store.Resolve(ctx, a.ID, as, d.s.now())
		switch {
		case err == nil:
			d.opt.Log("drain %s: unknown admission %s seq %d resolved as %s", d.session, a.ID, a.Seq, as)
		case errors.Is(err, backend.ErrConflict):
			// Resolved meanwhile by an operator: nothing left to do.
		case transient(err):
			return stepDeferred, false, err
		default:
			return stepDone, false, fmt.Errorf("drain %s: resolve unknown admission %s as %s: %w", d.session, a.ID, as, err)
		}
	}
	return stepDone, false, nil
}

// settled records admissions this drainer settled in one store operation
// (one, or a run of notes).
func (d *drainer) settled(as ...backend.Admission) {
	if len(as) == 0 {
		return
	}
	if !d.opt.NoExecuted {
		d.rep.Executed = append(d.rep.Executed, as...)
	}
	if d.opt.Settled != nil {
		d.opt.Settled(as)
	}
	for _, a := range as {
		d.count(a)
	}
}

// count adds a settled admission to the report and the log.
func (d *drainer) count(a backend.Admission) {
	switch {
	case a.Outcome == backend.OutcomeCompleted && a.Mode == backend.ModeNote:
		d.rep.Notes++
		d.opt.Log("drain %s: note %s seq %d -> %s", d.session, a.ID, a.Seq, a.DeliveredTo)
	case a.Outcome == backend.OutcomeCompleted:
		d.rep.Turns++
		d.opt.Log("drain %s: turn %s seq %d -> %s", d.session, a.ID, a.Seq, a.DeliveredTo)
	default:
		d.rep.Failed++
		d.problems = append(d.problems, fmt.Sprintf("admission %s seq %d %s: %s", a.ID, a.Seq, a.Outcome, firstLine(a.Error)))
		d.opt.Log("drain %s: %s %s seq %d: %s", d.session, a.Outcome, a.ID, a.Seq, firstLine(a.Error))
	}
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// direct settles the queued head in one store operation (no claim), as a
// note or a misroute, so neither can be left half-done.
func (d *drainer) direct(ctx context.Context, req backend.SettleRequest) (stepResult, bool, error) {
	req.Session, req.Epoch, req.Direct, req.Now = d.session, d.lease.Epoch, true, d.s.now()
	sctx, cancel := d.settleContext(ctx)
	defer cancel()
	a, err := d.fencedWrite(sctx, sending(d.s.Store.Settle, req), directSettled(req),
		fenceOpts{what: "settle admission", id: req.AdmissionID})
	switch {
	case err == nil:
		d.settled(a)
		return stepDone, false, nil
	case errors.Is(err, backend.ErrNotHead), errors.Is(err, backend.ErrMoved):
		// Decided on a state that changed: the next step decides again.
		return stepNotHead, false, nil
	default:
		return stepDone, false, fmt.Errorf("drain %s: settle admission %s: %w", d.session, req.AdmissionID, err)
	}
}

// maxRedecide bounds how often a turn's settle decides its target again
// because the session's current transcript moved under it.
const maxRedecide = 8

// redecideTurn makes a turn's settle request anew after ErrMoved: against
// the session as it is now, the messages go to the admission's delivery
// target; a misrouted completion or a human input whose session now names a
// closed transcript is settled failed, its reply written nowhere (kept in
// no transcript, the admission replayable).
func (d *drainer) redecideTurn(ctx context.Context, a backend.Admission, req backend.SettleRequest) (backend.SettleRequest, error) {
	sess, err := d.s.Store.GetSession(ctx, d.session, d.s.now())
	if err != nil {
		return req, err
	}
	target, misrouted, err := d.s.resolve(ctx, sess, a)
	if errors.Is(err, ErrLineageLoop) {
		req.ExpectCurrent = sess.CurrentTranscript
		req.Outcome, req.Messages, req.DeliveredTo = backend.OutcomeFailed, nil, ""
		req.Error = lineageLoopError(err)
		return req, nil
	}
	if err != nil {
		return req, err
	}
	req.ExpectCurrent = sess.CurrentTranscript
	switch decide(sess, a, target, misrouted) {
	case execMisrouted:
		req.Outcome, req.Error, req.Messages, req.DeliveredTo = backend.OutcomeFailed, "misrouted", nil, ""
	case execClosed:
		req.Outcome, req.Messages, req.DeliveredTo = backend.OutcomeFailed, nil, ""
		req.Error = fmt.Sprintf("closed: transcript %s ended (%s)", target.ID, target.EndReason)
	default:
		req.DeliveredTo = target.ID
		for i := range req.Messages {
			req.Messages[i].Transcript = target.ID
		}
	}
	return req, nil
}

// misrouted settles an admission whose pinned transcript is no longer in
// the session's lineage: failed with error "misrouted", written nowhere, kept
// for inspect and replay with a new target.
func (d *drainer) misrouted(ctx context.Context, sess backend.Session, a backend.Admission) (stepResult, bool, error) {
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID, ExpectCurrent: sess.CurrentTranscript,
		Outcome: backend.OutcomeFailed,
		Error:   "misrouted",
	})
}

// runningUnstarted gives back the admissions running under this drainer's
// epoch, which it claimed and never started (see unknown), and looks at
// the head again; with none, the session is busy.
func (d *drainer) runningUnstarted(ctx context.Context) (stepResult, bool, error) {
	running, err := d.s.Store.ListAdmissions(ctx, d.session, backend.AdmissionFilter{
		Statuses: []backend.Status{backend.StatusRunning},
	})
	if err != nil {
		if transient(err) {
			return stepDeferred, false, err
		}
		return stepDone, false, fmt.Errorf("drain %s: read running admissions: %w", d.session, err)
	}
	n := 0
	for _, a := range running {
		if a.Epoch != d.lease.Epoch {
			continue
		}
		req := backend.SettleRequest{
			Session: d.session, AdmissionID: a.ID, Epoch: a.Epoch, Generation: a.Generation, Now: d.s.now(),
		}
		if _, err := d.fencedWrite(ctx, sending(d.s.Store.Requeue, req), requeued,
			fenceOpts{what: "requeue admission", id: req.AdmissionID}); err != nil {
			return stepDone, false, fmt.Errorf("drain %s: give back admission %s (claimed, never started): %w", d.session, a.ID, err)
		}
		d.opt.Log("drain %s: admission %s seq %d was claimed and never started: given back", d.session, a.ID, a.Seq)
		n++
	}
	if n == 0 {
		return stepDone, false, fmt.Errorf("drain %s: an admission is running under epoch %d's lease: %w", d.session, d.lease.Epoch, backend.ErrBusy)
	}
	return stepNotHead, false, nil
}

// lineageLoop settles an admission whose pinned transcript's lineage loops
// in the store (ErrLineageLoop) failed, with the chain in its error,
// written nowhere and kept for replay with a target: the damage stops this
// admission, never the session's queue or another session's drain.
func (d *drainer) lineageLoop(ctx context.Context, sess backend.Session, a backend.Admission, loop error) (stepResult, bool, error) {
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID, ExpectCurrent: sess.CurrentTranscript,
		Outcome: backend.OutcomeFailed,
		Error:   lineageLoopError(loop),
	})
}

// lineageLoopError is the admission error of a target lost in a loop.
func lineageLoopError(loop error) string {
	return strings.TrimSuffix(loop.Error(), ": "+ErrLineageLoop.Error())
}

// closedTarget settles a human input whose session now points at a closed
// transcript (it was switched there after the input was admitted) as failed,
// kept for replay: a turn never writes into a closed transcript, and only
// an admission with --reopen may reopen one.
func (d *drainer) closedTarget(ctx context.Context, sess backend.Session, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID, ExpectCurrent: sess.CurrentTranscript,
		Outcome: backend.OutcomeFailed,
		Error:   fmt.Sprintf("closed: transcript %s ended (%s)", target.ID, target.EndReason),
	})
}

// turn claims the head, runs the handler and settles with the user message
// and the reply. ctx ending does not stop a running handler at once: it has
// opt.Grace to finish, and its result is settled with a context that
// outlives ctx.
func (d *drainer) turn(ctx context.Context, sess backend.Session, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	if d.opt.Handler == nil {
		return stepDone, false, fmt.Errorf("session %s: admission %s seq %d: %w", d.session, a.ID, a.Seq, ErrNoHandler)
	}
	if err := d.lapsing(); err != nil {
		// Renewals have been failing (a stalled store): no handler starts
		// until one succeeds or the lease is lost (the loop sees that).
		return stepDeferred, false, err
	}
	prestartSupervisor() // its start overlaps the claim's commit
	creq := backend.ClaimRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: d.lease.Epoch,
		Mode: backend.ModeTurn, DeliveredTo: target.ID, Now: d.s.now(),
	}
	claimed, err := d.fencedWrite(ctx, sending(d.s.Store.Claim, creq), claimedBy(creq),
		fenceOpts{what: "claim admission", id: creq.AdmissionID})
	if errors.Is(err, backend.ErrNotHead) {
		return stepNotHead, false, nil
	}
	if err != nil {
		if !errors.Is(err, backend.ErrFenced) {
			// A claim that committed with its reply lost, its retries then
			// cut short (the drain stopped): never started, it goes back.
			d.giveBackClaim(ctx, a.ID)
		}
		return stepDone, false, fmt.Errorf("drain %s: claim admission %s: %w", d.session, a.ID, err)
	}
	return d.runTurn(ctx, sess, claimed, target)
}

// runTurn runs the handler of a claimed admission and settles the turn
// with the user message and the reply (claiming the next head in the same
// store operation when it is due as a turn too: see peekTurn).
func (d *drainer) runTurn(ctx context.Context, sess backend.Session, claimed backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	a := claimed
	text := claimed.Text()
	in := TurnInput{
		Admission: claimed, Session: d.session, Target: target.ID, Text: text,
		NotesSeen: target.NoteCount, MessageCount: target.MessageCount,
	}
	d.opt.Log("drain %s: running handler for %s seq %d", d.session, a.ID, a.Seq)
	lease, stopWatch := d.watchLease()
	res, runErr := runHandler(ctx, lease, d.opt.Handler, d.opt.Grace, in, d.lease.Epoch)
	stopWatch()

	bg, cancel := d.settleContext(ctx)
	defer cancel()
	req := backend.SettleRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: claimed.Epoch, Generation: claimed.Generation, Now: d.s.now(),
	}
	if runErr != nil {
		// The handler did not start: a configuration problem, not the
		// turn's fault, or the lease about to lapse while the claim
		// waited on the store. Give the admission back untouched.
		if _, err := d.fencedWrite(bg, sending(d.s.Store.Requeue, req), requeued,
			fenceOpts{what: "requeue admission", id: req.AdmissionID}); err != nil {
			runErr = joinErrors(runErr, fmt.Errorf("requeue admission %s: %w", a.ID, err))
		}
		runErr = fmt.Errorf("drain %s: admission %s: %w", d.session, a.ID, runErr)
		if errors.Is(runErr, errLeaseLost) {
			return stepDeferred, false, runErr // tried again once renewed
		}
		return stepDone, false, runErr
	}
	if res.leaseErr != nil {
		// Killed because this drainer can no longer count on its lease
		// (or its end is not known): exactly as if it had lost it, the
		// admission is left running, and the next epoch marks it unknown
		// and applies its --on-unknown policy (pause, requeue, interrupt),
		// whether or not another drainer took over meanwhile. Drain ends;
		// its lease is released.
		err, what := res.leaseErr, "handler killed"
		switch {
		case res.end.err != nil:
			what = "handler's end unknown"
		case res.end.deadlineKill:
			// Killed by the supervisor: this drainer did not renew in time
			// (it was stopped or starved, or the store stalled).
			what = fmt.Sprintf("handler killed at %s by the handler supervisor, the lease not renewed by %s",
				res.end.at.Format(timeOfDay), res.end.deadline.Format(timeOfDay))
			if err = d.lapsing(); err == nil {
				err = fmt.Errorf("the lease of epoch %d was renewed too late: %w", d.lease.Epoch, backend.ErrFenced)
			}
		}
		return stepDone, false, fmt.Errorf("drain %s: admission %s left running for the next drainer's --on-unknown policy: %s: %w",
			d.session, a.ID, what, err)
	}
	req.Outcome = res.outcome
	req.Error = res.errText
	req.ExpectCurrent = sess.CurrentTranscript
	if res.outcome == backend.OutcomeCompleted {
		md := func() map[string]any { return map[string]any{"admission_id": a.ID} }
		req.Messages = []backend.NewMessage{
			{Transcript: target.ID, Role: backend.RoleUser, Content: text, Metadata: md()},
			{Transcript: target.ID, Role: backend.RoleAssistant, Content: res.reply, Metadata: md()},
		}
	}
	var (
		settled backend.Admission
		err     error
	)
	if next := d.peekTurn(ctx); next != nil {
		settled, err = d.settleAndClaim(bg, req, next)
	} else {
		settled, err = d.fencedWrite(bg, sending(d.s.Store.Settle, req), turnSettled(req),
			fenceOpts{what: "settle admission", id: req.AdmissionID})
	}
	for tries := 0; errors.Is(err, backend.ErrMoved) && tries < maxRedecide; tries++ {
		// The session was compressed or switched while the handler ran:
		// the input and the reply go where the admission is delivered
		// now (the tip of its lineage), or nowhere if that is no longer
		// possible, never into the transcript that just ended.
		if req, err = d.redecideTurn(bg, a, req); err == nil {
			settled, err = d.fencedWrite(bg, sending(d.s.Store.Settle, req), turnSettled(req),
				fenceOpts{what: "settle admission", id: req.AdmissionID})
		}
	}
	if err != nil {
		// Fenced: a newer drainer owns the session; the reply is written
		// nowhere, and the admission is theirs to resolve. (A settle that
		// committed with its reply lost is not here: fencedWrite saw it.)
		return stepDone, false, fmt.Errorf("drain %s: settle admission %s (handler ended with %s at %s; its outcome %s discarded): %w",
			d.session, a.ID, res.end.status, res.end.at.Format(timeOfDay), req.Outcome, err)
	}
	d.settled(settled)
	return stepDone, false, nil
}
