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
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/hermesq/hermesq/pkg/admission"
	"github.com/hermesq/hermesq/pkg/producer"
)

// PollMax is how many events the host takes from a plugin in one poll:
// one admission batch, one store round-trip; as many as a chunk of admit
// --batch. A coalescing plugin (delegation) offers a session's ready
// events of one poll as one group.
const PollMax = 1024

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

	// Timing, when set, accumulates where each plugin's run spent its
	// time (producers run --timing; the benchmark).
	Timing *Timing
	// AfterAdmit, when set, is called after each durable admission batch,
	// before its offers are settled (tests: a lost acknowledgement).
	AfterAdmit func()
	// Now is the clock; nil: time.Now.
	Now func() time.Time

	log *lineLog
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
			began := time.Now()
			err := h.supervise(ctx, spec, st)
			h.Timing.ran(spec.Name, time.Since(began))
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
		c, err := ob.CountPending(ctx)
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
