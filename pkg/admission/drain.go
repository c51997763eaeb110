package admission

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// drainer is one Drain call: one session, one lease.
type drainer struct {
	s         *Service
	session   string
	principal string // who drains (DrainOptions.Principal, or the owner)
	opt       DrainOptions
	lease     backend.Lease
	events    <-chan string // store changes, with Follow

	lostOnce sync.Once
	lost     chan struct{} // closed when a renewal was fenced
	lostErr  error
	// renewedAt is when (wall clock, unix ns) the last successful
	// acquire or renewal of the lease was sent: the lease runs until then
	// plus its TTL at least.
	renewedAt atomic.Int64
	// turnLease is the lease of the running turn's handler (nil: none), told
	// of each renewal.
	turnLease atomic.Pointer[turnLease]

	rep      DrainReport
	problems []string // failed turns and misroutes, for the attention error

	// next is a turn claimed in the same store operation as the last
	// turn's settle, for the next step to run (nil: none).
	next *pendingTurn
}

// Drain executes the session's queue in FIFO order under its drain lease (docs/contract.md §3–§5).
// Cancelling ctx means "stop taking work": the running turn may finish within Grace, is settled,
// the lease is released, and Drain returns ctx.Err() (wrapped) with the report so far.
// Errors: backend.ErrLeaseHeld (exit 5), backend.ErrFenced (exit 5), ErrNoHandler (exit 2),
// ErrPaused wraps backend.ErrAttention (exit 6, names the unknown admission), a failed turn or misroute
// → after draining the rest, an error wrapping backend.ErrAttention (exit 6).
func (s *Service) Drain(ctx context.Context, session string, opt DrainOptions) (DrainReport, error) {
	rep := DrainReport{Session: session}
	if err := backend.ValidateID("session", session); err != nil {
		return rep, err
	}
	opt, err := opt.normalise()
	if err != nil {
		return rep, err
	}
	principal, err := s.drainPrincipal(ctx, session, opt)
	if err != nil {
		return rep, err
	}
	rep.Executed = []backend.Admission{}
	d := &drainer{s: s, session: session, principal: principal, opt: opt, lost: make(chan struct{}), rep: rep}
	if opt.Follow {
		// Subscribe before the first look at the queue, so nothing admitted
		// in between is missed.
		subCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if ev, err := s.Store.Subscribe(subCtx); err != nil {
			opt.Log("drain %s: no store events (%v); looking every %s", session, err, followSafety)
		} else {
			d.events = ev
		}
	}
	if opt.Handler == nil {
		if err := d.turnDueWithoutHandler(ctx); err != nil {
			return d.rep, err
		}
	}
	if err := d.acquire(ctx); err != nil {
		return d.rep, err
	}
	d.rep.Epoch = d.lease.Epoch
	opt.Log("drain %s: lease acquired, epoch %d", session, d.lease.Epoch)

	stopRenew := make(chan struct{})
	var renewing sync.WaitGroup
	renewing.Add(1)
	go func() {
		defer renewing.Done()
		d.renew(stopRenew)
	}()

	err = d.loop(ctx)
	d.giveBackNext(ctx)

	close(stopRenew)
	renewing.Wait()
	bg, cancel := d.settleContext(ctx)
	defer cancel()
	if rerr := d.release(bg); rerr != nil {
		opt.Log("drain %s: release lease: %v", session, rerr)
	}

	if len(d.problems) > 0 {
		shown := d.problems
		more := ""
		if len(shown) > 3 {
			shown, more = shown[:3], fmt.Sprintf("; and %d more", len(d.problems)-3)
		}
		attn := fmt.Errorf("session %s: %d admission(s) failed or misrouted (%s%s): %w",
			session, len(d.problems), strings.Join(shown, "; "), more, backend.ErrAttention)
		if err == nil {
			err = attn
		} else if !errors.Is(err, backend.ErrAttention) {
			err = joinErrors(err, attn)
		}
	}
	return d.rep, err
}

// drainPrincipal is who drains session: opt.Principal, or with
// opt.AsOwner the session's owner. A principal that may not drain it is
// refused here, before anything is read for the drain (the store checks
// again when the lease is taken, and at every claim).
func (s *Service) drainPrincipal(ctx context.Context, session string, opt DrainOptions) (string, error) {
	sess, err := s.Store.GetSession(ctx, session, s.now())
	if err != nil {
		return "", fmt.Errorf("drain %s: %w", session, err)
	}
	if opt.AsOwner {
		return sess.Owner, nil
	}
	if !backend.Permits(sess.Owner, sess.Grants, opt.Principal, backend.ActDrain, "") {
		return "", fmt.Errorf("drain: %w", backend.Forbidden(session, opt.Principal, backend.ActDrain, ""))
	}
	return opt.Principal, nil
}

// joinErrors wraps every non-nil err in one error whose message stays on
// one line (errors.Join would put each on its own line). errors.Is and
// backend.CodeOf see them in order, so the first decides the exit code.
func joinErrors(errs ...error) error {
	var args []any
	for _, err := range errs {
		if err != nil {
			args = append(args, err)
		}
	}
	switch len(args) {
	case 0:
		return nil
	case 1:
		return args[0].(error)
	}
	return fmt.Errorf(strings.TrimSuffix(strings.Repeat("%w; ", len(args)), "; "), args...)
}

// stepResult is what one step of the loop did.
type stepResult int

const (
	stepDone     stepResult = iota // an admission was settled (or an unknown one resolved)
	stepDeferred                   // a transient read failed; nothing was written
	stepNotHead                    // the head changed under us; look again
)

// loop takes the head again and again until the queue is empty (or, with
// Follow, until ctx ends).
func (d *drainer) loop(ctx context.Context) error {
	var b backoff
	deferrals, notHead := 0, 0
	for {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("drain %s: stopped: %w", d.session, err)
		}
		if err := d.leaseLost(); err != nil {
			return err
		}
		if d.opt.Max > 0 && d.rep.count() >= d.opt.Max {
			return nil
		}
		res, idle, err := d.step(ctx)
		if err != nil && res != stepDeferred {
			return err
		}
		switch {
		case res == stepDeferred:
			d.rep.Deferred++
			deferrals++
			if !d.opt.Follow && deferrals > maxDeferrals {
				return err
			}
			wait := b.next()
			d.opt.Log("drain %s: deferred %s: %v", d.session, wait, err)
			if !sleep(ctx, wait) {
				continue // the ctx check above reports it
			}
		case res == stepNotHead:
			notHead++
			if notHead > maxNotHead {
				return fmt.Errorf("drain %s: the queue head keeps changing: %w", d.session, backend.ErrNotHead)
			}
		case idle:
			if !d.opt.Follow {
				return nil
			}
			d.waitForWork(ctx)
		default:
			deferrals, notHead = 0, 0
			b.reset()
		}
	}
}

// waitForWork blocks until the store reports a change to the session, the
// safety timer fires, the lease is lost, or ctx ends.
func (d *drainer) waitForWork(ctx context.Context) {
	t := time.NewTimer(followSafety)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-d.lost:
			return
		case <-t.C:
			return
		case id, ok := <-d.events:
			if !ok {
				d.events = nil // nil channel: wait for the timer from now on
				continue
			}
			if id == d.session {
				return
			}
		}
	}
}
