package admission

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// OnUnknown is the drainer's policy for an admission left unknown by a
// drainer that lost its lease mid-run (DESIGN §2).
type OnUnknown string

const (
	// OnUnknownPause stops the queue: Drain returns ErrPaused naming the
	// admission, and an operator resolves it. The default, because the
	// handler may or may not have acted on it.
	OnUnknownPause OnUnknown = "pause"
	// OnUnknownRequeue runs it again (at-least-once for the handler).
	OnUnknownRequeue OnUnknown = "requeue"
	// OnUnknownInterrupt settles it interrupted and goes on.
	OnUnknownInterrupt OnUnknown = "interrupt"
)

// DrainOptions steer Drain and DrainAll.
type DrainOptions struct {
	Holder    string                           // lease holder id; "" → hostname:pid:random
	Lease     time.Duration                    // drain lease TTL; 0 → 30s; renewed every Lease/3 while working
	Wait      bool                             // wait for a held lease instead of failing with backend.ErrLeaseHeld
	Max       int                              // at most this many admissions executed (0: no bound); per session in DrainAll
	OnUnknown OnUnknown                        // "" → pause
	Handler   *Handler                         // nil: a due turn leaves the admission queued and Drain returns ErrNoHandler
	Follow    bool                             // keep draining as inputs arrive, until ctx ends
	Grace     time.Duration                    // after ctx ends, a running turn may finish for this long, then it is killed
	Log       func(format string, args ...any) // progress lines for stderr; nil: silent
	// Settled, when set, is called with each admission the drain executed
	// as soon as it is settled (what DrainReport.Executed lists at the
	// end), so a long drain can show its work as it goes. DrainAll calls
	// it from several goroutines at once.
	Settled func(backend.Admission)
}

// DefaultLease is the drain lease TTL when DrainOptions.Lease is zero.
const DefaultLease = 30 * time.Second

// MinLease is the shortest drain lease (and viewer lease with a heartbeat)
// accepted: a lease is renewed every third of its TTL, and one much shorter
// than a store round trip would lapse between renewals.
const MinLease = 100 * time.Millisecond

var (
	// ErrNoHandler: a turn is due and no handler is configured. The
	// admission stays queued (exit 2).
	ErrNoHandler = fmt.Errorf("a turn is due and no handler is configured: %w", backend.ErrInvalid)
	// ErrPaused: the queue is paused on an unknown admission (exit 6); the
	// error Drain returns names it.
	ErrPaused = fmt.Errorf("queue paused on an unknown admission: %w", backend.ErrAttention)
)

// DrainReport says what one Drain did.
type DrainReport struct {
	Session  string              `json:"session"`
	Epoch    uint64              `json:"epoch"`
	Turns    int                 `json:"turns"`    // turns completed
	Notes    int                 `json:"notes"`    // notes written
	Failed   int                 `json:"failed"`   // turns failed or interrupted, misroutes
	Deferred int                 `json:"deferred"` // target lookups deferred by a transient error
	Executed []backend.Admission `json:"executed"` // as settled, in order
}

// Backoff of deferrals and lease waits (DESIGN §5: 250 ms → 5 s).
const (
	backoffMin = 250 * time.Millisecond
	backoffMax = 5 * time.Second
)

// maxDeferrals bounds consecutive deferrals of a Drain without Follow: past
// it the store is reported unavailable (exit 75) with the admission still
// queued, so a cron drain does not hang on a store that stays down.
const maxDeferrals = 10

// maxNotHead bounds consecutive claims lost to a concurrent change of the
// head (a cancel) before Drain gives up with the error.
const maxNotHead = 5

// followSafety is how long Follow waits for a store event before looking
// at the queue anyway, in case an event was lost.
const followSafety = 30 * time.Second

// settleTimeout bounds the store writes made after ctx ended (the settle of
// a turn that finished within the grace, the lease release).
const settleTimeout = 30 * time.Second

type backoff struct{ d time.Duration }

func (b *backoff) next() time.Duration {
	if b.d == 0 {
		b.d = backoffMin
	} else if b.d *= 2; b.d > backoffMax {
		b.d = backoffMax
	}
	return b.d
}

func (b *backoff) reset() { b.d = 0 }

func sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

func defaultHolder() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return fmt.Sprintf("%s:%d:%s", host, os.Getpid(), NewID()[:8])
}

func (o DrainOptions) normalise() (DrainOptions, error) {
	if o.Lease < 0 {
		return o, invalidf("drain lease %s is negative", o.Lease)
	}
	if o.Lease == 0 {
		o.Lease = DefaultLease
	}
	if o.Lease < MinLease {
		return o, invalidf("drain lease %s is shorter than %s", o.Lease, MinLease)
	}
	if o.Max < 0 {
		return o, invalidf("max %d is negative", o.Max)
	}
	if o.Grace < 0 {
		return o, invalidf("grace %s is negative", o.Grace)
	}
	switch o.OnUnknown {
	case "":
		o.OnUnknown = OnUnknownPause
	case OnUnknownPause, OnUnknownRequeue, OnUnknownInterrupt:
	default:
		return o, invalidf("on-unknown %q is not one of pause, requeue, interrupt", string(o.OnUnknown))
	}
	if o.Handler != nil && (len(o.Handler.Argv) == 0 || o.Handler.Argv[0] == "") {
		return o, invalidf("handler command is empty")
	}
	if o.Handler != nil && o.Handler.Timeout < 0 {
		return o, invalidf("handler timeout %s is negative", o.Handler.Timeout)
	}
	if o.Holder == "" {
		o.Holder = defaultHolder()
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o, nil
}

// drainer is one Drain call: one session, one lease.
type drainer struct {
	s       *Service
	session string
	opt     DrainOptions
	lease   backend.Lease
	events  <-chan string // store changes, with Follow

	lostOnce sync.Once
	lost     chan struct{} // closed when a renewal was fenced
	lostErr  error

	rep      DrainReport
	problems []string // failed turns and misroutes, for the attention error
}

// Drain executes the session's queue in FIFO order under its drain lease (DESIGN §3–§5).
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
	rep.Executed = []backend.Admission{}
	d := &drainer{s: s, session: session, opt: opt, lost: make(chan struct{}), rep: rep}
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

	close(stopRenew)
	renewing.Wait()
	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	if rerr := s.Store.ReleaseLease(bg, backend.LeaseRequest{
		Session: session, Holder: opt.Holder, Epoch: d.lease.Epoch, Now: s.now(),
	}); rerr != nil {
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

// acquire takes the drain lease, waiting for a held one with opt.Wait.
func (d *drainer) acquire(ctx context.Context) error {
	var b backoff
	for {
		l, err := d.s.Store.AcquireLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, TTL: d.opt.Lease, Now: d.s.now(),
		})
		if err == nil {
			d.lease = l
			return nil
		}
		if !d.opt.Wait || !errors.Is(err, backend.ErrLeaseHeld) {
			return fmt.Errorf("drain %s: %w", d.session, err)
		}
		wait := b.next()
		d.opt.Log("drain %s: lease held by another drainer; waiting %s", d.session, wait)
		if !sleep(ctx, wait) {
			return fmt.Errorf("drain %s: waiting for the lease: %w", d.session, ctx.Err())
		}
	}
}

// renew extends the lease every Lease/3 until stop is closed. A fenced
// renewal means a newer drainer took over: the drainer stops taking work
// (its running turn's settle will be fenced too). Other renewal errors are
// retried at the next tick, while the lease has time left.
func (d *drainer) renew(stop <-chan struct{}) {
	t := time.NewTicker(d.opt.Lease / 3)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(context.Background(), d.opt.Lease/3)
		_, err := d.s.Store.RenewLease(ctx, backend.LeaseRequest{
			Session: d.session, Holder: d.opt.Holder, Epoch: d.lease.Epoch, TTL: d.opt.Lease, Now: d.s.now(),
		})
		cancel()
		if errors.Is(err, backend.ErrFenced) {
			d.lostOnce.Do(func() {
				d.lostErr = fmt.Errorf("drain %s: lease of epoch %d lost: %w", d.session, d.lease.Epoch, err)
				close(d.lost)
			})
			d.opt.Log("drain %s: lease lost: %v", d.session, err)
			return
		}
		if err != nil {
			d.opt.Log("drain %s: renew lease: %v", d.session, err)
		}
	}
}

func (d *drainer) leaseLost() error {
	select {
	case <-d.lost:
		return d.lostErr
	default:
		return nil
	}
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
		if d.opt.Max > 0 && len(d.rep.Executed) >= d.opt.Max {
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

func transient(err error) bool { return errors.Is(err, backend.ErrUnavailable) }

// bug marks an error that is not transient where only a transient one is
// expected (a target lookup, DESIGN §5): it is a bug, code internal (exit
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
	sess, err = d.s.Store.GetSession(ctx, d.session)
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

// step reads the session and its head and executes the head (DESIGN §3, API
// "Drain step"). idle reports an empty queue.
func (d *drainer) step(ctx context.Context) (res stepResult, idle bool, err error) {
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
		return d.turn(ctx, a, target)
	case execMisrouted:
		return d.misrouted(ctx, a)
	case execClosed:
		return d.closedTarget(ctx, a, target)
	default:
		return d.note(ctx, a, target)
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

// decide is the turn-or-note rule of DESIGN §3, applied when the admission
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
// admissions. A running admission seen under our own lease cannot be ours
// (we settle before taking the next), so it is reported as busy.
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
		return stepDone, false, fmt.Errorf("drain %s: an admission is running under epoch %d's lease: %w", d.session, d.lease.Epoch, backend.ErrBusy)
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

// settled records an admission this drainer settled.
func (d *drainer) settled(a backend.Admission) {
	d.rep.Executed = append(d.rep.Executed, a)
	if d.opt.Settled != nil {
		d.opt.Settled(a)
	}
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
	a, err := d.s.Store.Settle(ctx, req)
	switch {
	case err == nil:
		d.settled(a)
		return stepDone, false, nil
	case errors.Is(err, backend.ErrNotHead):
		return stepNotHead, false, nil
	default:
		return stepDone, false, fmt.Errorf("drain %s: settle admission %s: %w", d.session, req.AdmissionID, err)
	}
}

// note appends the payload text to the target as one note message and
// settles the admission completed, in the same store operation: a crash
// can leave neither a note without its settlement (a second note on replay)
// nor a settlement without its note (a lost result). A note never reopens a
// closed transcript.
func (d *drainer) note(ctx context.Context, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	ids := append([]string{}, a.Identities...)
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID,
		Outcome:     backend.OutcomeCompleted,
		Mode:        backend.ModeNote,
		DeliveredTo: target.ID,
		Messages: []backend.NewMessage{{
			Transcript: target.ID,
			Role:       backend.RoleNote,
			Content:    a.Text(),
			Metadata:   map[string]any{"admission_id": a.ID, "producer": a.Producer, "identities": ids},
		}},
	})
}

// misrouted settles an admission whose pinned transcript is no longer in
// the session's lineage: failed with error "misrouted", written nowhere, kept
// for inspect and replay with a new target.
func (d *drainer) misrouted(ctx context.Context, a backend.Admission) (stepResult, bool, error) {
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID,
		Outcome:     backend.OutcomeFailed,
		Error:       "misrouted",
	})
}

// closedTarget settles a human input whose session now points at a closed
// transcript (it was switched there after the input was admitted) as failed,
// kept for replay: a turn never writes into a closed transcript, and only
// an admission with --reopen may reopen one.
func (d *drainer) closedTarget(ctx context.Context, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	return d.direct(ctx, backend.SettleRequest{
		AdmissionID: a.ID,
		Outcome:     backend.OutcomeFailed,
		Error:       fmt.Sprintf("closed: transcript %s ended (%s)", target.ID, target.EndReason),
	})
}

// turn claims the head, runs the handler and settles with the user message
// and the reply. ctx ending does not stop a running handler at once: it has
// opt.Grace to finish, and its result is settled with a context that
// outlives ctx.
func (d *drainer) turn(ctx context.Context, a backend.Admission, target backend.Transcript) (stepResult, bool, error) {
	if d.opt.Handler == nil {
		return stepDone, false, fmt.Errorf("session %s: admission %s seq %d: %w", d.session, a.ID, a.Seq, ErrNoHandler)
	}
	claimed, err := d.s.Store.Claim(ctx, backend.ClaimRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: d.lease.Epoch,
		Mode: backend.ModeTurn, DeliveredTo: target.ID, Now: d.s.now(),
	})
	if errors.Is(err, backend.ErrNotHead) {
		return stepNotHead, false, nil
	}
	if err != nil {
		return stepDone, false, fmt.Errorf("drain %s: claim admission %s: %w", d.session, a.ID, err)
	}
	text := claimed.Text()
	in := TurnInput{
		Admission: claimed, Session: d.session, Target: target.ID, Text: text,
		NotesSeen: target.NoteCount, MessageCount: target.MessageCount,
	}
	d.opt.Log("drain %s: running handler for %s seq %d", d.session, a.ID, a.Seq)
	res, runErr := runHandler(ctx, d.opt.Handler, d.opt.Grace, in, d.lease.Epoch)

	bg, cancel := context.WithTimeout(context.WithoutCancel(ctx), settleTimeout)
	defer cancel()
	req := backend.SettleRequest{
		Session: d.session, AdmissionID: a.ID, Epoch: claimed.Epoch, Generation: claimed.Generation, Now: d.s.now(),
	}
	if runErr != nil {
		// The handler could not start: a configuration problem, not the
		// turn's fault. Give the admission back untouched.
		if _, err := d.s.Store.Requeue(bg, req); err != nil {
			runErr = joinErrors(runErr, fmt.Errorf("requeue admission %s: %w", a.ID, err))
		}
		return stepDone, false, fmt.Errorf("drain %s: admission %s: %w", d.session, a.ID, runErr)
	}
	req.Outcome = res.outcome
	req.Error = res.errText
	if res.outcome == backend.OutcomeCompleted {
		md := func() map[string]any { return map[string]any{"admission_id": a.ID} }
		req.Messages = []backend.NewMessage{
			{Transcript: target.ID, Role: backend.RoleUser, Content: text, Metadata: md()},
			{Transcript: target.ID, Role: backend.RoleAssistant, Content: res.reply, Metadata: md()},
		}
	}
	settled, err := d.s.Store.Settle(bg, req)
	if err != nil {
		// Fenced: a newer drainer owns the session; the reply is written
		// nowhere, and the admission is theirs to resolve.
		return stepDone, false, fmt.Errorf("drain %s: settle admission %s (reply discarded): %w", d.session, a.ID, err)
	}
	d.settled(settled)
	return stepDone, false, nil
}

// DrainAll drains every session with queued work, up to parallel at once, each strictly FIFO under its
// own lease; sessions whose lease is held by another drainer are skipped (reported), not an error.
// With opt.Follow it keeps watching for new work (Store.Subscribe) until ctx ends.
//
// Each session is drained without Follow and without Wait, by as many Drain
// calls as work arrives; opt.Max bounds each call. A skipped session is
// reported through opt.Log. The error joins the sessions' errors (and, with
// Follow, ctx's).
func (s *Service) DrainAll(ctx context.Context, opt DrainOptions, parallel int) ([]DrainReport, error) {
	if parallel <= 0 {
		parallel = 1
	}
	opt, err := opt.normalise()
	if err != nil {
		return nil, err
	}
	one := opt
	one.Follow, one.Wait = false, false

	var events <-chan string
	if opt.Follow {
		subCtx, cancel := context.WithCancel(ctx)
		defer cancel()
		if events, err = s.Store.Subscribe(subCtx); err != nil {
			opt.Log("drain --all: no store events (%v); looking every %s", err, followSafety)
			events = nil
		}
	}

	var (
		mu      sync.Mutex
		reports []DrainReport
		errs    []error
		active  = map[string]bool{}
		again   = map[string]bool{} // work arrived while the session was being drained
		paused  = map[string]bool{} // left paused on an unknown admission; wait for a resolve
		wg      sync.WaitGroup
		sem     = make(chan struct{}, parallel)
	)
	start := func(id string) {
		mu.Lock()
		defer mu.Unlock()
		if active[id] {
			again[id] = true
			return
		}
		active[id] = true
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case sem <- struct{}{}:
			case <-ctx.Done():
				mu.Lock()
				active[id] = false
				mu.Unlock()
				return
			}
			defer func() { <-sem }()
			for {
				rep, err := s.Drain(ctx, id, one)
				mu.Lock()
				switch {
				case errors.Is(err, backend.ErrLeaseHeld):
					opt.Log("drain %s: skipped: %v", id, err)
				case ctx.Err() != nil && errors.Is(err, ctx.Err()) && len(rep.Executed) == 0:
					// stopped before doing anything: nothing to report
				case opt.Follow && err == nil && len(rep.Executed) == 0 && rep.Deferred == 0:
					// woken by a change that left nothing to do: not worth a report
				default:
					reports = append(reports, rep)
					if err != nil && !(ctx.Err() != nil && errors.Is(err, ctx.Err())) {
						errs = append(errs, err)
					}
				}
				paused[id] = errors.Is(err, ErrPaused)
				if again[id] && ctx.Err() == nil && !paused[id] {
					again[id] = false
					mu.Unlock()
					continue
				}
				again[id] = false
				active[id] = false
				mu.Unlock()
				return
			}
		}()
	}
	// hasWork says whether a session is worth a Drain: queued work, or
	// admissions left running or unknown by a drainer that is gone (unless
	// that already paused it under the pause policy).
	hasWork := func(sess backend.Session) bool {
		stuck := sess.Unknown > 0 || (sess.Running > 0 && !sess.LeaseLive(s.now()))
		mu.Lock()
		defer mu.Unlock()
		if sess.Unknown == 0 {
			paused[sess.ID] = false
		}
		if paused[sess.ID] && sess.Unknown > 0 {
			return false
		}
		return sess.Queued > 0 || stuck
	}
	scan := func() error {
		all, err := s.Store.ListSessions(ctx)
		if err != nil {
			return fmt.Errorf("drain --all: list sessions: %w", err)
		}
		for _, sess := range all {
			if hasWork(sess) {
				start(sess.ID)
			}
		}
		return nil
	}

	if err := scan(); err != nil && !opt.Follow {
		return nil, err
	} else if err != nil {
		opt.Log("%v", err)
	}
	if opt.Follow {
		t := time.NewTicker(followSafety)
		defer t.Stop()
	follow:
		for {
			select {
			case <-ctx.Done():
				break follow
			case <-t.C:
				if err := scan(); err != nil {
					opt.Log("%v", err)
				}
			case id, ok := <-events:
				if !ok {
					events = nil
					continue
				}
				sess, err := s.Store.GetSession(ctx, id)
				if err != nil {
					if ctx.Err() == nil {
						opt.Log("drain %s: read session: %v", id, err)
					}
					continue
				}
				if hasWork(sess) {
					start(id)
				}
			}
		}
	}
	wg.Wait()
	sortReports(reports)
	if opt.Follow && ctx.Err() != nil {
		errs = append([]error{fmt.Errorf("drain --all: stopped: %w", ctx.Err())}, errs...)
	}
	err = joinErrors(errs...)
	return reports, err
}

// sortReports orders reports by session, keeping each session's in the
// order they ran.
func sortReports(r []DrainReport) {
	sort.SliceStable(r, func(i, j int) bool { return r[i].Session < r[j].Session })
}
