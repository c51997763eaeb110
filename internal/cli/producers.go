package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/internal/producerhost"
	"github.com/hermesq/hermesq/internal/termtext"
	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

func newProducersCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "producers",
		Short: "Run and list producer plugins (process, delegation, watch…)",
		Long: `Producer plugins are programs named hermesq-producer-NAME in the plugin
folder (--plugin-dir, HERMESQ_PLUGIN_DIR, config plugin_dir; default
$XDG_DATA_HOME/hermesq/plugins). Each keeps its events in its own durable
outbox (producer_state_dir/NAME/outbox.db; default
$XDG_STATE_HOME/hermesq/producers/NAME). 'hermesq producers run' starts them
and admits what they offer to the sessions' queues.

Configuration (config file):
  plugin_dir: /abs/folder
  producer_state_dir: /abs/folder
  producer_lease: 5m            # a claim nobody settled is offered again after this
  producer_start_timeout: 10s   # how long a plugin may take to answer the handshake
  producer_poll: 1s             # wait between polls of an idle plugin
  producer_poll_deadline: 30s   # a plugin whose Poll takes longer is killed and restarted
  producer_settle_deadline: 30s # the same for Settle
  producer_backoff: 1s          # wait after an event's first refusal, doubling at each refusal…
  producer_backoff_cap: 5m      # …up to this
  producer_max_age: 720h        # drop pending events older than this (default: none, never)
  producer_wait_crit: 1h        # check is critical when an event waited longer after a refusal
  producers:
    delegation:
      sha256: <64 hex digits>   # refuse to start a binary with another checksum
    watch:
      enabled: false`,
		Args: cobra.NoArgs,
		RunE: groupRun,
	}
	cmd.PersistentFlags().String("plugin-dir", "", "folder of hermesq-producer-NAME binaries (env HERMESQ_PLUGIN_DIR; config plugin_dir)")
	_ = f.v.BindPFlag(keyPluginDir, cmd.PersistentFlags().Lookup("plugin-dir"))
	_ = cmd.MarkPersistentFlagDirname("plugin-dir")
	cmd.AddCommand(newProducersRunCmd(f), newProducersLsCmd(f), newProducersOutboxCmd(f))
	return cmd
}

type producersRunOptions struct {
	f      *Factory
	Once   bool
	Timing bool
}

func newProducersRunCmd(f *Factory) *cobra.Command {
	o := &producersRunOptions{f: f}
	cmd := &cobra.Command{
		Use:   "run [--once]",
		Short: "Start the producer plugins and admit what they offer",
		Long: `Run starts every enabled producer plugin and loops: it polls each plugin
for ready events, admits them (one batch per poll), and acknowledges each
offer only once its admission is durable. An event offered again after a
lost acknowledgement resolves to its existing admission (a duplicate is a
success), so nothing is lost and nothing runs twice.

Each plugin is executed directly (never through a shell) with mutual TLS
on its gRPC connection, a minimal environment (PATH, HOME, LANG, LC_ALL, TZ,
TMPDIR and its own HERMESQ_PRODUCER_* settings; never the store URL or its
credentials), and, when producers.NAME.sha256 is configured, only if its
SHA-256 matches that pin. Plugins log to hermesq's stderr, each line
prefixed with "hermesq: producer NAME:". A plugin that crashes or hangs at
the handshake is restarted with backoff while the others keep running; one
that fails its checksum or speaks another protocol version is not restarted.
Plugins die with the host.

Nothing a producer recorded is dropped by the host. An offer the store
refuses as invalid is rejected: its events are kept in the outbox as
rejected, with the reason, and counted (producers ls, stats, check) until
an operator drops them (producers outbox drop). A group of events whose
composed payload is over the store's limit is offered again in smaller
groups. Every other refusal (session not found, a grant missing, a
conflict, the store unavailable or failing) keeps the events pending with
the reason, their attempts and a not-before time: producer_backoff (1s)
after the first refusal, doubling to producer_backoff_cap (5m), so a fix
made minutes later still delivers them. An event leaves its outbox only
delivered, dropped by an operator, or past producer_max_age if set.

Each call to a plugin has a deadline: a Poll not answered within
producer_poll_deadline (30s) or a Settle within producer_settle_deadline
(30s) gets the plugin killed and restarted with backoff, as a crash does,
and named on stderr. An error a plugin returns from Poll is logged and the
plugin polled again after 1s, doubling to 30s (with --once: failed after 3
in a row); a plugin reporting a permanent failure (such as a bad
configuration) is not restarted, its message shown.

Without --once, run goes on until SIGINT or SIGTERM (exit 130 or 143). With
--once, each plugin is run until it has nothing ready, then run exits. A
plugin that hangs or crashes is started at most 3 times, so --once ends
within 3 x (producer_start_timeout + producer_poll_deadline +
producer_settle_deadline + 3s) + 1s whatever the plugins do (2 min 13 s
with the defaults), unless a plugin keeps offering new events.

The host is hermesq-producers, installed beside hermesq (or on PATH):
hermesq with the plugin transport (go-plugin, gRPC), which the other
commands do not load. hermesq replaces itself with it, so the process, its
signals and its exit code are the same; without it run exits 1.

With --timing, run prints at exit one line per plugin on stderr: the
events admitted, the run's time, and its shares in rpc (the calls to the
plugin less what the plugin reports it spent serving them), outbox (what
it reports: its producer's Poll and Settle), store (the admission
batches) and other (start, handshake, policy, pauses).

Exit codes (--once): 0 every plugin ran and no event is left waiting
after a refusal; 6 events were rejected in this run or are left waiting
after a refusal (one line per producer on stderr: how many, the oldest,
the last reason); 8 a plugin failed (could not start, crashed or missed a
deadline, failed its checksum, speaks another protocol version, reported a
permanent failure; the others ran; one line each); 75 the store was
unavailable (the events wait; run again later).`,
		Example: `  hermesq producers run --once
  hermesq producers run --plugin-dir /usr/local/lib/hermesq/plugins
  hermesq producers run --once --timing`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProducers(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.Once, "once", false, "run each plugin until it has nothing ready, then exit")
	addTimingFlag(cmd, o)
	return cmd
}

func runProducers(ctx context.Context, o *producersRunOptions) error {
	if o.f.Launch == nil {
		return execSibling(ProducersBinary) // returns only on failure
	}
	if ctx == nil {
		ctx = context.Background()
	}
	cfg, err := o.f.Config()
	if err != nil {
		return err
	}
	pc, err := o.f.producerConfig()
	if err != nil {
		return err
	}
	specs, err := producerhost.Discover(pc.PluginDir, pc.hostSettings())
	if err != nil {
		return err
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	h := &producerhost.Host{
		Admission: svc,
		Principal: cfg.Principal,
		Config:    pc.hostConfig(),
		Once:      o.Once,
		Stderr:    o.f.IO.ErrOut,
		Launch:    o.f.Launch,
	}
	enabled := 0
	for _, s := range specs {
		if s.Enabled {
			enabled++
		}
	}
	if enabled == 0 {
		fmt.Fprintf(o.f.IO.ErrOut, "hermesq: no producer plugins in %s (%s*)\n", termtext.Esc(pc.PluginDir), pluginPrefix)
		return nil
	}

	if o.Timing {
		h.Timing = &producerhost.Timing{}
	}
	ctx, signals := o.f.watchSignals(ctx, "producers run")
	defer signals.Stop()
	rep := h.Run(ctx, specs)
	printTiming(o.f.IO.ErrOut, h.Timing)
	if sig := signals.Caught(); sig != nil {
		return sig
	}
	return producersOutcome(o.f.IO.ErrOut, rep)
}

// producersOutcome prints one line per cause that needs an operator and
// returns the run's error: 8 when a plugin failed, 75 when the store was
// unavailable, 6 when events were rejected or are left waiting after a
// refusal, else nil.
func producersOutcome(w io.Writer, rep producerhost.Report) error {
	var causes []string
	names := make([]string, 0, len(rep.Rejected))
	for n := range rep.Rejected {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		fmt.Fprintf(w, "hermesq: producer %s: %d %s rejected as invalid in this run (kept: producers outbox %s)\n",
			n, rep.Rejected[n], plural(rep.Rejected[n], "event", "events"), n)
		causes = append(causes, n+" rejected events")
	}
	for _, wt := range rep.Waiting {
		c := wt.Counts
		fmt.Fprintf(w, "hermesq: producer %s: %d %s waiting after a refusal (oldest added %s ago; producers outbox %s): %s\n",
			wt.Name, c.Waiting, plural(c.Waiting, "event", "events"), time.Since(c.OldestWaiting).Round(time.Second), wt.Name,
			producerhost.EscapeControl(c.LastReason))
		causes = append(causes, wt.Name+" events waiting")
	}
	switch {
	case len(rep.Failures) > 0:
		return &producersFailedError{failures: rep.Failures}
	case rep.Unavailable && len(rep.Waiting) > 0:
		return fmt.Errorf("producers: the store was unavailable; the events wait (run again later): %w", backend.ErrUnavailable)
	case len(causes) > 0:
		return fmt.Errorf("producers: %s: %w", strings.Join(causes, ", "), backend.ErrAttention)
	}
	return nil
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// producersFailedError is the error of a producers run in which plugins
// failed (exit 8), the others having run.
type producersFailedError struct{ failures []producerhost.Failure }

func (e *producersFailedError) Error() string {
	parts := make([]string, len(e.failures))
	for i, f := range e.failures {
		parts[i] = fmt.Sprintf("%s (%v)", f.Name, f.Err)
	}
	noun := "plugin"
	if len(parts) > 1 {
		noun = "plugins"
	}
	return fmt.Sprintf("producers: %d %s failed: %s", len(parts), noun, strings.Join(parts, "; "))
}

type pluginRow struct {
	Name    string           `json:"name"`
	Path    string           `json:"path"`
	Enabled bool             `json:"enabled"`
	SHA256  string           `json:"sha256"`
	Pinned  *bool            `json:"pin_matches"` // null: not pinned
	Problem string           `json:"problem"`
	Outbox  *producer.Counts `json:"outbox"` // null: no outbox yet
}

func newProducersLsCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "ls",
		Short: "List the producer plugins, their pins and their outboxes",
		Long: `Ls lists the hermesq-producer-NAME binaries of the plugin folder and the
producers configured without one: whether each is enabled, its SHA-256,
whether that matches the configured pin, and how many events its outbox
holds: pending (of which waiting after a refusal, with the oldest one's
age and the last reason), rejected, delivered and dropped. It starts no
plugin.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProducersLs(cmd.Context(), f) },
	}
}

func runProducersLs(ctx context.Context, f *Factory) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, p, err := f.configAndPrinter()
	if err != nil {
		return err
	}
	pc, err := f.producerConfig()
	if err != nil {
		return err
	}
	specs, err := producerhost.Discover(pc.PluginDir, pc.hostSettings())
	if err != nil {
		return err
	}
	rows := make([]pluginRow, 0, len(specs))
	for _, s := range specs {
		r := pluginRow{Name: s.Name, Path: s.Path, Enabled: s.Enabled, Problem: s.Problem}
		if s.Path != "" && s.Problem == "" {
			sum, err := producerhost.FileSHA256(s.Path)
			if err != nil {
				r.Problem = err.Error()
			} else {
				r.SHA256 = hex.EncodeToString(sum)
				if s.Pin != nil {
					ok := hex.EncodeToString(s.Pin) == r.SHA256
					r.Pinned = &ok
				}
			}
		}
		if _, err := os.Stat(pc.pluginStateDir(s.Name) + "/" + producer.OutboxFile); err == nil {
			ob, err := f.outbox(s.Name)
			if err != nil {
				return err
			}
			c, err := ob.Count(ctx)
			if err != nil {
				return outboxError(err)
			}
			r.Outbox = &c
		}
		rows = append(rows, r)
	}
	return list(p, rows, func(w io.Writer) error {
		out := [][]string{}
		for _, r := range rows {
			pin := "-"
			if r.Pinned != nil {
				pin = map[bool]string{true: "ok", false: "MISMATCH"}[*r.Pinned]
			}
			state := "enabled"
			if !r.Enabled {
				state = "disabled"
			}
			if r.Problem != "" {
				state = r.Problem
			}
			counts, waiting := "-", "-"
			if c := r.Outbox; c != nil {
				counts = fmt.Sprintf("%d/%d/%d/%d/%d", c.Pending, c.Waiting, c.Rejected, c.Delivered, c.Dropped)
				if c.Waiting > 0 {
					waiting = fmt.Sprintf("%s: %s", time.Since(c.OldestWaiting).Round(time.Second), c.LastReason)
				}
			}
			out = append(out, []string{r.Name, termtext.Cell(state, 60), pin, counts, termtext.Cell(waiting, 60), termtext.OrDash(r.Path)})
		}
		return termtext.Table(w, []string{"NAME", "STATE", "PIN", "PENDING/WAITING/REJECTED/DELIVERED/DROPPED", "OLDEST WAITING", "PATH"}, out)
	})
}

func newProducersOutboxCmd(f *Factory) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "outbox NAME",
		Short: "List the events in a producer's outbox",
		Long: `Outbox lists the events producer NAME holds in its outbox, oldest first:
seq, state (pending, rejected, delivered, dropped), attempts, when a
pending event refused by the store may be offered again (NOT BEFORE) and
why it was refused (REASON; also why an event was rejected or dropped),
session, identity and text. -o json gives every field (reason, refused_at,
not_before, claim…). It starts no plugin and changes nothing.

'hermesq producers outbox drop NAME SEQ…' is the operator's decision to
give up events.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runProducersOutbox(cmd.Context(), f, args[0]) },
	}
	cmd.AddCommand(newProducersOutboxDropCmd(f))
	return cmd
}

func newProducersOutboxDropCmd(f *Factory) *cobra.Command {
	var reason string
	cmd := &cobra.Command{
		Use:   "drop NAME SEQ… [--reason TEXT]",
		Short: "Give up pending or rejected events of a producer's outbox",
		Long: `Drop gives up the events with sequence numbers SEQ (the SEQ column of
'hermesq producers outbox NAME') of producer NAME's outbox: pending events
(waiting after a refusal or not) and rejected ones become dropped, with
the reason (--reason, default "dropped by the operator") and their last
refusal kept. They are never offered again; listed until the retention
(7 days) forgets them. This and producer_max_age are the only ways an
event leaves its outbox without being delivered.

All or nothing: a SEQ of no pending or rejected event refuses the whole
command (exit 3), nothing dropped.`,
		Example: `  hermesq producers outbox process
  hermesq producers outbox drop process 12 13 --reason "session deleted"`,
		Args: cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runProducersOutboxDrop(cmd.Context(), f, args[0], args[1:], reason)
		},
	}
	cmd.Flags().StringVar(&reason, "reason", "dropped by the operator", "why, kept with the events")
	return cmd
}

func runProducersOutboxDrop(ctx context.Context, f *Factory, name string, args []string, reason string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	if !producerhost.ValidName(name) {
		return fmt.Errorf("producer name %q: want lower-case letters, digits, - and _: %w", name, backend.ErrInvalid)
	}
	seqs := make([]uint64, len(args))
	for i, a := range args {
		n, err := strconv.ParseUint(a, 10, 64)
		if err != nil || n == 0 {
			return fmt.Errorf("SEQ %q: want a sequence number from producers outbox %s: %w", a, name, backend.ErrInvalid)
		}
		seqs[i] = n
	}
	if strings.TrimSpace(reason) == "" {
		return fmt.Errorf("--reason is empty: %w", backend.ErrInvalid)
	}
	ob, err := existingOutbox(f, name)
	if err != nil {
		return err
	}
	if err := ob.Drop(ctx, seqs, termtext.OneLine(reason)); err != nil {
		return outboxError(err)
	}
	fmt.Fprintf(f.IO.ErrOut, "hermesq: producer %s: dropped %d %s\n", name, len(seqs), plural(len(seqs), "event", "events"))
	return nil
}

// existingOutbox opens producer name's outbox for producers outbox and its
// drop: one that was never created is ErrNotFound, not made anew.
func existingOutbox(f *Factory, name string) (*producer.Outbox, error) {
	pc, err := f.producerConfig()
	if err != nil {
		return nil, err
	}
	if _, err := os.Stat(filepath.Join(pc.pluginStateDir(name), producer.OutboxFile)); err != nil {
		return nil, fmt.Errorf("producer %s has no outbox in %s: %w", name, pc.pluginStateDir(name), backend.ErrNotFound)
	}
	return f.outbox(name)
}

func runProducersOutbox(ctx context.Context, f *Factory, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, p, err := f.configAndPrinter()
	if err != nil {
		return err
	}
	if !producerhost.ValidName(name) {
		return fmt.Errorf("producer name %q: want lower-case letters, digits, - and _: %w", name, backend.ErrInvalid)
	}
	ob, err := existingOutbox(f, name)
	if err != nil {
		return err
	}
	es, err := ob.Entries(ctx)
	if err != nil {
		return outboxError(err)
	}
	if es == nil {
		es = []producer.Entry{}
	}
	return list(p, es, func(w io.Writer) error {
		rows := [][]string{}
		for _, e := range es {
			text := e.Text
			if text == "" {
				var pl struct{ Text string }
				_ = json.Unmarshal(e.Payload, &pl)
				text = pl.Text
			}
			notBefore := "-"
			if e.State == producer.StatePending && !e.NotBefore.IsZero() {
				notBefore = e.NotBefore.Local().Format(time.DateTime)
			}
			rows = append(rows, []string{strconv.FormatUint(e.Seq, 10), e.State, strconv.Itoa(e.Attempts), notBefore,
				termtext.Cell(termtext.OrDash(e.Reason), 48), termtext.Cell(e.Session, 24), termtext.Cell(e.Identity, 48), termtext.Cell(text, 60)})
		}
		return termtext.Table(w, []string{"SEQ", "STATE", "ATTEMPTS", "NOT BEFORE", "REASON", "SESSION", "IDENTITY", "TEXT"}, rows)
	})
}
