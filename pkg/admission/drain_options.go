package admission

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/hermesq/hermesq/pkg/backend"
)

// OnUnknown is the drainer's policy for an admission left unknown by a
// drainer that lost its lease mid-run (docs/contract.md §2).
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
	// Principal is who drains: the owner of each session drained, or a
	// principal granted drainer or owner on it (backend.Permits with
	// backend.ActDrain); the store checks it when the lease is taken and
	// at every claim. A session it may not drain is ErrForbidden from
	// Drain, and left out by DrainAll.
	Principal string
	// AsOwner drains each session as its owner, whoever Principal is: for
	// an admin, who may act as any principal.
	AsOwner bool
	// LeftOut, when set, is called by DrainAll with the number of sessions
	// with work it left out because Principal may not drain them (once
	// per scan that found new ones; each session counted once).
	LeftOut   func(n int)
	Holder    string                           // lease holder id; "" → hostname:pid:random
	Lease     time.Duration                    // drain lease TTL; 0 → 30s; renewed every Lease/3 while working
	Wait      bool                             // wait for a held lease instead of failing with backend.ErrLeaseHeld
	Max       int                              // at most this many admissions executed (0: no bound); per session in DrainAll
	OnUnknown OnUnknown                        // "" → pause
	Handler   *Handler                         // nil: a due turn leaves the admission queued and Drain returns ErrNoHandler
	Follow    bool                             // keep draining as inputs arrive, until ctx ends
	Grace     time.Duration                    // after ctx ends, a running turn may finish for this long, then it is killed
	Log       func(format string, args ...any) // progress lines for stderr; nil: silent
	// Settled, when set, is called with the admissions the drain executed
	// as soon as they are settled (what DrainReport.Executed lists at the
	// end), so a long drain can show its work as it goes: once per store
	// operation, with one admission or a run of notes settled together.
	// DrainAll calls it from several goroutines at once.
	Settled func([]backend.Admission)
	// NoExecuted leaves DrainReport.Executed empty (the counts are kept):
	// memory stays flat however long the drain, for a caller that sees each
	// admission through Settled.
	NoExecuted bool
	// SettleTimeout bounds the store writes that record work done and are
	// retried past a transient failure or after ctx ended (a turn's
	// settle, a claim's retry, giving a turn back, the lease release);
	// 0 → 30s.
	SettleTimeout time.Duration
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

// Backoff of deferrals and lease waits (docs/contract.md §5: 250 ms → 5 s).
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

// settleTimeout is DrainOptions.SettleTimeout's default.
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
	if o.SettleTimeout < 0 {
		return o, invalidf("drain settle timeout %s is negative", o.SettleTimeout)
	}
	if o.SettleTimeout == 0 {
		o.SettleTimeout = settleTimeout
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
