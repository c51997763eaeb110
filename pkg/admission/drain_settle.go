package admission

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// Writes that end or give back an admission (claim, settle, requeue) are
// fenced by epoch and generation, so re-sending one is safe: a second
// attempt after the first committed is refused, never applied twice. A
// transient failure (the store paused, the reply of a command the server
// ran lost on the way back) is therefore retried with backoff until the
// settle deadline; and when a retry that follows a transient failure is
// refused (fenced, not the head, busy), the admission is read: if it shows
// the write's effect under this drainer's epoch, the first attempt
// committed and only its reply was lost, and the write counts as done.
// Without that, a settle meeting a stalled store would discard the turn's
// reply, leave the admission running, and the next drainer would mark it
// unknown and (with --on-unknown requeue) run the handler again.

// settleContext is the context of the writes that record work done: they
// outlive the drain's ctx (a stop must not lose a finished turn) for at
// most DrainOptions.SettleTimeout.
func (d *drainer) settleContext(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), d.opt.SettleTimeout)
}

// fenceOpts names a fenced write in messages and says how its attempts
// begin.
type fenceOpts struct {
	what string // the write, as messages name it: "settle admission"
	id   string // the admission written, read back after a refusal
	// transientBefore: an attempt made before this one, elsewhere (a joint
	// settle-claim, a run of notes), already failed transiently, so a
	// refusal may mean that attempt committed.
	transientBefore bool
}

// fencedWrite runs write until it succeeds, fails for good, or ctx ends,
// retrying transient failures. done reports whether an admission as read
// shows write's effect; it is asked only when a retry was refused after a
// transient failure (or o.transientBefore).
func (d *drainer) fencedWrite(ctx context.Context,
	write func(context.Context) (backend.Admission, error), done func(backend.Admission) bool, o fenceOpts,
) (backend.Admission, error) {
	what, id, transientBefore := o.what, o.id, o.transientBefore
	var b backoff
	for {
		a, err := write(ctx)
		switch {
		case err == nil:
			return a, nil
		case transient(err):
			transientBefore = true
			wait := b.next()
			d.opt.Log("drain %s: %s %s: %v; retrying in %s", d.session, what, id, err, wait)
			if !sleep(ctx, wait) {
				return a, err
			}
			continue
		case transientBefore && (errors.Is(err, backend.ErrFenced) || errors.Is(err, backend.ErrConflict)):
			got, rerr := d.readAdmission(ctx, id, &b)
			if rerr == nil && done(got) {
				d.opt.Log("drain %s: %s %s had committed; only its reply was lost", d.session, what, id)
				return got, nil
			}
		}
		return a, err
	}
}

// sending binds a store write to its request, for fencedWrite.
func sending[R any](write func(context.Context, R) (backend.Admission, error), req R) func(context.Context) (backend.Admission, error) {
	return func(ctx context.Context) (backend.Admission, error) { return write(ctx, req) }
}

// turnSettled is the done test of req, a turn's settle: the admission is
// done with its outcome under its epoch and generation.
func turnSettled(req backend.SettleRequest) func(backend.Admission) bool {
	return func(a backend.Admission) bool {
		return a.Status == backend.StatusDone && a.Outcome == req.Outcome &&
			a.Epoch == req.Epoch && a.Generation == req.Generation
	}
}

// directSettled is the done test of req, a settle of the queued head in
// one write (a note, a misroute).
func directSettled(req backend.SettleRequest) func(backend.Admission) bool {
	return func(a backend.Admission) bool {
		// Under this epoch only this drainer writes: a done admission
		// with this write's outcome and mode is this write's.
		return a.Status == backend.StatusDone && a.Outcome == req.Outcome && a.Epoch == req.Epoch &&
			(req.Mode == "" || a.Mode == req.Mode)
	}
}

// requeued is the done test of a requeue: the admission is queued again.
func requeued(a backend.Admission) bool { return a.Status == backend.StatusQueued }

// claimedBy is the done test of req, a claim: a claim whose reply was
// lost shows the admission running under this epoch in req's mode.
func claimedBy(req backend.ClaimRequest) func(backend.Admission) bool {
	return func(a backend.Admission) bool {
		return a.Status == backend.StatusRunning && a.Epoch == req.Epoch && a.Mode == req.Mode
	}
}

// readAdmission reads an admission, retrying transient failures while ctx
// lasts.
func (d *drainer) readAdmission(ctx context.Context, id string, b *backoff) (backend.Admission, error) {
	for {
		a, err := d.s.Store.GetAdmission(ctx, id)
		if err == nil || !transient(err) {
			return a, err
		}
		if !sleep(ctx, b.next()) {
			return a, err
		}
	}
}

// release gives the lease up, retrying transient failures until the settle
// deadline (a release is a no-op once done, so re-sending it is safe): a
// lease left held would make the next drain wait out its TTL.
func (d *drainer) release(ctx context.Context) error {
	var b backoff
	for {
		err := d.s.Store.ReleaseLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, Epoch: d.lease.Epoch, Now: d.s.now(),
		})
		if err == nil || !transient(err) {
			return err
		}
		if !sleep(ctx, b.next()) {
			return fmt.Errorf("release lease: %w", err)
		}
	}
}

// watchLease returns the lease of a turn about to start: its fence ends
// when this drainer can no longer count on its lease: a renewal was fenced
// (another drainer took over), or the last successful renewal is so old
// that the lease may lapse before the next one (renewals failing as
// transient: a partition, a paused store). A turn's handler is stopped then,
// so that two handlers of one session never run at once; on Linux its
// supervisor also stops it at the deadline should this drainer be stopped
// or starved (renewals reach it through turnLease.renewed). stop ends the
// watch.
func (d *drainer) watchLease() (lease *turnLease, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	lease = &turnLease{fence: ctx, deadline: d.leaseDeadline}
	// Looked at before the handler starts, not a tick later: a claim that
	// waited out a stalled store may come back with the lease about to
	// lapse, and a handler shorter than a tick would run unwatched.
	if err := d.lapsing(); err != nil {
		cancel(err)
		return lease, func() {}
	}
	d.turnLease.Store(lease)
	go func() {
		t := time.NewTimer(time.Until(d.leaseDeadline()))
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-d.lost:
				cancel(d.lostErr)
				return
			case <-t.C:
				if err := d.lapsing(); err != nil {
					cancel(err)
					return
				}
				t.Reset(time.Until(d.leaseDeadline())) // renewed meanwhile
			}
		}
	}()
	return lease, func() {
		d.turnLease.Store(nil)
		cancel(nil)
	}
}

// leaseDeadline is when this drainer stops counting on its lease unless it
// is renewed before: leaseMargin before the lease could lapse, counted from
// when the last successful renewal was sent (the store's expiry is at
// least that plus the TTL).
func (d *drainer) leaseDeadline() time.Time {
	return d.lastRenewal().Add(d.opt.Lease - leaseMargin(d.opt.Lease))
}

// lapsing is an error wrapping backend.ErrFenced once the lease was lost or
// is past leaseDeadline, nil before.
func (d *drainer) lapsing() error {
	if err := d.leaseLost(); err != nil {
		return err
	}
	if now := time.Now(); !now.Before(d.leaseDeadline()) {
		return fmt.Errorf("drain %s: lease of epoch %d not renewed for %s (lease %s): %w",
			d.session, d.lease.Epoch, now.Sub(d.lastRenewal()).Round(time.Millisecond), d.opt.Lease, backend.ErrFenced)
	}
	return nil
}

// leaseMargin is how long before a lease could lapse, unrenewed, that the
// running handler is stopped: a sixth of the lease, after two renewals in a
// row have failed (renewals run every third).
func leaseMargin(lease time.Duration) time.Duration { return lease / 6 }
