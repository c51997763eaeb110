// Package producerhost runs producer plugins and admits what they offer:
// the host of `hermesq producers run`. It starts each plugin (through a
// Launcher: the go-plugin gRPC transport in hermesq-producers), polls it
// for ready events, admits them, and settles each offer by one pure policy
// (Decide): delivered, rejected (invalid, kept), or waiting with a
// not-before time. Nothing a producer recorded is dropped by the host.
// Every plugin call has a deadline; a plugin that misses one is killed and
// started again with backoff, as one that crashes.
package producerhost

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// PollMax is how many events the host takes from a plugin in one poll:
// one admission batch, one store round-trip.
const PollMax = 256

// OnceStarts bounds how often producers run --once starts a plugin that
// crashes, hangs or misses a deadline before it has delivered everything,
// and how many failed polls in a row it accepts.
const OnceStarts = 3

// Defaults of the host's settings.
const (
	DefaultStartTimeout   = 10 * time.Second // producer_start_timeout
	DefaultPoll           = time.Second      // producer_poll
	DefaultPollDeadline   = 30 * time.Second // producer_poll_deadline
	DefaultSettleDeadline = 30 * time.Second // producer_settle_deadline
)

// Restart backoff of a plugin that crashed or missed a deadline, and the
// backoff of polls that failed.
const (
	restartBase = 200 * time.Millisecond
	restartCap  = 30 * time.Second
	pollErrBase = time.Second
	pollErrCap  = 30 * time.Second
)

// Client is a started producer plugin.
type Client interface {
	Producer() producer.Producer // calls go to the plugin
	Exited() bool                // its process has ended
	Kill()                       // end it
}

// LaunchOptions say how a plugin is started.
type LaunchOptions struct {
	Pin          []byte        // SHA-256 the binary must have; nil: not pinned
	StartTimeout time.Duration // bound on the handshake
	Output       io.Writer     // the plugin's output lines and the transport's errors
}

// Launcher starts cmd as a producer plugin. An error with a method
// Permanent() bool that reports true is not retried.
type Launcher func(cmd *exec.Cmd, o LaunchOptions) (Client, error)

// Config is the host's configuration.
type Config struct {
	StateDir       string        // plugin NAME keeps its state (its outbox) in StateDir/NAME
	Lease          time.Duration // claim lease handed to the plugins; 0: theirs (5m)
	MaxAge         time.Duration // age limit of pending events handed to the plugins; 0: none
	StartTimeout   time.Duration // bound on the handshake; 0: DefaultStartTimeout
	Poll           time.Duration // wait between polls of an idle plugin; 0: DefaultPoll
	PollDeadline   time.Duration // bound on one Poll; 0: DefaultPollDeadline
	SettleDeadline time.Duration // bound on one Settle; 0: DefaultSettleDeadline
	Backoff        Backoff       // spacing of refused events; zero: DefaultBackoff
}

// PluginStateDir is plugin name's own state folder.
func (c Config) PluginStateDir(name string) string { return filepath.Join(c.StateDir, name) }

// Bound is how long producers run --once may take for one plugin that
// hangs, crashes or misses its deadlines at every start: OnceStarts starts,
// each bounded by the handshake and one poll and one settle deadline (and
// the few seconds a kill takes), with the restart backoff between them. A
// plugin that keeps offering new events is run as long as it does.
func (c Config) Bound() time.Duration {
	c = c.withDefaults()
	per := c.StartTimeout + c.PollDeadline + c.SettleDeadline + 3*time.Second
	return OnceStarts*per + restartBase + 2*restartBase
}

func (c Config) withDefaults() Config {
	if c.StartTimeout <= 0 {
		c.StartTimeout = DefaultStartTimeout
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.PollDeadline <= 0 {
		c.PollDeadline = DefaultPollDeadline
	}
	if c.SettleDeadline <= 0 {
		c.SettleDeadline = DefaultSettleDeadline
	}
	if c.Backoff.Base <= 0 {
		c.Backoff.Base = DefaultBackoff.Base
	}
	if c.Backoff.Cap <= 0 {
		c.Backoff.Cap = max(DefaultBackoff.Cap, c.Backoff.Base)
	}
	return c
}

// Host runs producer plugins and admits what they offer.
type Host struct {
	Admission *admission.Service
	Principal string // admits as this principal
	Config    Config
	Once      bool      // run each plugin until it has nothing ready
	Stderr    io.Writer // plugin output and diagnostics, one prefixed line each
	Launch    Launcher

	// Timing, when set, accumulates the time spent in plugin calls and in
	// the store (the benchmark).
	Timing *Timing
	// AfterAdmit, when set, is called after each durable admission batch,
	// before its offers are settled (tests: a lost acknowledgement).
	AfterAdmit func()
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	log *lineLog
}

// Timing is where a host's time went.
type Timing struct {
	mu         sync.Mutex
	RPC, Store time.Duration
	Admitted   int
}

func (t *Timing) add(rpc, store time.Duration, n int) {
	if t == nil {
		return
	}
	t.mu.Lock()
	t.RPC += rpc
	t.Store += store
	t.Admitted += n
	t.mu.Unlock()
}

// Failure is a plugin that could not run or stopped for good.
type Failure struct {
	Name string
	Err  error
}

// Waiting is a producer whose outbox holds events waiting after a refusal
// when the run ends.
type Waiting struct {
	Name   string
	Counts producer.Counts
}

// Report is how a run went.
type Report struct {
	Failures    []Failure
	Rejected    map[string]int // events rejected during the run, by producer
	Waiting     []Waiting      // with Once: producers left with events waiting after a refusal
	Unavailable bool           // the store was unavailable for an offer
}

// permanentError marks a plugin failure that a restart cannot mend: the
// checksum does not match the pin, the plugin speaks another protocol
// version, cannot be executed, or reported a permanent failure.
type permanentError struct{ err error }

func (e *permanentError) Error() string { return e.err.Error() }
func (e *permanentError) Unwrap() error { return e.err }

// deadlineError is a plugin call that missed its deadline.
type deadlineError struct {
	call, key string
	d         time.Duration
}

func (e *deadlineError) Error() string {
	return fmt.Sprintf("%s did not return within %s (%s); plugin killed", e.call, e.d, e.key)
}

// pollError is an error a plugin returned from Poll.
type pollError struct{ err error }

func (e *pollError) Error() string { return "poll failed: " + oneLine(e.err.Error()) }
func (e *pollError) Unwrap() error { return e.err }

// runState is what one plugin's run gathered.
type runState struct {
	mu          sync.Mutex
	rejected    int
	missed      error // the last deadline missed
	unavailable bool
}

func (h *Host) now() time.Time {
	if h.Now != nil {
		return h.Now()
	}
	return time.Now()
}

// Run runs every enabled plugin until ctx ends (or, Once, until each has
// nothing ready) and reports how it went.
func (h *Host) Run(ctx context.Context, specs []Spec) Report {
	h.Config = h.Config.withDefaults()
	h.log = &lineLog{out: h.Stderr}
	if h.Stderr == nil {
		h.log.out = io.Discard
	}
	var mu sync.Mutex
	rep := Report{Rejected: map[string]int{}}
	var wg sync.WaitGroup
	for _, spec := range specs {
		if !spec.Enabled {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := &runState{}
			err := h.supervise(ctx, spec, st)
			if err != nil {
				h.log.printf(spec.Name, "failed: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				rep.Failures = append(rep.Failures, Failure{Name: spec.Name, Err: err})
			}
			if st.rejected > 0 {
				rep.Rejected[spec.Name] = st.rejected
			}
			rep.Unavailable = rep.Unavailable || st.unavailable
		}()
	}
	wg.Wait()
	sort.Slice(rep.Failures, func(i, j int) bool { return rep.Failures[i].Name < rep.Failures[j].Name })
	if h.Once && ctx.Err() == nil {
		rep.Waiting = h.waiting(ctx, specs)
	}
	return rep
}

// waiting reads the outboxes of the enabled plugins for events waiting
// after a refusal.
func (h *Host) waiting(ctx context.Context, specs []Spec) []Waiting {
	var out []Waiting
	for _, s := range specs {
		if !s.Enabled {
			continue
		}
		dir := h.Config.PluginStateDir(s.Name)
		if _, err := os.Stat(filepath.Join(dir, producer.OutboxFile)); err != nil {
			continue
		}
		ob, err := producer.OpenOutbox(dir, producer.OutboxOptions{Lease: h.Config.Lease, MaxAge: h.Config.MaxAge})
		if err != nil {
			h.log.printf(s.Name, "outbox: %v", err)
			continue
		}
		c, err := ob.Count(ctx)
		if err != nil {
			h.log.printf(s.Name, "outbox: %v", err)
			continue
		}
		if c.Waiting > 0 {
			out = append(out, Waiting{Name: s.Name, Counts: c})
		}
	}
	return out
}

// supervise runs one plugin, restarting it with backoff when it crashes,
// hangs or misses a deadline, until ctx ends (Once: until it has nothing
// ready). It returns the error that stopped it for good; with Once, a
// missed deadline is one even when a later start ran clean.
func (h *Host) supervise(ctx context.Context, spec Spec, st *runState) error {
	if spec.Problem != "" {
		return &permanentError{errors.New(spec.Problem)}
	}
	backoff := restartBase
	for starts := 1; ; starts++ {
		began := time.Now()
		err := h.session(ctx, spec, st)
		var perm *permanentError
		switch {
		case err == nil, ctx.Err() != nil:
			if h.Once && st.missed != nil && ctx.Err() == nil {
				return st.missed
			}
			return nil
		case errors.As(err, &perm):
			return err
		case h.Once && starts >= OnceStarts:
			return fmt.Errorf("%w (gave up after %d starts)", err, starts)
		}
		if time.Since(began) > time.Minute {
			backoff = restartBase
		}
		h.log.printf(spec.Name, "%v; restarting in %s", err, backoff)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, restartCap)
	}
}

// pluginEnv is the whole environment a plugin gets: a few harmless
// variables of the host's (never the store URL or its credentials) and its
// own name, state folder, lease and age limit.
func (h *Host) pluginEnv(spec Spec) []string {
	var env []string
	for _, k := range []string{"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	env = append(env,
		producer.EnvName+"="+spec.Name,
		producer.EnvStateDir+"="+h.Config.PluginStateDir(spec.Name))
	if h.Config.Lease > 0 {
		env = append(env, producer.EnvLease+"="+h.Config.Lease.String())
	}
	if h.Config.MaxAge > 0 {
		env = append(env, producer.EnvMaxAge+"="+h.Config.MaxAge.String())
	}
	if len(spec.Config) > 0 {
		env = append(env, producer.EnvConfig+"="+string(spec.Config))
	}
	return env
}

// session starts the plugin once and drives it until ctx ends, it fails,
// or (Once) it has nothing ready.
func (h *Host) session(ctx context.Context, spec Spec, st *runState) error {
	if err := os.MkdirAll(h.Config.PluginStateDir(spec.Name), 0o700); err != nil {
		return &permanentError{fmt.Errorf("state folder: %w", err)}
	}
	cmd := exec.Command(spec.Path) // run directly, never through a shell
	cmd.Env = h.pluginEnv(spec)
	cmd.Dir = h.Config.PluginStateDir(spec.Name)
	dieWithParent(cmd)
	out := h.log.writer(spec.Name)
	defer out.flush()
	client, err := h.Launch(cmd, LaunchOptions{Pin: spec.Pin, StartTimeout: h.Config.StartTimeout, Output: out})
	if err != nil {
		var pin interface{ PinMismatch() bool }
		if errors.As(err, &pin) && pin.PinMismatch() {
			// Name the binary's own checksum, so a stale pin is told
			// from a swapped binary.
			if sum, serr := FileSHA256(spec.Path); serr == nil {
				err = fmt.Errorf("%w (%s has sha256 %x, pinned %x)", err, spec.Path, sum, spec.Pin)
			}
		}
		var perm interface{ Permanent() bool }
		if errors.As(err, &perm) && perm.Permanent() {
			return &permanentError{err}
		}
		if strings.Contains(err.Error(), "before the handshake") {
			if last := out.last(); last != "" {
				return fmt.Errorf("%w: %s", err, last)
			}
		}
		return err
	}
	defer client.Kill()
	p := client.Producer()
	pause := time.Duration(0)
	pollFails := 0
	for {
		if pause > 0 {
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(pause):
			}
		}
		if ctx.Err() != nil {
			return nil
		}
		n, err := h.round(ctx, spec.Name, p, st)
		var miss *deadlineError
		var pe *pollError
		switch {
		case err == nil:
		case errors.As(err, &miss):
			// Hung: kill it at once (a graceful stop would wait for the
			// call it hangs in); its claims come back after the lease.
			if cmd.Process != nil {
				_ = cmd.Process.Kill()
			}
			st.mu.Lock()
			st.missed = err
			st.mu.Unlock()
			return err
		case errors.Is(err, producer.ErrPermanent):
			return &permanentError{fmt.Errorf("%s (a permanent failure: not restarted)", oneLine(err.Error()))}
		case errors.As(err, &pe):
			if exited(client) {
				return fmt.Errorf("plugin exited: %w", err)
			}
			pollFails++
			if h.Once && pollFails >= OnceStarts {
				return &permanentError{fmt.Errorf("%w (%d polls in a row)", err, pollFails)}
			}
			pause = min(pollErrBase<<(pollFails-1), pollErrCap)
			h.log.printf(spec.Name, "%v; polling again in %s", err, pause)
			continue
		default:
			if exited(client) {
				return fmt.Errorf("plugin exited: %w", err)
			}
			return err
		}
		pollFails = 0
		switch {
		case n == 0 && h.Once:
			return nil
		case n == 0:
			pause = h.Config.Poll
		default:
			pause = 0
		}
	}
}

// exited reports whether the plugin process has exited, giving it a moment:
// a failed call is often seen before the process's end is.
func exited(c Client) bool {
	for range 20 {
		if c.Exited() {
			return true
		}
		time.Sleep(50 * time.Millisecond)
	}
	return false
}

// round polls the plugin once, admits the offers in one batch and settles
// each. It returns how many offers it took.
func (h *Host) round(ctx context.Context, name string, p producer.Producer, st *runState) (int, error) {
	pctx, cancel := context.WithTimeout(ctx, h.Config.PollDeadline)
	t0 := time.Now()
	offers, err := p.Poll(pctx, producer.PollRequest{Max: PollMax, PayloadLimit: h.Admission.PayloadLimit()})
	rpc := time.Since(t0)
	missed := pastDeadline(pctx)
	cancel()
	if err != nil {
		switch {
		case ctx.Err() != nil:
			return 0, nil
		case missed:
			return 0, &deadlineError{call: "poll", key: "producer_poll_deadline", d: h.Config.PollDeadline}
		case errors.Is(err, producer.ErrPermanent):
			return 0, err
		}
		return 0, &pollError{err}
	}
	if len(offers) == 0 {
		return 0, nil
	}
	// An admission in flight is finished and settled even when a signal
	// arrives meanwhile: stopping halfway only costs a re-offer later.
	work, wcancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
	defer wcancel()
	ins := make([]admission.Input, len(offers))
	for i, o := range offers {
		ins[i] = offerInput(name, h.Principal, o)
	}
	t1 := time.Now()
	results, batchErr := h.Admission.AdmitBatch(work, ins)
	inStore := time.Since(t1)
	if h.AfterAdmit != nil && batchErr == nil {
		h.AfterAdmit()
	}
	admitted := 0
	for i, o := range offers {
		err := batchErr
		if i < len(results) && results[i].Err != nil {
			err = results[i].Err
		}
		s := h.settlement(work, name, o, err, st)
		if s.Action == producer.Complete {
			admitted += len(o.IdentityList())
		}
		sctx, scancel := context.WithTimeout(work, h.Config.SettleDeadline)
		t2 := time.Now()
		err = p.Settle(sctx, o.Claim, s)
		rpc += time.Since(t2)
		missed := pastDeadline(sctx)
		scancel()
		if err != nil {
			if missed {
				return len(offers), &deadlineError{call: "settle", key: "producer_settle_deadline", d: h.Config.SettleDeadline}
			}
			// The claim stays taken until its lease runs out; then the
			// events are offered again and resolve to their admissions.
			h.log.printf(name, "settle %s of %s failed: %s", s.Action, describeOffer(o), oneLine(err.Error()))
			if !errors.Is(err, producer.ErrUnknownClaim) {
				return len(offers), err
			}
		}
	}
	h.Timing.add(rpc, inStore, admitted)
	return len(offers), nil
}

// pastDeadline reports whether ctx's deadline has passed (the transport
// may fail a call a moment before ctx itself reports it).
func pastDeadline(ctx context.Context) bool {
	dl, ok := ctx.Deadline()
	return errors.Is(ctx.Err(), context.DeadlineExceeded) || ok && !time.Now().Add(50*time.Millisecond).Before(dl)
}

// settlement applies the policy to the store's answer err to offer o (and
// admits the smaller groups of a group over the limit).
func (h *Host) settlement(ctx context.Context, name string, o producer.Offer, err error, st *runState) producer.Settlement {
	r := RefusalOf(err, len(o.Parts))
	d := Decide(r, o.Attempts, h.now(), h.Config.Backoff)
	var delivered []string
	if d.Outcome == Split {
		h.log.printf(name, "%s: %s; offering its events in smaller groups", describeOffer(o), d.Reason)
		delivered, d = h.admitSplit(ctx, name, o, o.Parts)
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	switch d.Outcome {
	case Deliver:
		return producer.Settlement{Action: producer.Complete}
	case Reject:
		st.rejected += len(o.IdentityList()) - len(delivered)
		h.log.printf(name, "rejected %s: %s", describeOffer(o), d.Reason)
		return producer.Settlement{Action: producer.Reject, Reason: d.Reason, Delivered: delivered}
	}
	if r.Code == backend.CodeUnavailable {
		st.unavailable = true
	}
	h.log.printf(name, "%s waits until %s (attempt %d): %s", describeOffer(o), d.NotBefore.UTC().Format(time.RFC3339), o.Attempts, d.Reason)
	return producer.Settlement{Action: producer.Retry, Reason: d.Reason, NotBefore: d.NotBefore, Delivered: delivered}
}

// admitSplit admits parts of offer o in two halves, each split again while
// refused as too large. It returns the identities admitted and the
// decision for the others (Deliver when every part went in); a wait
// outweighs a rejection, so an event that may yet go in is never rejected
// with another.
func (h *Host) admitSplit(ctx context.Context, name string, o producer.Offer, parts []producer.Part) ([]string, Decision) {
	var delivered []string
	rest := Decision{Outcome: Deliver}
	half := len(parts) / 2
	for _, g := range [][]producer.Part{parts[:half], parts[half:]} {
		sub := o
		sub.Identities, sub.Parts = nil, g
		var err error
		results, batchErr := h.Admission.AdmitBatch(ctx, []admission.Input{offerInput(name, h.Principal, sub)})
		switch {
		case batchErr != nil:
			err = batchErr
		case len(results) > 0:
			err = results[0].Err
		}
		d := Decide(RefusalOf(err, len(g)), o.Attempts, h.now(), h.Config.Backoff)
		switch d.Outcome {
		case Deliver:
			delivered = append(delivered, sub.IdentityList()...)
			continue
		case Split:
			var more []string
			more, d = h.admitSplit(ctx, name, o, g)
			delivered = append(delivered, more...)
		}
		if d.Outcome == Wait || d.Outcome == Reject && rest.Outcome == Deliver {
			rest = d
		}
	}
	return delivered, rest
}

// offerInput is the admission input of an offer.
func offerInput(name, principal string, o producer.Offer) admission.Input {
	in := admission.Input{
		Session:    o.Session,
		Target:     o.Target,
		Producer:   name,
		Principal:  principal,
		Identities: o.Identities,
		Text:       o.Text,
		Payload:    o.Payload,
	}
	for _, p := range o.Parts {
		in.Parts = append(in.Parts, admission.Part{Identity: p.Identity, Text: p.Text, Payload: p.Payload})
	}
	return in
}

func describeOffer(o producer.Offer) string {
	ids := o.IdentityList()
	if len(ids) > 3 {
		return fmt.Sprintf("offer for session %q (%d events: %s … %s)", o.Session, len(ids), ids[0], ids[len(ids)-1])
	}
	return fmt.Sprintf("offer for session %q (identities %s)", o.Session, strings.Join(ids, " "))
}
