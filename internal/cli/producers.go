package cli

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hermesq/hermesq/pkg/backend"
	"github.com/hermesq/hermesq/pkg/producer"
)

// envKillAfterAdmit is a test hook of producers run: set to 1, the host
// SIGKILLs itself right after an admission is durable, before the settle.
const envKillAfterAdmit = "HERMESQ_TEST_KILL_AFTER_ADMIT"

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
	f    *Factory
	Once bool
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

An offer the store refuses as invalid is dropped (logged with the reason);
one refused for another reason is released (offered again, dropped after 8
attempts); when the store is unavailable the offers are deferred (offered
again, no attempt counted).

Without --once, run goes on until SIGINT or SIGTERM (exit 130 or 143). With
--once, each plugin is run until it has nothing ready, then run exits.

The host is hermesq-producers, installed beside hermesq (or on PATH):
hermesq with the plugin transport (go-plugin, gRPC), which the other
commands do not load. hermesq replaces itself with it, so the process, its
signals and its exit code are the same; without it run exits 1.

Exit codes: 0 every plugin ran; 8 a plugin failed (could not start, crashed
more than 3 times with --once, failed its checksum, speaks another protocol
version; the others ran; each failure is logged); 75 the store was
unavailable (--once).`,
		Example: `  hermesq producers run --once
  hermesq producers run --plugin-dir /usr/local/lib/hermesq/plugins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runProducers(cmd.Context(), o) },
	}
	cmd.Flags().BoolVar(&o.Once, "once", false, "run each plugin until it has nothing ready, then exit")
	return cmd
}

func runProducers(ctx context.Context, o *producersRunOptions) error {
	if o.f.Launch == nil {
		return execProducers() // returns only on failure
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
	specs, err := discoverPlugins(pc)
	if err != nil {
		return err
	}
	svc, err := o.f.Admission()
	if err != nil {
		return err
	}
	h := &host{
		svc:            svc,
		principal:      cfg.Principal,
		pc:             pc,
		once:           o.Once,
		log:            &lineLog{out: o.f.IO.ErrOut},
		launch:         o.f.Launch,
		killAfterAdmit: os.Getenv(envKillAfterAdmit) == "1",
	}
	enabled := 0
	for _, s := range specs {
		if s.Enabled {
			enabled++
		}
	}
	if enabled == 0 {
		fmt.Fprintf(o.f.IO.ErrOut, "hermesq: no producer plugins in %s (%s*)\n", esc(pc.PluginDir), pluginPrefix)
		return nil
	}

	ctx, signals := o.f.watchSignals(ctx, "producers run")
	defer signals.Stop()
	failures := h.run(ctx, specs)
	if sig := signals.Caught(); sig != nil {
		return sig
	}
	if len(failures) == 0 {
		return nil
	}
	for _, fl := range failures {
		if !errors.Is(fl.Err, backend.ErrUnavailable) {
			return &producersFailedError{failures: failures}
		}
	}
	// Only the store failed (--once): exit 75, retry later.
	return fmt.Errorf("producer %s: %w", failures[0].Name, failures[0].Err)
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
holds (pending, of which claimed; delivered; dropped). It starts no plugin.`,
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
	specs, err := discoverPlugins(pc)
	if err != nil {
		return err
	}
	rows := make([]pluginRow, 0, len(specs))
	for _, s := range specs {
		r := pluginRow{Name: s.Name, Path: s.Path, Enabled: s.Enabled, Problem: s.Problem}
		if s.Path != "" && s.Problem == "" {
			sum, err := fileSHA256(s.Path)
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
			counts := "-"
			if r.Outbox != nil {
				counts = fmt.Sprintf("%d/%d/%d/%d", r.Outbox.Pending, r.Outbox.Claimed, r.Outbox.Delivered, r.Outbox.Dropped)
			}
			out = append(out, []string{r.Name, cell(state, 60), pin, counts, orDash(r.Path)})
		}
		return table(w, []string{"NAME", "STATE", "PIN", "PENDING/CLAIMED/DELIVERED/DROPPED", "PATH"}, out)
	})
}

func newProducersOutboxCmd(f *Factory) *cobra.Command {
	return &cobra.Command{
		Use:   "outbox NAME",
		Short: "List the events in a producer's outbox",
		Long: `Outbox lists the events producer NAME holds in its outbox, oldest first:
state (pending, delivered, dropped), attempts, claim, session, identity and
text. It starts no plugin and changes nothing.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error { return runProducersOutbox(cmd.Context(), f, args[0]) },
	}
}

func runProducersOutbox(ctx context.Context, f *Factory, name string) error {
	if ctx == nil {
		ctx = context.Background()
	}
	_, p, err := f.configAndPrinter()
	if err != nil {
		return err
	}
	if !producerName.MatchString(name) {
		return fmt.Errorf("producer name %q: want lower-case letters, digits, - and _: %w", name, backend.ErrInvalid)
	}
	pc, err := f.producerConfig()
	if err != nil {
		return err
	}
	if _, err := os.Stat(pc.pluginStateDir(name) + "/" + producer.OutboxFile); err != nil {
		return fmt.Errorf("producer %s has no outbox in %s: %w", name, pc.pluginStateDir(name), backend.ErrNotFound)
	}
	ob, err := f.outbox(name)
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
			rows = append(rows, []string{strconv.FormatUint(e.Seq, 10), e.State, strconv.Itoa(e.Attempts),
				cell(e.Session, 24), cell(e.Identity, 48), cell(text, 60)})
		}
		return table(w, []string{"SEQ", "STATE", "ATTEMPTS", "SESSION", "IDENTITY", "TEXT"}, rows)
	})
}
